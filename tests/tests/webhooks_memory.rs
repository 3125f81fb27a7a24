//! The webhook store's contract and the webhooks use case over it, against the memory store.

swath_tests::contract_suite!(
    webhook_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = swath_tests::webhook_contract::MemoryWebhookFactory,
);

swath_tests::contract_suite!(
    webhook_access,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = swath_tests::webhook_access::MemoryWebhookAccessFactory,
);
