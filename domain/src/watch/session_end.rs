//! W8's event (docs/rules.md §4, decision 203): `session_ended`, once per session, when the
//! session can no longer merge with a later stretch.
//!
//! The watcher folds W8 with the domain's own [`SessionFold`] over the states it watches (newer
//! than `watched_until`, in arrival order), and keeps what the fold needs of its carry between
//! states in the watch row ([`SessionWatch`], one text column on PostgreSQL: decisions 208 and
//! 211) while a session is pending: open, or ended and still able to merge. Once no later stretch
//! can merge, the event is raised and the row forgets the session (a fold without a current
//! session ignores the previous state, so nothing is lost).
//!
//! A session can no longer merge when a watched state comes at least the merge gap after its end
//! (every later state is strictly newer, so a stretch it starts would start beyond the gap); with
//! a gap of 0, at once when it ends. A mower that docks and then stops reporting sends no such
//! state: the watch row then says when the gap will have passed on the receiving side
//! ([`Watch::session_due_at`]) and the offline sweep raises the event from then on
//! ([`sweep_watch`](super::sweep_watch)). Both raise the same event: its id and instant come from
//! the session's end, its figures from the fold.

use super::events::{Event, EventDetail};
use super::fold::Watch;
use crate::report::StateReport;
use crate::sessions::{session_id, EndReason, Rest, Session, SessionFold, SessionPoint};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What the watcher remembers of W8 while a session is pending (decision 208): of the fold's
/// newest session, what its `session_ended` carries; of the rest after its end, the blade time a
/// merge would add; of the previous state, what the watch row does not hold already (its time is
/// `watched_until`, its activity `last_activity`). The rest of what [`SessionFold::resume`] takes
/// (state counts, first and last positions and batteries) feeds figures the event does not carry
/// and no branch of [`SessionFold::push`], so it is not kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionWatch {
    pub started_at: DateTime<Utc>,
    /// `None` while the session is open.
    pub ended_at: Option<DateTime<Utc>>,
    pub end_reason: Option<EndReason>,
    pub error_code: Option<String>,
    pub mowing_ms: i64,
    pub blade_ms: i64,
    pub distance_mm: i64,
    pub breaks: i64,
    /// The blade time of the states after the session's end.
    pub rest_blade_ms: i64,
    /// The previous state's blade and position.
    pub last_blade_on: bool,
    pub last_lat: Option<f64>,
    pub last_lon: Option<f64>,
}

impl SessionWatch {
    /// What the fold carried after the watched state `last`, `current` its pending session.
    fn kept(current: Session, rest: &Rest, last: &SessionPoint) -> Self {
        Self {
            started_at: current.started_at,
            ended_at: current.ended_at,
            end_reason: current.end_reason,
            error_code: current.error_code,
            mowing_ms: current.mowing_ms,
            blade_ms: current.blade_ms,
            distance_mm: current.distance_mm,
            breaks: current.breaks,
            rest_blade_ms: rest.blade_ms,
            last_blade_on: last.blade_on,
            last_lat: last.lat,
            last_lon: last.lon,
        }
    }

    /// The session as the fold resumes it. Its id is left nil: deriving it is a hash, and only
    /// the event needs it ([`session_ended`] derives it from the start, as the fold does).
    fn session(self, mower_id: crate::ids::MowerId) -> Session {
        Session {
            id: Uuid::nil(),
            mower_id,
            started_at: self.started_at,
            ended_at: self.ended_at,
            end_reason: self.end_reason,
            error_code: self.error_code,
            mowing_ms: self.mowing_ms,
            blade_ms: self.blade_ms,
            distance_mm: self.distance_mm,
            breaks: self.breaks,
            states: 0,
            first_lat: None,
            first_lon: None,
            last_lat: None,
            last_lon: None,
            first_battery_percent: None,
            last_battery_percent: None,
            local_date: self.started_at.date_naive(),
        }
    }
}

/// W8's clause for one watched state (newer than everything watched, received at
/// `received_at`): folds it, and returns the session that can no longer merge, if the state made
/// one so. Updates the watch's [`SessionWatch`] and `session_due_at`. Called before the watch
/// row advances to `state`, so `watched_until` and `last_activity` are the previous state's.
pub(super) fn watch_session(
    w: &mut Watch,
    state: &StateReport,
    received_at: DateTime<Utc>,
    merge_gap: Duration,
) -> Option<Session> {
    let (current, rest, last) = match w.session.take() {
        Some(s) => {
            let last = SessionPoint {
                observed_at: w.watched_until,
                activity: w.last_activity,
                blade_on: s.last_blade_on,
                battery_percent: None,
                error_code: None,
                lat: s.last_lat,
                lon: s.last_lon,
            };
            let rest = Rest {
                blade_ms: s.rest_blade_ms,
                ..Rest::default()
            };
            (Some(s.session(w.mower_id)), rest, Some(last))
        }
        // A fold without a current session never reads the previous state.
        None => (None, Rest::default(), None),
    };
    // The event carries no local date, so the fold's zone does not matter: UTC.
    let mut fold = SessionFold::resume(
        state.mower_id,
        chrono_tz::UTC,
        merge_gap,
        current,
        rest,
        last,
    );
    fold.push(SessionPoint::of(state));
    // At most one: a session is closed by a stretch starting beyond the gap, which is open.
    let mut done = fold.take_closed().pop();
    if let Some(end) = fold.current.as_ref().and_then(|c| c.ended_at) {
        if state.observed_at - end >= merge_gap {
            done = fold.current.take();
        }
    }
    w.session = fold.current.take().map(|current| {
        let last = fold
            .last
            .as_ref()
            .expect("the fold holds the state it was given");
        SessionWatch::kept(current, &fold.rest, last)
    });
    w.session_due_at = w
        .session
        .as_ref()
        .and_then(|s| s.ended_at)
        .and_then(|end| due_at(end, merge_gap, state.observed_at, received_at));
    done
}

/// When, on the receiving side's clock, the merge gap after `end` will have passed: the newest
/// state's `observed_at` was received at `received_at`, so the gap's end in the mower's time is
/// translated by that offset (a mower whose clock is off is judged by its own clock). `None`
/// when the gap is too long to represent (it never passes).
fn due_at(
    end: DateTime<Utc>,
    merge_gap: Duration,
    observed_at: DateTime<Utc>,
    received_at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let left = end.checked_add_signed(merge_gap)? - observed_at;
    received_at.checked_add_signed(left)
}

/// The `session_ended` event of a session that can no longer merge: at its end, with its
/// summary.
pub fn session_ended(w: &Watch, session: &Session) -> Option<Event> {
    let ended_at = session.ended_at?;
    Some(Event::new(
        w.mower_id,
        w.account_id,
        ended_at,
        EventDetail::SessionEnded {
            // The stored session's id (decision 190); a resumed session does not hold it.
            session_id: session_id(w.mower_id, session.started_at),
            started_at: session.started_at,
            ended_at,
            end_reason: session.end_reason?,
            error_code: session.error_code.clone(),
            breaks: session.breaks,
            mowing_seconds: session.mowing_ms as f64 / 1000.0,
            blade_seconds: session.blade_ms as f64 / 1000.0,
            distance_m: session.distance_mm as f64 / 1000.0,
        },
    ))
}

/// The sweep's half of the clause: a pending session whose gap has passed by `now` on the
/// receiving side can no longer merge. Returns its event and forgets it; `None` when nothing is
/// due.
pub(super) fn session_due(w: &mut Watch, now: DateTime<Utc>) -> Option<Event> {
    if w.session_due_at.is_none_or(|due| due >= now) {
        return None;
    }
    w.session_due_at = None;
    let pending = w.session.take()?.session(w.mower_id);
    session_ended(w, &pending)
}
