//! `RetentionStore` on the memory store: the same limits as PostgreSQL, on the rows it keeps.
//!
//! There are no partitions to drop; every step deletes from the mowers' ordered maps under the
//! rows' write lock, taken once per step and never across an await, so the API's reads see a
//! step done or not done. The lock between runs is a tokio mutex taken without waiting, which is
//! what PostgreSQL's advisory lock gives between replicas.

use crate::store::{read, write, MemoryStore};
use async_trait::async_trait;
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::sync::Arc;
use swath_application::ports::{
    DownsampleWindow, Partition, RetainedTable, RetentionError, RetentionRun, RetentionStore,
};
use swath_domain::MowerId;
use tokio::sync::OwnedMutexGuard;

#[async_trait]
impl RetentionStore for MemoryStore {
    async fn try_lock(&self) -> Result<Option<Box<dyn RetentionRun>>, RetentionError> {
        Ok(Arc::clone(&self.retention.lock)
            .try_lock_owned()
            .ok()
            .map(|guard| {
                Box::new(MemoryRun {
                    store: self.clone(),
                    _lock: guard,
                }) as Box<dyn RetentionRun>
            }))
    }
}

struct MemoryRun {
    store: MemoryStore,
    _lock: OwnedMutexGuard<()>,
}

/// The start of `t`'s UTC minute.
fn minute_of(t: DateTime<Utc>) -> DateTime<Utc> {
    // Rounding a UTC instant to a minute cannot overflow; keep `t` if it ever did.
    t.duration_trunc(Duration::minutes(1)).unwrap_or(t)
}

#[async_trait]
impl RetentionRun for MemoryRun {
    async fn mowers(&mut self) -> Result<Vec<MowerId>, RetentionError> {
        // Every mower of the directory, as PostgreSQL answers (and as the run's log then says),
        // plus rows a deleted mower may have left behind.
        let mut mowers: Vec<MowerId> = read(&self.store.directory).mowers.keys().copied().collect();
        mowers.extend(read(&self.store.telemetry).keys().copied());
        mowers.sort_unstable();
        mowers.dedup();
        Ok(mowers)
    }

    async fn partitions(&mut self) -> Result<Vec<Partition>, RetentionError> {
        Ok(Vec::new())
    }

    async fn drop_partition(
        &mut self,
        _partition: &Partition,
        _dry_run: bool,
    ) -> Result<Option<u64>, RetentionError> {
        // Never planned: `partitions` answers none.
        Ok(None)
    }

    async fn expire(
        &mut self,
        table: RetainedTable,
        mowers: &[MowerId],
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError> {
        let mut telemetry = write(&self.store.telemetry);
        let mut deleted = 0u64;
        for mower in mowers {
            let Some(rows) = telemetry.get_mut(mower) else {
                continue;
            };
            // Both maps are keyed by observed_at: the rows to go are a prefix.
            let (count, keep) = match table {
                RetainedTable::History => (
                    rows.history.range(..before).count() as u64,
                    &mut rows.history as &mut dyn Split,
                ),
                RetainedTable::Positions => (
                    rows.positions.range(..before).count() as u64,
                    &mut rows.positions as &mut dyn Split,
                ),
            };
            if dry_run {
                deleted += count;
                continue;
            }
            let take = count.min(limit - deleted);
            keep.pop_first_n(take);
            deleted += take;
            if deleted == limit {
                break;
            }
        }
        Ok(deleted)
    }

    async fn expire_sessions(
        &mut self,
        mowers: &[MowerId],
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError> {
        let mut telemetry = write(&self.store.telemetry);
        let mut deleted = 0u64;
        for mower in mowers {
            let Some(rows) = telemetry.get_mut(mower) else {
                continue;
            };
            let newest = rows.sessions.keys().next_back().copied();
            let gone: Vec<DateTime<Utc>> = rows
                .sessions
                .iter()
                .filter(|(at, row)| {
                    Some(**at) != newest && row.session.ended_at.is_some_and(|end| end < before)
                })
                .map(|(at, _)| *at)
                .collect();
            if dry_run {
                deleted += gone.len() as u64;
                continue;
            }
            for at in gone.into_iter().take((limit - deleted) as usize) {
                rows.sessions.remove(&at);
                deleted += 1;
            }
            if deleted == limit {
                break;
            }
        }
        Ok(deleted)
    }

    async fn downsample(
        &mut self,
        mowers: &[MowerId],
        window: DownsampleWindow,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError> {
        if window.from >= window.to {
            return Ok(0);
        }
        let mut telemetry = write(&self.store.telemetry);
        let mut deleted = 0u64;
        for mower in mowers {
            let Some(rows) = telemetry.get_mut(mower) else {
                continue;
            };
            let positions = &rows.positions;
            let victims: Vec<DateTime<Utc>> = positions
                .range(window.from..window.to)
                .map(|(t, _)| *t)
                .filter(|t| {
                    // An earlier position of the same minute that stays (not about to expire).
                    let start = minute_of(*t).max(window.keep_from);
                    start < *t && positions.range(start..*t).next().is_some()
                })
                .take(if dry_run {
                    usize::MAX
                } else {
                    usize::try_from(limit - deleted).unwrap_or(usize::MAX)
                })
                .collect();
            deleted += victims.len() as u64;
            if !dry_run {
                for t in victims {
                    rows.positions.remove(&t);
                }
                if deleted == limit {
                    break;
                }
            }
        }
        Ok(deleted)
    }

    async fn downsampled_until(&mut self) -> Result<Option<DateTime<Utc>>, RetentionError> {
        Ok(*self
            .store
            .retention
            .downsampled_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()))
    }

    async fn set_downsampled_until(&mut self, until: DateTime<Utc>) -> Result<(), RetentionError> {
        *self
            .store
            .retention
            .downsampled_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(until);
        Ok(())
    }

    async fn raise_floors(
        &mut self,
        history: DateTime<Utc>,
        positions: DateTime<Utc>,
    ) -> Result<(), RetentionError> {
        let mut floors = self
            .store
            .retention
            .floors
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *floors = (floors.0.max(Some(history)), floors.1.max(Some(positions)));
        Ok(())
    }

    async fn release(self: Box<Self>) -> Result<(), RetentionError> {
        Ok(())
    }
}

/// Removing the first rows of an ordered map, whatever its values.
trait Split {
    fn pop_first_n(&mut self, n: u64);
}

impl<V> Split for std::collections::BTreeMap<DateTime<Utc>, V> {
    fn pop_first_n(&mut self, n: u64) {
        for _ in 0..n {
            if self.pop_first().is_none() {
                return;
            }
        }
    }
}
