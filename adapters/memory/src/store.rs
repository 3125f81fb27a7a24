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
//! The rows are kept compact, because a day of the demo is 1.7 million states (BENCHMARKS.md,
//! decision 53): a mower's maps do not repeat its id nor the key in each value (`KeptHistory`,
//! `KeptPosition`), a position's optional numbers take 8 bytes each, and a mower's error codes
//! are shared between its rows. Reads rebuild the domain rows.
//!
//! Deleting a mower takes `batch_lock` too, so that it never lands between a batch's `begin` and
//! its `commit` (the commit would re-create the rows of a mower just deleted).

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use swath_application::ports::{
    Account, Directory, DirectoryAdmin, DirectoryError, ListQuery, Mower, NewToken, OrderKey,
    Principal, Site, StoreError, TelemetryBatch, TelemetryStore, TimeWindow, TokenError, TokenHash,
    TokenId, TokenInfo, TokenQuery, TokenStore, WindowRows,
};
use swath_domain::{
    AccountId, Activity, BatchChanges, DayTotals, DirectoryEntry, HealthTotals, HistoryRow,
    LatestRow, MowerId, MowerSnapshot, PositionRow, SiteId, StoredState, TelemetryRows,
};
use tokio::sync::{Mutex, OwnedMutexGuard};

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
    accounts: HashMap<AccountId, Account>,
    sites: HashMap<SiteId, Site>,
    pub(crate) mowers: HashMap<MowerId, Mower>,
}

#[derive(Default)]
struct TokenData {
    by_hash: HashMap<TokenHash, TokenId>,
    /// Ordered by id, the listing order.
    by_id: BTreeMap<TokenId, TokenInfo>,
}

#[derive(Default)]
pub(crate) struct MowerRows {
    pub(crate) history: BTreeMap<DateTime<Utc>, KeptHistory>,
    pub(crate) positions: BTreeMap<DateTime<Utc>, KeptPosition>,
    /// The distinct error codes of the mower's history rows, shared by them (see `intern`).
    error_codes: Vec<Arc<str>>,
    latest: Option<LatestRow>,
    health: Option<HealthTotals>,
    days: BTreeMap<NaiveDate, DayTotals>,
    /// Just after the newest history row the cap removed: older history rows may be gone.
    history_capped_until: Option<DateTime<Utc>>,
    /// Just after the newest position the cap removed: older positions may be gone.
    positions_capped_until: Option<DateTime<Utc>>,
}

/// The most distinct error codes a mower's rows share; further ones get a copy each, so that a
/// gateway sending ever new codes never makes the search long.
const SHARED_ERROR_CODES: usize = 32;

/// A history row as the memory store keeps it: without the mower id (the map's) and
/// `observed_at` (the key). 24 bytes instead of 56.
#[derive(Clone, Debug)]
pub(crate) struct KeptHistory {
    error_code: Option<Arc<str>>,
    activity: Activity,
    battery_percent: Option<u8>,
    blade_on: bool,
}

impl KeptHistory {
    fn row(&self, mower_id: MowerId, observed_at: DateTime<Utc>) -> HistoryRow {
        HistoryRow {
            mower_id,
            observed_at,
            activity: self.activity,
            battery_percent: self.battery_percent,
            error_code: self.error_code.as_deref().map(str::to_owned),
            blade_on: self.blade_on,
        }
    }
}

/// A position as the memory store keeps it: without the mower id and `observed_at`. 32 bytes
/// instead of 80.
#[derive(Clone, Debug)]
pub(crate) struct KeptPosition {
    lat: f64,
    lon: f64,
    accuracy_m: MaybeF64,
    heading_deg: MaybeF64,
}

impl KeptPosition {
    fn new(row: PositionRow) -> Self {
        Self {
            lat: row.lat,
            lon: row.lon,
            accuracy_m: MaybeF64::new(row.accuracy_m),
            heading_deg: MaybeF64::new(row.heading_deg),
        }
    }

    fn row(&self, mower_id: MowerId, observed_at: DateTime<Utc>) -> PositionRow {
        PositionRow {
            mower_id,
            observed_at,
            lat: self.lat,
            lon: self.lon,
            accuracy_m: self.accuracy_m.get(),
            heading_deg: self.heading_deg.get(),
        }
    }
}

/// An `Option<f64>` in 8 bytes instead of 16: NaN stands for `None`. A position's accuracy and
/// heading are finite whenever present (ingest refuses a report otherwise: `StateReport`'s
/// validation, and JSON cannot carry NaN anyway), so no value is lost (decision 53).
#[derive(Clone, Copy, Debug)]
struct MaybeF64(f64);

impl MaybeF64 {
    fn new(value: Option<f64>) -> Self {
        debug_assert!(
            value.is_none_or(|v| !v.is_nan()),
            "a position's optional number is never NaN"
        );
        Self(value.unwrap_or(f64::NAN))
    }

    fn get(self) -> Option<f64> {
        (!self.0.is_nan()).then_some(self.0)
    }
}

impl MowerRows {
    /// The kept form of a history row, its error code shared with the mower's earlier rows.
    fn keep_history(&mut self, row: HistoryRow) -> KeptHistory {
        KeptHistory {
            error_code: row.error_code.map(|code| self.intern(code)),
            activity: row.activity,
            battery_percent: row.battery_percent,
            blade_on: row.blade_on,
        }
    }

    /// The shared copy of `code`: a mower in error reports the same code every second.
    fn intern(&mut self, code: String) -> Arc<str> {
        if let Some(shared) = self.error_codes.iter().find(|c| &***c == code.as_str()) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(code);
        if self.error_codes.len() < SHARED_ERROR_CODES {
            self.error_codes.push(Arc::clone(&shared));
        }
        shared
    }

    /// Just after the newest row the cap removed from either table: older rows of the mower may
    /// be gone (a late state's neighbours among them), see `swath_domain::Neighbourhood`.
    fn capped_until(&self) -> Option<DateTime<Utc>> {
        self.history_capped_until.max(self.positions_capped_until)
    }

    /// Removes the oldest history row when the table holds more than `cap`.
    fn cap_history(&mut self, cap: usize) {
        if self.history.len() > cap {
            if let Some((at, _)) = self.history.pop_first() {
                raise(&mut self.history_capped_until, at);
            }
        }
    }

    /// Removes the oldest position when the table holds more than `cap`.
    fn cap_positions(&mut self, cap: usize) {
        if self.positions.len() > cap {
            if let Some((at, _)) = self.positions.pop_first() {
                raise(&mut self.positions_capped_until, at);
            }
        }
    }
}

/// Raises `floor` to just after `removed`, a row the cap removed.
fn raise(floor: &mut Option<DateTime<Utc>>, removed: DateTime<Utc>) {
    let after = removed + chrono::Duration::microseconds(1);
    *floor = (*floor).max(Some(after));
}

/// The oldest row of `rows` kept after what the cap removed below `capped_until` (the port's
/// `WindowRows::oldest_kept`). Normally the table's first row: the cap removes the oldest, so
/// every kept row is newer. A late state stored below the floor after retention made room is
/// kept but does not start the complete part. No row after the floor means retention (by age)
/// has since removed every row the cap had removed and more: the cap explains nothing missing,
/// as in PostgreSQL, so `None`.
fn oldest_kept<T>(
    rows: &BTreeMap<DateTime<Utc>, T>,
    capped_until: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    capped_until.and_then(|floor| rows.range(floor..).next().map(|(at, _)| *at))
}

/// The in-memory store. Cheap to clone (shared state).
#[derive(Clone)]
pub struct MemoryStore {
    settings: MemoryStoreSettings,
    pub(crate) directory: Arc<RwLock<DirectoryData>>,
    tokens: Arc<RwLock<TokenData>>,
    pub(crate) telemetry: Arc<RwLock<HashMap<MowerId, MowerRows>>>,
    batch_lock: Arc<Mutex<()>>,
    /// The notification side (see `watch`): written by the ingest commit too (W6).
    pub(crate) watch: Arc<crate::watch::WatchData>,
    /// Retention's lock and downsampling watermark (see `retention`).
    pub(crate) retention: Arc<crate::retention::RetentionData>,
}

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
        Self {
            settings,
            directory: Arc::default(),
            tokens: Arc::default(),
            telemetry: Arc::default(),
            batch_lock: Arc::new(Mutex::new(())),
            watch: Arc::default(),
            retention: Arc::default(),
        }
    }

    /// A blade reset (W6 re-armed), serialised with ingest batches like PostgreSQL's row lock
    /// serialises it; `also` runs under the same lock (it clears the blade alert).
    pub(crate) async fn reset_blade_locked(&self, mower: MowerId, also: impl FnOnce()) {
        let _batch = self.batch_lock.lock().await;
        if let Some(health) = write(&self.telemetry)
            .get_mut(&mower)
            .and_then(|r| r.health.as_mut())
        {
            health.reset_blade();
        }
        also();
    }
}

#[async_trait]
impl Directory for MemoryStore {
    async fn create_account(&self, account: Account) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        if dir.accounts.contains_key(&account.id) {
            return Err(DirectoryError::Conflict(format!("account {}", account.id)));
        }
        dir.accounts.insert(account.id, account);
        Ok(())
    }

    async fn create_site(&self, site: Site) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        if !dir.accounts.contains_key(&site.account_id) {
            return Err(DirectoryError::NotFound(format!(
                "account {}",
                site.account_id
            )));
        }
        if dir.sites.contains_key(&site.id) {
            return Err(DirectoryError::Conflict(format!("site {}", site.id)));
        }
        dir.sites.insert(site.id, site);
        Ok(())
    }

    async fn create_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get(&mower.site_id) {
            Some(site) if site.account_id == mower.account_id => {}
            _ => return Err(DirectoryError::NotFound(format!("site {}", mower.site_id))),
        }
        if dir.mowers.contains_key(&mower.id) {
            return Err(DirectoryError::Conflict(format!("mower {}", mower.id)));
        }
        dir.mowers.insert(mower.id, mower);
        Ok(())
    }

    async fn account(&self, id: AccountId) -> Result<Option<Account>, DirectoryError> {
        Ok(read(&self.directory).accounts.get(&id).cloned())
    }

    async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError> {
        Ok(read(&self.directory).mowers.get(&id).cloned())
    }

    async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError> {
        let mut sites: Vec<Site> = read(&self.directory)
            .sites
            .values()
            .filter(|s| s.account_id == account)
            .cloned()
            .collect();
        sites.sort_by(|a, b| {
            (a.display_order, &a.name, a.id).cmp(&(b.display_order, &b.name, b.id))
        });
        Ok(sites)
    }

    async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError> {
        let mut mowers: Vec<Mower> = read(&self.directory)
            .mowers
            .values()
            .filter(|m| m.account_id == account)
            .cloned()
            .collect();
        mowers.sort_by(|a, b| {
            (a.display_order, &a.name, a.id).cmp(&(b.display_order, &b.name, b.id))
        });
        Ok(mowers)
    }
}

#[async_trait]
impl DirectoryAdmin for MemoryStore {
    async fn site(&self, id: SiteId) -> Result<Option<Site>, DirectoryError> {
        Ok(read(&self.directory).sites.get(&id).cloned())
    }

    async fn mowers_by_id(&self, ids: &[MowerId]) -> Result<Vec<Mower>, DirectoryError> {
        let dir = read(&self.directory);
        let mut mowers: Vec<Mower> = ids
            .iter()
            .filter_map(|id| dir.mowers.get(id).cloned())
            .collect();
        mowers.sort_by_key(|m| m.id);
        mowers.dedup_by_key(|m| m.id);
        Ok(mowers)
    }

    async fn list_sites(&self, query: &ListQuery) -> Result<Vec<Site>, DirectoryError> {
        let dir = read(&self.directory);
        Ok(page(
            dir.sites.values().filter(|s| {
                s.account_id == query.account
                    && query.sites.as_ref().is_none_or(|only| only.contains(&s.id))
            }),
            Site::order_key,
            query,
        ))
    }

    async fn list_mowers(&self, query: &ListQuery) -> Result<Vec<Mower>, DirectoryError> {
        let dir = read(&self.directory);
        Ok(page(
            dir.mowers.values().filter(|m| {
                m.account_id == query.account
                    && query
                        .sites
                        .as_ref()
                        .is_none_or(|only| only.contains(&m.site_id))
            }),
            Mower::order_key,
            query,
        ))
    }

    async fn update_site(&self, site: Site) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get_mut(&site.id) {
            Some(stored) if stored.account_id == site.account_id => {
                *stored = site;
                Ok(())
            }
            _ => Err(DirectoryError::NotFound(format!("site {}", site.id))),
        }
    }

    async fn delete_site(&self, account: AccountId, id: SiteId) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get(&id) {
            Some(site) if site.account_id == account => {}
            _ => return Err(DirectoryError::NotFound(format!("site {id}"))),
        }
        if dir.mowers.values().any(|m| m.site_id == id) {
            return Err(DirectoryError::InUse(format!("site {id}")));
        }
        dir.sites.remove(&id);
        Ok(())
    }

    async fn update_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get(&mower.site_id) {
            Some(site) if site.account_id == mower.account_id => {}
            _ => return Err(DirectoryError::NotFound(format!("site {}", mower.site_id))),
        }
        match dir.mowers.get_mut(&mower.id) {
            Some(stored) if stored.account_id == mower.account_id => {
                *stored = mower;
                Ok(())
            }
            _ => Err(DirectoryError::NotFound(format!("mower {}", mower.id))),
        }
    }

    async fn delete_mower(&self, account: AccountId, id: MowerId) -> Result<(), DirectoryError> {
        // No batch may be between its begin and its commit while the mower goes (see the module).
        let _batch = self.batch_lock.lock().await;
        let mut dir = write(&self.directory);
        match dir.mowers.get(&id) {
            Some(mower) if mower.account_id == account => {}
            _ => return Err(DirectoryError::NotFound(format!("mower {id}"))),
        }
        let mut telemetry = write(&self.telemetry);
        dir.mowers.remove(&id);
        telemetry.remove(&id);
        Ok(())
    }
}

/// The rows after `query.after`, in [`OrderKey`] order, at most `query.limit`.
fn page<'a, T: Clone + 'a>(
    rows: impl Iterator<Item = &'a T>,
    key: impl Fn(&T) -> OrderKey,
    query: &ListQuery,
) -> Vec<T> {
    let mut keyed: Vec<(OrderKey, &T)> = rows
        .map(|row| (key(row), row))
        .filter(|(k, _)| query.after.as_ref().is_none_or(|after| k > after))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed
        .into_iter()
        .take(query.limit)
        .map(|(_, row)| row.clone())
        .collect()
}

#[async_trait]
impl TokenStore for MemoryStore {
    async fn create_token(&self, hash: TokenHash, token: NewToken) -> Result<(), TokenError> {
        let mut tokens = write(&self.tokens);
        if tokens.by_hash.contains_key(&hash) || tokens.by_id.contains_key(&token.id) {
            return Err(TokenError::Conflict);
        }
        tokens.by_hash.insert(hash, token.id);
        tokens.by_id.insert(
            token.id,
            TokenInfo {
                id: token.id,
                name: token.name,
                principal: token.principal,
                created_at: Utc::now(),
            },
        );
        Ok(())
    }

    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError> {
        let tokens = read(&self.tokens);
        Ok(tokens
            .by_hash
            .get(hash)
            .and_then(|id| tokens.by_id.get(id))
            .map(|t| t.principal.clone()))
    }

    async fn tokens(&self, query: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
        let tokens = read(&self.tokens);
        let start = match query.after {
            Some(after) => Bound::Excluded(after),
            None => Bound::Unbounded,
        };
        Ok(tokens
            .by_id
            .range((start, Bound::Unbounded))
            .map(|(_, t)| t)
            .filter(|t| query.within.covers(&t.principal))
            .take(query.limit)
            .cloned()
            .collect())
    }

    async fn token(&self, id: TokenId) -> Result<Option<TokenInfo>, TokenError> {
        Ok(read(&self.tokens).by_id.get(&id).cloned())
    }

    async fn revoke_token(&self, id: TokenId) -> Result<bool, TokenError> {
        let mut tokens = write(&self.tokens);
        if tokens.by_id.remove(&id).is_none() {
            return Ok(false);
        }
        tokens.by_hash.retain(|_, token| *token != id);
        Ok(true)
    }
}

/// An open memory batch: holds the batch lock until committed or dropped.
struct MemoryBatch {
    store: MemoryStore,
    _lock: OwnedMutexGuard<()>,
}

#[async_trait]
impl TelemetryBatch for MemoryBatch {
    async fn neighbours(
        &mut self,
        late: &[(MowerId, DateTime<Utc>)],
        snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
    ) -> Result<(), StoreError> {
        let telemetry = read(&self.store.telemetry);
        // Under the rows' lock: retention raises its floors before it removes rows (see
        // `RetentionRun::raise_floors`), so these floors cover every removal this read can miss.
        let (history_floor, positions_floor) = self.store.retention.floors();
        for (mower, at) in late {
            let (Some(rows), Some(snapshot)) = (telemetry.get(mower), snapshots.get_mut(mower))
            else {
                continue;
            };
            let near = &mut snapshot.neighbourhood;
            // Either table's cap raises both floors, as before the tables had a floor each: a
            // neighbour is a history row with its position.
            let capped_until = rows.capped_until();
            for floor in [history_floor, capped_until].into_iter().flatten() {
                near.raise_history_floor(floor);
            }
            for floor in [positions_floor, capped_until].into_iter().flatten() {
                near.raise_positions_floor(floor);
            }
            let before = rows.history.range(..=*at).next_back();
            let after = rows
                .history
                .range((Bound::Excluded(*at), Bound::Unbounded))
                .next();
            for (observed_at, row) in before.into_iter().chain(after) {
                let position = rows.positions.get(observed_at);
                near.insert_stored(StoredState {
                    observed_at: *observed_at,
                    activity: row.activity,
                    blade_on: row.blade_on,
                    lat: position.map(|p| p.lat),
                    lon: position.map(|p| p.lon),
                });
            }
        }
        Ok(())
    }

    async fn commit(self: Box<Self>, changes: BatchChanges) -> Result<(), StoreError> {
        let cap = self.store.settings.history_per_mower.max(1);
        let mut telemetry = write(&self.store.telemetry);
        // W2 follows W1: a position is stored with its key's history row, never for a key
        // stored earlier. The rules list positions in the order of their history rows (a
        // subsequence), so one walk pairs them.
        let mut positions = changes.positions.into_iter().peekable();
        for row in changes.history {
            let (mower_id, at) = (row.mower_id, row.observed_at);
            let rows = telemetry.entry(mower_id).or_default();
            let inserted = !rows.history.contains_key(&at);
            if inserted {
                let kept = rows.keep_history(row);
                rows.history.insert(at, kept);
            }
            rows.cap_history(cap);
            let Some(position) =
                positions.next_if(|p| p.mower_id == mower_id && p.observed_at == at)
            else {
                continue;
            };
            if inserted {
                rows.positions
                    .entry(at)
                    .or_insert_with(|| KeptPosition::new(position));
                rows.cap_positions(cap);
            }
        }
        for row in changes.latest {
            let mower_id = row.mower_id;
            telemetry.entry(mower_id).or_default().latest = Some(row);
        }
        for row in changes.health {
            let mower_id = row.mower_id;
            telemetry.entry(mower_id).or_default().health = Some(row);
        }
        for row in changes.days {
            telemetry
                .entry(row.mower_id)
                .or_default()
                .days
                .entry(row.day)
                .and_modify(|d| d.add(&row))
                .or_insert(row);
        }
        // W6's events and alerts, with the rows that raised them (still under the rows' lock).
        crate::watch::store_ingest_events(&self.store.watch, &changes.events);
        Ok(())
    }
}

#[async_trait]
impl TelemetryStore for MemoryStore {
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError> {
        let lock = Arc::clone(&self.batch_lock).lock_owned().await;
        let directory = read(&self.directory);
        let telemetry = read(&self.telemetry);
        let mut snapshots = BTreeMap::new();
        for mower_id in mowers {
            let Some(mower) = directory.mowers.get(mower_id) else {
                continue;
            };
            let Some(site) = directory.sites.get(&mower.site_id) else {
                return Err(StoreError::Corrupt(format!(
                    "mower {mower_id} names site {} which does not exist",
                    mower.site_id
                )));
            };
            let rows = telemetry.get(mower_id);
            snapshots.insert(
                *mower_id,
                MowerSnapshot {
                    directory: Some(DirectoryEntry {
                        mower_id: *mower_id,
                        account_id: mower.account_id,
                        time_zone: site.time_zone,
                        blade_threshold_ms: mower.blade_threshold_ms,
                    }),
                    latest: rows.and_then(|r| r.latest.as_ref()).map(LatestRow::key),
                    health: rows.and_then(|r| r.health.clone()),
                    neighbourhood: Default::default(),
                },
            );
        }
        drop((directory, telemetry));
        Ok((
            snapshots,
            Box::new(MemoryBatch {
                store: self.clone(),
                _lock: lock,
            }),
        ))
    }

    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        let telemetry = read(&self.telemetry);
        let mut rows: Vec<LatestRow> = mowers
            .iter()
            .filter_map(|m| telemetry.get(m).and_then(|r| r.latest.clone()))
            .collect();
        rows.sort_by_key(|r| r.mower_id);
        Ok(rows)
    }

    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError> {
        Ok(read(&self.telemetry)
            .get(&mower)
            .and_then(|r| r.health.clone()))
    }

    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError> {
        let mut sorted = mowers.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let telemetry = read(&self.telemetry);
        let mut out = TelemetryRows::default();
        for (mower, rows) in sorted
            .iter()
            .filter_map(|m| telemetry.get(m).map(|rows| (*m, rows)))
        {
            out.history
                .extend(rows.history.iter().map(|(at, h)| h.row(mower, *at)));
            out.positions
                .extend(rows.positions.iter().map(|(at, p)| p.row(mower, *at)));
            out.latest.extend(rows.latest.clone());
            out.health.extend(rows.health.clone());
            out.days.extend(rows.days.values().cloned());
        }
        Ok(out)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError> {
        let telemetry = read(&self.telemetry);
        Ok(telemetry
            .get(&mower)
            .map(|rows| WindowRows {
                rows: in_window(&rows.history, window)
                    .map(|(at, h)| h.row(mower, *at))
                    .collect(),
                oldest_kept: oldest_kept(&rows.history, rows.history_capped_until),
            })
            .unwrap_or_else(|| WindowRows::complete(Vec::new())))
    }

    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError> {
        let telemetry = read(&self.telemetry);
        Ok(telemetry
            .get(&mower)
            .map(|rows| WindowRows {
                rows: in_window(&rows.positions, window)
                    .map(|(at, p)| p.row(mower, *at))
                    .collect(),
                oldest_kept: oldest_kept(&rows.positions, rows.positions_capped_until),
            })
            .unwrap_or_else(|| WindowRows::complete(Vec::new())))
    }

    async fn days(
        &self,
        mower: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError> {
        if from > to {
            return Ok(Vec::new());
        }
        let telemetry = read(&self.telemetry);
        Ok(telemetry
            .get(&mower)
            .map(|rows| rows.days.range(from..=to).map(|(_, d)| d.clone()).collect())
            .unwrap_or_default())
    }
}

/// The rows of `window` (see [`TimeWindow`]) from one mower's rows keyed by `observed_at`.
fn in_window<'a, T>(
    rows: &'a BTreeMap<DateTime<Utc>, T>,
    window: &TimeWindow,
) -> impl Iterator<Item = (&'a DateTime<Utc>, &'a T)> {
    // The lower bound is the later of `from` (inclusive) and `after` (exclusive).
    let lower = match (window.from, window.after) {
        (Some(from), Some(after)) if after >= from => Bound::Excluded(after),
        (Some(from), _) => Bound::Included(from),
        (None, Some(after)) => Bound::Excluded(after),
        (None, None) => Bound::Unbounded,
    };
    let upper = window.to.map_or(Bound::Unbounded, Bound::Excluded);
    // BTreeMap::range panics on an empty or inverted range: answer nothing instead.
    let empty = match (lower, upper) {
        (Bound::Included(l), Bound::Excluded(u)) | (Bound::Excluded(l), Bound::Excluded(u)) => {
            l >= u
        }
        _ => false,
    };
    let range = (!empty).then(|| rows.range((lower, upper)).take(window.limit));
    range.into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the compact rows are kept for (module docs; BENCHMARKS.md has the whole store's).
    #[test]
    fn kept_rows_are_compact() {
        assert_eq!(std::mem::size_of::<KeptHistory>(), 24);
        assert_eq!(std::mem::size_of::<KeptPosition>(), 32);
        assert!(std::mem::size_of::<HistoryRow>() > 2 * std::mem::size_of::<KeptHistory>());
    }

    /// What a kept position answers is what was stored, absent numbers included.
    #[test]
    fn kept_positions_answer_what_was_stored() {
        let mower = MowerId(uuid::Uuid::from_u128(7));
        let at = DateTime::<Utc>::from_timestamp(1_780_000_000, 123_000).unwrap();
        for (accuracy_m, heading_deg) in [
            (None, None),
            (Some(0.0), Some(360.0)),
            (Some(0.4), None),
            (None, Some(-0.0)),
        ] {
            let row = PositionRow {
                mower_id: mower,
                observed_at: at,
                lat: 52.5,
                lon: -13.4,
                accuracy_m,
                heading_deg,
            };
            assert_eq!(KeptPosition::new(row.clone()).row(mower, at), row);
        }
    }

    /// A mower's rows share one copy of an error code; beyond the shared ones, codes are copied.
    #[test]
    fn error_codes_are_shared() {
        let mut rows = MowerRows::default();
        let a = rows.intern("BLADE_BLOCKED".to_owned());
        let b = rows.intern("BLADE_BLOCKED".to_owned());
        assert!(Arc::ptr_eq(&a, &b));
        for i in 0..2 * SHARED_ERROR_CODES {
            rows.intern(format!("E{i}"));
        }
        assert_eq!(rows.error_codes.len(), SHARED_ERROR_CODES);
        let late = rows.intern("LATE".to_owned());
        assert_eq!(&*late, "LATE");
        assert!(!rows.error_codes.iter().any(|c| Arc::ptr_eq(c, &late)));
    }
}
