//! The latest-state cache `swath serve` puts in front of the telemetry store (decision 134):
//! what it answers from memory and when it asks the store. The telemetry contract suite runs
//! through it too (`telemetry_memory::with_latest_cache`; the cache is the same in front of
//! every store), which shows that it keeps the store's contract; this file counts the reads that
//! asked the store.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use std::sync::Arc;
use swath_application::latest_cache::LatestCache;
use swath_application::ports::{Clock, ManualClock, TelemetryStore};
use swath_application::Ingest;
use swath_memory::MemoryStore;
use swath_tests::support::{ingest_json, trace_start, Fleet, RecordingBus, DEFAULT_THRESHOLD};

/// The memory store behind a cache of `ttl`, the fleet seeded, and the ingest writing through
/// the cache as `swath serve`'s does.
struct Setup {
    store: Arc<MemoryStore>,
    cache: Arc<LatestCache>,
    clock: Arc<ManualClock>,
    ingest: Ingest,
    fleet: Fleet,
}

impl Setup {
    async fn new(ttl: std::time::Duration) -> Self {
        let store = Arc::new(MemoryStore::default());
        let fleet = Fleet::new();
        fleet.seed(store.as_ref(), DEFAULT_THRESHOLD).await;
        let clock = Arc::new(ManualClock::new(trace_start()));
        let cache = Arc::new(LatestCache::new(store.clone(), clock.clone(), ttl));
        let ingest = Ingest::new(
            cache.clone(),
            Arc::new(RecordingBus::default()),
            clock.clone(),
        );
        Self {
            store,
            cache,
            clock,
            ingest,
            fleet,
        }
    }

    /// Stores a state of `mower` observed at `at` through the cache, as this replica does.
    async fn report(&self, mower: usize, at: DateTime<Utc>) {
        ingest_json(&self.ingest, &[self.json(mower, at)]).await;
    }

    /// Stores a state straight into the store, as another replica does.
    async fn report_past_the_cache(&self, mower: usize, at: DateTime<Utc>) {
        let bus = Arc::new(RecordingBus::default());
        let other_replica = Ingest::new(self.store.clone(), bus, self.clock.clone());
        ingest_json(&other_replica, &[self.json(mower, at)]).await;
    }

    fn json(&self, mower: usize, at: DateTime<Utc>) -> serde_json::Value {
        let mower_id = self.fleet.mowers[mower];
        json!({
            "mower_id": mower_id,
            "account_id": self.fleet.account_of(mower_id),
            "observed_at": at.to_rfc3339(),
            "activity": "mowing",
            "blade_on": true,
            "battery_percent": 70,
        })
    }

    /// The `observed_at` of the mower's latest row, read through the cache.
    async fn latest_at(&self, mower: usize) -> Option<DateTime<Utc>> {
        let rows = self.cache.latest(&[self.fleet.mowers[mower]]).await;
        rows.expect("latest").first().map(|row| row.observed_at)
    }

    fn store_reads(&self) -> u64 {
        self.cache.store_reads()
    }
}

#[tokio::test]
async fn a_mower_read_again_within_the_bound_is_answered_from_memory() {
    let s = Setup::new(std::time::Duration::from_secs(1)).await;
    let at = trace_start();
    s.report(0, at).await;
    for _ in 0..5 {
        assert_eq!(s.latest_at(0).await, Some(at));
    }
    assert_eq!(s.store_reads(), 1, "one store read for five");

    // Another mower is a read of its own.
    s.report(1, at).await;
    assert_eq!(s.latest_at(1).await, Some(at));
    assert_eq!(s.latest_at(1).await, Some(at));
    assert_eq!(s.store_reads(), 2);
}

#[tokio::test]
async fn a_commit_through_the_cache_is_read_at_once() {
    let s = Setup::new(std::time::Duration::from_secs(3600)).await;
    let at = trace_start();
    s.report(0, at).await;
    assert_eq!(s.latest_at(0).await, Some(at));
    s.report(0, at + Duration::seconds(1)).await;
    assert_eq!(s.latest_at(0).await, Some(at + Duration::seconds(1)));
    assert_eq!(
        s.store_reads(),
        2,
        "the commit made the next read ask the store"
    );
    assert_eq!(s.latest_at(0).await, Some(at + Duration::seconds(1)));
    assert_eq!(s.store_reads(), 2, "and the answer is kept again");
}

#[tokio::test]
async fn a_state_written_past_the_cache_is_seen_within_the_bound() {
    let s = Setup::new(std::time::Duration::from_secs(1)).await;
    let at = trace_start();
    s.report(0, at).await;
    assert_eq!(s.latest_at(0).await, Some(at));
    s.report_past_the_cache(0, at + Duration::seconds(1)).await;
    s.clock.advance(Duration::milliseconds(999));
    assert_eq!(
        s.latest_at(0).await,
        Some(at),
        "within the bound: the kept row"
    );
    s.clock.advance(Duration::milliseconds(1));
    assert_eq!(
        s.latest_at(0).await,
        Some(at + Duration::seconds(1)),
        "at the bound: the store's"
    );
    assert_eq!(s.store_reads(), 2);
}

#[tokio::test]
async fn reads_of_several_mowers_and_of_none_stored_always_ask_the_store() {
    let s = Setup::new(std::time::Duration::from_secs(3600)).await;
    let at = trace_start();
    s.report(0, at).await;
    assert_eq!(s.latest_at(0).await, Some(at), "kept for an hour");
    let newer = at + Duration::seconds(1);
    s.report_past_the_cache(0, newer).await;
    assert_eq!(s.latest_at(0).await, Some(at), "the kept row");
    let both = [s.fleet.mowers[0], s.fleet.mowers[1]];
    let rows = s.cache.latest(&both).await.expect("latest");
    let seen: Vec<_> = rows.iter().map(|r| (r.mower_id, r.observed_at)).collect();
    assert_eq!(seen, [(both[0], newer)], "a page of mowers reads the store");

    assert_eq!(s.latest_at(1).await, None);
    s.report_past_the_cache(1, at).await;
    assert_eq!(s.latest_at(1).await, Some(at), "no state was not kept");
}

#[tokio::test]
async fn a_zero_bound_is_the_store_itself() {
    let store: Arc<dyn TelemetryStore> = Arc::new(MemoryStore::default());
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(trace_start()));
    let wrapped = LatestCache::wrap(Arc::clone(&store), clock, std::time::Duration::ZERO);
    assert!(Arc::ptr_eq(&store, &wrapped));
}
