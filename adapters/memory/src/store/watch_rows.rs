//! The notification rows of the memory store (watches, geofences, zones and zone watches,
//! events, alerts, busy statuses), their locks, and the changes every writer applies to them:
//! the feed's and the cleared alerts' bounds, one open alert per mower and kind, a mower's rows
//! removed with it.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Zone, ZoneWatch};
use swath_domain::watch::Geofence;
use swath_domain::watch::{Alert, AlertChanges, AlertKind, Event, IngestNotifications, Watch};
use swath_domain::MowerId;
use tokio::sync::{Mutex, OwnedMutexGuard};
use uuid::Uuid;

/// Events kept in the feed (the oldest go first).
pub const MAX_EVENTS: usize = 100_000;
/// Cleared alerts kept (the oldest go first); open ones are always kept.
pub const MAX_CLEARED_ALERTS: usize = 100_000;

/// The notification rows and their locks. Part of [`MemoryStore`](super::MemoryStore).
#[derive(Default)]
pub(crate) struct WatchData {
    pub(crate) rows: RwLock<Tables>,
    pub(crate) watch_lock: Arc<Mutex<()>>,
    pub(crate) zone_lock: Arc<Mutex<()>>,
}

#[derive(Default)]
pub(crate) struct Tables {
    pub(crate) watches: HashMap<MowerId, Watch>,
    pub(crate) geofences: HashMap<MowerId, Geofence>,
    pub(crate) zones: HashMap<MowerId, BTreeMap<Uuid, Zone>>,
    pub(crate) zone_watches: HashMap<MowerId, ZoneWatch>,
    pub(crate) events: BTreeMap<Uuid, Event>,
    pub(crate) alerts: BTreeMap<Uuid, Alert>,
    pub(crate) open: HashMap<(MowerId, AlertKind), Uuid>,
    pub(crate) cleared: usize,
    pub(crate) busy: HashMap<MowerId, BusyStatus>,
}

pub(crate) fn read(lock: &RwLock<Tables>) -> RwLockReadGuard<'_, Tables> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn write(lock: &RwLock<Tables>) -> RwLockWriteGuard<'_, Tables> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl Tables {
    pub(crate) fn insert_events(&mut self, events: &[Event]) {
        for event in events {
            self.events.entry(event.id).or_insert_with(|| event.clone());
        }
        while self.events.len() > MAX_EVENTS {
            self.events.pop_first();
        }
    }

    pub(crate) fn apply_alerts(&mut self, changes: &AlertChanges) {
        for clear in &changes.clears {
            self.clear(clear.mower_id, clear.kind, clear.cleared_at);
        }
        for alert in &changes.raised {
            if self.alerts.contains_key(&alert.id) {
                continue;
            }
            if alert.cleared_at.is_none() {
                // One open alert per mower and kind: the rules never open a second one, and
                // a second one would be refused like PostgreSQL's unique index refuses it.
                if self.open.contains_key(&(alert.mower_id, alert.kind)) {
                    continue;
                }
                self.open.insert((alert.mower_id, alert.kind), alert.id);
            } else {
                self.cleared += 1;
            }
            self.alerts.insert(alert.id, alert.clone());
        }
        self.trim_cleared();
    }

    /// Clears the open alert of the mower and kind; `true` when there was one.
    pub(crate) fn clear(&mut self, mower: MowerId, kind: AlertKind, at: DateTime<Utc>) -> bool {
        let Some(id) = self.open.remove(&(mower, kind)) else {
            return false;
        };
        let Some(alert) = self.alerts.get_mut(&id) else {
            return false;
        };
        alert.cleared_at = Some(at);
        self.cleared += 1;
        true
    }

    fn trim_cleared(&mut self) {
        if self.cleared <= MAX_CLEARED_ALERTS {
            return;
        }
        let excess = self.cleared - MAX_CLEARED_ALERTS;
        let oldest: Vec<Uuid> = self
            .alerts
            .values()
            .filter(|a| a.cleared_at.is_some())
            .take(excess)
            .map(|a| a.id)
            .collect();
        for id in oldest {
            self.alerts.remove(&id);
            self.cleared -= 1;
        }
    }
}

impl WatchData {
    /// Waits until no watcher batch, sweep or W7 unit of work is open, and keeps new ones out
    /// while the guards live: a mower's deletion must not land inside one (its commit would
    /// write rows of a mower just deleted).
    pub(crate) async fn exclusive(&self) -> (OwnedMutexGuard<()>, OwnedMutexGuard<()>) {
        let watches = Arc::clone(&self.watch_lock).lock_owned().await;
        let zones = Arc::clone(&self.zone_lock).lock_owned().await;
        (watches, zones)
    }

    /// Removes every row of `mower`: its watch, geofence, zones and zone watch, busy status,
    /// events and alerts. Called by the mower's deletion, under the directory's write lock.
    pub(crate) fn remove_mower(&self, mower: MowerId) {
        let mut rows = write(&self.rows);
        let rows = &mut *rows;
        rows.watches.remove(&mower);
        rows.geofences.remove(&mower);
        rows.zones.remove(&mower);
        rows.zone_watches.remove(&mower);
        rows.busy.remove(&mower);
        rows.events.retain(|_, e| e.mower_id != mower);
        let alerts: Vec<Uuid> = rows
            .alerts
            .values()
            .filter(|a| a.mower_id == mower)
            .map(|a| a.id)
            .collect();
        for id in alerts {
            let Some(alert) = rows.alerts.remove(&id) else {
                continue;
            };
            if alert.cleared_at.is_some() {
                rows.cleared -= 1;
            } else {
                rows.open.remove(&(mower, alert.kind));
            }
        }
    }
}

/// Called by the telemetry commit (while it holds the telemetry rows): W6's events and alerts as
/// the ingest derived them, stored with the rows that raised them.
pub(crate) fn store_ingest_events(data: &WatchData, notifications: &IngestNotifications) {
    if notifications.is_empty() {
        return;
    }
    let mut rows = write(&data.rows);
    rows.insert_events(&notifications.events);
    rows.apply_alerts(&notifications.alerts);
}
