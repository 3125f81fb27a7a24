//! The API store contract (directory pages and changes, tokens, telemetry reads) against
//! PostgreSQL, when `SWATH_TEST_DATABASE_URL` is set.

use swath_tests::api_contract as contract;
use swath_tests::postgres::{test_database_url, PostgresFactory};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    swath_no_postgres,
    ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL"
)]
async fn scenarios() {
    let url = test_database_url();
    contract::run_all(&PostgresFactory::new(url)).await;
}
