//! The API store contract (directory pages and changes, tokens, telemetry reads) against the
//! memory store: one test per scenario.

use swath_tests::api_contract::MemoryApiFactory;

swath_tests::contract_suite!(
    api_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    // Room for the 10 000 rows of the paging scenario and the rows ingested during it.
    factory = MemoryApiFactory {
        history_per_mower: 100_000,
    },
);
