//! The telemetry store contract, against the memory store.

use async_trait::async_trait;
use proptest::prelude::*;
use swath_memory::{MemoryStore, MemoryStoreSettings, DEFAULT_HISTORY_PER_MOWER};
use swath_tests::reference_contract as reference;
use swath_tests::support::{block_on, StoreFactory, TestStore};
use swath_tests::telemetry_contract as contract;
use swath_tests::traces::{distinct_trace, splits, trace};

struct Memory;

#[async_trait]
impl StoreFactory for Memory {
    async fn fresh(&self) -> TestStore {
        TestStore::memory(MemoryStore::new(MemoryStoreSettings::default()))
    }

    fn kept_per_mower(&self) -> Option<usize> {
        Some(DEFAULT_HISTORY_PER_MOWER)
    }
}

/// Memory stores keeping this many history and position rows per mower.
struct Capped(usize);

#[async_trait]
impl StoreFactory for Capped {
    async fn fresh(&self) -> TestStore {
        TestStore::memory(MemoryStore::new(MemoryStoreSettings {
            history_per_mower: self.0,
        }))
    }

    fn kept_per_mower(&self) -> Option<usize> {
        Some(self.0)
    }
}

swath_tests::contract_suite!(
    telemetry_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = Memory,
);

/// The same suite through the latest-state cache `swath serve` puts in front of the store.
mod with_latest_cache {
    use super::Memory;
    use swath_tests::support::WithLatestCache;

    swath_tests::contract_suite!(
        telemetry_contract,
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        factory = WithLatestCache(Memory),
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn batched_equals_one_at_a_time(steps in trace(150), sizes in splits()) {
        block_on(contract::batched_equals_one_at_a_time(&Memory, &steps, &sizes));
    }

    #[test]
    fn any_order_equals_time_order(
        (steps, redeliveries, order) in distinct_trace(150),
        sizes in splits(),
    ) {
        block_on(contract::any_order_equals_time_order(
            &Memory, &steps, &redeliveries, &order, &sizes,
        ));
    }

    /// The same traces against the independent reference (docs/rules.md §3 read directly):
    /// a rule wrong on the batch and the single path alike fails here.
    #[test]
    fn matches_the_reference(steps in trace(150), sizes in splits()) {
        block_on(reference::telemetry_matches_the_reference(&Memory, &steps, &sizes));
    }

    #[test]
    fn any_order_matches_the_reference(
        (steps, redeliveries, order) in distinct_trace(150),
        sizes in splits(),
    ) {
        block_on(reference::any_order_matches_the_reference(
            &Memory, &steps, &redeliveries, &order, &sizes,
        ));
    }
}

/// The memory store keeps at most `history_per_mower` history and position rows per mower, the
/// newest ones.
#[tokio::test]
async fn history_is_capped_per_mower() {
    let h = contract::Harness::new(&Capped(5), swath_tests::support::DEFAULT_THRESHOLD).await;
    let mower = h.fleet.mowers[0];
    let reports: Vec<_> = (0..12)
        .map(|i| {
            serde_json::json!({
                "mower_id": mower,
                "account_id": h.fleet.account_a,
                "observed_at": (swath_tests::support::trace_start() + chrono::Duration::seconds(i)).to_rfc3339(),
                "activity": "mowing",
                "position": {"lat": 52.0, "lon": 13.0},
            })
        })
        .collect();
    h.ingest(&reports).await;
    let rows = h.rows().await;
    assert_eq!(rows.history.len(), 5);
    assert_eq!(rows.positions.len(), 5);
    assert_eq!(
        rows.history[0].observed_at,
        swath_tests::support::trace_start() + chrono::Duration::seconds(7),
        "the oldest rows went first"
    );
    assert_eq!(rows.health[0].mowing_ms, 11_000, "totals are never capped");
}

/// The contract's scenario again, on a cap small enough that its mowers lose rows (the suite's
/// default cap keeps them all).
#[tokio::test]
async fn reads_say_where_the_kept_rows_begin_under_a_small_cap() {
    contract::reads_say_where_the_kept_rows_begin(&Capped(5)).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn two_writers_end_with_the_rows_of_one(steps in trace(150), sizes in splits()) {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(contract::two_writers_end_with_the_rows_of_one(&Memory, &steps, &sizes));
    }
}
