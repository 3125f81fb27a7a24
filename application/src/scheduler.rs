//! The scheduler's busy check (docs/rules.md §4): the status a scheduler reads before it starts
//! a run. It runs on the watcher consumer's batches, after the watcher: one read of the batch's
//! mowers' statuses, the throttle rule of the domain state by state, and one write of the statuses
//! that changed (none, most of the time). No lock is needed: the store never replaces a status by
//! an older one, and two replicas racing can at worst both write a fresh status.

use crate::ports::{Clock, WatchError, WatchStore};
use std::collections::BTreeMap;
use std::sync::Arc;
use swath_domain::watch::busy::{busy_update, BusyStatus};
use swath_domain::{MowerId, StateReport};

/// The busy-check use case.
pub struct SchedulerStatus {
    store: Arc<dyn WatchStore>,
    clock: Arc<dyn Clock>,
}

impl SchedulerStatus {
    pub fn new(store: Arc<dyn WatchStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// Applies the throttle to `states` (accepted by the directory check, in arrival order) and
    /// writes what changed. Returns how many statuses were written.
    pub async fn record(&self, states: &[StateReport]) -> Result<usize, WatchError> {
        if states.is_empty() {
            return Ok(0);
        }
        let now = self.clock.now_micros();
        let mut mowers: Vec<MowerId> = states.iter().map(|s| s.mower_id).collect();
        mowers.sort_unstable();
        mowers.dedup();
        let mut current: BTreeMap<MowerId, BusyStatus> = self
            .store
            .busy(&mowers)
            .await?
            .into_iter()
            .map(|s| (s.mower_id, s))
            .collect();
        let mut changed: BTreeMap<MowerId, ()> = BTreeMap::new();
        for state in states {
            if let Some(next) = busy_update(current.get(&state.mower_id), state, now) {
                current.insert(state.mower_id, next);
                changed.insert(state.mower_id, ());
            }
        }
        let writes: Vec<BusyStatus> = changed
            .into_keys()
            .filter_map(|m| current.remove(&m))
            .collect();
        if !writes.is_empty() {
            self.store.write_busy(&writes).await?;
        }
        metrics::counter!("swath_busy_writes_total").increment(writes.len() as u64);
        Ok(writes.len())
    }
}
