//! The notification feed (events, alerts, blade resets)'s contract, against the memory store.

swath_tests::contract_suite!(
    feed_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = swath_tests::watch_contract::MemoryWatch,
);
