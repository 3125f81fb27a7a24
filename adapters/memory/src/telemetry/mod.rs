//! The memory store's telemetry: the `TelemetryStore` impl, its batch (the unit of work under
//! `batch_lock`) and the reads of a time window.
//!
//! Layout, as on PostgreSQL: this file holds the `TelemetryStore` impl (the batch's read and
//! lock, the reads); `batch` the open batch (late states' neighbours, the commit). The compact
//! rows the store keeps are `store::telemetry_rows`.

mod batch;

use crate::store::telemetry_rows::oldest_kept;
use crate::store::{read, MemoryStore};
use async_trait::async_trait;
use batch::MemoryBatch;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use swath_application::ports::{
    StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows,
};
use swath_domain::sessions::SessionCarry;
use swath_domain::{
    DayTotals, DirectoryEntry, HealthTotals, HistoryRow, LatestRow, MowerId, MowerSnapshot,
    PositionRow, TelemetryRows,
};

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
                    sessions: rows
                        .map(|r| SessionCarry {
                            newest: r
                                .sessions
                                .last_key_value()
                                .map(|(_, row)| row.session.clone()),
                            rest: r.session_rest.clone(),
                        })
                        .unwrap_or_default(),
                },
            );
        }
        drop((directory, telemetry));
        Ok((snapshots, Box::new(MemoryBatch::new(self.clone(), lock))))
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
            out.sessions.extend(rows.sessions.values().cloned());
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
