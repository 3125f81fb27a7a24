//! W8's stored sessions (`sessions_contract`), against the memory store: in order, any order,
//! batched against one at a time, against the reference and W4's totals.

use async_trait::async_trait;
use chrono::Duration;
use proptest::prelude::*;
use swath_memory::{MemoryStore, MemoryStoreSettings, DEFAULT_HISTORY_PER_MOWER};
use swath_tests::sessions_contract as contract;
use swath_tests::support::{block_on, StoreFactory, TestStore};
use swath_tests::traces::{distinct_trace, splits};

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

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn in_order_matches_the_reference((steps, _, _) in distinct_trace(150), sizes in splits()) {
        block_on(contract::in_order_matches_the_reference(&Memory, &steps, &sizes));
    }

    #[test]
    fn any_order_matches_the_reference(
        (steps, redeliveries, order) in distinct_trace(150),
        sizes in splits(),
        no_merge in any::<bool>(),
    ) {
        let gap = if no_merge { Duration::zero() } else { Duration::hours(2) };
        block_on(contract::any_order_matches_the_reference(
            &Memory, &steps, &redeliveries, &order, &sizes, gap,
        ));
    }

    #[test]
    fn batched_equals_one_at_a_time(
        (steps, redeliveries, order) in distinct_trace(100),
        sizes in splits(),
    ) {
        block_on(contract::batched_equals_one_at_a_time(
            &Memory, &steps, &redeliveries, &order, &sizes,
        ));
    }

    #[test]
    fn sessions_add_up_to_the_health_totals(
        (steps, _, order) in distinct_trace(150),
        sizes in splits(),
    ) {
        block_on(contract::sessions_add_up_to_the_health_totals(&Memory, &steps, &order, &sizes));
    }
}
