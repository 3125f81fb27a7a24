//! The in-memory store: directory, tokens and telemetry in one process. It is the product's
//! embedded default, not a mock: it keeps the same rows as PostgreSQL, under the same contract.
//!
//! Concurrency: a batch takes `batch_lock` (a tokio mutex, held across the batch's await points)
//! for the whole unit of work, which is what PostgreSQL's `FOR UPDATE` on the batch's mowers
//! gives; one lock for all mowers is simpler and costs nothing here because a memory batch never
//! waits on I/O. The rows themselves sit behind a std `RwLock` taken only briefly, never across an
//! await, so the API's reads never wait for a batch to finish, and never see half of one: a
//! commit applies all its changes under one write lock.
//!
//! Memory is bounded: history and positions keep at most `history_per_mower` rows per mower (the
//! oldest go first). Latest, health and day rows are one per mower (and day) and are kept. A
//! late state whose neighbours the cap removed is stored but not counted (`capped_until`). The
//! history and track reads say where the kept rows begin once the cap removed some
//! (`WindowRows::oldest_kept`), so a client never takes a capped history for the whole one.
//!
//! The rows are kept compact, because the default bound holds a day of the demo (decision 53;
//! BENCHMARKS.md, "The memory store's day of the demo"): a mower's maps do not repeat its id nor
//! the key in each value (`KeptHistory`, `KeptPosition`), a position's optional numbers take 8
//! bytes each, and a mower's error codes are shared between its rows. Reads rebuild the domain
//! rows.
//!
//! Deleting a mower takes `batch_lock` too, so that it never lands between a batch's `begin` and
//! its `commit` (the commit would re-create the rows of a mower just deleted), and the
//! notification side's locks (`watch`): it removes every row of the mower in both, under the
//! directory's write lock, and the notification side's writes that do not run in a unit of work
//! (busy statuses, zones, geofences) check the directory under its read lock, so that none lands
//! after the deletion.
//!
//! Layout: this file holds the store's state, settings and locks; `telemetry_rows` the compact
//! telemetry rows, `watch_rows` the notification rows. The ports are implemented on the store in
//! the modules of their names (`directory`, `tokens`, `telemetry`, `sessions`, `watch`, `retention`), as on
//! PostgreSQL.

pub(crate) mod telemetry_rows;
pub(crate) mod watch_rows;

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use swath_application::ports::{TokenHash, TokenId, TokenInfo};
use swath_domain::{Account, AccountId, Assignment, Mower, MowerId, Site, SiteId};
use telemetry_rows::MowerRows;
use tokio::sync::Mutex;
use watch_rows::WatchData;

/// The default of [`MemoryStoreSettings::history_per_mower`]: more than a day (86 400 s) of one
/// state a second (decision 52).
pub const DEFAULT_HISTORY_PER_MOWER: usize = 100_000;

/// Settings of the memory store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryStoreSettings {
    /// History rows and position rows kept per mower (`SWATH_MEMORY_HISTORY_PER_MOWER`).
    pub history_per_mower: usize,
}

impl Default for MemoryStoreSettings {
    fn default() -> Self {
        Self {
            // A day of the demo's one state a second (86 400), with room: decision 52.
            history_per_mower: DEFAULT_HISTORY_PER_MOWER,
        }
    }
}

#[derive(Default)]
pub(crate) struct DirectoryData {
    pub(crate) accounts: HashMap<AccountId, Account>,
    pub(crate) sites: HashMap<SiteId, Site>,
    pub(crate) mowers: HashMap<MowerId, Mower>,
}

#[derive(Default)]
pub(crate) struct TokenData {
    pub(crate) by_hash: HashMap<TokenHash, TokenId>,
    /// Ordered by id, the listing order.
    pub(crate) by_id: BTreeMap<TokenId, TokenInfo>,
}

/// The retention side of the memory store (used by `retention`).
#[derive(Debug, Default)]
pub(crate) struct RetentionData {
    pub(crate) lock: Arc<Mutex<()>>,
    pub(crate) downsampled_until: std::sync::Mutex<Option<DateTime<Utc>>>,
    /// Before these instants history rows, and positions, may have been removed.
    pub(crate) floors: std::sync::Mutex<Floors>,
}

/// The history and positions floors (see `RetentionRun::raise_floors`).
pub(crate) type Floors = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

impl RetentionData {
    /// The history and positions floors (see `RetentionRun::raise_floors`).
    pub(crate) fn floors(&self) -> Floors {
        *self.floors.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The in-memory store. Cheap to clone (shared state).
#[derive(Clone)]
pub struct MemoryStore {
    pub(crate) settings: MemoryStoreSettings,
    pub(crate) directory: Arc<RwLock<DirectoryData>>,
    pub(crate) tokens: Arc<RwLock<TokenData>>,
    pub(crate) telemetry: Arc<RwLock<HashMap<MowerId, MowerRows>>>,
    pub(crate) batch_lock: Arc<Mutex<()>>,
    /// The notification side (see `watch`): written by the ingest commit too (W6).
    pub(crate) watch: Arc<WatchData>,
    /// Retention's lock and downsampling watermark (see `retention`).
    pub(crate) retention: Arc<RetentionData>,
    /// The most history rows one mower has held (`swath_memory_store_history_rows_max`): how
    /// near the store came to `history_per_mower`, where it starts dropping the oldest rows.
    pub(crate) fullest: Arc<std::sync::atomic::AtomicUsize>,
    /// The operator assignments that `MemoryProjections` serves, kept here so that a mower's
    /// deletion removes them with its other rows.
    pub(crate) assignments: Arc<RwLock<AssignmentRows>>,
}

/// Assignments by mower, then id.
pub(crate) type AssignmentRows = HashMap<MowerId, BTreeMap<uuid::Uuid, Assignment>>;

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(MemoryStoreSettings::default())
    }
}

/// A poisoned lock only means another thread panicked while holding it; the data is still
/// consistent because every write is a plain insert. Carry on rather than propagate the panic.
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl MemoryStore {
    pub fn new(settings: MemoryStoreSettings) -> Self {
        metrics::gauge!("swath_memory_store_history_rows_limit")
            .set(settings.history_per_mower.max(1) as f64);
        metrics::gauge!("swath_memory_store_history_rows_max").set(0.0);
        Self {
            settings,
            directory: Arc::default(),
            tokens: Arc::default(),
            telemetry: Arc::default(),
            batch_lock: Arc::new(Mutex::new(())),
            watch: Arc::default(),
            retention: Arc::default(),
            fullest: Arc::default(),
            assignments: Arc::default(),
        }
    }

    /// A blade reset (W6 re-armed), serialised with ingest batches like PostgreSQL's row lock
    /// serialises it; `also` runs under the same lock (it clears the blade alert) and gives the
    /// answer.
    pub(crate) async fn reset_blade_locked<T>(
        &self,
        mower: MowerId,
        also: impl FnOnce() -> T,
    ) -> T {
        let _batch = self.batch_lock.lock().await;
        if let Some(health) = write(&self.telemetry)
            .get_mut(&mower)
            .and_then(|r| r.health.as_mut())
        {
            health.reset_blade();
        }
        also()
    }
}
