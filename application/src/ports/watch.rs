use super::Cause;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Zone, ZoneChanges, ZoneWatch};
use swath_domain::watch::{
    Alert, AlertKind, Event, EventKind, GeoPolygon, Geofence, Watch, WatchChanges, WatchSnapshot,
};
use swath_domain::{AccountId, MowerId};
use uuid::Uuid;

/// Errors of the [`WatchStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The store could not be reached or a statement failed. Nothing of the unit of work is
    /// stored; the caller retries (a watcher batch is redelivered).
    #[error("watch store unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// A stored row could not be read back (a bug or a manual edit).
    #[error("stored watch data is corrupt: {0}")]
    Corrupt(#[source] Cause),
    /// A limit of the store was reached (e.g. zones per mower); nothing was stored.
    #[error("{0}")]
    Limit(String),
}

/// A page of the events feed: newest first.
#[derive(Clone, Debug, PartialEq)]
pub struct EventQuery {
    pub account_id: AccountId,
    /// Only these mowers (a site-limited principal, or a filter); `None`: the whole account.
    pub mowers: Option<Vec<MowerId>>,
    pub kind: Option<EventKind>,
    /// Only events with an id below this one (the previous page's last id).
    pub before: Option<Uuid>,
    /// The most events to return.
    pub limit: usize,
}

/// Where a page of open alerts starts: after this alert in the order (severity desc, raised_at
/// desc, id desc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlertCursor {
    pub severity_rank: i16,
    pub raised_at: DateTime<Utc>,
    pub id: Uuid,
}

impl AlertCursor {
    pub fn of(alert: &Alert) -> Self {
        Self {
            severity_rank: alert.severity.rank(),
            raised_at: alert.raised_at,
            id: alert.id,
        }
    }
}

/// A page of open alerts, ordered by severity (most urgent first), then `raised_at` and id, both
/// descending.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertQuery {
    pub account_id: AccountId,
    pub mowers: Option<Vec<MowerId>>,
    pub kind: Option<AlertKind>,
    pub after: Option<AlertCursor>,
    pub limit: usize,
}

/// Everything the notification side stores about some mowers, for verification and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchRows {
    /// In mower id order.
    pub watches: Vec<Watch>,
    /// In id order.
    pub events: Vec<Event>,
    /// In id order.
    pub alerts: Vec<Alert>,
    /// In mower id order (mowers that have one).
    pub zone_watches: Vec<ZoneWatch>,
    /// In mower id order.
    pub busy: Vec<BusyStatus>,
}

/// What [`WatchStore::begin_watch`] reads for a watcher batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchRead {
    /// Per mower in the directory: its account, current geofence version and watch row.
    pub snapshots: BTreeMap<MowerId, WatchSnapshot>,
    /// The polygon of each snapshot's geofence version that the caller has not parsed, read
    /// together with the version: every version a snapshot names is either here or among the
    /// caller's `parsed` versions.
    pub geofences: BTreeMap<MowerId, GeoPolygon>,
}

/// The zones of a mower and what W7 remembers about it, as read for a batch.
pub type ZoneRows = BTreeMap<MowerId, (Vec<Zone>, ZoneWatch)>;

/// The watcher's side of the notification store: watch rows and the watcher's units of work (a
/// batch, the offline sweep), and the scheduler's busy statuses (docs/rules.md §4). The other
/// concerns of the notification side are ports of their own: [`ZoneStore`] (W7),
/// [`GeofenceStore`] and [`NotificationFeed`] (events, alerts, blade resets). All four answer
/// [`WatchError`].
///
/// An implementation MUST:
/// - in [`WatchStore::begin_watch`], read for every given mower (sorted, without duplicates) its
///   directory account, its current geofence version and its watch row, **once**, and hold the
///   watch rows locked against any other watch batch (or sweep) until the returned [`WatchBatch`]
///   is committed or dropped; lock in mower id order, so that two replicas never deadlock. A
///   mower missing from the directory is absent from the map. In the same read (one snapshot of
///   the geofences), return the polygon of every current version that is not in `parsed`: a
///   geofence replaced or removed after that read must not change what the batch was given (the
///   batch judges against the version it read; the next batch sees the change).
/// - in [`WatchBatch::commit`], write all of [`WatchChanges`] atomically: the watch rows replaced
///   (every field, W8's pending session and `session_due_at` included),
///   the events inserted (an id stored already is left as it is), then the alerts: `clears`
///   applied to the open alert of their mower and kind (if any), then `raised` inserted (an id
///   stored already is left as it is). At most one alert of a kind is open per mower.
///   Either everything is stored or nothing ([`WatchError::Unavailable`]). Dropping an
///   uncommitted batch stores nothing and releases the locks.
/// - in [`WatchStore::begin_sweep`], lock (skipping rows locked by a running batch) and return at
///   most `limit` watches that are not offline and were last seen before `silent_before`, or
///   whose `session_due_at` is before `due_before` (decision 203), in mower id order.
/// - in [`WatchStore::write_busy`], never replace a stored status by one with an `observed_at`
///   that is not newer, and store nothing of a status whose mower is not in the directory under
///   the status's account (deleted since the busy check read it): the check against the
///   directory and the write are atomic with respect to a deletion.
/// - in [`WatchStore::export_watch`], answer every row of the notification side of these mowers
///   (watches, events, alerts, zone watches, busy statuses), whichever port wrote it.
/// - answer reads with what was committed, and never another account's rows.
/// - return [`WatchError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait WatchStore: Send + Sync {
    /// Reads and locks the watch rows of `mowers` (sorted, without duplicates), with the polygons
    /// of their current geofence versions except those in `parsed`.
    async fn begin_watch(
        &self,
        mowers: &[MowerId],
        parsed: &[Uuid],
    ) -> Result<(WatchRead, Box<dyn WatchBatch>), WatchError>;

    /// Locks and returns watches silent since before `silent_before` and not offline yet, and
    /// watches whose pending session is due before `due_before`.
    async fn begin_sweep(
        &self,
        silent_before: DateTime<Utc>,
        due_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<(Vec<Watch>, Box<dyn WatchBatch>), WatchError>;

    /// The busy statuses of these mowers (those that have one), in mower id order.
    async fn busy(&self, mowers: &[MowerId]) -> Result<Vec<BusyStatus>, WatchError>;

    /// Writes statuses (one per mower), each only over an older one.
    async fn write_busy(&self, statuses: &[BusyStatus]) -> Result<(), WatchError>;

    /// Every stored row of these mowers (for verification and tests).
    async fn export_watch(&self, mowers: &[MowerId]) -> Result<WatchRows, WatchError>;
}

/// Virtual zones (docs/rules.md §3 W7): a mower's named polygons, administered by the API, and
/// the zone watch (which zones a mower is in) that ingestion's zone step advances.
///
/// An implementation MUST:
/// - in [`ZoneStore::begin_zones`], read the zones and the zone watch of every given mower that
///   has at least one zone, once, locking the zone watches in mower id order until the
///   [`ZoneBatch`] is committed or dropped; commit writes the zone watches and the events
///   atomically.
/// - in [`ZoneStore::create_zone`], refuse a zone past
///   [`swath_domain::watch::zones::MAX_ZONES_PER_MOWER`] with [`WatchError::Limit`], storing
///   nothing; refuse a zone of a mower not in the directory (deleted since the caller checked it)
///   with [`WatchError::Unavailable`], storing nothing.
/// - answer reads with what was committed, and never another account's rows.
/// - return [`WatchError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait ZoneStore: Send + Sync {
    /// Reads the zones of `mowers` (sorted, without duplicates) and locks their zone watches.
    async fn begin_zones(
        &self,
        mowers: &[MowerId],
    ) -> Result<(ZoneRows, Box<dyn ZoneBatch>), WatchError>;

    /// A mower's zones, in name then id order.
    async fn zones(&self, mower: MowerId) -> Result<Vec<Zone>, WatchError>;

    /// Adds a zone; refuses with [`WatchError::Limit`] past
    /// [`swath_domain::watch::zones::MAX_ZONES_PER_MOWER`].
    async fn create_zone(&self, zone: Zone) -> Result<(), WatchError>;

    /// Replaces a zone's name and polygon (matched by id and mower); `false` if there is none.
    async fn update_zone(&self, zone: Zone) -> Result<bool, WatchError>;

    /// Removes a zone; `false` if the mower has no such zone.
    async fn delete_zone(&self, mower: MowerId, zone: Uuid) -> Result<bool, WatchError>;

    /// What W7 remembers about a mower (which zones it is in).
    async fn zone_watch(&self, mower: MowerId) -> Result<Option<ZoneWatch>, WatchError>;
}

/// Geofences (docs/rules.md §4): one polygon per mower, administered by the API, that the watcher
/// reads with its batches ([`WatchStore::begin_watch`]).
///
/// An implementation MUST:
/// - in [`GeofenceStore::put_geofence`], replace (or set) the mower's geofence with the given
///   version; a watcher batch that read the previous version judges against it, the next batch
///   reads the new one (the read clause of [`WatchStore::begin_watch`]); refuse a geofence of a
///   mower not in the directory (deleted since the caller checked it) with
///   [`WatchError::Unavailable`], storing nothing.
/// - answer reads with what was committed, and never another account's rows.
/// - return [`WatchError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait GeofenceStore: Send + Sync {
    /// Replaces (or sets) a mower's geofence with a new version.
    async fn put_geofence(&self, geofence: Geofence) -> Result<(), WatchError>;

    async fn geofence(&self, mower: MowerId) -> Result<Option<Geofence>, WatchError>;

    /// Removes a mower's geofence; `false` if it had none.
    async fn delete_geofence(&self, mower: MowerId) -> Result<bool, WatchError>;
}

/// What the notification side tells people: the events feed and the open alerts, whoever raised
/// them (the watcher, ingestion's W6 and W7), and the blade reset that closes W6's alert
/// (docs/rules.md §3 W6, §4).
///
/// An implementation MUST:
/// - store the events and alerts of ingestion (W6) in the ingest transaction itself (the
///   telemetry store's commit does it, through the same tables), so that the feeds answer them
///   like the watcher's.
/// - in [`NotificationFeed::events`], answer the events of `query.account_id` (of `query.mowers`
///   and `query.kind` when given) below `query.before`, newest first, at most `query.limit`; in
///   [`NotificationFeed::open_alerts`], the open alerts likewise, in the order of [`AlertQuery`],
///   strictly after `query.after`.
/// - in [`NotificationFeed::reset_blade`], restart the blade time of the mower's health totals at
///   zero, re-arm W6 and clear its open `blade_due` alert, atomically and serialised with
///   ingestion, and answer `true` only when an alert was open.
/// - answer reads with what was committed, and never another account's rows.
/// - return [`WatchError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait NotificationFeed: Send + Sync {
    /// A page of the events feed, newest first.
    async fn events(&self, query: &EventQuery) -> Result<Vec<Event>, WatchError>;

    /// A page of open alerts.
    async fn open_alerts(&self, query: &AlertQuery) -> Result<Vec<Alert>, WatchError>;

    /// A blade reset at `at` (see the contract above); `at` is when the blade alert is cleared.
    /// Answers whether an open `blade_due` alert was cleared (the caller tells the live streams).
    async fn reset_blade(&self, mower: MowerId, at: DateTime<Utc>) -> Result<bool, WatchError>;
}

/// One open watcher batch or sweep: the locks, released on commit or drop.
#[async_trait]
pub trait WatchBatch: Send {
    async fn commit(self: Box<Self>, changes: WatchChanges) -> Result<(), WatchError>;
}

/// One open W7 unit of work.
#[async_trait]
pub trait ZoneBatch: Send {
    async fn commit(self: Box<Self>, changes: ZoneChanges) -> Result<(), WatchError>;
}

/// The notification side's ports, one per concern (decision 95): the API's routes each take the
/// one they need, and the notification side's contract suites reach a store through all four.
#[derive(Clone)]
pub struct NotificationPorts {
    /// The watcher's units of work and the busy statuses (`/v1/mowers/{id}/busy`).
    pub watch: Arc<dyn WatchStore>,
    /// Virtual zones.
    pub zones: Arc<dyn ZoneStore>,
    /// Geofences.
    pub geofences: Arc<dyn GeofenceStore>,
    /// The events feed, open alerts and blade resets.
    pub feed: Arc<dyn NotificationFeed>,
}

impl NotificationPorts {
    /// One store behind all four ports (both adapters implement them all).
    pub fn of<S>(store: Arc<S>) -> Self
    where
        S: WatchStore + ZoneStore + GeofenceStore + NotificationFeed + 'static,
    {
        Self {
            watch: store.clone(),
            zones: store.clone(),
            geofences: store.clone(),
            feed: store,
        }
    }
}
