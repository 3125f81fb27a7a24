//! The API store contract (directory pages and changes, tokens, telemetry reads) against the
//! memory store.

use swath_tests::api_contract::{self as contract, MemoryApiFactory};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios() {
    // Room for the 10 000 rows of the paging scenario and the rows ingested during it.
    contract::run_all(&MemoryApiFactory {
        history_per_mower: 100_000,
    })
    .await;
}
