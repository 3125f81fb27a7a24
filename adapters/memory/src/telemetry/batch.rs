//! An open memory batch: its late states' neighbours read from the kept rows, its changes
//! written under the rows' write lock in one go, so that no read sees half of it.

use crate::store::telemetry_rows::{KeptPosition, MowerRows};
use crate::store::watch_rows::store_ingest_events;
use crate::store::{read, write, MemoryStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use swath_application::ports::{SessionWindow, StoreError, TelemetryBatch};
use swath_domain::sessions::{SessionPoint, SessionRow};
use swath_domain::watch::IngestNotifications;
use swath_domain::{BatchChanges, MowerId, MowerSnapshot, StoredState};
use tokio::sync::OwnedMutexGuard;

/// An open memory batch: holds the batch lock until committed or dropped.
pub(super) struct MemoryBatch {
    store: MemoryStore,
    _lock: OwnedMutexGuard<()>,
}

impl MemoryBatch {
    pub(super) fn new(store: MemoryStore, lock: OwnedMutexGuard<()>) -> Self {
        Self { store, _lock: lock }
    }
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

    async fn session_windows(
        &mut self,
        late: &[(MowerId, DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<Vec<SessionWindow>, StoreError> {
        let telemetry = read(&self.store.telemetry);
        Ok(late
            .iter()
            .map(|&(mower, t_min, t_max)| match telemetry.get(&mower) {
                Some(rows) => session_window(rows, mower, t_min, t_max),
                None => SessionWindow {
                    mower_id: mower,
                    from: t_min,
                    through: None,
                    sessions: Vec::new(),
                    states: Vec::new(),
                },
            })
            .collect())
    }

    async fn commit(
        self: Box<Self>,
        changes: BatchChanges,
        notifications: IngestNotifications,
    ) -> Result<(), StoreError> {
        let cap = self.store.settings.history_per_mower.max(1);
        let mut telemetry = write(&self.store.telemetry);
        // W2 follows W1: a position is stored with its key's history row, never for a key
        // stored earlier. The rules list positions in the order of their history rows (a
        // subsequence), so one walk pairs them.
        let mut positions = changes.positions.into_iter().peekable();
        let mut fullest = 0;
        for row in changes.history {
            let (mower_id, at) = (row.mower_id, row.observed_at);
            let rows = telemetry.entry(mower_id).or_default();
            let inserted = !rows.history.contains_key(&at);
            if inserted {
                let kept = rows.keep_history(row);
                rows.history.insert(at, kept);
            }
            rows.cap_history(cap);
            fullest = fullest.max(rows.history.len());
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
        let before = self.store.fullest.fetch_max(fullest, Ordering::Relaxed);
        if fullest > before {
            metrics::gauge!("swath_memory_store_history_rows_max").set(fullest as f64);
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
        // W8's sessions: removed keys first, then the upserts (disjoint from them).
        for (mower_id, at) in changes.sessions.remove {
            if let Some(rows) = telemetry.get_mut(&mower_id) {
                rows.sessions.remove(&at);
            }
        }
        for row in changes.sessions.upsert {
            let (mower_id, at) = (row.session.mower_id, row.session.started_at);
            telemetry
                .entry(mower_id)
                .or_default()
                .sessions
                .insert(at, row);
        }
        // Then the newest session's running figures, over its row (decision 207).
        for newest in changes.sessions.newest {
            let rows = telemetry.entry(newest.mower_id).or_default();
            if let Some(session) = newest.carry.newest {
                let row = SessionRow {
                    account_id: newest.account_id,
                    session,
                };
                rows.sessions.insert(row.session.started_at, row);
            }
            rows.session_rest = newest.carry.rest;
        }
        // W6's events and alerts, with the rows that raised them (still under the rows' lock).
        store_ingest_events(&self.store.watch, &notifications);
        Ok(())
    }
}

/// A mower's [`SessionWindow`] for late states from `t_min` through `t_max`, as the port defines
/// it.
fn session_window(
    rows: &MowerRows,
    mower_id: MowerId,
    t_min: DateTime<Utc>,
    t_max: DateTime<Utc>,
) -> SessionWindow {
    let from = rows
        .sessions
        .range(..t_min)
        .next_back()
        .map_or(t_min, |(at, _)| *at);
    let mut after = rows
        .sessions
        .range((Bound::Excluded(t_max), Bound::Unbounded));
    let next = after.next();
    let followed = after.next().is_some();
    let through = next
        .filter(|_| followed)
        .and_then(|(_, row)| row.session.ended_at);
    let last_start = match (through, next) {
        (Some(_), Some((at, _))) => Bound::Included(*at),
        _ => Bound::Unbounded,
    };
    let sessions = rows
        .sessions
        .range((Bound::Included(from), last_start))
        .map(|(at, _)| *at)
        .collect();
    let upper = through.map_or(Bound::Unbounded, Bound::Included);
    let mut states: Vec<SessionPoint> = rows
        .history
        .range((Bound::Included(from), upper))
        .map(|(at, h)| point(rows, mower_id, *at, h))
        .collect();
    if let Some(through) = through {
        let beyond = rows
            .history
            .range((Bound::Excluded(through), Bound::Unbounded))
            .next();
        states.extend(beyond.map(|(at, h)| point(rows, mower_id, *at, h)));
    }
    SessionWindow {
        mower_id,
        from,
        through,
        sessions,
        states,
    }
}

fn point(
    rows: &MowerRows,
    mower_id: MowerId,
    at: DateTime<Utc>,
    kept: &crate::store::telemetry_rows::KeptHistory,
) -> SessionPoint {
    let row = kept.row(mower_id, at);
    let position = rows.positions.get(&at);
    SessionPoint {
        observed_at: at,
        activity: row.activity,
        blade_on: row.blade_on,
        battery_percent: row.battery_percent,
        error_code: row.error_code,
        lat: position.map(|p| p.lat),
        lon: position.map(|p| p.lon),
    }
}
