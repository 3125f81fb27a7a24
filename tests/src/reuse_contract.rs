//! A mower id that changes hands (issue 35, decision 137): account A creates mower X with zones,
//! a geofence, states that raise events and alerts and a busy status; A deletes X while a
//! watcher batch and its busy check of X run (through the use case the route uses,
//! `FleetDirectory::delete_mower`); account B then creates a mower X. Nothing of A's
//! may be left in any store, and every per-mower read of B's X (through the use case the routes
//! use, `MowerReads`, and the feeds) must show nothing of A.
//!
//! The deletion lands at a random moment after the last state was handed to the ingest and the
//! watcher (a seeded sequence of waits), round after round: the rounds run against one store,
//! each with accounts and a mower of its own. The memory store and PostgreSQL run the same
//! scenario; PostgreSQL runs fewer rounds ([`ReuseFactory::rounds`]), each costing it a few
//! dozen statements.

use crate::support::{add_account, add_mower, add_site, ingest_json, mower, site, RecordingBus};
use crate::traces::ingest_clock;
use crate::watch_contract::{lawn_rectangle, MemoryWatch, PostgresWatch};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{
    AlertQuery, DirectoryAdmin, EventQuery, ManualClock, NotificationPorts, TelemetryStore,
    TimeWindow, TokenStore,
};
use swath_application::{
    Access, CreationLimits, CreationRate, FleetDirectory, Ingest, MowerReads, Revocations,
    SchedulerStatus, TokenAdmin, Watcher,
};
use swath_domain::watch::zones::Zone;
use swath_domain::watch::{Geofence, DEFAULT_OFFLINE_AFTER};
use swath_domain::{AccountId, MowerId, Principal, Scope, SiteId, StateOutcome};
use uuid::Uuid;

/// One store seen through every port a mower's data lives in.
pub struct ReuseStore {
    pub admin: Arc<dyn DirectoryAdmin>,
    pub tokens: Arc<dyn TokenStore>,
    pub telemetry: Arc<dyn TelemetryStore>,
    pub notifications: NotificationPorts,
}

/// Makes a fresh, empty [`ReuseStore`], and says how many rounds the scenario runs on it.
#[async_trait]
pub trait ReuseFactory: Send + Sync {
    async fn fresh(&self) -> ReuseStore;

    fn rounds(&self) -> usize;
}

#[async_trait]
impl ReuseFactory for MemoryWatch {
    async fn fresh(&self) -> ReuseStore {
        let store = Arc::new(swath_memory::MemoryStore::default());
        ReuseStore {
            admin: store.clone(),
            tokens: store.clone(),
            telemetry: store.clone(),
            notifications: NotificationPorts::of(store),
        }
    }

    fn rounds(&self) -> usize {
        300
    }
}

#[async_trait]
impl ReuseFactory for PostgresWatch {
    async fn fresh(&self) -> ReuseStore {
        let store = Arc::new(self.0.fresh_store().await);
        ReuseStore {
            admin: store.clone(),
            tokens: store.clone(),
            telemetry: store.clone(),
            notifications: NotificationPorts::of(store),
        }
    }

    fn rounds(&self) -> usize {
        60
    }
}

/// A seeded sequence of numbers (splitmix64): the moments of the deletions, the same on every
/// run.
struct Moments(u64);

impl Moments {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % below
    }
}

/// The use cases over one store, as `swath serve` wires them.
struct Services {
    store: ReuseStore,
    ingest: Arc<Ingest>,
    watcher: Arc<Watcher>,
    scheduler: Arc<SchedulerStatus>,
    data: MowerReads,
    fleet: FleetDirectory,
}

impl Services {
    fn new(store: ReuseStore) -> Self {
        let clock = Arc::new(ManualClock::new(ingest_clock()));
        let bus = Arc::new(RecordingBus::default());
        let ports = store.notifications.clone();
        let ingest = Arc::new(
            Ingest::new(store.telemetry.clone(), bus.clone(), clock.clone())
                .with_zones(ports.zones.clone()),
        );
        let watcher = Arc::new(Watcher::new(
            ports.watch.clone(),
            bus,
            clock.clone(),
            DEFAULT_OFFLINE_AFTER,
        ));
        let scheduler = Arc::new(SchedulerStatus::new(ports.watch.clone(), clock.clone()));
        let access = Access::new(
            store.admin.clone(),
            store.tokens.clone(),
            clock.clone(),
            Revocations::default(),
        );
        let data = MowerReads::new(
            access.clone(),
            store.admin.clone(),
            store.telemetry.clone(),
            Some(ports),
        );
        let rate = CreationRate::new(CreationLimits::default(), clock);
        let tokens = TokenAdmin::new(access.clone(), store.tokens.clone(), rate.clone());
        let fleet = FleetDirectory::new(
            access,
            store.admin.clone(),
            store.telemetry.clone(),
            tokens,
            rate,
        );
        Self {
            store,
            ingest,
            watcher,
            scheduler,
            data,
            fleet,
        }
    }

    /// The watcher's batch and the busy check on its accepted states, as the watcher consumer
    /// runs them.
    async fn watch(&self, reports: &[Value]) {
        let batch: Vec<_> = reports
            .iter()
            .map(|r| self.watcher.parse(r.to_string().as_bytes()))
            .collect();
        let outcomes = self
            .watcher
            .on_states(&batch)
            .await
            .expect("the watcher's batch");
        let accepted: Vec<_> = batch
            .into_iter()
            .zip(&outcomes)
            .filter(|(_, o)| **o == StateOutcome::Stored)
            .filter_map(|(r, _)| r.ok())
            .collect();
        self.scheduler
            .record(&accepted)
            .await
            .expect("the busy check");
    }
}

/// An account with one site.
async fn tenant(admin: &dyn DirectoryAdmin, name: &str) -> (AccountId, SiteId) {
    let account = AccountId(Uuid::now_v7());
    let site_id = SiteId(Uuid::now_v7());
    add_account(admin, account, name).await;
    add_site(admin, site(site_id, account, name, chrono_tz::UTC, 0)).await;
    (account, site_id)
}

fn principal(account: AccountId) -> Principal {
    Principal {
        account_id: account,
        scopes: vec![Scope::Read, Scope::Write],
        sites: None,
    }
}

/// A state of `mower` at `at`, inside the zone and the geofence.
fn state(account: AccountId, mower: MowerId, at: DateTime<Utc>, activity: &str) -> Value {
    json!({
        "mower_id": mower,
        "account_id": account,
        "observed_at": at.to_rfc3339(),
        "activity": activity,
        "error_code": if activity == "error" { Some("E1") } else { None },
        "battery_percent": 80,
        "blade_on": activity == "mowing",
        "position": {"lat": 52.5005, "lon": 13.4005, "accuracy_m": 0.5},
    })
}

/// A's mower X with a zone, a geofence, two states ingested and watched (an error raised: an
/// event, an alert, a busy status).
async fn furnish(s: &Services, account: AccountId, x: MowerId, at: DateTime<Utc>) {
    let ports = &s.store.notifications;
    ports
        .zones
        .create_zone(Zone {
            id: Uuid::now_v7(),
            mower_id: x,
            account_id: account,
            name: "Roses".into(),
            polygon: lawn_rectangle((0, 0), (100, 100)),
            created_at: at,
            updated_at: at,
        })
        .await
        .expect("A's zone");
    ports
        .geofences
        .put_geofence(Geofence {
            mower_id: x,
            account_id: account,
            version: Uuid::now_v7(),
            polygon: lawn_rectangle((0, 0), (200, 200)),
            updated_at: at,
        })
        .await
        .expect("A's geofence");
    let states = [
        state(account, x, at, "mowing"),
        state(account, x, at + Duration::seconds(1), "error"),
    ];
    for report in &states {
        let slice = std::slice::from_ref(report);
        assert_eq!(ingest_json(&s.ingest, slice).await, [StateOutcome::Stored]);
        s.watch(slice).await;
    }
    let rows = ports.watch.export_watch(&[x]).await.unwrap();
    assert!(
        !rows.events.is_empty() && !rows.alerts.is_empty() && !rows.busy.is_empty(),
        "A's mower has events, alerts and a busy status before it is deleted: {rows:?}"
    );
}

/// What every read of the store says of `x`: empty, whoever asks.
async fn nothing_stored(s: &Services, x: MowerId, round: usize) {
    let telemetry = s.store.telemetry.export(&[x]).await.unwrap();
    assert_eq!(
        telemetry,
        Default::default(),
        "round {round}: no telemetry row of a deleted mower"
    );
    let watch = s
        .store
        .notifications
        .watch
        .export_watch(&[x])
        .await
        .unwrap();
    assert_eq!(
        watch,
        Default::default(),
        "round {round}: no watch row, event, alert, zone watch or busy status of a deleted mower"
    );
    let ports = &s.store.notifications;
    assert!(
        ports.zones.zones(x).await.unwrap().is_empty(),
        "round {round}: zones"
    );
    assert!(
        ports.geofences.geofence(x).await.unwrap().is_none(),
        "round {round}: geofence"
    );
}

/// Every per-mower read of B's X, through the use case and the feeds: nothing of A's.
async fn b_sees_nothing_of_a(s: &Services, a: AccountId, b: AccountId, x: MowerId, round: usize) {
    let who = principal(b);
    let data = &s.data;
    assert_eq!(
        data.latest(&who, x).await.unwrap(),
        None,
        "round {round}: state"
    );
    assert_eq!(
        data.health(&who, x).await.unwrap().1,
        None,
        "round {round}: health"
    );
    let zones = data.zones(&who, x).await.unwrap();
    assert!(
        zones.zones.is_empty(),
        "round {round}: zones {:?}",
        zones.zones
    );
    assert!(
        zones.watch.is_none_or(|w| w.occupancy.is_empty()),
        "round {round}: zone occupancy"
    );
    assert_eq!(
        data.geofence(&who, x).await.unwrap(),
        None,
        "round {round}: geofence"
    );
    assert_eq!(
        data.busy(&who, x).await.unwrap(),
        None,
        "round {round}: busy"
    );
    let window = TimeWindow {
        from: None,
        to: None,
        after: None,
        limit: 100,
    };
    let telemetry = &s.store.telemetry;
    assert!(
        telemetry.history(x, &window).await.unwrap().rows.is_empty(),
        "round {round}: history"
    );
    assert!(
        telemetry.track(x, &window).await.unwrap().rows.is_empty(),
        "round {round}: track"
    );
    for account in [a, b] {
        let feed = &s.store.notifications.feed;
        let events = feed
            .events(&EventQuery {
                account_id: account,
                mowers: Some(vec![x]),
                kind: None,
                before: None,
                limit: 100,
            })
            .await
            .unwrap();
        assert!(events.is_empty(), "round {round}: events {events:?}");
        let alerts = feed
            .open_alerts(&AlertQuery {
                account_id: account,
                mowers: Some(vec![x]),
                kind: None,
                after: None,
                limit: 100,
            })
            .await
            .unwrap();
        assert!(alerts.is_empty(), "round {round}: alerts {alerts:?}");
    }
}

/// The scenario of the module, [`ReuseFactory::rounds`] times.
pub async fn a_re_created_mower_id_shows_nothing_of_its_previous_owner(factory: &dyn ReuseFactory) {
    let services = Arc::new(Services::new(factory.fresh().await));
    let mut moments = Moments(35);
    for round in 0..factory.rounds() {
        let s = &services;
        let admin = s.store.admin.as_ref();
        let (a, a_site) = tenant(admin, "A").await;
        let (b, b_site) = tenant(admin, "B").await;
        let x = MowerId(Uuid::new_v4());
        add_mower(admin, mower(x, a, a_site, "X", round)).await;
        let at = ingest_clock() - Duration::minutes(5);
        furnish(s, a, x, at).await;

        // The error clears: a state the ingest and the watcher (with its busy check) are busy
        // with while A deletes the mower.
        let last = vec![state(a, x, at + Duration::seconds(2), "mowing")];
        let ingesting = tokio::spawn({
            let (s, last) = (Arc::clone(s), last.clone());
            async move { ingest_json(&s.ingest, &last).await }
        });
        let watching = tokio::spawn({
            let s = Arc::clone(s);
            async move { s.watch(&last).await }
        });
        for _ in 0..moments.next(64) {
            tokio::task::yield_now().await;
        }
        if moments.next(4) == 0 {
            tokio::time::sleep(std::time::Duration::from_micros(moments.next(2000))).await;
        }
        s.fleet
            .delete_mower(&principal(a), x)
            .await
            .expect("A deletes X");
        ingesting.await.expect("the ingest task");
        watching.await.expect("the watcher task");

        nothing_stored(s, x, round).await;
        add_mower(admin, mower(x, b, b_site, "X", round)).await;
        b_sees_nothing_of_a(s, a, b, x, round).await;
    }
}
