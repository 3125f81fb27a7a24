//! W8's `session_ended` through the watcher and the stores (decision 203): once per session,
//! whatever the batches and redeliveries; from the sweep for a mower that docked and went quiet;
//! the pending session kept in the watch row between batches, the sweep's due instant with it.

use super::{report, WatchFactory, WatchHarness};
use crate::support::trace_start;
use crate::traces::ingest_clock;
use chrono::Duration;
use serde_json::Value;
use swath_domain::sessions::session_id;
use swath_domain::watch::{Event, EventDetail, EventKind};
use swath_domain::Activity;

const GAP: Duration = Duration::minutes(10);

/// The `session_ended` events the store holds.
async fn ended(h: &WatchHarness) -> Vec<Event> {
    h.rows()
        .await
        .1
        .events
        .into_iter()
        .filter(|e| e.kind() == EventKind::SessionEnded)
        .collect()
}

fn published_ended(h: &WatchHarness) -> usize {
    h.published_kinds()
        .iter()
        .filter(|k| *k == "session_ended")
        .count()
}

/// A session of mower 0 docked at 180 s, then charging: `until` the last charging state.
fn docked_session(h: &WatchHarness, until: i64) -> Vec<Value> {
    let f = &h.fleet;
    let mut reports = vec![
        report(f, 0, 0, Activity::Mowing),
        report(f, 0, 60, Activity::Mowing),
        report(f, 0, 120, Activity::Mowing),
        report(f, 0, 180, Activity::Docked),
    ];
    reports.extend(
        (1..)
            .map(|i| 180 + 100 * i)
            .take_while(|t| *t <= until)
            .map(|t| report(f, 0, t, Activity::Charging)),
    );
    reports
}

/// Raised once the gap has passed after the end (not before), with the stored session's id;
/// a redelivery raises nothing twice, and batches raise what one state at a time raises.
pub async fn a_session_ends_once_whatever_the_batches(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000)
        .await
        .with_merge_gap(GAP);
    let reports = docked_session(&h, 780);
    let (within, beyond) = reports.split_at(reports.len() - 1);
    h.both(within).await;
    assert!(ended(&h).await.is_empty(), "780 s is within the gap");
    let watch = &h.rows().await.1.watches[0];
    assert!(watch.session.is_some(), "the pending session is kept");
    // The last state 680 s, the end 180 s: the gap passes 100 s after the newest state's receipt.
    assert_eq!(
        watch.session_due_at,
        Some(ingest_clock() + Duration::seconds(100))
    );
    h.both(beyond).await;
    let events = ended(&h).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].observed_at,
        trace_start() + Duration::seconds(180)
    );
    match &events[0].detail {
        EventDetail::SessionEnded {
            session_id: id,
            started_at,
            mowing_seconds,
            ..
        } => {
            assert_eq!(*id, session_id(h.fleet.mowers[0], trace_start()));
            assert_eq!(*started_at, trace_start());
            assert_eq!(*mowing_seconds, 180.0);
        }
        other => panic!("{other:?}"),
    }
    let stored = h
        .store
        .telemetry
        .export(&[h.fleet.mowers[0]])
        .await
        .expect("export")
        .sessions;
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].session.id,
        session_id(h.fleet.mowers[0], trace_start())
    );
    let watch = &h.rows().await.1.watches[0];
    assert_eq!((watch.session.clone(), watch.session_due_at), (None, None));
    assert_eq!(published_ended(&h), 1);

    let before = h.rows().await;
    h.both(&reports).await;
    assert_eq!(h.rows().await, before, "a redelivery changes nothing");
    assert_eq!(published_ended(&h), 1, "and publishes nothing");

    let single = WatchHarness::new(factory, 600_000)
        .await
        .with_merge_gap(GAP);
    for r in &reports {
        single.both(std::slice::from_ref(r)).await;
    }
    assert_eq!(ended(&single).await, events);
}

/// A mower that docks and reports nothing more: the sweep raises its session's event once the
/// gap has passed on the receiving clock, once; the mower's return raises no second one.
pub async fn a_docked_mower_that_goes_quiet_ends_its_session_from_the_sweep(
    factory: &dyn WatchFactory,
) {
    let h = WatchHarness::new(factory, 600_000)
        .await
        .with_merge_gap(GAP);
    h.both(&docked_session(&h, 180)).await;
    h.clock.advance(GAP);
    h.watcher.sweep_offline().await.unwrap();
    assert!(ended(&h).await.is_empty(), "due, not past");
    h.clock.advance(Duration::seconds(1));
    h.watcher.sweep_offline().await.unwrap();
    let events = ended(&h).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].observed_at,
        trace_start() + Duration::seconds(180)
    );
    assert_eq!(published_ended(&h), 1);
    h.clock.advance(Duration::hours(1));
    h.watcher.sweep_offline().await.unwrap();
    assert_eq!(published_ended(&h), 1, "once");
    let watch = &h.rows().await.1.watches[0];
    assert_eq!((watch.session.clone(), watch.session_due_at), (None, None));
    // Back within the gap in its own time (a state it had kept): a session of its own, not a
    // second event for the one that ended.
    let f = &h.fleet;
    h.both(&[
        report(f, 0, 300, Activity::Mowing),
        report(f, 0, 360, Activity::Docked),
    ])
    .await;
    assert_eq!(ended(&h).await, events);
}

/// A session that breaks and merges, with distance, blade time in its rest and an error end,
/// carried from batch to batch in the watch row (decision 208), beside a mower without one:
/// one state per batch raises exactly the events one batch raises, with the figures of the
/// session the ingest stored.
pub async fn a_pending_session_survives_every_batch_boundary(factory: &dyn WatchFactory) {
    let one_batch = WatchHarness::new(factory, 600_000)
        .await
        .with_merge_gap(GAP);
    let f = &one_batch.fleet;
    // (seconds, activity, blade on, metres east): stopped at 180 with the blade still on,
    // working again at 300 (a merge: the rest's 120 s of blade join the session), an error at
    // 420, and the gap passed at 1 020.
    let steps = [
        (0, Activity::Mowing, true, 0.0),
        (60, Activity::Mowing, true, 100.0),
        (120, Activity::Mowing, true, 200.0),
        (180, Activity::Idle, true, 250.0),
        (240, Activity::Idle, true, 250.0),
        (300, Activity::Mowing, true, 300.0),
        (360, Activity::Mowing, true, 400.0),
        (420, Activity::Error, false, 450.0),
        (480, Activity::Docked, false, 0.0),
        (1_020, Activity::Charging, false, 0.0),
    ];
    let mut reports = Vec::new();
    for (t, activity, blade, east) in steps {
        let mut r = super::at(report(f, 0, t, activity), 10.0, east, 3.0);
        r["blade_on"] = serde_json::json!(blade);
        if activity == Activity::Error {
            r["error_code"] = serde_json::json!("E42");
        }
        reports.push(report(f, 1, t, Activity::Charging));
        reports.push(r);
    }
    one_batch.both(&reports).await;
    let events = ended(&one_batch).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let stored = one_batch
        .store
        .telemetry
        .export(&[f.mowers[0]])
        .await
        .expect("export")
        .sessions;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let s = &stored[0].session;
    match &events[0].detail {
        EventDetail::SessionEnded {
            session_id: id,
            started_at,
            ended_at,
            end_reason,
            error_code,
            breaks,
            mowing_seconds,
            blade_seconds,
            distance_m,
        } => {
            assert_eq!(*id, s.id);
            assert_eq!((*started_at, Some(*ended_at)), (s.started_at, s.ended_at));
            assert_eq!(Some(*end_reason), s.end_reason);
            assert_eq!(error_code.as_deref(), Some("E42"));
            assert_eq!(*breaks, 1);
            assert_eq!((*mowing_seconds, *blade_seconds), (300.0, 420.0));
            assert_eq!(*distance_m, s.distance_mm as f64 / 1000.0);
            assert!(*distance_m > 0.0);
        }
        other => panic!("{other:?}"),
    }

    let single = WatchHarness::new(factory, 600_000)
        .await
        .with_merge_gap(GAP);
    for (i, r) in reports.iter().enumerate() {
        single.both(std::slice::from_ref(r)).await;
        if i + 1 < reports.len() {
            assert!(ended(&single).await.is_empty(), "ended early, at state {i}");
        }
    }
    assert_eq!(ended(&single).await, events);
    assert_eq!(single.rows().await.1, one_batch.rows().await.1);
}
