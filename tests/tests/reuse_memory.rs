//! A mower id that changes hands (`reuse_contract`) on the memory store: 300 rounds, each
//! deletion at a random moment while the ingest and the watcher run.

use swath_tests::watch_contract::MemoryWatch;

swath_tests::contract_suite!(
    reuse_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = MemoryWatch,
);
