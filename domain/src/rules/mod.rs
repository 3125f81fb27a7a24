//! Write rules W0–W6 (docs/rules.md §3), applied state by state, in arrival order, to the rows of a
//! batch's mowers held in memory.
//!
//! A store reads the rows of the batch's mowers once ([`MowerSnapshot`]); when some states of the
//! batch are late ([`late_states`]: older than their mower's `counted_until`) it reads their
//! stored neighbours in one more read ([`Neighbourhood`]); then [`apply_states`] runs and the
//! store writes the resulting [`BatchChanges`] all at once (one statement on PostgreSQL).
//!
//! # The totals are a function of the set of states
//! Health totals (W4) and day rows (W5) equal what folding the mower's distinct states in
//! `observed_at` order gives, whatever the order and batching in which they arrived:
//! - a state newer than `counted_until` extends the fold: the interval from the newest counted
//!   state (which the totals remember: `last_*`) to it is added;
//! - a late state `L` (older than `counted_until`, a key not stored yet) is **merged** between its
//!   neighbours `P` (the newest state before it; none when `L` is older than every counted state)
//!   and `S` (the oldest after it): the interval `P→S` is taken back from the totals and from the
//!   day row of `S`, `P→L` and `L→S` are added (to the days of `L` and `S`), the "entering"
//!   counts of `L` (after `P`) and of `S` (after `L` instead of `P`) are re-decided, and the day
//!   of `L` gains its state;
//! - a state whose key is stored already (a redelivery) changes nothing; no interval is ever
//!   counted twice.
//!
//! Because every interval is integer milliseconds and millimetres computed from its two ends, a
//! take-back removes exactly what was added, and any order gives the same sums. The neighbours
//! are the batch's own states counted so far, the stored states read around its late states, and
//! the newest counted state; so a batch gives exactly the rows that the same states stored one at
//! a time give. History and position keys stored earlier are not in the snapshot: the store's
//! insert keeps the stored row ("conflict does nothing"), as one-at-a-time storage does.
//!
//! # Retention
//! A merge needs the neighbours as they were counted. Retention (and the memory store's cap)
//! removes the oldest rows, so a store tells, per mower, the instant before which history rows
//! may be gone ([`Neighbourhood::history_floor`]) and before which positions may be
//! ([`Neighbourhood::positions_floor`]). A late state is merged only when its predecessor is at or
//! after the history floor (or is a state of this batch, or the newest counted state, whose
//! values the totals keep), or when it is older than every counted state (`counted_from`) and
//! that first state is at or after the floor: then no removed state can lie between it and its
//! neighbours. Otherwise it is stored (W1–W3) and counts nothing. Distance is re-attributed only
//! when both neighbours' positions are known (present, or at or after the positions floor); else
//! the merge leaves distance as counted, so a merge never over-counts distance.
//!
//! # Blade due (W6)
//! Blade time since the last reset is that of the intervals closing after the reset's mark
//! (`blade_reset_until`), so a late state from before a reset changes blade time only. A merge
//! that brings it to the threshold raises `blade_due` once per reset, like an in-order state; a
//! later correction downwards does not withdraw it.
//!
//! # Layout
//! This file holds the constants and the batch's entry points ([`late_states`], [`apply_states`]
//! and W0–W3); `batch` what a batch reads and writes ([`MowerSnapshot`], [`BatchChanges`], …);
//! `fold` the neighbourhood of late states and the counting of W4–W6; `tests` the unit tests.

mod batch;
mod fold;

pub use batch::{BatchChanges, DirectoryEntry, MowerSnapshot, StateCounts, StateOutcome};
pub use fold::{distance_mm, Neighbourhood};

use crate::ids::MowerId;
use crate::report::{DropReason, StateReport};
use crate::rows::{DayTotals, HistoryRow, LatestKey, LatestRow, PositionRow};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use fold::{count_state, Fold};
use std::collections::{BTreeMap, HashSet};

/// The longest interval attributed to the state that opened it. A longer gap (the mower was off,
/// or out of reach) counts no mowing, blade time or distance.
pub const MAX_ATTRIBUTED_INTERVAL: Duration = Duration::minutes(5);

/// Blade time after which a blade is due for replacement, unless the mower sets its own: 100 h.
pub const DEFAULT_BLADE_THRESHOLD_MS: i64 = 100 * 3600 * 1000;

/// The late states of a batch, as `(mower, observed_at)` in that order without duplicates: the
/// states that pass W0 and are older than their mower's `counted_until` in `snapshots`. The
/// store reads their neighbours ([`Neighbourhood::insert_stored`]) before [`apply_states`]; a
/// batch without late states needs no such read.
pub fn late_states(
    snapshots: &BTreeMap<MowerId, MowerSnapshot>,
    states: &[StateReport],
) -> Vec<(MowerId, DateTime<Utc>)> {
    let mut late: Vec<(MowerId, DateTime<Utc>)> = states
        .iter()
        .filter(|state| {
            snapshots.get(&state.mower_id).is_some_and(|snapshot| {
                snapshot
                    .health
                    .as_ref()
                    .is_some_and(|h| state.observed_at < h.counted_until)
                    && check_directory(snapshot, state).is_ok()
            })
        })
        .map(|state| (state.mower_id, state.observed_at))
        .collect();
    late.sort_unstable();
    late.dedup();
    late
}

/// Applies W0–W6 to `states` in order. `snapshots` must hold an entry for every mower of the batch
/// that the store knows (a missing entry means "not in the directory"), with the neighbours of
/// the batch's [`late_states`]; it is advanced in place. `received_at` is stored as the latest
/// row's `last_seen_at`.
pub fn apply_states(
    snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
    states: &[StateReport],
    received_at: DateTime<Utc>,
) -> (Vec<StateOutcome>, BatchChanges) {
    let mut outcomes = Vec::with_capacity(states.len());
    let mut changes = BatchChanges {
        history: Vec::with_capacity(states.len()),
        positions: Vec::with_capacity(states.len()),
        ..BatchChanges::default()
    };
    let mut history_keys: HashSet<(MowerId, DateTime<Utc>)> = HashSet::with_capacity(states.len());
    // Index of the state that is the mower's newest: the row (with its cloned document) is built
    // once per mower at the end, not once per state.
    let mut latest: BTreeMap<MowerId, usize> = BTreeMap::new();
    let mut health_touched: BTreeMap<MowerId, ()> = BTreeMap::new();
    let mut days: BTreeMap<(MowerId, NaiveDate), DayTotals> = BTreeMap::new();

    for (index, state) in states.iter().enumerate() {
        let snapshot = snapshots.entry(state.mower_id).or_default();
        if let Err(reason) = check_directory(snapshot, state) {
            outcomes.push(StateOutcome::Dropped(reason));
            continue;
        }
        let key = (state.mower_id, state.observed_at);
        // W1: the first state of a key writes its history row; later ones write nothing.
        let first_of_key = history_keys.insert(key);
        if first_of_key {
            changes.history.push(history_row(state));
        }
        // W2: the position of the key's first state, if it has one (a later state of the key,
        // like a stored one, changes nothing: the totals counted the first one as it was).
        if let (true, Some(p)) = (first_of_key, &state.position) {
            changes.positions.push(PositionRow {
                mower_id: state.mower_id,
                observed_at: state.observed_at,
                lat: p.lat,
                lon: p.lon,
                accuracy_m: p.accuracy_m,
                heading_deg: p.heading_deg,
            });
        }
        // W3: only a strictly newer state replaces the latest row.
        if snapshot
            .latest
            .is_none_or(|l| state.observed_at > l.observed_at)
        {
            snapshot.latest = Some(LatestKey {
                account_id: state.account_id,
                observed_at: state.observed_at,
            });
            latest.insert(state.mower_id, index);
        }
        // W4–W6.
        let counted = if first_of_key {
            count_state(snapshot, state, &mut days, &mut changes.events)
        } else {
            Fold::Duplicate
        };
        let counts = &mut changes.counts;
        match counted {
            Fold::InOrder => counts.in_order += 1,
            Fold::Merged => counts.late_merged += 1,
            Fold::Uncounted => counts.late_not_counted += 1,
            Fold::Duplicate => counts.duplicates += 1,
        }
        if matches!(counted, Fold::InOrder | Fold::Merged) {
            health_touched.insert(state.mower_id, ());
        }
        outcomes.push(StateOutcome::Stored);
    }

    changes.latest = latest
        .into_values()
        .map(|i| {
            let state = &states[i];
            LatestRow {
                mower_id: state.mower_id,
                account_id: state.account_id,
                observed_at: state.observed_at,
                last_seen_at: received_at,
                state: state.clone(),
            }
        })
        .collect();
    changes.health = health_touched
        .into_keys()
        .filter_map(|m| snapshots.get(&m).and_then(|s| s.health.clone()))
        .collect();
    changes.days = days.into_values().filter(|d| !d.is_zero()).collect();
    (outcomes, changes)
}

/// W0: the mower is in the directory, and the report names its account and that of its rows.
fn check_directory(snapshot: &MowerSnapshot, state: &StateReport) -> Result<(), DropReason> {
    let Some(directory) = &snapshot.directory else {
        return Err(DropReason::UnknownMower);
    };
    let account = state.account_id;
    let rows_agree = snapshot.latest.is_none_or(|l| l.account_id == account)
        && snapshot
            .health
            .as_ref()
            .is_none_or(|h| h.account_id == account);
    if directory.account_id != account || !rows_agree {
        return Err(DropReason::AccountMismatch);
    }
    Ok(())
}

fn history_row(state: &StateReport) -> HistoryRow {
    HistoryRow {
        mower_id: state.mower_id,
        observed_at: state.observed_at,
        activity: state.activity,
        battery_percent: state.battery_percent,
        error_code: state.error_code.clone(),
        blade_on: state.blade_on,
    }
}

#[cfg(test)]
mod tests;
