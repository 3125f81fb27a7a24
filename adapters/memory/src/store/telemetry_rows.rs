//! The memory store's compact telemetry rows: a mower's tables, the kept forms of its history
//! rows and positions, the cap on their number and where the kept rows begin (see the store's documentation).

use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use swath_domain::sessions::{Rest, SessionRow};
use swath_domain::{
    Activity, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, PositionRow,
};

#[derive(Default)]
pub(crate) struct MowerRows {
    pub(crate) history: BTreeMap<DateTime<Utc>, KeptHistory>,
    pub(crate) positions: BTreeMap<DateTime<Utc>, KeptPosition>,
    /// The distinct error codes of the mower's history rows, shared by them (see `intern`).
    error_codes: Vec<Arc<str>>,
    pub(crate) latest: Option<LatestRow>,
    pub(crate) health: Option<HealthTotals>,
    pub(crate) days: BTreeMap<NaiveDate, DayTotals>,
    /// W8's sessions by `started_at`.
    pub(crate) sessions: BTreeMap<DateTime<Utc>, SessionRow>,
    /// What the states after the newest session's end would add to it (decision 207).
    pub(crate) session_rest: Rest,
    /// Just after the newest history row the cap removed: older history rows may be gone.
    pub(crate) history_capped_until: Option<DateTime<Utc>>,
    /// Just after the newest position the cap removed: older positions may be gone.
    pub(crate) positions_capped_until: Option<DateTime<Utc>>,
}

/// The most distinct error codes a mower's rows share; further ones get a copy each, so that a
/// gateway sending ever new codes never makes the search long.
const SHARED_ERROR_CODES: usize = 32;

/// A history row as the memory store keeps it: without the mower id (the map's) and
/// `observed_at` (the key). 24 bytes instead of 56.
#[derive(Clone, Debug)]
pub(crate) struct KeptHistory {
    error_code: Option<Arc<str>>,
    pub(crate) activity: Activity,
    battery_percent: Option<u8>,
    pub(crate) blade_on: bool,
}

impl KeptHistory {
    pub(crate) fn row(&self, mower_id: MowerId, observed_at: DateTime<Utc>) -> HistoryRow {
        HistoryRow {
            mower_id,
            observed_at,
            activity: self.activity,
            battery_percent: self.battery_percent,
            error_code: self.error_code.as_deref().map(str::to_owned),
            blade_on: self.blade_on,
        }
    }
}

/// A position as the memory store keeps it: without the mower id and `observed_at`. 32 bytes
/// instead of 80.
#[derive(Clone, Debug)]
pub(crate) struct KeptPosition {
    pub(crate) lat: f64,
    pub(crate) lon: f64,
    accuracy_m: MaybeF64,
    heading_deg: MaybeF64,
}

impl KeptPosition {
    pub(crate) fn new(row: PositionRow) -> Self {
        Self {
            lat: row.lat,
            lon: row.lon,
            accuracy_m: MaybeF64::new(row.accuracy_m),
            heading_deg: MaybeF64::new(row.heading_deg),
        }
    }

    pub(crate) fn row(&self, mower_id: MowerId, observed_at: DateTime<Utc>) -> PositionRow {
        PositionRow {
            mower_id,
            observed_at,
            lat: self.lat,
            lon: self.lon,
            accuracy_m: self.accuracy_m.get(),
            heading_deg: self.heading_deg.get(),
        }
    }
}

/// An `Option<f64>` in 8 bytes instead of 16: NaN stands for `None`. A position's accuracy and
/// heading are finite whenever present (ingest refuses a report otherwise: `StateReport`'s
/// validation, and JSON cannot carry NaN anyway), so no value is lost (decision 53).
#[derive(Clone, Copy, Debug)]
struct MaybeF64(f64);

impl MaybeF64 {
    fn new(value: Option<f64>) -> Self {
        debug_assert!(
            value.is_none_or(|v| !v.is_nan()),
            "a position's optional number is never NaN"
        );
        Self(value.unwrap_or(f64::NAN))
    }

    fn get(self) -> Option<f64> {
        (!self.0.is_nan()).then_some(self.0)
    }
}

impl MowerRows {
    /// The kept form of a history row, its error code shared with the mower's earlier rows.
    pub(crate) fn keep_history(&mut self, row: HistoryRow) -> KeptHistory {
        KeptHistory {
            error_code: row.error_code.map(|code| self.intern(code)),
            activity: row.activity,
            battery_percent: row.battery_percent,
            blade_on: row.blade_on,
        }
    }

    /// The shared copy of `code`: a mower in error reports the same code every second.
    fn intern(&mut self, code: String) -> Arc<str> {
        if let Some(shared) = self.error_codes.iter().find(|c| &***c == code.as_str()) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(code);
        if self.error_codes.len() < SHARED_ERROR_CODES {
            self.error_codes.push(Arc::clone(&shared));
        }
        shared
    }

    /// Just after the newest row the cap removed from either table: older rows of the mower may
    /// be gone (a late state's neighbours among them), see `swath_domain::Neighbourhood`.
    pub(crate) fn capped_until(&self) -> Option<DateTime<Utc>> {
        self.history_capped_until.max(self.positions_capped_until)
    }

    /// Removes the oldest history row when the table holds more than `cap`.
    pub(crate) fn cap_history(&mut self, cap: usize) {
        if self.history.len() > cap {
            if let Some((at, _)) = self.history.pop_first() {
                raise(&mut self.history_capped_until, at);
            }
        }
    }

    /// Removes the oldest position when the table holds more than `cap`.
    pub(crate) fn cap_positions(&mut self, cap: usize) {
        if self.positions.len() > cap {
            if let Some((at, _)) = self.positions.pop_first() {
                raise(&mut self.positions_capped_until, at);
            }
        }
    }
}

/// Raises `floor` to just after `removed`, a row the cap removed.
fn raise(floor: &mut Option<DateTime<Utc>>, removed: DateTime<Utc>) {
    let after = removed + chrono::Duration::microseconds(1);
    *floor = (*floor).max(Some(after));
}

/// The oldest row of `rows` kept after what the cap removed below `capped_until` (the port's
/// `WindowRows::oldest_kept`). Normally the table's first row: the cap removes the oldest, so
/// every kept row is newer. A late state stored below the floor after retention made room is
/// kept but does not start the complete part. No row after the floor means retention (by age)
/// has since removed every row the cap had removed and more: the cap explains nothing missing,
/// as in PostgreSQL, so `None`.
pub(crate) fn oldest_kept<T>(
    rows: &BTreeMap<DateTime<Utc>, T>,
    capped_until: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    capped_until.and_then(|floor| rows.range(floor..).next().map(|(at, _)| *at))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the compact rows are kept for (module docs; BENCHMARKS.md has the whole store's).
    #[test]
    fn kept_rows_are_compact() {
        assert_eq!(std::mem::size_of::<KeptHistory>(), 24);
        assert_eq!(std::mem::size_of::<KeptPosition>(), 32);
        assert!(std::mem::size_of::<HistoryRow>() > 2 * std::mem::size_of::<KeptHistory>());
    }

    /// What a kept position answers is what was stored, absent numbers included.
    #[test]
    fn kept_positions_answer_what_was_stored() {
        let mower = MowerId(uuid::Uuid::from_u128(7));
        let at = DateTime::<Utc>::from_timestamp(1_780_000_000, 123_000).unwrap();
        for (accuracy_m, heading_deg) in [
            (None, None),
            (Some(0.0), Some(360.0)),
            (Some(0.4), None),
            (None, Some(-0.0)),
        ] {
            let row = PositionRow {
                mower_id: mower,
                observed_at: at,
                lat: 52.5,
                lon: -13.4,
                accuracy_m,
                heading_deg,
            };
            assert_eq!(KeptPosition::new(row.clone()).row(mower, at), row);
        }
    }

    /// A mower's rows share one copy of an error code; beyond the shared ones, codes are copied.
    #[test]
    fn error_codes_are_shared() {
        let mut rows = MowerRows::default();
        let a = rows.intern("BLADE_BLOCKED".to_owned());
        let b = rows.intern("BLADE_BLOCKED".to_owned());
        assert!(Arc::ptr_eq(&a, &b));
        for i in 0..2 * SHARED_ERROR_CODES {
            rows.intern(format!("E{i}"));
        }
        assert_eq!(rows.error_codes.len(), SHARED_ERROR_CODES);
        let late = rows.intern("LATE".to_owned());
        assert_eq!(&*late, "LATE");
        assert!(!rows.error_codes.iter().any(|c| Arc::ptr_eq(c, &late)));
    }
}
