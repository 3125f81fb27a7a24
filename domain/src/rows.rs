//! The rows of the telemetry store. Every store (memory, PostgreSQL) keeps exactly these, so that
//! tests can compare stores row by row. Durations are integer milliseconds, distances integer
//! millimetres.

use crate::ids::{AccountId, MowerId};
use crate::report::{Activity, StateReport};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

/// W1: one row per distinct `(mower_id, observed_at)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub mower_id: MowerId,
    pub observed_at: DateTime<Utc>,
    pub activity: Activity,
    pub battery_percent: Option<u8>,
    pub error_code: Option<String>,
    pub blade_on: bool,
}

/// W2: one row per distinct `(mower_id, observed_at)` that has a position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PositionRow {
    pub mower_id: MowerId,
    pub observed_at: DateTime<Utc>,
    pub lat: f64,
    pub lon: f64,
    pub accuracy_m: Option<f64>,
    pub heading_deg: Option<f64>,
}

/// W3: the newest state of a mower, as the API serves it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatestRow {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    pub observed_at: DateTime<Utc>,
    /// When Swath received the state that became the latest.
    pub last_seen_at: DateTime<Utc>,
    /// The full state document.
    pub state: StateReport,
}

/// The part of a latest row the write rules need: read without the state document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatestKey {
    pub account_id: AccountId,
    pub observed_at: DateTime<Utc>,
}

impl LatestRow {
    pub fn key(&self) -> LatestKey {
        LatestKey {
            account_id: self.account_id,
            observed_at: self.observed_at,
        }
    }
}

/// W4 and W6: totals per mower over the set of its counted states, and what the next interval
/// (and a late state's merge) needs to know.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthTotals {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// The oldest counted state: a late state older than it becomes the mower's first state.
    pub counted_from: DateTime<Utc>,
    /// The newest counted state (the latest row's key): a newer state extends the fold, an older
    /// one is merged between its stored neighbours.
    pub counted_until: DateTime<Utc>,
    pub last_activity: Activity,
    pub last_blade_on: bool,
    pub last_lat: Option<f64>,
    pub last_lon: Option<f64>,
    pub mowing_ms: i64,
    pub blade_ms: i64,
    pub distance_mm: i64,
    pub error_count: i64,
    pub charge_count: i64,
    /// Blade time since the last blade reset (W6).
    pub blade_since_reset_ms: i64,
    /// Whether `blade_due` was raised since the last blade reset.
    pub blade_due_raised: bool,
    /// `counted_until` at the last blade reset (`None`: never reset). Blade time since the reset
    /// is that of the intervals closing after it, so a late state from before the reset moves
    /// blade time but not blade time since the reset.
    pub blade_reset_until: Option<DateTime<Utc>>,
}

impl HealthTotals {
    /// W6's rule, its one statement: the blade is due once its time since the last reset has
    /// reached the mower's threshold (docs/rules.md §3). Ingestion raises `blade_due` when this
    /// first holds after a reset; the API's `blade_due` shows it.
    pub fn blade_due(&self, threshold_ms: i64) -> bool {
        self.blade_since_reset_ms >= threshold_ms
    }
}

/// What the totals need of one state: its history row's activity and blade, its position. The
/// store reads the stored neighbours of a batch's late states as these (history joined with
/// positions).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoredState {
    pub observed_at: DateTime<Utc>,
    pub activity: Activity,
    pub blade_on: bool,
    pub lat: Option<f64>,
    pub lon: Option<f64>,
}

impl StoredState {
    pub fn of(state: &StateReport) -> Self {
        let (lat, lon) = match &state.position {
            Some(p) => (Some(p.lat), Some(p.lon)),
            None => (None, None),
        };
        Self {
            observed_at: state.observed_at,
            activity: state.activity,
            blade_on: state.blade_on,
            lat,
            lon,
        }
    }
}

impl HealthTotals {
    /// The newest counted state, as the totals remember it.
    pub fn last_state(&self) -> StoredState {
        StoredState {
            observed_at: self.counted_until,
            activity: self.last_activity,
            blade_on: self.last_blade_on,
            lat: self.last_lat,
            lon: self.last_lon,
        }
    }
}

/// W5: totals per mower and local day of the mower's site.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayTotals {
    pub mower_id: MowerId,
    pub day: NaiveDate,
    pub mowing_ms: i64,
    pub blade_ms: i64,
    pub distance_mm: i64,
    pub error_count: i64,
    pub charge_count: i64,
    /// Counted states observed on this day (every distinct state, late ones included once
    /// merged).
    pub state_count: i64,
}

impl DayTotals {
    pub fn zero(mower_id: MowerId, day: NaiveDate) -> Self {
        Self {
            mower_id,
            day,
            mowing_ms: 0,
            blade_ms: 0,
            distance_mm: 0,
            error_count: 0,
            charge_count: 0,
            state_count: 0,
        }
    }

    /// Adds another row of the same key (an upsert that adds).
    pub fn add(&mut self, other: &DayTotals) {
        self.mowing_ms += other.mowing_ms;
        self.blade_ms += other.blade_ms;
        self.distance_mm += other.distance_mm;
        self.error_count += other.error_count;
        self.charge_count += other.charge_count;
        self.state_count += other.state_count;
    }

    /// True when every value is zero (a delta that changes nothing).
    pub fn is_zero(&self) -> bool {
        self.mowing_ms == 0
            && self.blade_ms == 0
            && self.distance_mm == 0
            && self.error_count == 0
            && self.charge_count == 0
            && self.state_count == 0
    }
}
