//! The API store contract (directory pages and changes, tokens, telemetry reads) against
//! PostgreSQL, when `SWATH_TEST_DATABASE_URL` is set: one test per scenario.

use swath_tests::postgres::{test_database_url, PostgresFactory};

swath_tests::contract_suite!(
    api_contract,
    postgres = PostgresFactory::new(test_database_url()),
);
