//! The geofence store's contract ([`swath_application::ports::GeofenceStore`], docs/rules.md §4):
//! geofences set and replaced while the watcher judges positions against them, each version
//! parsed once and judged beyond the position's accuracy, through the use cases, over the same
//! [`WatchFactory`] as the other suites of the notification side.
use crate::traces::ingest_clock;
use crate::watch_contract::{at, lawn_rectangle, open_alerts, report, WatchFactory, WatchHarness};
use serde_json::Value;
use swath_application::Watcher;
use swath_domain::watch::{AlertKind, EventKind, GeoPolygon, Geofence, DEFAULT_OFFLINE_AFTER};
use swath_domain::{Activity, StateOutcome};
use uuid::Uuid;

/// A geofence is parsed once per (mower, version), however many states and batches arrive.
pub async fn a_geofence_is_parsed_once_per_version(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    h.put_geofence(0, lawn_rectangle((0, 0), (500, 500))).await;
    h.put_geofence(1, lawn_rectangle((0, 0), (500, 500))).await;
    for batch in 0..20 {
        let reports: Vec<Value> = (0..10)
            .map(|i| {
                let s = batch * 10 + i;
                at(
                    report(f, (i % 2) as usize, s, Activity::Mowing),
                    100.0 + s as f64,
                    100.0,
                    0.5,
                )
            })
            .collect();
        h.watch(&reports).await;
    }
    assert_eq!(
        h.watcher.geofence_parses(),
        2,
        "two mowers, one version each"
    );
    h.put_geofence(0, lawn_rectangle((0, 0), (100, 100))).await;
    for s in 300..310 {
        h.watch(&[at(report(f, 0, s, Activity::Mowing), 200.0, 200.0, 0.5)])
            .await;
    }
    assert_eq!(h.watcher.geofence_parses(), 3, "the new version, once");
    assert_eq!(h.published_kinds(), vec!["geofence_left"]);
}

/// Positions wobbling across the fence within their accuracy raise no alarm; one clearly outside
/// does, once.
pub async fn jitter_within_accuracy_raises_no_alarm(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    // The fence's eastern edge is at 300e-5° of longitude; 1e-5° is 0.68 m at 52.5° N.
    h.put_geofence(0, lawn_rectangle((0, 0), (300, 300))).await;
    let wobble: Vec<Value> = (0..40)
        .map(|i| {
            // ±0.7 m around the edge, with a 3 m accuracy.
            let east = 300.0 + if i % 2 == 0 { 1.0 } else { -1.0 };
            at(report(f, 0, i, Activity::Mowing), 150.0, east, 3.0)
        })
        .collect();
    for batch in wobble.chunks(7) {
        h.both(batch).await;
    }
    assert!(h.published_kinds().is_empty(), "{:?}", h.published_kinds());
    assert!(open_alerts(&h, None).await.is_empty());
    // 7 m outside with a 3 m accuracy: the theft alarm.
    h.both(&[at(report(f, 0, 50, Activity::Mowing), 150.0, 310.0, 3.0)])
        .await;
    h.both(&[at(report(f, 0, 51, Activity::Mowing), 150.0, 311.0, 3.0)])
        .await;
    assert_eq!(h.published_kinds(), vec!["geofence_left"]);
    let alerts = open_alerts(&h, None).await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].kind, AlertKind::Geofence);
    assert_eq!(alerts[0].severity, swath_domain::watch::Severity::Critical);
}

/// A geofence replaced while a watcher batch runs (after the batch read its rows, before it
/// judged them) is never taken for "no geofence": the batch judges against the version it read
/// (one the watcher has not parsed yet: an operator editing the fence twice in a row), the next
/// batch against the new one. A mower outside the fence keeps its alarm through such
/// replacements, and the alert is only cleared by a `geofence_returned` event, once the current
/// fence contains it.
pub async fn a_geofence_replaced_during_a_watcher_batch_never_clears_the_alarm(
    factory: &dyn WatchFactory,
) {
    use crate::faults::FaultyWatch;

    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    let faulty = FaultyWatch::new(h.watch.clone(), h.zones.clone());
    let watcher = Watcher::new(
        faulty.clone(),
        h.bus.clone(),
        h.clock.clone(),
        DEFAULT_OFFLINE_AFTER,
    );
    let watch = |seconds: i64, north: f64| {
        let report = at(report(f, 0, seconds, Activity::Mowing), north, 150.0, 0.5);
        let parsed = watcher.parse(report.to_string().as_bytes());
        let watcher = &watcher;
        async move {
            let outcomes = watcher.on_states(&[parsed]).await.expect("watched");
            assert_eq!(outcomes, vec![StateOutcome::Stored]);
        }
    };
    let replace = |polygon: GeoPolygon| {
        let store = h.geofences.clone();
        let mower_id = f.mowers[0];
        let account_id = f.account_of(mower_id);
        async move {
            store
                .put_geofence(Geofence {
                    mower_id,
                    account_id,
                    version: Uuid::now_v7(),
                    polygon,
                    updated_at: ingest_clock(),
                })
                .await
                .expect("replace the geofence");
        }
    };
    let geofence_alerts = |h: &WatchHarness| {
        let watch = h.watch.clone();
        let mower = h.fleet.mowers[0];
        async move {
            let rows = watch.export_watch(&[mower]).await.unwrap();
            let alerts: Vec<_> = rows
                .alerts
                .into_iter()
                .filter(|a| a.kind == AlertKind::Geofence)
                .collect();
            (alerts, rows.watches, rows.events)
        }
    };

    // 400e-5° north of a fence that ends at 300: the theft alarm.
    h.put_geofence(0, lawn_rectangle((0, 0), (300, 300))).await;
    watch(0, 400.0).await;
    assert_eq!(h.published_kinds(), vec!["geofence_left"]);

    // Replaced by larger fences that still leave the mower outside: once before the next batch
    // (a version it has not parsed), and again while that batch runs.
    replace(lawn_rectangle((0, 0), (340, 340))).await;
    faulty.after_next_watch_read(replace(lawn_rectangle((0, 0), (350, 350))));
    watch(10, 410.0).await;
    assert!(faulty.hook_ran());
    let (alerts, watches, _) = geofence_alerts(&h).await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].cleared_at, None, "the alarm is still open");
    assert!(watches[0].outside_geofence);
    // The next batch judges against the new fence: still outside, nothing new.
    watch(20, 420.0).await;
    assert_eq!(h.published_kinds(), vec!["geofence_left"]);

    // Replaced by a fence that contains the mower, again during a batch: that batch still judges
    // against the fence it read; the next one brings the mower back, with its event.
    replace(lawn_rectangle((0, 0), (360, 360))).await;
    faulty.after_next_watch_read(replace(lawn_rectangle((0, 0), (600, 600))));
    watch(30, 430.0).await;
    assert!(faulty.hook_ran());
    assert_eq!(h.published_kinds(), vec!["geofence_left"]);
    assert_eq!(geofence_alerts(&h).await.0[0].cleared_at, None);
    watch(40, 440.0).await;
    assert_eq!(
        h.published_kinds(),
        vec!["geofence_left", "geofence_returned"]
    );
    let (alerts, watches, events) = geofence_alerts(&h).await;
    assert!(!watches[0].outside_geofence);
    let returned: Vec<_> = events
        .iter()
        .filter(|e| e.kind() == EventKind::GeofenceReturned)
        .map(|e| e.observed_at)
        .collect();
    assert_eq!(
        alerts
            .iter()
            .filter_map(|a| a.cleared_at)
            .collect::<Vec<_>>(),
        returned,
        "the alert was cleared by the return, and only by it"
    );
    assert_eq!(watcher.geofence_parses(), 5, "each version parsed once");
}
