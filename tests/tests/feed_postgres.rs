//! The notification feed (events, alerts, blade resets)'s contract against PostgreSQL (when `SWATH_TEST_DATABASE_URL` is set).

use swath_tests::postgres::{test_database_url, PostgresFactory};
use swath_tests::watch_contract::PostgresWatch;

swath_tests::contract_suite!(
    feed_contract,
    postgres = PostgresWatch(PostgresFactory::new(test_database_url())),
);
