//! The notification side's contract, against the memory store.

use async_trait::async_trait;
use proptest::prelude::*;
use std::sync::Arc;
use swath_application::ports::WatchStore;
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_tests::support::TestStore;
use swath_tests::traces::{splits, trace};
use swath_tests::watch_contract::{self as contract, WatchFactory};

struct Memory;

#[async_trait]
impl WatchFactory for Memory {
    async fn fresh(&self) -> (TestStore, Arc<dyn WatchStore>) {
        let store = MemoryStore::new(MemoryStoreSettings::default());
        (TestStore::memory(store.clone()), Arc::new(store))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios() {
    contract::run_all(&Memory).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn batched_equals_one_at_a_time(steps in trace(150), sizes in splits()) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(contract::batched_equals_one_at_a_time(&Memory, &steps, &sizes));
    }
}
