//! The scheduler's busy check (docs/rules.md §4): the status the scheduler reads before it
//! starts a run. It needs the activity when it changes and a recent position (for the weather),
//! not every state: an activity change is written at once, an unchanged activity at most every
//! [`REFRESH_AFTER`] or after a move of [`REFRESH_AFTER_MOVE_M`], and an older report never.

use crate::ids::{AccountId, MowerId};
use crate::report::{Activity, StateReport};
use crate::rules::distance_mm;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// An unchanged activity is written again after this long (on the clock of the writer).
pub const REFRESH_AFTER: Duration = Duration::seconds(30);
/// …or once the mower moved this far from the written position, in metres.
pub const REFRESH_AFTER_MOVE_M: f64 = 100.0;

/// A mower's status as the scheduler sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BusyStatus {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    pub activity: Activity,
    /// The `observed_at` of the report written.
    pub observed_at: DateTime<Utc>,
    pub lat: Option<f64>,
    pub lon: Option<f64>,
    /// When it was written (the writer's clock).
    pub written_at: DateTime<Utc>,
}

impl BusyStatus {
    /// Busy: on a run (mowing, leaving, returning, paused mid-run) or stuck in an error. Docked,
    /// charging and idle mowers can take a run.
    pub fn busy(&self) -> bool {
        is_busy(self.activity)
    }
}

/// Whether a mower doing `activity` is busy (see [`BusyStatus::busy`]).
pub fn is_busy(activity: Activity) -> bool {
    !matches!(
        activity,
        Activity::Docked | Activity::Charging | Activity::Idle
    )
}

/// The status to write for `state`, given the one written last (or `None` to write nothing).
pub fn busy_update(
    written: Option<&BusyStatus>,
    state: &StateReport,
    now: DateTime<Utc>,
) -> Option<BusyStatus> {
    let (lat, lon) = match &state.position {
        Some(p) => (Some(p.lat), Some(p.lon)),
        None => (None, None),
    };
    let next = BusyStatus {
        mower_id: state.mower_id,
        account_id: state.account_id,
        activity: state.activity,
        observed_at: state.observed_at,
        lat,
        lon,
        written_at: now,
    };
    let Some(written) = written else {
        return Some(next);
    };
    if state.observed_at <= written.observed_at {
        return None;
    }
    let moved = match (written.lat, written.lon, lat, lon) {
        (Some(a), Some(b), Some(c), Some(d)) => {
            distance_mm(a, b, c, d) as f64 / 1000.0 >= REFRESH_AFTER_MOVE_M
        }
        // A position where there was none is news for the weather; losing it is not.
        (None, _, Some(_), _) => true,
        _ => false,
    };
    let write =
        written.activity != state.activity || now - written.written_at >= REFRESH_AFTER || moved;
    write.then_some(next)
}
