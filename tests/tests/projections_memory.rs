//! The live projections' contract against the memory adapters.

use async_trait::async_trait;
use std::sync::Arc;
use swath_domain::{AccountId, Mower, MowerId, SiteId};
use swath_memory::{MemoryProjections, MemoryStore, MemoryStoreSettings};
use swath_tests::projections_contract::{ProjectionFactory, ProjectionHarness};
use swath_tests::support::{add_mower, mower};

struct Memory;

#[async_trait]
impl ProjectionFactory for Memory {
    async fn fresh(&self) -> ProjectionHarness {
        let store = MemoryStore::new(MemoryStoreSettings::default());
        let projections = Arc::new(MemoryProjections::new(store.clone()));
        let store = Arc::new(store);
        ProjectionHarness {
            directory: store.clone(),
            telemetry: store.clone(),
            watch: store,
            projections: projections.clone(),
            assignments: projections,
            postgres: None,
        }
    }

    async fn bulk_mowers(&self, h: &ProjectionHarness, account: AccountId, site: SiteId, n: usize) {
        for i in 0..n {
            let mower = Mower {
                display_order: 10,
                ..mower(MowerId::new(), account, site, format!("bulk-{i:05}"), i)
            };
            add_mower(h.directory.as_ref(), mower).await;
        }
    }
}

swath_tests::contract_suite!(
    projections_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = Memory,
);
