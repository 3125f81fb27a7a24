use super::Cause;
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use swath_domain::MowerId;

/// Errors of the [`RetentionStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    /// The store could not be reached or a statement failed. What the failed step did not
    /// commit, it did not do; the next run does it.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] Cause),
}

/// The two tables retention trims. Latest rows, health totals and day totals are kept forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RetainedTable {
    /// W1's history rows.
    History,
    /// W2's position rows (the track).
    Positions,
}

impl RetainedTable {
    /// The name used in logs, metrics and summaries.
    pub fn name(self) -> &'static str {
        match self {
            Self::History => "history",
            Self::Positions => "positions",
        }
    }
}

/// A part of a table the store can drop whole, cheaply: a PostgreSQL monthly partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub table: RetainedTable,
    /// The store's name for it (`positions_202501`).
    pub name: String,
    /// Its rows are those with `start <= observed_at < end`.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Partition {
    /// The calendar month (UTC) of a monthly partition, for summaries.
    pub fn month(&self) -> NaiveDate {
        self.start.date_naive()
    }
}

/// The store side of retention (`swath_application::retention` drives it).
///
/// An implementation MUST:
/// - in [`RetentionStore::try_lock`], take the store-wide retention lock without waiting and
///   answer `None` when another run (in this process or another replica) holds it. The lock is
///   held until [`RetentionRun::release`] or until the run is dropped, and is released by the
///   store when the process dies (PostgreSQL: a session advisory lock).
#[async_trait]
pub trait RetentionStore: Send + Sync {
    async fn try_lock(&self) -> Result<Option<Box<dyn RetentionRun>>, RetentionError>;
}

/// One run of retention, holding the lock. Every method is one bounded unit of work committed on
/// its own, so a run stopped anywhere has done exactly what its finished calls did.
///
/// An implementation MUST:
/// - `mowers`: answer every mower that may have history or positions, in id order.
/// - `partitions`: answer the parts of the tables it can drop whole (none for the memory store).
/// - `drop_partition`: remove the partition and its rows, and answer how many rows it held
///   (an estimate is allowed: PostgreSQL's statistics); with `dry_run`, remove nothing. When the
///   partition cannot be dropped now (PostgreSQL: a lock not granted in time), answer
///   `Ok(None)` and change nothing: its rows go by [`RetentionRun::expire`] instead.
/// - `expire`: delete at most `limit` rows of `table` of these `mowers` with
///   `observed_at < before`, and answer how many it deleted; with `dry_run`, delete nothing and
///   answer how many there are (without the limit).
/// - `downsample`: among the positions of these `mowers` with `from <= observed_at < to`, delete
///   at most `limit` of those that have an earlier position of the same mower in the same UTC
///   minute with `observed_at >= keep_from`, and answer how many it deleted; with `dry_run`,
///   count them all and delete nothing. (A row kept is never made deletable by the deletion of
///   another, so chunks may run in any order, and a repeated chunk finds nothing more.)
/// - `downsampled_until` / `set_downsampled_until`: keep the instant up to which the positions
///   were downsampled by completed slices, across runs and restarts (`None` before the first).
/// - `expire_sessions`: delete at most `limit` of the W8 sessions of these `mowers` that ended
///   before `before`, never a mower's newest session (an open one has no end), and answer how
///   many it deleted; with `dry_run`, delete nothing and answer how many there are.
/// - never touch latest rows, health totals or day totals.
#[async_trait]
pub trait RetentionRun: Send {
    async fn mowers(&mut self) -> Result<Vec<MowerId>, RetentionError>;

    async fn partitions(&mut self) -> Result<Vec<Partition>, RetentionError>;

    async fn drop_partition(
        &mut self,
        partition: &Partition,
        dry_run: bool,
    ) -> Result<Option<u64>, RetentionError>;

    async fn expire(
        &mut self,
        table: RetainedTable,
        mowers: &[MowerId],
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError>;

    async fn downsample(
        &mut self,
        mowers: &[MowerId],
        window: DownsampleWindow,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError>;

    async fn expire_sessions(
        &mut self,
        mowers: &[MowerId],
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError>;

    async fn downsampled_until(&mut self) -> Result<Option<DateTime<Utc>>, RetentionError>;

    async fn set_downsampled_until(&mut self, until: DateTime<Utc>) -> Result<(), RetentionError>;

    /// Raises (never lowers) the floors before which this run may remove history rows and
    /// positions, durably and visibly to ingestion **before** it removes any: a late state whose
    /// neighbours are older than a floor is stored but not merged into the totals (docs/rules.md §3 W4).
    async fn raise_floors(
        &mut self,
        history: DateTime<Utc>,
        positions: DateTime<Utc>,
    ) -> Result<(), RetentionError>;

    /// Releases the lock (dropping the run releases it too, possibly later).
    async fn release(self: Box<Self>) -> Result<(), RetentionError>;
}

/// The positions a downsampling chunk looks at (`from <= observed_at < to`) and the oldest
/// instant a position may have to count as the first of its minute (`keep_from`: older ones are
/// about to expire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DownsampleWindow {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub keep_from: DateTime<Utc>,
}
