//! The retention contract against the memory store.

use async_trait::async_trait;
use std::sync::Arc;
use swath_application::ports::RetentionStore;
use swath_memory::MemoryStore;
use swath_tests::retention_contract::RetentionFactory;
use swath_tests::support::TestStore;

/// Memory stores, remembered so that a "replica" is the same store (one process).
#[derive(Default)]
struct Memory {
    stores: std::sync::Mutex<Vec<MemoryStore>>,
}

#[async_trait]
impl RetentionFactory for Memory {
    async fn fresh(&self) -> (TestStore, Arc<dyn RetentionStore>) {
        let store = MemoryStore::default();
        self.stores.lock().unwrap().push(store.clone());
        (TestStore::memory(store.clone()), Arc::new(store))
    }

    async fn replica(&self, _store: &TestStore) -> Arc<dyn RetentionStore> {
        let last = self.stores.lock().unwrap().last().cloned();
        Arc::new(last.expect("a store was made"))
    }
}

swath_tests::contract_suite!(
    retention_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = Memory::default(),
);
