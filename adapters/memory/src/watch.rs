//! The notification side of the memory store: watch rows, geofences, zones and their occupancy,
//! the events feed, alerts and busy statuses (the ports `WatchStore`, `ZoneStore`,
//! `GeofenceStore` and `NotificationFeed`).
//!
//! Concurrency mirrors the telemetry side: watcher batches and sweeps take `watch_lock`, W7 units
//! take `zone_lock` (tokio mutexes held from `begin` to `commit`, what PostgreSQL's row locks
//! give), and the rows sit behind one std `RwLock` taken briefly, never across an await. The
//! ingest commit writes W6's events and alerts while it holds the telemetry rows' lock; the order
//! is always telemetry first, then these rows.
//!
//! Memory is bounded: the feed keeps the newest [`MAX_EVENTS`] events and the newest
//! [`MAX_CLEARED_ALERTS`] cleared alerts; open alerts, watches and statuses are one per mower.
//!
//! The rows themselves, their locks and how they change are in the store (`store::watch_rows`);
//! this file implements the four ports on them, with the watcher's units of work.

pub use crate::store::watch_rows::{MAX_CLEARED_ALERTS, MAX_EVENTS};

use crate::store::watch_rows::{read, write, WatchData};
use crate::store::{DirectoryData, MemoryStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use swath_application::ports::{
    AlertCursor, AlertQuery, Cause, Directory, EventQuery, GeofenceStore, NotificationFeed,
    WatchBatch, WatchError, WatchRead, WatchRows, WatchStore, ZoneBatch, ZoneRows, ZoneStore,
};
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Zone, ZoneChanges, ZoneWatch, MAX_ZONES_PER_MOWER};
use swath_domain::watch::Geofence;
use swath_domain::watch::{Alert, AlertKind, Event, Watch, WatchChanges, WatchSnapshot};
use swath_domain::{AccountId, MowerId};
use tokio::sync::OwnedMutexGuard;
use uuid::Uuid;

/// Whether `mower` is in the directory under `account`: the busy write's guard. A late write of
/// a mower deleted meanwhile must not leave a row that the next holder of its id would read.
fn in_directory(directory: &DirectoryData, mower: MowerId, account: AccountId) -> bool {
    directory
        .mowers
        .get(&mower)
        .is_some_and(|m| m.account_id == account)
}

/// The refusal of a zone or geofence of a mower that is not (any more) in the directory, as
/// PostgreSQL's foreign key refuses it (the memory store's foreign key).
fn gone(mower: MowerId) -> WatchError {
    WatchError::Unavailable(format!("mower {mower} is not in the directory").into())
}

struct MemoryWatchBatch {
    data: Arc<WatchData>,
    _lock: OwnedMutexGuard<()>,
}

#[async_trait]
impl WatchBatch for MemoryWatchBatch {
    async fn commit(self: Box<Self>, changes: WatchChanges) -> Result<(), WatchError> {
        let mut rows = write(&self.data.rows);
        for watch in changes.watches {
            rows.watches.insert(watch.mower_id, watch);
        }
        rows.insert_events(&changes.events);
        rows.apply_alerts(&changes.alerts);
        Ok(())
    }
}

struct MemoryZoneBatch {
    data: Arc<WatchData>,
    _lock: OwnedMutexGuard<()>,
}

#[async_trait]
impl ZoneBatch for MemoryZoneBatch {
    async fn commit(self: Box<Self>, changes: ZoneChanges) -> Result<(), WatchError> {
        let mut rows = write(&self.data.rows);
        for watch in changes.watches {
            rows.zone_watches.insert(watch.mower_id, watch);
        }
        rows.insert_events(&changes.events);
        Ok(())
    }
}

fn directory_error(e: impl Into<Cause>) -> WatchError {
    WatchError::Unavailable(e.into())
}

#[async_trait]
impl WatchStore for MemoryStore {
    async fn begin_watch(
        &self,
        mowers: &[MowerId],
        parsed: &[Uuid],
    ) -> Result<(WatchRead, Box<dyn WatchBatch>), WatchError> {
        let data = Arc::clone(&self.watch);
        let lock = Arc::clone(&data.watch_lock).lock_owned().await;
        let mut accounts = Vec::with_capacity(mowers.len());
        for mower in mowers {
            if let Some(m) = Directory::mower(self, *mower)
                .await
                .map_err(directory_error)?
            {
                accounts.push((*mower, m.account_id));
            }
        }
        // Versions and polygons under one read of the rows: the polygon is the version's.
        let rows = read(&data.rows);
        let mut out = WatchRead::default();
        for (mower, account) in accounts {
            let geofence = rows.geofences.get(&mower);
            if let Some(g) = geofence.filter(|g| !parsed.contains(&g.version)) {
                out.geofences.insert(mower, g.polygon.clone());
            }
            out.snapshots.insert(
                mower,
                WatchSnapshot {
                    account_id: Some(account),
                    geofence_version: geofence.map(|g| g.version),
                    watch: rows.watches.get(&mower).cloned(),
                },
            );
        }
        drop(rows);
        Ok((
            out,
            Box::new(MemoryWatchBatch {
                data: Arc::clone(&data),
                _lock: lock,
            }),
        ))
    }

    async fn begin_sweep(
        &self,
        silent_before: DateTime<Utc>,
        due_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<(Vec<Watch>, Box<dyn WatchBatch>), WatchError> {
        let data = Arc::clone(&self.watch);
        let lock = Arc::clone(&data.watch_lock).lock_owned().await;
        let rows = read(&data.rows);
        let mut silent: Vec<Watch> = rows
            .watches
            .values()
            .filter(|w| {
                (!w.offline && w.last_seen_at < silent_before)
                    || w.session_due_at.is_some_and(|due| due < due_before)
            })
            .cloned()
            .collect();
        drop(rows);
        silent.sort_by_key(|w| w.mower_id);
        silent.truncate(limit);
        Ok((
            silent,
            Box::new(MemoryWatchBatch {
                data: Arc::clone(&data),
                _lock: lock,
            }),
        ))
    }

    async fn busy(&self, mowers: &[MowerId]) -> Result<Vec<BusyStatus>, WatchError> {
        let rows = read(&self.watch.rows);
        let mut out: Vec<BusyStatus> = mowers
            .iter()
            .filter_map(|m| rows.busy.get(m).cloned())
            .collect();
        out.sort_by_key(|s| s.mower_id);
        out.dedup_by_key(|s| s.mower_id);
        Ok(out)
    }

    async fn write_busy(&self, statuses: &[BusyStatus]) -> Result<(), WatchError> {
        // The directory held while the statuses are written: a deletion cannot come between the
        // check and the write (it takes the directory first, then these rows).
        let directory = crate::store::read(&self.directory);
        let mut rows = write(&self.watch.rows);
        for status in statuses {
            // A late write for a mower deleted meanwhile, or whose id another account holds
            // now, is dropped (PostgreSQL's guarded write).
            if !in_directory(&directory, status.mower_id, status.account_id) {
                continue;
            }
            let newer = rows
                .busy
                .get(&status.mower_id)
                .is_none_or(|s| s.observed_at < status.observed_at);
            if newer {
                rows.busy.insert(status.mower_id, status.clone());
            }
        }
        Ok(())
    }

    async fn export_watch(&self, mowers: &[MowerId]) -> Result<WatchRows, WatchError> {
        let mut sorted = mowers.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let rows = read(&self.watch.rows);
        Ok(WatchRows {
            watches: sorted
                .iter()
                .filter_map(|m| rows.watches.get(m).cloned())
                .collect(),
            events: rows
                .events
                .values()
                .filter(|e| sorted.binary_search(&e.mower_id).is_ok())
                .cloned()
                .collect(),
            alerts: rows
                .alerts
                .values()
                .filter(|a| sorted.binary_search(&a.mower_id).is_ok())
                .cloned()
                .collect(),
            zone_watches: sorted
                .iter()
                .filter_map(|m| rows.zone_watches.get(m).cloned())
                .collect(),
            busy: sorted
                .iter()
                .filter_map(|m| rows.busy.get(m).cloned())
                .collect(),
        })
    }
}

#[async_trait]
impl ZoneStore for MemoryStore {
    async fn begin_zones(
        &self,
        mowers: &[MowerId],
    ) -> Result<(ZoneRows, Box<dyn ZoneBatch>), WatchError> {
        let data = Arc::clone(&self.watch);
        let lock = Arc::clone(&data.zone_lock).lock_owned().await;
        let rows = read(&data.rows);
        let mut out = ZoneRows::new();
        for mower in mowers {
            let Some(zones) = rows.zones.get(mower).filter(|z| !z.is_empty()) else {
                continue;
            };
            let watch = rows
                .zone_watches
                .get(mower)
                .cloned()
                .unwrap_or_else(|| ZoneWatch::new(*mower));
            out.insert(*mower, (zones.values().cloned().collect(), watch));
        }
        drop(rows);
        Ok((
            out,
            Box::new(MemoryZoneBatch {
                data: Arc::clone(&data),
                _lock: lock,
            }),
        ))
    }

    async fn zones(&self, mower: MowerId) -> Result<Vec<Zone>, WatchError> {
        let mut zones: Vec<Zone> = read(&self.watch.rows)
            .zones
            .get(&mower)
            .map(|z| z.values().cloned().collect())
            .unwrap_or_default();
        zones.sort_by(|a, b| (&a.name, a.id).cmp(&(&b.name, b.id)));
        Ok(zones)
    }

    async fn create_zone(&self, zone: Zone) -> Result<(), WatchError> {
        // Held while the zone is stored: a deletion takes the directory first, then these rows.
        let directory = crate::store::read(&self.directory);
        if !directory.mowers.contains_key(&zone.mower_id) {
            return Err(gone(zone.mower_id));
        }
        let mut rows = write(&self.watch.rows);
        let zones = rows.zones.entry(zone.mower_id).or_default();
        if zones.len() >= MAX_ZONES_PER_MOWER {
            return Err(WatchError::Limit(format!(
                "A mower may have at most {MAX_ZONES_PER_MOWER} zones."
            )));
        }
        zones.insert(zone.id, zone);
        Ok(())
    }

    async fn update_zone(&self, zone: Zone) -> Result<bool, WatchError> {
        let mut rows = write(&self.watch.rows);
        match rows
            .zones
            .get_mut(&zone.mower_id)
            .and_then(|z| z.get_mut(&zone.id))
        {
            Some(stored) => {
                stored.name = zone.name;
                stored.polygon = zone.polygon;
                stored.updated_at = zone.updated_at;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn delete_zone(&self, mower: MowerId, zone: Uuid) -> Result<bool, WatchError> {
        Ok(write(&self.watch.rows)
            .zones
            .get_mut(&mower)
            .and_then(|z| z.remove(&zone))
            .is_some())
    }

    async fn zone_watch(&self, mower: MowerId) -> Result<Option<ZoneWatch>, WatchError> {
        Ok(read(&self.watch.rows).zone_watches.get(&mower).cloned())
    }
}

#[async_trait]
impl GeofenceStore for MemoryStore {
    async fn put_geofence(&self, geofence: Geofence) -> Result<(), WatchError> {
        let directory = crate::store::read(&self.directory);
        if !directory.mowers.contains_key(&geofence.mower_id) {
            return Err(gone(geofence.mower_id));
        }
        write(&self.watch.rows)
            .geofences
            .insert(geofence.mower_id, geofence);
        Ok(())
    }

    async fn geofence(&self, mower: MowerId) -> Result<Option<Geofence>, WatchError> {
        Ok(read(&self.watch.rows).geofences.get(&mower).cloned())
    }

    async fn delete_geofence(&self, mower: MowerId) -> Result<bool, WatchError> {
        Ok(write(&self.watch.rows).geofences.remove(&mower).is_some())
    }
}

#[async_trait]
impl NotificationFeed for MemoryStore {
    async fn events(&self, query: &EventQuery) -> Result<Vec<Event>, WatchError> {
        let rows = read(&self.watch.rows);
        let upper = match query.before {
            Some(before) => std::ops::Bound::Excluded(before),
            None => std::ops::Bound::Unbounded,
        };
        Ok(rows
            .events
            .range((std::ops::Bound::Unbounded, upper))
            .rev()
            .map(|(_, e)| e)
            .filter(|e| {
                e.account_id == query.account_id
                    && query
                        .mowers
                        .as_ref()
                        .is_none_or(|m| m.contains(&e.mower_id))
                    && query.kind.is_none_or(|k| e.kind() == k)
            })
            .take(query.limit)
            .cloned()
            .collect())
    }

    async fn open_alerts(&self, query: &AlertQuery) -> Result<Vec<Alert>, WatchError> {
        let rows = read(&self.watch.rows);
        let key = |a: &Alert| std::cmp::Reverse(AlertCursorKey::of(a));
        let mut open: Vec<&Alert> = rows
            .open
            .values()
            .filter_map(|id| rows.alerts.get(id))
            .filter(|a| {
                a.account_id == query.account_id
                    && query
                        .mowers
                        .as_ref()
                        .is_none_or(|m| m.contains(&a.mower_id))
                    && query.kind.is_none_or(|k| a.kind == k)
                    && query
                        .after
                        .is_none_or(|c| AlertCursorKey::of(a) < AlertCursorKey::from(c))
            })
            .collect();
        open.sort_by_key(|a| key(a));
        Ok(open.into_iter().take(query.limit).cloned().collect())
    }

    async fn reset_blade(&self, mower: MowerId, at: DateTime<Utc>) -> Result<bool, WatchError> {
        let data = Arc::clone(&self.watch);
        Ok(self
            .reset_blade_locked(mower, move || {
                write(&data.rows).clear(mower, AlertKind::BladeDue, at)
            })
            .await)
    }
}

/// The order of open alerts as a sortable key: (severity, raised_at, id), ascending.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct AlertCursorKey(i16, DateTime<Utc>, Uuid);

impl AlertCursorKey {
    fn of(alert: &Alert) -> Self {
        Self(alert.severity.rank(), alert.raised_at, alert.id)
    }
}

impl From<AlertCursor> for AlertCursorKey {
    fn from(c: AlertCursor) -> Self {
        Self(c.severity_rank, c.raised_at, c.id)
    }
}
