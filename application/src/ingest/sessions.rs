//! W8 mowing sessions in the ingest's unit of work (docs/rules.md §3, W8; decisions 200 and 207).
//!
//! In order, a mower's newest session (kept with its health totals, read by the batch's first
//! statement with the rest after its end) is resumed with the health totals' newest counted
//! state as the previous one, and the batch's new states extend it: no state is read, and the
//! sessions are written by the batch's one write. The newest session's running figures go back
//! where they came from ([`SessionChanges::newest`]); a session row is written only when a
//! session starts, closes or is folded again, so a batch that extends every mower's open session
//! writes no session row at all. A batch with late states also reads, once for all its mowers, each
//! mower's [`SessionWindow`] (the stored session before its oldest late state through the one
//! after its newest, with the states between) and folds that window again with the new states:
//! the sessions outside it keep their starts, ends and merges.
//!
//! Sessions change only with the states W4 counts from stored neighbours: a mower whose window
//! begins before the floor below which retention (or the memory store's cap) may have removed
//! or downsampled its rows keeps its sessions as they are, since a fold of what remains would
//! differ from the one that made them.

use crate::ports::SessionWindow;
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use std::collections::BTreeMap;
use swath_domain::sessions::{
    NewestSession, SessionCarry, SessionChanges, SessionFold, SessionPoint, SessionRow,
};
use swath_domain::{AccountId, BatchChanges, MowerId, MowerSnapshot, StateOutcome, StateReport};

/// What the session step needs of a mower as the batch found it, taken before the rules advance
/// the snapshot.
pub(super) struct Before {
    zone: Tz,
    account: AccountId,
    counted_until: Option<DateTime<Utc>>,
    last: Option<SessionPoint>,
    carry: SessionCarry,
    floor: Option<DateTime<Utc>>,
}

/// The mowers of the batch as it found them (those in the directory).
pub(super) fn before(
    snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
) -> BTreeMap<MowerId, Before> {
    snapshots
        .iter_mut()
        .filter_map(|(mower, snapshot)| {
            let directory = snapshot.directory.as_ref()?;
            let near = &snapshot.neighbourhood;
            Some((
                *mower,
                Before {
                    zone: directory.time_zone,
                    account: directory.account_id,
                    counted_until: snapshot.health.as_ref().map(|h| h.counted_until),
                    last: snapshot.health.as_ref().map(SessionPoint::newest_counted),
                    carry: std::mem::take(&mut snapshot.sessions),
                    floor: near.history_floor.max(near.positions_floor),
                },
            ))
        })
        .collect()
}

/// Each mower's oldest and newest late state, from [`swath_domain::late_states`]' answer
/// (sorted by mower, then time).
pub(super) fn late_spans(
    late: &[(MowerId, DateTime<Utc>)],
) -> Vec<(MowerId, DateTime<Utc>, DateTime<Utc>)> {
    let mut spans: Vec<(MowerId, DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for &(mower, at) in late {
        match spans.last_mut() {
            Some((m, lo, hi)) if *m == mower => {
                *lo = (*lo).min(at);
                *hi = (*hi).max(at);
            }
            _ => spans.push((mower, at, at)),
        }
    }
    spans
}

/// The sessions the batch's stored states change: `applied` are the outcomes of `states`.
pub(super) fn session_changes(
    before: &BTreeMap<MowerId, Before>,
    windows: Vec<SessionWindow>,
    states: &[StateReport],
    applied: &[StateOutcome],
    merge_gap: Duration,
) -> SessionChanges {
    let mut by_mower: BTreeMap<MowerId, Vec<&StateReport>> = BTreeMap::new();
    for (state, outcome) in states.iter().zip(applied) {
        if *outcome == StateOutcome::Stored {
            by_mower.entry(state.mower_id).or_default().push(state);
        }
    }
    let mut windows: BTreeMap<MowerId, SessionWindow> =
        windows.into_iter().map(|w| (w.mower_id, w)).collect();
    let mut changes = SessionChanges::default();
    for (mower, states) in by_mower {
        let Some(found) = before.get(&mower) else {
            continue;
        };
        let step = Step {
            mower,
            found,
            merge_gap,
        };
        // W1: the first state of a key is the one kept (a stored key's row stays, which the
        // window's stored states decide below).
        let (mut in_order, mut late) = (BTreeMap::new(), BTreeMap::new());
        for state in states {
            let t = state.observed_at;
            match found.counted_until {
                Some(until) if t < until => {
                    late.entry(t).or_insert_with(|| SessionPoint::of(state))
                }
                Some(until) if t == until => continue,
                _ => in_order.entry(t).or_insert_with(|| SessionPoint::of(state)),
            };
        }
        let window = windows
            .remove(&mower)
            .filter(|w| !late.is_empty() && found.floor.is_none_or(|floor| w.from >= floor));
        let carry = match window {
            Some(window) if window.through.is_none() => {
                step.refold(window, late, &mut in_order, &mut changes)
            }
            Some(window) => {
                step.refold(window, late, &mut in_order, &mut changes);
                step.extend(in_order, &mut changes)
            }
            None => step.extend(in_order, &mut changes),
        };
        if let Some(carry) = carry.filter(|c| *c != found.carry) {
            changes.newest.push(NewestSession {
                mower_id: mower,
                account_id: found.account,
                carry,
            });
        }
    }
    changes
}

/// Gives every mower of `changes.sessions.newest` its health row in the batch's changes, so that
/// a store may keep the newest session in that row (decision 207): a mower whose totals the
/// batch did not change gets its row as the batch found it. A mower without one (which a changed
/// session cannot have: its states were counted) keeps its stored session.
pub(super) fn cover_with_health(
    changes: &mut BatchChanges,
    snapshots: &BTreeMap<MowerId, MowerSnapshot>,
) {
    let newest = std::mem::take(&mut changes.sessions.newest);
    for entry in newest {
        let at = changes
            .health
            .binary_search_by_key(&entry.mower_id, |h| h.mower_id);
        match at {
            Ok(_) => changes.sessions.newest.push(entry),
            Err(i) => {
                let found = snapshots
                    .get(&entry.mower_id)
                    .and_then(|s| s.health.clone());
                if let Some(health) = found {
                    changes.health.insert(i, health);
                    changes.sessions.newest.push(entry);
                }
            }
        }
    }
}

struct Step<'a> {
    mower: MowerId,
    found: &'a Before,
    merge_gap: Duration,
}

impl Step<'_> {
    fn row(&self, session: swath_domain::sessions::Session) -> SessionRow {
        SessionRow {
            account_id: self.found.account,
            session,
        }
    }

    /// The in-order path: the newest stored session resumed and extended by the new states.
    /// Returns the carry the states leave (`None` when there are none). A session that closes
    /// is final and upserted; the newest is upserted only when its start is not stored yet, its
    /// running figures being the carry's.
    fn extend(
        &self,
        in_order: BTreeMap<DateTime<Utc>, SessionPoint>,
        out: &mut SessionChanges,
    ) -> Option<SessionCarry> {
        if in_order.is_empty() {
            return None;
        }
        let carry = &self.found.carry;
        let mut fold = SessionFold::resume(
            self.mower,
            self.found.zone,
            self.merge_gap,
            carry.newest.clone(),
            carry.rest.clone(),
            self.found.last.clone(),
        );
        for point in in_order.into_values() {
            fold.push(point);
        }
        for session in fold.take_closed() {
            out.upsert.push(self.row(session));
        }
        let stored_start = carry.newest.as_ref().map(|s| s.started_at);
        if let Some(current) = &fold.current {
            if stored_start != Some(current.started_at) {
                out.upsert.push(self.row(current.clone()));
            }
        }
        Some(SessionCarry {
            newest: fold.current,
            rest: fold.rest,
        })
    }

    /// The late path: the window folded again from its stored states and the new ones in it.
    /// Returns the carry it leaves when the window reaches the mower's newest state.
    fn refold(
        &self,
        window: SessionWindow,
        late: BTreeMap<DateTime<Utc>, SessionPoint>,
        in_order: &mut BTreeMap<DateTime<Utc>, SessionPoint>,
        out: &mut SessionChanges,
    ) -> Option<SessionCarry> {
        let mut points: BTreeMap<DateTime<Utc>, SessionPoint> = window
            .states
            .into_iter()
            .map(|p| (p.observed_at, p))
            .collect();
        // A stored key keeps its stored row (W1): the new state of that key is a redelivery.
        for (at, point) in late {
            points.entry(at).or_insert(point);
        }
        if window.through.is_none() {
            for (at, point) in std::mem::take(in_order) {
                points.entry(at).or_insert(point);
            }
        }
        let mut fold = SessionFold::new(self.mower, self.found.zone, self.merge_gap);
        for point in points.into_values() {
            fold.push(point);
        }
        let mut produced = fold.sessions();
        if let Some(through) = window.through {
            // The state after the window's last session tells how it ended; a session it
            // starts is the stored one after the window, which is left as it is.
            produced.retain(|s| s.started_at <= through);
        }
        let starts: Vec<DateTime<Utc>> = produced.iter().map(|s| s.started_at).collect();
        let carry = window.through.is_none().then(|| SessionCarry {
            newest: produced.last().cloned(),
            rest: fold.rest,
        });
        out.upsert
            .extend(produced.into_iter().map(|session| self.row(session)));
        out.remove.extend(
            window
                .sessions
                .into_iter()
                .filter(|at| !starts.contains(at))
                .map(|at| (self.mower, at)),
        );
        carry
    }
}
