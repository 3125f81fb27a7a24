//! The watcher's store contract ([`WatchStore`]: its units of work, the offline sweep, the busy
//! statuses), and what the notification side's suites share: the factory of the four ports
//! ([`WatchFactory`]), the harness that drives them through the use cases ([`WatchHarness`]) and
//! the property comparing batches with one state at a time. The other ports of the notification
//! side have suites of their own: `zone_contract` ([`ZoneStore`], W7), `geofence_contract`
//! ([`GeofenceStore`]) and `feed_contract` ([`NotificationFeed`]: events, alerts, blade resets).
//! Every scenario is a `pub async fn` taking a [`WatchFactory`], run against the memory store
//! always and against PostgreSQL when `SWATH_TEST_DATABASE_URL` is set. Scenarios go through the
//! use cases, as production does.

use crate::support::{trace_start, Fleet, RecordingBus, TestStore};
use crate::traces::{batched_and_single, build_trace, ingest_clock, Step};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{
    AlertQuery, Clock, GeofenceStore, ManualClock, NotificationFeed, NotificationPorts, WatchRows,
    WatchStore, ZoneStore,
};
use swath_application::{Ingest, SchedulerStatus, Watcher};
use swath_domain::watch::zones::Zone;
use swath_domain::watch::{AlertKind, GeoPolygon, Geofence, DEFAULT_OFFLINE_AFTER};
use swath_domain::{Activity, MowerId, StateOutcome, TelemetryRows};
use uuid::Uuid;

mod sessions;
pub use sessions::{
    a_docked_mower_that_goes_quiet_ends_its_session_from_the_sweep,
    a_pending_session_survives_every_batch_boundary, a_session_ends_once_whatever_the_batches,
};

/// Makes a fresh, empty store, seen as a telemetry store and through the notification side's
/// ports. Every suite of the notification side takes the same factory.
#[async_trait]
pub trait WatchFactory: Send + Sync {
    async fn fresh(&self) -> (TestStore, NotificationPorts);
}

/// The memory store behind every port of the notification side.
pub struct MemoryWatch;

#[async_trait]
impl WatchFactory for MemoryWatch {
    async fn fresh(&self) -> (TestStore, NotificationPorts) {
        let store = swath_memory::MemoryStore::new(swath_memory::MemoryStoreSettings::default());
        (
            TestStore::memory(store.clone()),
            NotificationPorts::of(Arc::new(store)),
        )
    }
}

/// A fresh PostgreSQL database behind every port of the notification side.
pub struct PostgresWatch(pub crate::postgres::PostgresFactory);

#[async_trait]
impl WatchFactory for PostgresWatch {
    async fn fresh(&self) -> (TestStore, NotificationPorts) {
        let store = self.0.fresh_store().await;
        (
            TestStore {
                directory: Arc::new(store.clone()),
                telemetry: Arc::new(store.clone()),
                sessions: Arc::new(store.clone()),
                postgres: Some(store.clone()),
            },
            NotificationPorts::of(Arc::new(store)),
        )
    }
}

/// A store with the fleet seeded, ingest (with zones), the watcher and the busy check on top.
pub struct WatchHarness {
    pub store: TestStore,
    pub watch: Arc<dyn WatchStore>,
    pub zones: Arc<dyn ZoneStore>,
    pub geofences: Arc<dyn GeofenceStore>,
    pub feed: Arc<dyn NotificationFeed>,
    pub ingest: Arc<Ingest>,
    pub watcher: Arc<Watcher>,
    pub scheduler: Arc<SchedulerStatus>,
    pub bus: Arc<RecordingBus>,
    pub clock: Arc<ManualClock>,
    pub fleet: Fleet,
}

impl WatchHarness {
    pub async fn new(factory: &dyn WatchFactory, blade_threshold_ms: i64) -> Self {
        let (
            store,
            NotificationPorts {
                watch,
                zones,
                geofences,
                feed,
            },
        ) = factory.fresh().await;
        let fleet = Fleet::new();
        fleet
            .seed(store.directory.as_ref(), blade_threshold_ms)
            .await;
        let bus = Arc::new(RecordingBus::default());
        let clock = Arc::new(ManualClock::new(ingest_clock()));
        let ingest = Arc::new(
            Ingest::new(store.telemetry.clone(), bus.clone(), clock.clone())
                .with_zones(zones.clone()),
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
            zones,
            geofences,
            feed,
            ingest,
            watcher,
            scheduler,
            bus,
            clock,
            fleet,
        }
    }

    /// The same harness with W8's merge gap `gap` in the ingest and the watcher.
    pub fn with_merge_gap(mut self, gap: Duration) -> Self {
        self.ingest = Arc::new(
            Ingest::new(
                self.store.telemetry.clone(),
                self.bus.clone(),
                self.clock.clone(),
            )
            .with_zones(self.zones.clone())
            .with_session_merge_gap(gap),
        );
        self.watcher = Arc::new(
            Watcher::new(
                self.watch.clone(),
                self.bus.clone(),
                self.clock.clone(),
                DEFAULT_OFFLINE_AFTER,
            )
            .with_session_merge_gap(gap),
        );
        self
    }

    /// Ingests one batch, then watches it (as the two consumers would), then the busy check.
    pub async fn both(&self, reports: &[Value]) -> Vec<StateOutcome> {
        self.ingest(reports).await;
        self.watch(reports).await
    }

    pub async fn ingest(&self, reports: &[Value]) -> Vec<StateOutcome> {
        crate::support::ingest_json(&self.ingest, reports).await
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
        self.geofences
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
        self.zones
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

    let (batched_outcomes, single_outcomes) = batched_and_single(
        &reports,
        sizes,
        async |batch| batched.both(batch).await,
        async |batch| single.both(batch).await,
    )
    .await;
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

pub(crate) fn report(fleet: &Fleet, mower: usize, seconds: i64, activity: Activity) -> Value {
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
pub(crate) fn at(mut r: Value, north: f64, east: f64, accuracy_m: f64) -> Value {
    r["position"] = json!({
        "lat": 52.5 + north * 1e-5,
        "lon": 13.4 + east * 1e-5,
        "accuracy_m": accuracy_m,
    });
    r
}

/// The open alerts of account A (of `mowers` when given), at most 100.
pub(crate) async fn open_alerts(
    h: &WatchHarness,
    mowers: Option<Vec<MowerId>>,
) -> Vec<swath_domain::watch::Alert> {
    h.feed
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

/// The instant `seconds` after the trace start (for PostgreSQL-only scenarios).
pub fn trace_at(seconds: i64) -> DateTime<Utc> {
    trace_start() + Duration::seconds(seconds)
}
