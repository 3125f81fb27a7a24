//! The webhook store's contract and the webhooks use case over it, against PostgreSQL (when
//! `SWATH_TEST_DATABASE_URL` is set).

use swath_tests::postgres::{test_database_url, PostgresFactory};
use swath_tests::webhook_access::PostgresWebhookAccessFactory;
use swath_tests::webhook_contract::PostgresWebhookFactory;

swath_tests::contract_suite!(
    webhook_contract,
    postgres = PostgresWebhookFactory(PostgresFactory::new(test_database_url())),
);

swath_tests::contract_suite!(
    webhook_access,
    postgres = PostgresWebhookAccessFactory(PostgresFactory::new(test_database_url())),
);
