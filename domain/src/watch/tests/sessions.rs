//! W8's `session_ended` (decision 203): once per session, when it can no longer merge; never
//! for a session that still can, nor for states behind the watch point; at once with a gap of
//! 0; from the offline sweep for a mower that stopped reporting.

use super::*;
use crate::sessions::{session_id, sessions_of, EndReason, Session, SessionPoint};

const GAP: Duration = Duration::minutes(10);

fn gapped(merge_gap: Duration) -> Run {
    let mut run = Run::new(false);
    run.merge_gap = merge_gap;
    run
}

fn ended(changes: &WatchChanges) -> Vec<Event> {
    changes
        .events
        .iter()
        .filter(|e| e.kind() == SessionEnded)
        .cloned()
        .collect()
}

/// The states of a run: `(seconds, activity)`.
fn trace(steps: &[(i64, Activity)]) -> Vec<StateReport> {
    steps.iter().map(|(t, a)| state(*t, *a)).collect()
}

/// The domain's own W8 fold of these states, for the figures an event must carry.
fn folded(states: &[StateReport], merge_gap: Duration) -> Vec<Session> {
    sessions_of(
        MOWER,
        chrono_tz::UTC,
        merge_gap,
        states.iter().map(SessionPoint::of),
    )
}

fn expected_event(session: &Session) -> Event {
    let end = session.ended_at.expect("ended");
    Event::new(
        MOWER,
        ACCOUNT,
        end,
        EventDetail::SessionEnded {
            session_id: session_id(MOWER, session.started_at),
            started_at: session.started_at,
            ended_at: end,
            end_reason: session.end_reason.expect("ended"),
            error_code: session.error_code.clone(),
            breaks: session.breaks,
            mowing_seconds: session.mowing_ms as f64 / 1000.0,
            blade_seconds: session.blade_ms as f64 / 1000.0,
            distance_m: session.distance_mm as f64 / 1000.0,
        },
    )
}

#[test]
fn a_session_ends_once_when_a_state_comes_the_gap_after_its_end() {
    let mut run = gapped(GAP);
    let session = trace(&[
        (0, Activity::Mowing),
        (60, Activity::Mowing),
        (120, Activity::Mowing),
        (180, Activity::Docked),
    ]);
    let (_, changes) = run.watch(&session);
    assert!(ended(&changes).is_empty(), "it can still merge");
    assert!(changes.watches[0].session.is_some());
    // Within the gap: still able to merge.
    let (_, changes) = run.watch(&trace(&[
        (240, Activity::Charging),
        (779, Activity::Charging),
    ]));
    assert!(ended(&changes).is_empty(), "{:?}", changes.events);
    // Exactly the gap after the end: no later stretch can start within it any more.
    let (_, changes) = run.watch(&trace(&[(780, Activity::Charging)]));
    let events = ended(&changes);
    assert_eq!(events.len(), 1, "{:?}", changes.events);
    let sessions = folded(&session, GAP);
    assert_eq!(events[0], expected_event(&sessions[0]));
    assert_eq!(events[0].observed_at, at(180));
    match &events[0].detail {
        EventDetail::SessionEnded {
            session_id: id,
            end_reason,
            mowing_seconds,
            breaks,
            ..
        } => {
            assert_eq!(*id, session_id(MOWER, at(0)));
            assert_eq!(*end_reason, EndReason::Docked);
            assert_eq!(*mowing_seconds, 180.0);
            assert_eq!(*breaks, 0);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(changes.watches[0].session, None, "the row forgets it");
    assert_eq!(changes.watches[0].session_due_at, None);
    // Never again.
    let (_, changes) = run.watch(&trace(&[(900, Activity::Docked), (5_000, Activity::Idle)]));
    assert!(ended(&changes).is_empty(), "{:?}", changes.events);
}

#[test]
fn a_stretch_within_the_gap_merges_and_the_session_ends_once_later() {
    let mut run = gapped(GAP);
    let states = trace(&[
        (0, Activity::Mowing),
        (60, Activity::Mowing),
        (120, Activity::Docked),
        (300, Activity::Charging),
        // 600 s after the end: merges (the gap is inclusive).
        (720, Activity::Mowing),
        (780, Activity::Returning),
        (840, Activity::Docked),
        (1_000, Activity::Charging),
    ]);
    let (_, changes) = run.watch(&states);
    assert!(ended(&changes).is_empty(), "{:?}", changes.events);
    let (_, changes) = run.watch(&trace(&[(1_440, Activity::Charging)]));
    let events = ended(&changes);
    assert_eq!(events.len(), 1, "{:?}", changes.events);
    let sessions = folded(&states, GAP);
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].breaks, 1);
    assert_eq!(events[0], expected_event(&sessions[0]));
    assert_eq!(events[0].observed_at, at(840));
}

#[test]
fn with_a_gap_of_zero_a_session_ends_at_once() {
    let mut run = gapped(Duration::zero());
    let docked = trace(&[
        (0, Activity::Mowing),
        (60, Activity::Mowing),
        (120, Activity::Docked),
    ]);
    let (_, changes) = run.watch(&docked);
    let events = ended(&changes);
    assert_eq!(events.len(), 1, "{:?}", changes.events);
    assert_eq!(events[0].observed_at, at(120));
    assert_eq!(changes.watches[0].session, None);
    // A silent end is known at the state after the silence, and ends the session there.
    let (_, changes) = run.watch(&trace(&[(200, Activity::Mowing), (260, Activity::Mowing)]));
    assert!(
        ended(&changes).is_empty(),
        "still open: {:?}",
        changes.events
    );
    let (_, changes) = run.watch(&trace(&[(1_000, Activity::Mowing)]));
    let events = ended(&changes);
    assert_eq!(events.len(), 1, "{:?}", changes.events);
    assert_eq!(events[0].observed_at, at(260));
    assert!(matches!(
        events[0].detail,
        EventDetail::SessionEnded {
            end_reason: EndReason::Silent,
            ..
        }
    ));
    // The state after the silence opened a session of its own.
    assert!(changes.watches[0].session.is_some());
}

#[test]
fn a_backfill_behind_the_watch_point_ends_no_session() {
    let mut run = gapped(Duration::zero());
    run.watch(&trace(&[(10_000, Activity::Docked)]));
    let backfill = trace(&[
        (0, Activity::Mowing),
        (60, Activity::Mowing),
        (120, Activity::Docked),
        (500, Activity::Mowing),
        (560, Activity::Error),
    ]);
    let (_, changes) = run.watch(&backfill);
    assert!(changes.events.is_empty(), "{:?}", changes.events);
    let (_, changes) = run.watch(&trace(&[(20_000, Activity::Docked)]));
    assert!(ended(&changes).is_empty(), "{:?}", changes.events);
}

#[test]
fn a_mower_that_docks_and_goes_quiet_ends_its_session_from_the_sweep() {
    let mut run = gapped(GAP);
    let states = trace(&[
        (0, Activity::Mowing),
        (60, Activity::Mowing),
        (120, Activity::Docked),
    ]);
    let (_, changes) = run.watch(&states);
    let mut watch = changes.watches[0].clone();
    // Received at 10 000 s, the newest state's time is the end: due a gap later.
    assert_eq!(watch.session_due_at, Some(at(10_000) + GAP));
    let quiet = Duration::hours(1);
    let mut swept = WatchChanges::default();
    sweep_watch(&mut watch, at(10_000) + GAP, quiet, &mut swept);
    assert!(
        swept.events.is_empty() && swept.watches.is_empty(),
        "not yet"
    );
    sweep_watch(
        &mut watch,
        at(10_000) + GAP + Duration::seconds(1),
        quiet,
        &mut swept,
    );
    assert_eq!(swept.events.len(), 1, "{:?}", swept.events);
    assert_eq!(swept.watches.len(), 1);
    // The same event a state the gap after the end gives.
    let mut by_state = gapped(GAP);
    let (_, c) = by_state.watch(&states);
    assert!(ended(&c).is_empty());
    let (_, c) = by_state.watch(&trace(&[(720, Activity::Docked)]));
    assert_eq!(ended(&c), swept.events);
    // Once: neither the next sweep nor the mower's return raise it again.
    let mut again = WatchChanges::default();
    sweep_watch(&mut watch, at(20_000), quiet, &mut again);
    assert!(ended(&again).is_empty(), "{:?}", again.events);
    run.snapshots.get_mut(&MOWER).unwrap().watch = Some(watch);
    let (_, changes) = run.watch(&trace(&[
        (400, Activity::Mowing),
        (9_000, Activity::Docked),
    ]));
    assert_eq!(ended(&changes).len(), 1, "only the new session's");
    assert_eq!(ended(&changes)[0].observed_at, at(400));
}

#[test]
fn the_sweep_marks_offline_and_ends_a_session_in_one_row() {
    let mut run = gapped(GAP);
    let (_, changes) = run.watch(&trace(&[(0, Activity::Mowing), (60, Activity::Docked)]));
    let mut watch = changes.watches[0].clone();
    let mut swept = WatchChanges::default();
    sweep_watch(&mut watch, at(30_000), DEFAULT_OFFLINE_AFTER, &mut swept);
    let kinds: Vec<EventKind> = swept.events.iter().map(Event::kind).collect();
    assert_eq!(kinds, vec![SessionEnded, WentOffline]);
    assert_eq!(swept.watches.len(), 1, "one row per mower");
    assert!(swept.watches[0].offline && swept.watches[0].session.is_none());
}

/// An in-order trace: seconds forward (up to a quarter of an hour, so silences happen) and
/// an activity.
fn forward() -> impl Strategy<Value = (i64, usize)> {
    (
        prop_oneof![6 => 1i64..120, 1 => 250i64..900],
        0usize..Activity::ALL.len(),
    )
}

proptest! {
    /// Over any in-order trace, the events are exactly the fold's sessions that can no longer
    /// merge by the newest state (ended, and the gap since passed), each once, with the fold's
    /// figures; whatever the batches.
    #[test]
    fn the_events_are_the_folds_sessions_that_can_no_longer_merge(
        steps in proptest::collection::vec(forward(), 1..120),
        gap in prop_oneof![Just(0i64), Just(300), Just(900), Just(3_600)],
        size in 1usize..20,
    ) {
        let gap = Duration::seconds(gap);
        let mut clock = 0i64;
        let states: Vec<StateReport> = steps
            .iter()
            .map(|(dt, activity)| {
                clock += dt;
                let mut s = state(clock, Activity::ALL[*activity]);
                // The blade also turns while not working now and then: the rest's blade time,
                // which a merge adds, is then carried between batches too.
                s.blade_on = s.activity == Activity::Mowing || clock % 3 == 0;
                if s.activity == Activity::Error {
                    s.error_code = Some(format!("E{}", clock % 7));
                }
                at_position(s, clock as f64 / 50.0, None)
            })
            .collect();
        let newest = states.last().expect("a state").observed_at;
        let expected: Vec<Event> = folded(&states, gap)
            .iter()
            .filter(|s| s.ended_at.is_some_and(|end| newest - end >= gap))
            .map(expected_event)
            .collect();
        let mut run = gapped(gap);
        let mut events = Vec::new();
        for chunk in states.chunks(size) {
            events.extend(ended(&run.watch(chunk).1));
        }
        prop_assert_eq!(events, expected);
    }
}
