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

use crate::events::IngestEvent;
use crate::ids::{AccountId, MowerId};
use crate::report::{Activity, DropReason, StateReport};
use crate::rows::{
    DayTotals, HealthTotals, HistoryRow, LatestKey, LatestRow, PositionRow, StoredState,
};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use geo::{Distance, Haversine, Point};
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;

/// The longest interval attributed to the state that opened it. A longer gap (the mower was off,
/// or out of reach) counts no mowing, blade time or distance.
pub const MAX_ATTRIBUTED_INTERVAL: Duration = Duration::minutes(5);

/// Blade time after which a blade is due for replacement, unless the mower sets its own: 100 h.
pub const DEFAULT_BLADE_THRESHOLD_MS: i64 = 100 * 3600 * 1000;

/// What the directory says about a mower, as the write rules need it.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectoryEntry {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// The time zone of the mower's site: decides the day a state counts for (W5).
    pub time_zone: Tz,
    pub blade_threshold_ms: i64,
}

/// The rows of one mower as read at the start of a batch (and advanced by [`apply_states`]).
/// A snapshot serves one batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MowerSnapshot {
    /// `None`: the mower is not in the directory.
    pub directory: Option<DirectoryEntry>,
    pub latest: Option<LatestKey>,
    pub health: Option<HealthTotals>,
    /// The stored states around the batch's late states (empty when it has none), and the
    /// states the rules counted so far in this batch.
    pub neighbourhood: Neighbourhood,
}

/// The states a late state's merge may need as neighbours: the stored ones the store read around
/// the batch's late states, plus those the batch counted so far, and the floors below which
/// stored rows may be gone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Neighbourhood {
    /// By `observed_at`; `true` for a state counted by this batch (present for certain), `false`
    /// for one read from the store.
    states: BTreeMap<DateTime<Utc>, (StoredState, bool)>,
    /// The newest counted states that this batch's extensions went past, ascending (each
    /// extension pushes the state it extends from: a plain push on the in-order path).
    passed: Vec<StoredState>,
    /// Stored history rows (and positions) older than this may have been removed.
    pub history_floor: Option<DateTime<Utc>>,
    /// Stored positions older than this may have been removed or downsampled.
    pub positions_floor: Option<DateTime<Utc>>,
}

impl Neighbourhood {
    /// Adds a stored state read by the store (the newest at or before a late state, or the
    /// oldest after it).
    pub fn insert_stored(&mut self, state: StoredState) {
        self.states
            .entry(state.observed_at)
            .or_insert((state, false));
    }

    /// Raises the history floor: stored rows older than `floor` may be gone.
    pub fn raise_history_floor(&mut self, floor: DateTime<Utc>) {
        self.history_floor = self.history_floor.max(Some(floor));
    }

    /// Raises the positions floor: stored positions older than `floor` may be gone.
    pub fn raise_positions_floor(&mut self, floor: DateTime<Utc>) {
        self.positions_floor = self.positions_floor.max(Some(floor));
    }

    fn is_known(&self, at: DateTime<Utc>) -> bool {
        self.states.contains_key(&at)
            || self
                .passed
                .binary_search_by(|s| s.observed_at.cmp(&at))
                .is_ok()
    }

    /// The newest state before `at`, and whether it is certainly present with its values (a
    /// state of this batch, or the newest counted state).
    fn before(&self, at: DateTime<Utc>) -> Option<(StoredState, bool)> {
        let in_map = self.states.range(..at).next_back().map(|(_, v)| *v);
        let i = self.passed.partition_point(|s| s.observed_at < at);
        let passed = i.checked_sub(1).map(|i| (self.passed[i], true));
        match (in_map, passed) {
            (Some(a), Some(b)) => Some(if a.0.observed_at > b.0.observed_at {
                a
            } else {
                b
            }),
            (a, b) => a.or(b),
        }
    }

    /// The oldest state after `at`, or `last` (the newest counted state) when none is older;
    /// with the same flag as [`Self::before`].
    fn after(&self, at: DateTime<Utc>, last: StoredState) -> (StoredState, bool) {
        let in_map = self
            .states
            .range((Bound::Excluded(at), Bound::Unbounded))
            .next()
            .map(|(_, v)| *v);
        let i = self.passed.partition_point(|s| s.observed_at <= at);
        let passed = self.passed.get(i).map(|s| (*s, true));
        [in_map, passed]
            .into_iter()
            .flatten()
            .fold((last, true), |best, s| {
                if s.0.observed_at < best.0.observed_at {
                    s
                } else {
                    best
                }
            })
    }

    /// Whether a neighbour's position is known: it has one, or it is certainly as counted, or no
    /// position of its time can have been removed.
    fn position_known(&self, (state, present): (StoredState, bool)) -> bool {
        present
            || state.lat.is_some()
            || self
                .positions_floor
                .is_none_or(|floor| state.observed_at >= floor)
    }
}

/// What became of one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateOutcome {
    /// Stored, or already stored earlier (a redelivered state changes nothing and is acknowledged).
    Stored,
    /// Refused alone; the other states of the batch are unaffected.
    Dropped(DropReason),
}

/// How the stored states of a batch counted in the totals (W4, W5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateCounts {
    /// New states newer than everything counted (or a mower's first): they extended the totals.
    pub in_order: u64,
    /// New states older than the mower's newest: merged between their neighbours.
    pub late_merged: u64,
    /// New late states whose neighbours retention may have removed: stored, not counted.
    pub late_not_counted: u64,
    /// States whose key was stored already (or came earlier in the batch): they change nothing.
    pub duplicates: u64,
}

impl StateCounts {
    /// States stored for the first time.
    pub fn new_states(&self) -> u64 {
        self.in_order + self.late_merged + self.late_not_counted
    }

    pub fn add(&mut self, other: &StateCounts) {
        self.in_order += other.in_order;
        self.late_merged += other.late_merged;
        self.late_not_counted += other.late_not_counted;
        self.duplicates += other.duplicates;
    }
}

/// The writes of one batch, one list per table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchChanges {
    /// Insert; a key stored earlier keeps its row.
    pub history: Vec<HistoryRow>,
    /// Insert with the history row of the same key, in the order of `history` (a subsequence
    /// of its keys): a key stored earlier keeps its rows, and gets no position.
    pub positions: Vec<PositionRow>,
    /// At most one per mower, in mower id order: replaces the stored row.
    pub latest: Vec<LatestRow>,
    /// At most one per mower, in mower id order: replaces the stored row.
    pub health: Vec<HealthTotals>,
    /// One per touched `(mower, day)`: added to the stored row (or inserted). A merge can make
    /// some values negative (an interval taken back).
    pub days: Vec<DayTotals>,
    /// Raised by the rules, to publish after the commit, in order.
    pub events: Vec<IngestEvent>,
    /// How the batch's stored states counted.
    pub counts: StateCounts,
}

impl BatchChanges {
    /// True when the batch writes nothing at all.
    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
            && self.positions.is_empty()
            && self.latest.is_empty()
            && self.health.is_empty()
            && self.days.is_empty()
    }
}

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

/// How one state counted in the totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fold {
    InOrder,
    Merged,
    Uncounted,
    Duplicate,
}

/// W4 (health totals), W5 (the days' shares) and W6 (blade due) for a state that passed W0 and is
/// the first of its key in the batch.
fn count_state(
    snapshot: &mut MowerSnapshot,
    state: &StateReport,
    days: &mut BTreeMap<(MowerId, NaiveDate), DayTotals>,
    events: &mut Vec<IngestEvent>,
) -> Fold {
    let directory = snapshot.directory.as_ref().expect("checked by W0");
    let zone = directory.time_zone;
    let threshold_ms = directory.blade_threshold_ms;
    let day = |at: DateTime<Utc>| at.with_timezone(&zone).date_naive();
    let point = StoredState::of(state);
    let t = state.observed_at;
    let mut share = |delta: DayTotals| {
        if !delta.is_zero() {
            days.entry((delta.mower_id, delta.day))
                .and_modify(|d| d.add(&delta))
                .or_insert(delta);
        }
    };

    let Some(h) = snapshot.health.as_mut() else {
        // The mower's first state.
        let mut delta = DayTotals::zero(state.mower_id, day(t));
        delta.state_count = 1;
        add_entering(&mut delta, &point, None, 1);
        snapshot.health = Some(HealthTotals {
            mower_id: state.mower_id,
            account_id: state.account_id,
            counted_from: t,
            counted_until: t,
            last_activity: point.activity,
            last_blade_on: point.blade_on,
            last_lat: point.lat,
            last_lon: point.lon,
            mowing_ms: 0,
            blade_ms: 0,
            distance_mm: 0,
            error_count: delta.error_count,
            charge_count: delta.charge_count,
            blade_since_reset_ms: 0,
            blade_due_raised: false,
            blade_reset_until: None,
        });
        share(delta);
        return Fold::InOrder;
    };

    let counted = if t > h.counted_until {
        // Extends the fold from the newest counted state.
        let previous = h.last_state();
        let mut delta = DayTotals::zero(state.mower_id, day(t));
        delta.state_count = 1;
        add_interval(&mut delta, &previous, &point, 1, true);
        add_entering(&mut delta, &point, Some(&previous), 1);
        h.add(&delta);
        // It closes after `counted_until`, so after any blade reset too.
        h.blade_since_reset_ms += delta.blade_ms;
        h.counted_until = t;
        h.last_activity = point.activity;
        h.last_blade_on = point.blade_on;
        h.last_lat = point.lat;
        h.last_lon = point.lon;
        snapshot.neighbourhood.passed.push(previous);
        share(delta);
        Fold::InOrder
    } else if t == h.counted_until || snapshot.neighbourhood.is_known(t) {
        // A stored key: a redelivery.
        return Fold::Duplicate;
    } else {
        let near = &mut snapshot.neighbourhood;
        let before = near.before(t);
        let (after, after_present) = near.after(t, h.last_state());
        let kept = |at: DateTime<Utc>| near.history_floor.is_none_or(|floor| at >= floor);
        let mergeable = match before {
            Some((p, present)) => present || kept(p.observed_at),
            None => t < h.counted_from && kept(h.counted_from),
        };
        if !mergeable {
            return Fold::Uncounted;
        }
        // Distance is re-attributed only when both ends' positions are known (a merge with no
        // predecessor only adds, so it never over-counts either).
        let with_distance = before
            .is_none_or(|p| near.position_known(p) && near.position_known((after, after_present)));
        let previous = before.map(|(p, _)| p);
        let mut late = DayTotals::zero(state.mower_id, day(t));
        late.state_count = 1;
        let mut next = DayTotals::zero(state.mower_id, day(after.observed_at));
        if let Some(p) = &previous {
            add_interval(&mut next, p, &after, -1, with_distance);
            add_interval(&mut late, p, &point, 1, with_distance);
        }
        add_interval(&mut next, &point, &after, 1, with_distance);
        add_entering(&mut late, &point, previous.as_ref(), 1);
        add_entering(&mut next, &after, previous.as_ref(), -1);
        add_entering(&mut next, &after, Some(&point), 1);
        // Blade time since the reset: that of the intervals closing after the reset's mark.
        let mark = h.blade_reset_until;
        let after_reset = |at: DateTime<Utc>| mark.is_none_or(|mark| at > mark);
        for (closing, delta) in [(t, &late), (after.observed_at, &next)] {
            h.add(delta);
            if after_reset(closing) {
                h.blade_since_reset_ms += delta.blade_ms;
            }
        }
        if previous.is_none() {
            h.counted_from = t;
        }
        near.states.insert(t, (point, true));
        share(late);
        share(next);
        Fold::Merged
    };
    // W6: once per blade reset.
    let h = snapshot.health.as_mut().expect("counted above");
    if !h.blade_due_raised && h.blade_due(threshold_ms) {
        h.blade_due_raised = true;
        events.push(IngestEvent::BladeDue {
            mower_id: state.mower_id,
            account_id: state.account_id,
            observed_at: t,
            blade_since_reset_ms: h.blade_since_reset_ms,
            threshold_ms,
        });
    }
    counted
}

/// Adds `sign` times what the interval `from → to` counts: mowing time if `from` was mowing,
/// blade time if its blade was on, distance if it was mowing and both ends have a position (and
/// `with_distance`); nothing when it is longer than [`MAX_ATTRIBUTED_INTERVAL`].
fn add_interval(
    delta: &mut DayTotals,
    from: &StoredState,
    to: &StoredState,
    sign: i64,
    with_distance: bool,
) {
    let interval = to.observed_at - from.observed_at;
    if interval > MAX_ATTRIBUTED_INTERVAL {
        return;
    }
    let ms = interval.num_milliseconds();
    let was_mowing = from.activity == Activity::Mowing;
    if was_mowing {
        delta.mowing_ms += sign * ms;
    }
    if from.blade_on {
        delta.blade_ms += sign * ms;
    }
    if let (true, true, Some(from_lat), Some(from_lon), Some(to_lat), Some(to_lon)) = (
        with_distance,
        was_mowing,
        from.lat,
        from.lon,
        to.lat,
        to.lon,
    ) {
        delta.distance_mm += sign * distance_mm(from_lat, from_lon, to_lat, to_lon);
    }
}

/// Adds `sign` times the "entering" counts of `state` after `previous` (none: the first state):
/// an error when it is in error and the previous one was not, a charge likewise.
fn add_entering(
    delta: &mut DayTotals,
    state: &StoredState,
    previous: Option<&StoredState>,
    sign: i64,
) {
    let entering =
        |activity| state.activity == activity && previous.is_none_or(|p| p.activity != activity);
    if entering(Activity::Error) {
        delta.error_count += sign;
    }
    if entering(Activity::Charging) {
        delta.charge_count += sign;
    }
}

/// Great-circle distance in whole millimetres (haversine, mean Earth radius).
pub fn distance_mm(from_lat: f64, from_lon: f64, to_lat: f64, to_lon: f64) -> i64 {
    let metres = Haversine::distance(Point::new(from_lon, from_lat), Point::new(to_lon, to_lat));
    (metres * 1000.0).round() as i64
}

impl HealthTotals {
    /// A blade reset: blade time since the reset starts again from zero and W6 is re-armed; the
    /// intervals counted so far (up to `counted_until`) stay before the reset, whatever merges
    /// later change in them.
    pub fn reset_blade(&mut self) {
        self.blade_since_reset_ms = 0;
        self.blade_due_raised = false;
        self.blade_reset_until = Some(self.counted_until);
    }

    /// Adds a day's delta to the totals (blade time since the reset is the caller's: it depends
    /// on where the intervals close).
    fn add(&mut self, delta: &DayTotals) {
        self.mowing_ms += delta.mowing_ms;
        self.blade_ms += delta.blade_ms;
        self.distance_mm += delta.distance_mm;
        self.error_count += delta.error_count;
        self.charge_count += delta.charge_count;
    }
}

#[cfg(test)]
mod tests;
