//! The notification side's contract suite: the watcher, W6's events and alerts, virtual zones
//! (W7), the offline sweep, blade resets, the feeds and the busy check. Every scenario is a
//! `pub async fn` taking a [`WatchFactory`], run against the memory store always and against
//! PostgreSQL when `SWATH_TEST_DATABASE_URL` is set. Scenarios go through the use cases, as
//! production does.

use crate::support::{trace_start, Fleet, RecordingBus, TestStore};
use crate::traces::{build_trace, ingest_clock, split, Step};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{
    AlertQuery, Clock, EventQuery, Geofence, ManualClock, WatchRows, WatchStore,
};
use swath_application::{Ingest, SchedulerStatus, Watcher};
use swath_domain::watch::zones::Zone;
use swath_domain::watch::{AlertKind, EventKind, GeoPolygon, DEFAULT_OFFLINE_AFTER};
use swath_domain::{Activity, MowerId, StateOutcome, TelemetryRows};
use uuid::Uuid;

/// Makes a fresh, empty store, seen as a telemetry store and as a watch store.
#[async_trait]
pub trait WatchFactory: Send + Sync {
    async fn fresh(&self) -> (TestStore, Arc<dyn WatchStore>);
}

/// A store with the fleet seeded, ingest (with zones), the watcher and the busy check on top.
pub struct WatchHarness {
    pub store: TestStore,
    pub watch: Arc<dyn WatchStore>,
    pub ingest: Arc<Ingest>,
    pub watcher: Arc<Watcher>,
    pub scheduler: Arc<SchedulerStatus>,
    pub bus: Arc<RecordingBus>,
    pub clock: Arc<ManualClock>,
    pub fleet: Fleet,
}

impl WatchHarness {
    pub async fn new(factory: &dyn WatchFactory, blade_threshold_ms: i64) -> Self {
        let (store, watch) = factory.fresh().await;
        let fleet = Fleet::new();
        fleet
            .seed(store.directory.as_ref(), blade_threshold_ms)
            .await;
        let bus = Arc::new(RecordingBus::default());
        let clock = Arc::new(ManualClock::new(ingest_clock()));
        let ingest = Arc::new(
            Ingest::new(store.telemetry.clone(), bus.clone(), clock.clone())
                .with_zones(watch.clone()),
        );
        let watcher = Arc::new(Watcher::new(
            watch.clone(),
            bus.clone(),
            clock.clone(),
            DEFAULT_OFFLINE_AFTER,
        ));
        let scheduler = Arc::new(SchedulerStatus::new(watch.clone(), clock.clone()));
        Self {
            store,
            watch,
            ingest,
            watcher,
            scheduler,
            bus,
            clock,
            fleet,
        }
    }

    /// Ingests one batch, then watches it (as the two consumers would), then the busy check.
    pub async fn both(&self, reports: &[Value]) -> Vec<StateOutcome> {
        self.ingest(reports).await;
        self.watch(reports).await
    }

    pub async fn ingest(&self, reports: &[Value]) -> Vec<StateOutcome> {
        let batch = reports
            .iter()
            .map(|r| self.ingest.parse(r.to_string().as_bytes()))
            .collect();
        self.ingest
            .record_states(batch)
            .await
            .expect("the store accepts the batch")
    }

    pub async fn watch(&self, reports: &[Value]) -> Vec<StateOutcome> {
        let batch: Vec<_> = reports
            .iter()
            .map(|r| self.watcher.parse(r.to_string().as_bytes()))
            .collect();
        let outcomes = self
            .watcher
            .on_states(&batch)
            .await
            .expect("the store accepts the batch");
        let accepted: Vec<_> = batch
            .into_iter()
            .zip(&outcomes)
            .filter(|(_, o)| **o == StateOutcome::Stored)
            .filter_map(|(r, _)| r.ok())
            .collect();
        self.scheduler
            .record(&accepted)
            .await
            .expect("busy statuses");
        outcomes
    }

    fn mowers(&self) -> Vec<MowerId> {
        let mut mowers = self.fleet.mowers.to_vec();
        mowers.push(self.fleet.unknown_mower);
        mowers
    }

    pub async fn rows(&self) -> (TelemetryRows, WatchRows) {
        let mowers = self.mowers();
        (
            self.store.telemetry.export(&mowers).await.expect("export"),
            self.watch.export_watch(&mowers).await.expect("export"),
        )
    }

    /// The kinds of the events published so far, in order.
    pub fn published_kinds(&self) -> Vec<String> {
        self.bus
            .published()
            .iter()
            .map(|(subject, _, _)| subject.rsplit('.').next().unwrap().to_owned())
            .collect()
    }

    pub async fn put_geofence(&self, mower: usize, polygon: GeoPolygon) -> Uuid {
        let version = Uuid::now_v7();
        self.watch
            .put_geofence(Geofence {
                mower_id: self.fleet.mowers[mower],
                account_id: self.fleet.account_of(self.fleet.mowers[mower]),
                version,
                polygon,
                updated_at: ingest_clock(),
            })
            .await
            .expect("put geofence");
        version
    }

    pub async fn add_zone(&self, mower: usize, id: u128, name: &str, polygon: GeoPolygon) {
        self.watch
            .create_zone(Zone {
                id: Uuid::from_u128(id),
                mower_id: self.fleet.mowers[mower],
                account_id: self.fleet.account_of(self.fleet.mowers[mower]),
                name: name.into(),
                polygon,
                created_at: ingest_clock(),
                updated_at: ingest_clock(),
            })
            .await
            .expect("create zone");
    }
}

/// A rectangle of the trace's lawn (`build_trace` offsets, in 1e-5 degrees from 52.5 N 13.4 E).
pub fn lawn_rectangle(from: (i32, i32), to: (i32, i32)) -> GeoPolygon {
    let lat = |d: i32| 52.5 + f64::from(d) * 1e-5;
    let lon = |d: i32| 13.4 + f64::from(d) * 1e-5;
    GeoPolygon::from_geojson(&json!({
        "type": "Polygon",
        "coordinates": [[
            [lon(from.1), lat(from.0)], [lon(to.1), lat(from.0)], [lon(to.1), lat(to.0)],
            [lon(from.1), lat(to.0)], [lon(from.1), lat(from.0)]
        ]]
    }))
    .unwrap()
}

/// Geofences and zones over the trace's lawn, the same in every harness.
async fn furnish(h: &WatchHarness) {
    h.put_geofence(0, lawn_rectangle((100, 100), (400, 400)))
        .await;
    h.put_geofence(2, lawn_rectangle((0, 0), (250, 500))).await;
    h.add_zone(0, 0x21, "Roses", lawn_rectangle((0, 0), (200, 200)))
        .await;
    h.add_zone(0, 0x22, "Pond", lawn_rectangle((150, 150), (300, 300)))
        .await;
    h.add_zone(1, 0x23, "Back", lawn_rectangle((250, 0), (500, 500)))
        .await;
}

/// The geofence versions are new UUIDs in every harness: compare watches without them.
fn comparable(mut rows: WatchRows) -> WatchRows {
    for w in &mut rows.watches {
        w.geofence_version = w.geofence_version.map(|_| Uuid::nil());
    }
    for e in &mut rows.events {
        use swath_domain::watch::EventDetail::*;
        match &mut e.detail {
            GeofenceLeft {
                geofence_version, ..
            }
            | GeofenceReturned {
                geofence_version, ..
            } => *geofence_version = Uuid::nil(),
            _ => {}
        }
    }
    rows
}

/// What one consumer published, in order: ingestion (W6, W7) or the watcher. The two consumers
/// interleave differently in batches than one state at a time; each keeps its own order.
fn published_without_versions(
    h: &WatchHarness,
    by_ingest: bool,
) -> Vec<(String, Value, Option<String>)> {
    let ingest_kinds = ["blade_due", "zone_entered", "zone_left"];
    h.bus
        .published()
        .into_iter()
        .filter(|(subject, _, _)| {
            ingest_kinds.contains(&subject.rsplit('.').next().unwrap()) == by_ingest
        })
        .map(|(subject, payload, dedup)| {
            let mut v: Value = serde_json::from_slice(&payload).unwrap();
            if v.get("geofence_version").is_some() {
                v["geofence_version"] = json!(null);
            }
            (subject, v, dedup)
        })
        .collect()
}

/// Random traces in random batch splits give the same outcomes, events (stored and published),
/// alerts, watch rows, zone watches and busy statuses as the same states one at a time.
pub async fn batched_equals_one_at_a_time(
    factory: &dyn WatchFactory,
    steps: &[Step],
    sizes: &[usize],
) {
    let batched = WatchHarness::new(factory, 600_000).await;
    let single = WatchHarness::new(factory, 600_000).await;
    furnish(&batched).await;
    furnish(&single).await;
    let reports = build_trace(&batched.fleet, steps);

    let mut batched_outcomes = Vec::new();
    for batch in split(&reports, sizes) {
        batched_outcomes.extend(batched.both(&batch).await);
    }
    let mut single_outcomes = Vec::new();
    for report in &reports {
        single_outcomes.extend(single.both(std::slice::from_ref(report)).await);
    }
    assert_eq!(batched_outcomes, single_outcomes, "outcomes differ");
    let (bt, bw) = batched.rows().await;
    let (st, sw) = single.rows().await;
    assert_eq!(bt, st, "telemetry rows differ");
    assert_eq!(comparable(bw), comparable(sw), "watch rows differ");
    for by_ingest in [true, false] {
        assert!(
            published_without_versions(&batched, by_ingest)
                == published_without_versions(&single, by_ingest),
            "published events differ (ingestion: {by_ingest})"
        );
    }
}

fn report(fleet: &Fleet, mower: usize, seconds: i64, activity: Activity) -> Value {
    let mower_id = fleet.mowers[mower];
    json!({
        "mower_id": mower_id,
        "account_id": fleet.account_of(mower_id),
        "observed_at": (trace_start() + Duration::seconds(seconds)).to_rfc3339(),
        "activity": activity.as_str(),
        "blade_on": activity == Activity::Mowing,
        "battery_percent": 70,
    })
}

/// `report` at a position given in 1e-5 degrees of the lawn, with an accuracy.
fn at(mut r: Value, north: f64, east: f64, accuracy_m: f64) -> Value {
    r["position"] = json!({
        "lat": 52.5 + north * 1e-5,
        "lon": 13.4 + east * 1e-5,
        "accuracy_m": accuracy_m,
    });
    r
}

/// A batch watched again after its commit (a redelivery) derives nothing and changes nothing;
/// an out-of-order older state derives nothing either.
pub async fn redelivery_and_older_states_derive_nothing(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    let batch = vec![
        report(f, 0, 0, Activity::Docked),
        report(f, 0, 10, Activity::Mowing),
        report(f, 0, 20, Activity::Error),
        report(f, 1, 5, Activity::Error),
    ];
    h.both(&batch).await;
    let before = h.rows().await;
    let published = h.bus.published().len();
    assert_eq!(
        h.published_kinds(),
        vec![
            "mowing_started",
            "error_raised",
            "mowing_finished",
            "error_raised"
        ]
    );
    let outcomes = h.both(&batch).await;
    assert!(outcomes.iter().all(|o| *o == StateOutcome::Stored));
    assert_eq!(h.rows().await, before, "a redelivery changes nothing");
    assert_eq!(h.bus.published().len(), published, "and publishes nothing");

    // Older than what was watched: an error cleared 5 s before the newest state.
    h.both(&[report(f, 0, 15, Activity::Docked)]).await;
    assert_eq!(h.bus.published().len(), published);
    assert_eq!(h.rows().await.1, before.1);
}

/// Events are stored in the feed, published on `notifications.mower.<id>.<kind>` with their id as
/// the de-duplication id, and open and clear one alert per kind and mower.
pub async fn events_are_stored_published_and_alert(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    let mut error = report(f, 0, 10, Activity::Error);
    error["error_code"] = json!("E_STUCK");
    let mut low = report(f, 1, 10, Activity::Paused);
    low["battery_percent"] = json!(12);
    h.both(&[report(f, 0, 0, Activity::Docked), error, low])
        .await;

    let published = h.bus.published();
    assert_eq!(published.len(), 2);
    let (subject, payload, dedup) = &published[0];
    assert_eq!(
        subject,
        &format!("notifications.mower.{}.error_raised", f.mowers[0])
    );
    let event: Value = serde_json::from_slice(payload).unwrap();
    assert_eq!(event["kind"], "error_raised");
    assert_eq!(event["error_code"], "E_STUCK");
    assert_eq!(dedup.as_deref(), event["id"].as_str());

    let feed = h
        .watch
        .events(&EventQuery {
            account_id: f.account_a,
            mowers: None,
            kind: None,
            before: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(feed.len(), 2, "both events are in the feed");
    let alerts = open_alerts(&h, None).await;
    let mut kinds: Vec<_> = alerts.iter().map(|a| a.kind).collect();
    kinds.sort();
    assert_eq!(kinds, vec![AlertKind::Error, AlertKind::BatteryLow]);
    assert_eq!(
        alerts[0].kind,
        AlertKind::Error,
        "the more severe alert first"
    );

    // Cleared: the error ends, the battery is recharged to 30 %.
    let mut charged = report(f, 1, 20, Activity::Charging);
    charged["battery_percent"] = json!(30);
    h.both(&[report(f, 0, 20, Activity::Docked), charged]).await;
    assert!(open_alerts(&h, None).await.is_empty());
    let (_, rows) = h.rows().await;
    assert_eq!(rows.alerts.len(), 2);
    assert!(rows.alerts.iter().all(|a| a.cleared_at.is_some()));

    // The feed filters by mower and kind, and pages by cursor.
    let only = h
        .watch
        .events(&EventQuery {
            account_id: f.account_a,
            mowers: Some(vec![f.mowers[0]]),
            kind: Some(EventKind::ErrorCleared),
            before: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(only.len(), 1);
    let first = h
        .watch
        .events(&EventQuery {
            account_id: f.account_a,
            mowers: None,
            kind: None,
            before: None,
            limit: 2,
        })
        .await
        .unwrap();
    let rest = h
        .watch
        .events(&EventQuery {
            account_id: f.account_a,
            mowers: None,
            kind: None,
            before: Some(first[1].id),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(
        first.len() + rest.len(),
        3,
        "error raised/cleared, battery low"
    );
    assert!(first[0].id > first[1].id && first[1].id > rest[0].id);
    let foreign = h
        .watch
        .events(&EventQuery {
            account_id: f.account_b,
            mowers: None,
            kind: None,
            before: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert!(foreign.is_empty(), "another account sees none of them");
}

async fn open_alerts(
    h: &WatchHarness,
    mowers: Option<Vec<MowerId>>,
) -> Vec<swath_domain::watch::Alert> {
    h.watch
        .open_alerts(&AlertQuery {
            account_id: h.fleet.account_a,
            mowers,
            kind: None,
            after: None,
            limit: 100,
        })
        .await
        .unwrap()
}

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

/// The sweep raises `went_offline` for a mower silent for the offline period, once; its next
/// state raises `came_online` and clears the alert.
pub async fn silent_mowers_go_offline_and_come_back(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    h.both(&[
        report(f, 0, 0, Activity::Docked),
        report(f, 1, 0, Activity::Docked),
    ])
    .await;
    h.clock.advance(Duration::seconds(300));
    h.both(&[report(f, 1, 300, Activity::Docked)]).await;
    h.clock.advance(Duration::seconds(299));
    assert_eq!(
        h.watcher.sweep_offline().await.unwrap(),
        0,
        "599 s is not silent"
    );
    h.clock.advance(Duration::seconds(2));
    assert_eq!(h.watcher.sweep_offline().await.unwrap(), 1, "only mower 0");
    assert_eq!(h.watcher.sweep_offline().await.unwrap(), 0, "once");
    assert_eq!(h.published_kinds(), vec!["went_offline"]);
    let alerts = open_alerts(&h, None).await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(
        (alerts[0].kind, alerts[0].mower_id),
        (AlertKind::Offline, f.mowers[0])
    );
    assert_eq!(alerts[0].raised_at, ingest_clock() + DEFAULT_OFFLINE_AFTER);

    h.both(&[report(f, 0, 900, Activity::Docked)]).await;
    assert_eq!(h.published_kinds(), vec!["went_offline", "came_online"]);
    assert!(open_alerts(&h, None).await.is_empty());
}

/// W6 through the whole path: `blade_due` is stored in the feed with an open alert, in the
/// ingest transaction; a blade reset clears the alert and re-arms W6.
pub async fn blade_due_alerts_until_the_blade_is_reset(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 60_000).await;
    let f = &h.fleet;
    let mowing: Vec<Value> = (0..4)
        .map(|i| report(f, 0, i * 30, Activity::Mowing))
        .collect();
    h.ingest(&mowing).await;
    h.ingest(&mowing).await; // a redelivery raises nothing
    assert_eq!(h.published_kinds(), vec!["blade_due"]);
    let alerts = open_alerts(&h, None).await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].kind, AlertKind::BladeDue);
    let (_, rows) = h.rows().await;
    assert_eq!(rows.events.len(), 1);
    assert_eq!(rows.events[0].id, alerts[0].id);

    h.watch
        .reset_blade(f.mowers[0], ingest_clock())
        .await
        .unwrap();
    assert!(open_alerts(&h, None).await.is_empty());
    let health = h
        .store
        .telemetry
        .health(f.mowers[0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (health.blade_since_reset_ms, health.blade_due_raised),
        (0, false)
    );
    let more: Vec<Value> = (4..8)
        .map(|i| report(f, 0, i * 30, Activity::Mowing))
        .collect();
    h.ingest(&more).await;
    assert_eq!(h.published_kinds(), vec!["blade_due", "blade_due"]);
    assert_eq!(open_alerts(&h, None).await.len(), 1);
}

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
    let zone_watch = h.watch.zone_watch(f.mowers[1]).await.unwrap().unwrap();
    assert_eq!(zone_watch.occupancy.len(), 1);
    assert_eq!(zone_watch.occupancy[0].zone_id, Uuid::from_u128(0x32));
    assert!(h
        .watch
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
    let faulty = FaultyWatch::new(h.watch.clone());
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
    let faulty = FaultyWatch::new(h.watch.clone());
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
        let store = h.watch.clone();
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

/// The busy check, pinned with a manual clock: an unchanged activity is written again after
/// 30 s (not 29 s) or after a move of 100 m; a changed activity at once; an older report never.
pub async fn the_busy_status_is_throttled(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    let busy = |h: &WatchHarness| {
        let watch = h.watch.clone();
        let mower = h.fleet.mowers[0];
        async move { watch.busy(&[mower]).await.unwrap().pop().unwrap() }
    };
    let start = h.clock.now();
    h.watch(&[at(report(f, 0, 0, Activity::Mowing), 0.0, 0.0, 0.5)])
        .await;
    assert_eq!(busy(&h).await.written_at, start);

    h.clock.advance(Duration::seconds(29));
    h.watch(&[at(report(f, 0, 29, Activity::Mowing), 10.0, 0.0, 0.5)])
        .await;
    let status = busy(&h).await;
    assert_eq!(
        (status.written_at, status.observed_at),
        (start, trace_start()),
        "29 s: not written"
    );

    h.clock.advance(Duration::seconds(1));
    h.watch(&[at(report(f, 0, 30, Activity::Mowing), 20.0, 0.0, 0.5)])
        .await;
    let status = busy(&h).await;
    assert_eq!(
        status.written_at,
        start + Duration::seconds(30),
        "30 s: written"
    );

    h.clock.advance(Duration::seconds(1));
    // 1e-5° of latitude is 1.11 m: 95 m north of the written position, then 101 m.
    h.watch(&[at(
        report(f, 0, 31, Activity::Mowing),
        20.0 + 85.5,
        0.0,
        0.5,
    )])
    .await;
    assert_eq!(busy(&h).await.written_at, start + Duration::seconds(30));
    h.watch(&[at(
        report(f, 0, 32, Activity::Mowing),
        20.0 + 91.0,
        0.0,
        0.5,
    )])
    .await;
    let status = busy(&h).await;
    assert_eq!(
        status.written_at,
        start + Duration::seconds(31),
        "100 m: written"
    );

    h.watch(&[report(f, 0, 33, Activity::Returning)]).await;
    assert_eq!(busy(&h).await.activity, Activity::Returning, "at once");
    assert!(busy(&h).await.busy());

    h.clock.advance(Duration::seconds(60));
    h.watch(&[report(f, 0, 1, Activity::Docked)]).await;
    let status = busy(&h).await;
    assert_eq!(
        (status.activity, status.observed_at),
        (Activity::Returning, trace_start() + Duration::seconds(33)),
        "an older report is never written"
    );
    // Older reports go straight to the store, too: it keeps the newer status.
    let mut older = status.clone();
    older.observed_at = trace_start();
    older.activity = Activity::Docked;
    h.watch.write_busy(&[older]).await.unwrap();
    assert_eq!(busy(&h).await, status);
}

/// Generates one `#[test]` per scenario of this suite for an adapter, each with a factory of its
/// own (the shape of every contract suite, docs/testing.md):
///
/// ```ignore
/// swath_tests::watch_contract_suite!(
///     #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
///     factory = Memory,
/// );
/// ```
///
/// `factory` is an expression evaluated once per test. A second attribute after the test
/// attribute goes on every test too: an adapter that needs a server passes
/// `#[cfg_attr(…, ignore = "…")]`, so that its tests are reported as ignored, never as passed,
/// when the server's variable is not set.
#[macro_export]
macro_rules! watch_contract_suite {
    (#[$test:meta] factory = $factory:expr $(,)?) => {
        $crate::watch_contract_suite!(
            #[$test] #[doc = "A scenario of the notification side's contract."] factory = $factory
        );
    };
    (#[$test:meta] #[$gate:meta] factory = $factory:expr $(,)?) => {
        $crate::factory_contract_tests!(#[$test] #[$gate] watch_contract, $factory;
            redelivery_and_older_states_derive_nothing,
            events_are_stored_published_and_alert,
            a_geofence_is_parsed_once_per_version,
            jitter_within_accuracy_raises_no_alarm,
            silent_mowers_go_offline_and_come_back,
            blade_due_alerts_until_the_blade_is_reset,
            zones_are_entered_and_left,
            a_failed_zone_step_still_publishes_blade_due_once,
            a_geofence_replaced_during_a_watcher_batch_never_clears_the_alarm,
            the_busy_status_is_throttled,
        );
    };
}

/// The instant `seconds` after the trace start (for PostgreSQL-only scenarios).
pub fn trace_at(seconds: i64) -> DateTime<Utc> {
    trace_start() + Duration::seconds(seconds)
}
