//! The memory store's telemetry: the `TelemetryStore` impl, its batch (the unit of work under
//! `batch_lock`) and the reads of a time window.

use super::rows::{oldest_kept, KeptPosition};
use super::{read, write, MemoryStore};
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use swath_application::ports::{
    StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows,
};
use swath_domain::{
    BatchChanges, DayTotals, DirectoryEntry, HealthTotals, HistoryRow, LatestRow, MowerId,
    MowerSnapshot, PositionRow, StoredState, TelemetryRows,
};
use tokio::sync::OwnedMutexGuard;

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
                return Err(StoreError::Corrupt(
                    format!(
                        "mower {mower_id} names site {} which does not exist",
                        mower.site_id
                    )
                    .into(),
                ));
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
