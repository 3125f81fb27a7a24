//! The API store contract (directory pages and changes, tokens, telemetry reads) against
//! PostgreSQL, when `SWATH_TEST_DATABASE_URL` is set: one test per scenario.

use swath_tests::postgres::{test_database_url, PostgresFactory};

swath_tests::api_contract_suite!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[cfg_attr(
        swath_no_postgres,
        ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL"
    )]
    factory = PostgresFactory::new(test_database_url()),
);
