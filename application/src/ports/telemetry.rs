use super::sessions::SessionWindow;
use super::Cause;
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;
use swath_domain::watch::IngestNotifications;
use swath_domain::{
    BatchChanges, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, MowerSnapshot,
    PositionRow, TelemetryRows,
};

/// Errors of the [`TelemetryStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or a statement failed. Nothing of the batch is stored; the
    /// caller redelivers it.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// A stored row could not be read back (a bug or a manual edit).
    #[error("stored data is corrupt: {0}")]
    Corrupt(#[source] Cause),
    /// The store refused the data itself (a value it cannot keep, a constraint or trigger that
    /// refused it): trying the same data again fails the same way, unlike
    /// [`StoreError::Unavailable`]. Nothing of the batch is stored. The ingest path isolates the
    /// state that causes it (`Ingest::record_states_isolating`).
    #[error("the store refused the data: {0}")]
    Rejected(#[source] Cause),
}

impl StoreError {
    /// Whether the same data would fail the same way again (not worth retrying as it is).
    pub fn is_rejection(&self) -> bool {
        matches!(self, StoreError::Rejected(_))
    }
}

/// The telemetry store: a batch unit of work for ingestion (docs/rules.md §3), plus the reads of the API.
///
/// An implementation MUST:
/// - in [`TelemetryStore::begin`], read the directory entry (account, site time zone, blade
///   threshold), the latest key (without the state document) and the health totals of every given
///   mower, and its newest stored session with the rest after it ([`MowerSnapshot::sessions`];
///   W8, decisions 200 and 207: as the last commit's `newest` left them), **once**, and hold them locked against any other batch touching those mowers until
///   the returned [`TelemetryBatch`] is committed or dropped; lock in mower id order, so that two
///   batches (or two replicas) never deadlock. A mower missing from the directory is absent from
///   the map.
/// - in [`TelemetryBatch::neighbours`] (called only for a batch with late states), read for each
///   given `(mower, observed_at)` the newest stored state at or before it and the oldest stored
///   state after it (history row and position), in **one** read under the batch's locks, into
///   the snapshots' [`swath_domain::Neighbourhood`]s, with the floors below which retention (or
///   a cap) may have removed rows of the mower: history rows (`raise_history_floor`) and
///   positions (`raise_positions_floor`).
/// - in [`TelemetryBatch::session_windows`] (called only for a batch with late states), read the
///   [`SessionWindow`] of each mower, in a constant number of statements whatever the batch.
/// - in [`TelemetryBatch::commit`], write all of [`BatchChanges`] atomically: history and positions
///   inserted with an existing key left as it is; latest and health rows replaced; day rows added
///   to the stored ones; sessions upserted by `(mower_id, started_at)`, the removed keys
///   deleted, then each mower's newest session and rest of `sessions.newest` laid over its row,
///   so that every read answers them (in the same statements as the rest of the batch: no
///   statement per state or per session); and with them the batch's W6 notifications as given
///   ([`IngestNotifications`], derived once by the ingest, never again by the store): events
///   inserted (an id stored earlier keeps its row), alert changes applied, in the same unit of
///   work, costing no statement when there are none. Either everything is stored or nothing (then [`StoreError::Unavailable`],
///   or [`StoreError::Rejected`] when the data itself was refused and would be again).
///   Dropping an uncommitted batch stores nothing and releases the locks.
/// - keep for every mower at least the newest history and position rows (the memory store may cap
///   older rows, configurably); never cap latest, health or day rows.
/// - answer reads with what was committed: never a half-written batch.
/// - `history`, `track`: answer exactly the rows of [`TimeWindow`]'s definition (the memory store
///   from the rows it kept), and with them, read at the same moment, [`WindowRows::oldest_kept`]:
///   `None` unless a bound of the store on rows per mower (the memory store's cap) has removed
///   rows of that mower's table (history, or positions), in which case `Some` of the oldest
///   `observed_at` kept after the newest row the bound removed. A store without such a bound
///   (PostgreSQL) answers `None` always: rows removed by retention (an operator's setting by age,
///   docs/operations.md) are not the bound's and do not set it. `days`: the day rows of
///   `from..=to` as stored.
#[async_trait]
pub trait TelemetryStore: Send + Sync {
    /// Reads and locks the rows of `mowers` (sorted, without duplicates).
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError>;

    /// The latest rows of these mowers (those that have one), in mower id order.
    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError>;

    /// The health totals of a mower, if it ever reported.
    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError>;

    /// Every stored row of these mowers, each table in key order (for verification and tests),
    /// W8's sessions (whatever their account) by `(mower_id, started_at)`.
    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError>;

    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// A page of a mower's history rows: those in `window`, in `observed_at` order, with where
    /// the kept history begins when the store's bound removed older rows (see the contract).
    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError>;

    /// A page of a mower's position rows: those in `window`, in `observed_at` order, with where
    /// the kept positions begin when the store's bound removed older rows (see the contract).
    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError>;

    /// A mower's day rows of the local days `from..=to`, in day order (days without a row are
    /// absent).
    async fn days(
        &self,
        mower: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError>;

    /// These mowers were deleted: a wrapper that keeps rows of them in memory (the latest-state
    /// cache) forgets them, and a read under way meanwhile is not kept. A store answers from its
    /// rows and has nothing to forget.
    fn forget(&self, _mowers: &[MowerId]) {}
}

/// A page of a mower's history or positions: the rows with `from <= observed_at < to` (either
/// bound may be open) and `observed_at > after` (the last key of the previous page), in
/// `observed_at` order, at most `limit` of them.
///
/// A keyset, not an offset: a page boundary is a key, so rows committed while a client pages
/// never shift the pages. A row committed behind the boundary (a late state, older than the last
/// key read) is not seen by that walk; every other row is seen exactly once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeWindow {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub after: Option<DateTime<Utc>>,
    pub limit: usize,
}

/// The answer of [`TelemetryStore::history`] and [`TelemetryStore::track`]: a window's rows, and
/// whether the store's bound on rows per mower has removed older rows of that table.
///
/// One answer rather than a second port method, so that the rows and the floor are read at the
/// same moment (a commit between two reads could move the floor past the rows answered).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowRows<T> {
    /// The rows of the window (see [`TimeWindow`]).
    pub rows: Vec<T>,
    /// `None` when the store's bound has removed no row of this mower's table (always, for a
    /// store without such a bound). Otherwise the `observed_at` of the oldest row kept after the
    /// newest row the bound removed: every row stored from it on is kept, rows before it may be
    /// missing. Independent of the window: it is a property of the mower's table.
    pub oldest_kept: Option<DateTime<Utc>>,
}

impl<T> WindowRows<T> {
    /// The rows of a store that keeps every row (no bound removed any).
    pub fn complete(rows: Vec<T>) -> Self {
        Self {
            rows,
            oldest_kept: None,
        }
    }
}

/// One open batch: the locks taken by [`TelemetryStore::begin`], released on commit or drop.
#[async_trait]
pub trait TelemetryBatch: Send {
    /// Reads the stored neighbours of the batch's late states (see the contract above); `late`
    /// is sorted, without duplicates, as [`swath_domain::late_states`] answers it.
    async fn neighbours(
        &mut self,
        late: &[(MowerId, DateTime<Utc>)],
        snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
    ) -> Result<(), StoreError>;

    /// Reads the session windows of the batch's late states (see the contract above and
    /// [`SessionWindow`]): one `(mower, t_min, t_max)` per mower, sorted by mower, where `t_min`
    /// and `t_max` are its oldest and newest late states.
    async fn session_windows(
        &mut self,
        late: &[(MowerId, DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<Vec<SessionWindow>, StoreError>;

    /// Writes `changes` and `notifications` in one unit of work (see the contract above).
    async fn commit(
        self: Box<Self>,
        changes: BatchChanges,
        notifications: IngestNotifications,
    ) -> Result<(), StoreError>;
}
