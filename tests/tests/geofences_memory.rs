//! The geofence store's contract, against the memory store.

swath_tests::contract_suite!(
    geofence_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = swath_tests::watch_contract::MemoryWatch,
);
