//! The retention contract against the memory store.

use async_trait::async_trait;
use std::sync::Arc;
use swath_application::ports::RetentionStore;
use swath_memory::MemoryStore;
use swath_tests::retention_contract::{self as contract, RetentionFactory};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boundaries() {
    contract::boundaries(&Memory::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_point_of_each_minute() {
    contract::first_point_of_each_minute(&Memory::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_runs_resume() {
    for stop_after in [1, 2, 3, 4, 5, 40, 300] {
        contract::interrupted_run_resumes(&Memory::default(), stop_after).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_do_the_work_once() {
    contract::concurrent_runs_do_the_work_once(&Memory::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_run_releases_the_lock() {
    contract::an_abandoned_run_releases_the_lock(&Memory::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_states_after_retention() {
    contract::late_states_after_retention(&Memory::default()).await;
}
