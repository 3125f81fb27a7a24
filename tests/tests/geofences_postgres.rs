//! The geofence store's contract against PostgreSQL (when `SWATH_TEST_DATABASE_URL` is set).

use swath_tests::postgres::{test_database_url, PostgresFactory};
use swath_tests::watch_contract::PostgresWatch;

swath_tests::geofence_contract_suite!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[cfg_attr(
        swath_no_postgres,
        ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL"
    )]
    factory = PostgresWatch(PostgresFactory::new(test_database_url())),
);
