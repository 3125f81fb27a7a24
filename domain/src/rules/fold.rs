//! The counting of a state (W4 health totals, W5 the days' shares, W6 blade due): extending the
//! fold, or merging a late state between its neighbours ([`Neighbourhood`]), as the module
//! documentation of `rules` describes.

use super::{MowerSnapshot, MAX_ATTRIBUTED_INTERVAL};
use crate::events::IngestEvent;
use crate::ids::MowerId;
use crate::report::{Activity, StateReport};
use crate::rows::{DayTotals, HealthTotals, StoredState};
use chrono::{DateTime, NaiveDate, Utc};
use geo::{Distance, Haversine, Point};
use std::collections::BTreeMap;
use std::ops::Bound;

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

/// How one state counted in the totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fold {
    InOrder,
    Merged,
    Uncounted,
    Duplicate,
}

/// W4 (health totals), W5 (the days' shares) and W6 (blade due) for a state that passed W0 and is
/// the first of its key in the batch.
pub(super) fn count_state(
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
