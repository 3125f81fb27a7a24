//! The zone store's contract ([`swath_application::ports::ZoneStore`], docs/rules.md §3 W7): the
//! zones and zone watches that ingestion's zone step reads and advances after the telemetry
//! commit, through the use cases, over the same [`WatchFactory`] as the other suites of the
//! notification side.
use crate::watch_contract::{at, lawn_rectangle, open_alerts, report, WatchFactory, WatchHarness};
use serde_json::Value;
use swath_application::Ingest;
use swath_domain::watch::AlertKind;
use swath_domain::{Activity, StateOutcome};
use uuid::Uuid;

/// W7: after the commit the batch's positions are evaluated in order against the zones of all
/// its mowers; entering and leaving raise events and the occupancy is stored.
pub async fn zones_are_entered_and_left(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    h.add_zone(0, 0x31, "Roses", lawn_rectangle((0, 0), (100, 100)))
        .await;
    h.add_zone(1, 0x32, "Back", lawn_rectangle((0, 0), (100, 100)))
        .await;
    h.ingest(&[
        at(report(f, 0, 0, Activity::Mowing), 200.0, 200.0, 0.5),
        at(report(f, 0, 10, Activity::Mowing), 50.0, 50.0, 0.5),
        at(report(f, 1, 10, Activity::Mowing), 50.0, 50.0, 0.5),
        at(report(f, 0, 20, Activity::Mowing), 50.0, 150.0, 0.5),
        at(report(f, 2, 20, Activity::Mowing), 50.0, 50.0, 0.5),
    ])
    .await;
    assert_eq!(
        h.published_kinds(),
        vec!["zone_entered", "zone_entered", "zone_left"]
    );
    let zone_watch = h.zones.zone_watch(f.mowers[1]).await.unwrap().unwrap();
    assert_eq!(zone_watch.occupancy.len(), 1);
    assert_eq!(zone_watch.occupancy[0].zone_id, Uuid::from_u128(0x32));
    assert!(h
        .zones
        .zone_watch(f.mowers[0])
        .await
        .unwrap()
        .unwrap()
        .occupancy
        .is_empty());
    // A redelivery evaluates nothing again.
    h.ingest(&[at(report(f, 0, 10, Activity::Mowing), 50.0, 50.0, 0.5)])
        .await;
    assert_eq!(h.published_kinds().len(), 3);
}

/// W7 fails once after the telemetry commit (the zone unit of work cannot commit): the batch's
/// rows are stored and its `blade_due` event, stored by that commit, is published at once; the
/// error says the zones are pending. The redelivery completes W7 (`zone_entered`, once) and
/// raises no second `blade_due`; a further redelivery publishes nothing.
pub async fn a_failed_zone_step_still_publishes_blade_due_once(factory: &dyn WatchFactory) {
    use crate::faults::FaultyWatch;
    use swath_application::IngestError;

    let h = WatchHarness::new(factory, 60_000).await;
    let f = &h.fleet;
    h.add_zone(0, 0x41, "Roses", lawn_rectangle((0, 0), (100, 100)))
        .await;
    let faulty = FaultyWatch::new(h.watch.clone(), h.zones.clone());
    let ingest = Ingest::new(h.store.telemetry.clone(), h.bus.clone(), h.clock.clone())
        .with_zones(faulty.clone());
    // Two minutes of mowing inside the zone: the blade is due after one.
    let batch: Vec<Value> = (0..5)
        .map(|i| at(report(f, 0, i * 30, Activity::Mowing), 50.0, 50.0, 0.5))
        .collect();
    async fn record(ingest: &Ingest, batch: &[Value]) -> Result<Vec<StateOutcome>, IngestError> {
        let parsed = batch
            .iter()
            .map(|r| ingest.parse(r.to_string().as_bytes()))
            .collect();
        ingest.record_states(parsed).await
    }

    faulty.fail_zone_commits(1);
    match record(&ingest, &batch).await {
        Err(IngestError::ZonesPending { outcomes, .. }) => {
            assert_eq!(outcomes, vec![StateOutcome::Stored; 5]);
        }
        other => panic!("expected the zones to be pending, got {other:?}"),
    }
    assert_eq!(
        h.published_kinds(),
        vec!["blade_due"],
        "the committed event is published although the zone step failed"
    );
    let (telemetry, rows) = h.rows().await;
    assert_eq!(telemetry.history.len(), 5, "the rows are stored");
    assert_eq!(rows.events.len(), 1, "only blade_due is stored");
    assert!(rows.zone_watches.iter().all(|z| z.occupancy.is_empty()));

    // The redelivery: W7 completes, W6 raises nothing again.
    let outcomes = record(&ingest, &batch)
        .await
        .expect("the redelivery succeeds");
    assert_eq!(outcomes, vec![StateOutcome::Stored; 5]);
    assert_eq!(h.published_kinds(), vec!["blade_due", "zone_entered"]);
    let again = record(&ingest, &batch).await.expect("another redelivery");
    assert_eq!(again, vec![StateOutcome::Stored; 5]);
    assert_eq!(
        h.published_kinds(),
        vec!["blade_due", "zone_entered"],
        "each event published exactly once"
    );
    let (telemetry_after, rows) = h.rows().await;
    assert_eq!(telemetry_after, telemetry, "nothing stored twice");
    let kinds: Vec<&str> = rows.events.iter().map(|e| e.kind().as_str()).collect();
    assert_eq!(kinds.len(), 2);
    assert!(kinds.contains(&"blade_due") && kinds.contains(&"zone_entered"));
    let alerts = open_alerts(&h, None).await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].kind, AlertKind::BladeDue);
}
