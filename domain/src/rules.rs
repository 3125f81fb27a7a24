//! Write rules W0–W6 (DESIGN §3), applied state by state, in arrival order, to the rows of a
//! batch's mowers held in memory.
//!
//! A store reads the rows of the batch's mowers once ([`MowerSnapshot`]), calls [`apply_states`]
//! and writes the resulting [`BatchChanges`] all at once (one statement on PostgreSQL). Because
//! the rules only ever look at the snapshot they themselves advance, a batch gives exactly the rows
//! that the same states stored one at a time give. The only rows the snapshot does not hold are
//! history and position keys stored earlier: for those the store's insert keeps the stored row
//! ("conflict does nothing"), which is what one-at-a-time storage does too.

use crate::events::IngestEvent;
use crate::ids::{AccountId, MowerId};
use crate::report::{Activity, DropReason, StateReport};
use crate::rows::{DayTotals, HealthTotals, HistoryRow, LatestKey, LatestRow, PositionRow};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use geo::{Distance, Haversine, Point};
use std::collections::{BTreeMap, HashSet};

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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MowerSnapshot {
    /// `None`: the mower is not in the directory.
    pub directory: Option<DirectoryEntry>,
    pub latest: Option<LatestKey>,
    pub health: Option<HealthTotals>,
}

/// What became of one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateOutcome {
    /// Stored, or already stored earlier (a redelivered state changes nothing and is acknowledged).
    Stored,
    /// Refused alone; the other states of the batch are unaffected.
    Dropped(DropReason),
}

/// The writes of one batch, one list per table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchChanges {
    /// Insert; a key stored earlier keeps its row.
    pub history: Vec<HistoryRow>,
    /// Insert; a key stored earlier keeps its row.
    pub positions: Vec<PositionRow>,
    /// At most one per mower, in mower id order: replaces the stored row.
    pub latest: Vec<LatestRow>,
    /// At most one per mower, in mower id order: replaces the stored row.
    pub health: Vec<HealthTotals>,
    /// One per touched `(mower, day)`: added to the stored row (or inserted).
    pub days: Vec<DayTotals>,
    /// Raised by the rules, to publish after the commit, in order.
    pub events: Vec<IngestEvent>,
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

/// Applies W0–W6 to `states` in order. `snapshots` must hold an entry for every mower of the batch
/// that the store knows (a missing entry means "not in the directory"); it is advanced in place.
/// `received_at` is stored as the latest row's `last_seen_at`.
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
    let mut position_keys: HashSet<(MowerId, DateTime<Utc>)> = HashSet::with_capacity(states.len());
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
        if history_keys.insert(key) {
            changes.history.push(history_row(state));
        }
        // W2: likewise for positions, among the states of the key that have one.
        if let Some(p) = &state.position {
            if position_keys.insert(key) {
                changes.positions.push(PositionRow {
                    mower_id: state.mower_id,
                    observed_at: state.observed_at,
                    lat: p.lat,
                    lon: p.lon,
                    accuracy_m: p.accuracy_m,
                    heading_deg: p.heading_deg,
                });
            }
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
        let directory = snapshot.directory.as_ref().expect("checked by W0");
        if let Some(delta) =
            advance_health(&mut snapshot.health, directory, state, &mut changes.events)
        {
            health_touched.insert(state.mower_id, ());
            days.entry((delta.mower_id, delta.day))
                .and_modify(|d| d.add(&delta))
                .or_insert(delta);
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
    changes.days = days.into_values().collect();
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

/// W4 (health totals), W5 (the day's share) and W6 (blade due). Returns the day row's delta when
/// the state advanced the totals, `None` when it was not newer than `counted_until`.
fn advance_health(
    health: &mut Option<HealthTotals>,
    directory: &DirectoryEntry,
    state: &StateReport,
    events: &mut Vec<IngestEvent>,
) -> Option<DayTotals> {
    let day = state
        .observed_at
        .with_timezone(&directory.time_zone)
        .date_naive();
    let mut delta = DayTotals::zero(state.mower_id, day);
    delta.state_count = 1;
    let (lat, lon) = match &state.position {
        Some(p) => (Some(p.lat), Some(p.lon)),
        None => (None, None),
    };
    let previous_activity = match health {
        Some(h) if state.observed_at <= h.counted_until => return None,
        Some(h) => {
            let interval = state.observed_at - h.counted_until;
            if interval <= MAX_ATTRIBUTED_INTERVAL {
                let ms = interval.num_milliseconds();
                let was_mowing = h.last_activity == Activity::Mowing;
                if was_mowing {
                    delta.mowing_ms = ms;
                }
                if h.last_blade_on {
                    delta.blade_ms = ms;
                }
                if let (true, Some(from_lat), Some(from_lon), Some(to_lat), Some(to_lon)) =
                    (was_mowing, h.last_lat, h.last_lon, lat, lon)
                {
                    delta.distance_mm = distance_mm(from_lat, from_lon, to_lat, to_lon);
                }
            }
            Some(h.last_activity)
        }
        None => None,
    };
    if state.activity == Activity::Error && previous_activity != Some(Activity::Error) {
        delta.error_count = 1;
    }
    if state.activity == Activity::Charging && previous_activity != Some(Activity::Charging) {
        delta.charge_count = 1;
    }

    let h = health.get_or_insert_with(|| HealthTotals {
        mower_id: state.mower_id,
        account_id: state.account_id,
        counted_until: state.observed_at,
        last_activity: state.activity,
        last_blade_on: state.blade_on,
        last_lat: lat,
        last_lon: lon,
        mowing_ms: 0,
        blade_ms: 0,
        distance_mm: 0,
        error_count: 0,
        charge_count: 0,
        blade_since_reset_ms: 0,
        blade_due_raised: false,
    });
    h.mowing_ms += delta.mowing_ms;
    h.blade_ms += delta.blade_ms;
    h.distance_mm += delta.distance_mm;
    h.error_count += delta.error_count;
    h.charge_count += delta.charge_count;
    h.blade_since_reset_ms += delta.blade_ms;
    h.counted_until = state.observed_at;
    h.last_activity = state.activity;
    h.last_blade_on = state.blade_on;
    h.last_lat = lat;
    h.last_lon = lon;
    // W6: once per blade reset.
    if !h.blade_due_raised && h.blade_since_reset_ms >= directory.blade_threshold_ms {
        h.blade_due_raised = true;
        events.push(IngestEvent::BladeDue {
            mower_id: state.mower_id,
            account_id: state.account_id,
            observed_at: state.observed_at,
            blade_since_reset_ms: h.blade_since_reset_ms,
            threshold_ms: directory.blade_threshold_ms,
        });
    }
    Some(delta)
}

/// Great-circle distance in whole millimetres (haversine, mean Earth radius).
pub fn distance_mm(from_lat: f64, from_lon: f64, to_lat: f64, to_lon: f64) -> i64 {
    let metres = Haversine::distance(Point::new(from_lon, from_lat), Point::new(to_lon, to_lat));
    (metres * 1000.0).round() as i64
}

impl HealthTotals {
    /// A blade reset: blade time since the reset starts again from zero and W6 is re-armed.
    pub fn reset_blade(&mut self) {
        self.blade_since_reset_ms = 0;
        self.blade_due_raised = false;
    }
}

#[cfg(test)]
mod tests;
