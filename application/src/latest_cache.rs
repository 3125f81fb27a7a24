//! A replica's latest states, kept for a short while: the telemetry store seen through a cache of
//! one mower's latest row (decision 134).
//!
//! Why: `GET /v1/mowers/{id}/state` is the read clients poll, and one PostgreSQL statement per
//! poll was the larger half of its cost (BENCHMARKS.md, "Latest-state GET"). A mower reports
//! about once a second, so a poll answered from a row read up to [`LATEST_CACHE_TTL`] ago shows
//! what a poll a moment earlier would have shown.
//!
//! What a poll may show:
//! - **nothing of a mower deleted through this process**: the deletion forgets its kept row
//!   (`TelemetryStore::forget`), so a mower created with the same id starts empty;
//! - **never a state older than one this process stored**: every batch this process commits
//!   (the bus's ingest and `POST /v1/states` alike, both write through this store) forgets its
//!   mowers' kept rows once it committed, and a read that was under way meanwhile is not kept
//!   (a generation per shard of mowers, read before the store is asked and again after, as the
//!   access caches do);
//! - a state stored through **another replica** (which ingests other partitions) within the
//!   bound of its commit, or the newer one; and never, from one replica, an older state after a
//!   newer one (two reads that missed together keep the newer answer);
//! - only reads of **one** mower are kept (the latest-state read, a mower's summary); the mower
//!   lists' pages ask the store each time, so a page of up to a thousand mowers never churns the
//!   cache.
//!
//! Every other read and the units of work go to the store unchanged.

use crate::ports::{Clock, StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows};
use crate::ttl_cache::TtlCache;
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use swath_domain::watch::IngestNotifications;
use swath_domain::{
    BatchChanges, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, MowerSnapshot,
    PositionRow, TelemetryRows,
};

/// How long a mower's latest row is answered from memory: the longest a state stored through
/// another replica stays unseen by this one's latest-state reads (`SWATH_LATEST_CACHE_SECONDS`'s
/// default).
pub const LATEST_CACHE_TTL: Duration = Duration::from_secs(1);

/// The most mowers whose latest row is kept (about a kilobyte each).
pub const LATEST_CACHE_ENTRIES: usize = 10_000;

/// Shards of the write generations: a commit forgets the kept rows of its mowers' shards, so a
/// busy fleet's writes forget a few other mowers' rows each, never the whole cache.
const SHARDS: usize = 1024;

/// The telemetry store with a mower's latest row kept for at most a bound (see the module's
/// documentation).
pub struct LatestCache {
    store: Arc<dyn TelemetryStore>,
    clock: Arc<dyn Clock>,
    rows: TtlCache<MowerId, LatestRow>,
    written: Arc<Generations>,
    /// Single-mower reads that asked the store (`swath_latest_reads_total{answer="store"}`).
    store_reads: AtomicU64,
}

/// One counter per shard of mowers, bumped after each commit that wrote one of them.
struct Generations(Box<[AtomicU64]>);

impl Generations {
    fn new() -> Self {
        Self((0..SHARDS).map(|_| AtomicU64::new(0)).collect())
    }

    fn of(&self, mower: MowerId) -> &AtomicU64 {
        // The low bits of a UUID (v4 or v7) are random.
        &self.0[(mower.0.as_u128() % SHARDS as u128) as usize]
    }

    fn get(&self, mower: MowerId) -> u64 {
        self.of(mower).load(Ordering::Acquire)
    }

    fn bump(&self, mower: MowerId) {
        self.of(mower).fetch_add(1, Ordering::AcqRel);
    }
}

impl LatestCache {
    /// `store` with its single-mower latest reads kept for `ttl`; a zero `ttl` answers `store`
    /// itself, unchanged.
    pub fn wrap(
        store: Arc<dyn TelemetryStore>,
        clock: Arc<dyn Clock>,
        ttl: Duration,
    ) -> Arc<dyn TelemetryStore> {
        if ttl.is_zero() {
            return store;
        }
        Arc::new(Self::new(store, clock, ttl))
    }

    /// `store` with its single-mower latest reads kept for `ttl` (zero: kept for no time, every
    /// read asks the store).
    pub fn new(store: Arc<dyn TelemetryStore>, clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        Self {
            store,
            clock,
            rows: TtlCache::new(ttl, LATEST_CACHE_ENTRIES),
            written: Arc::new(Generations::new()),
            store_reads: AtomicU64::new(0),
        }
    }

    /// How many single-mower reads were not answered from memory and asked the store.
    pub fn store_reads(&self) -> u64 {
        self.store_reads.load(Ordering::Relaxed)
    }

    fn count(&self, answer: &'static str) {
        metrics::counter!("swath_latest_reads_total", "answer" => answer).increment(1);
    }
}

#[async_trait]
impl TelemetryStore for LatestCache {
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError> {
        let (snapshots, batch) = self.store.begin(mowers).await?;
        let batch = Box::new(ForgettingBatch {
            batch,
            written: Arc::clone(&self.written),
        });
        Ok((snapshots, batch))
    }

    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        let [mower] = mowers else {
            return self.store.latest(mowers).await;
        };
        let asked = AtomicBool::new(false);
        let read = async {
            asked.store(true, Ordering::Relaxed);
            self.store_reads.fetch_add(1, Ordering::Relaxed);
            let rows = self.store.latest(mowers).await?;
            Ok(rows.into_iter().find(|row| row.mower_id == *mower))
        };
        // Two reads that missed together may finish in either order: the older answer (another
        // replica committed between them) never replaces the newer one.
        let newer = |kept: &LatestRow, read: &LatestRow| kept.observed_at > read.observed_at;
        let generation = || self.written.get(*mower);
        let now = self.clock.now();
        let row = self
            .rows
            .read_through_unless(mower, now, generation, read, newer)
            .await?;
        self.count(if asked.into_inner() {
            "store"
        } else {
            "memory"
        });
        Ok(row.into_iter().collect())
    }

    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError> {
        self.store.health(mower).await
    }

    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError> {
        self.store.export(mowers).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError> {
        self.store.history(mower, window).await
    }

    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError> {
        self.store.track(mower, window).await
    }

    async fn days(
        &self,
        mower: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError> {
        self.store.days(mower, from, to).await
    }

    fn forget(&self, mowers: &[MowerId]) {
        self.store.forget(mowers);
        for mower in mowers {
            self.written.bump(*mower);
        }
    }
}

/// A unit of work that forgets its mowers' kept latest rows once its commit returned.
struct ForgettingBatch {
    batch: Box<dyn TelemetryBatch>,
    written: Arc<Generations>,
}

#[async_trait]
impl TelemetryBatch for ForgettingBatch {
    async fn neighbours(
        &mut self,
        late: &[(MowerId, DateTime<Utc>)],
        snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
    ) -> Result<(), StoreError> {
        self.batch.neighbours(late, snapshots).await
    }

    async fn session_windows(
        &mut self,
        late: &[(MowerId, DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<Vec<crate::ports::SessionWindow>, StoreError> {
        self.batch.session_windows(late).await
    }

    async fn commit(
        self: Box<Self>,
        changes: BatchChanges,
        notifications: IngestNotifications,
    ) -> Result<(), StoreError> {
        let mowers: Vec<MowerId> = changes.latest.iter().map(|row| row.mower_id).collect();
        let written = self.written;
        let committed = self.batch.commit(changes, notifications).await;
        // After the commit, whatever it answered: a failed commit may still have been stored (a
        // connection lost after COMMIT was sent), and forgetting costs one read.
        for mower in mowers {
            written.bump(mower);
        }
        committed
    }
}
