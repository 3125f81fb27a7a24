//! W8's event (docs/rules.md §4, decision 203): `session_ended`, once per session, when the
//! session can no longer merge with a later stretch.
//!
//! The watcher folds W8 with the domain's own [`SessionFold`] over the states it watches (newer
//! than `watched_until`, in arrival order), and keeps what the fold carries between states in the
//! watch row ([`SessionWatch`]) while a session is pending: open, or ended and still able to
//! merge. Once no later stretch can merge, the event is raised and the row forgets the session
//! (a fold without a current session ignores the previous state, so nothing is lost).
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
use crate::sessions::{Rest, Session, SessionFold, SessionPoint};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// What the watcher remembers of W8 while a session is pending: the fold's newest session, the
/// rest after its end and the previous state ([`SessionFold::resume`]'s arguments).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionWatch {
    pub current: Session,
    pub rest: Rest,
    pub last: SessionPoint,
}

impl SessionWatch {
    /// The session's end, once it has one.
    pub fn ended_at(&self) -> Option<DateTime<Utc>> {
        self.current.ended_at
    }
}

/// W8's clause for one watched state (newer than everything watched, received at
/// `received_at`): folds it, and returns the session that can no longer merge, if the state made
/// one so. Updates the watch's [`SessionWatch`] and `session_due_at`.
pub(super) fn watch_session(
    w: &mut Watch,
    state: &StateReport,
    received_at: DateTime<Utc>,
    merge_gap: Duration,
) -> Option<Session> {
    let (current, rest, last) = match w.session.take() {
        Some(s) => (Some(s.current), s.rest, Some(s.last)),
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
    w.session = fold.current.take().map(|current| SessionWatch {
        current,
        rest: std::mem::take(&mut fold.rest),
        last: fold
            .last
            .take()
            .expect("the fold holds the state it was given"),
    });
    w.session_due_at = w
        .session
        .as_ref()
        .and_then(SessionWatch::ended_at)
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
            session_id: session.id,
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
    let pending = w.session.take()?;
    session_ended(w, &pending.current)
}
