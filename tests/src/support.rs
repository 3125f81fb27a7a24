//! Test support shared by every suite: a seeded directory, a store bundle built by a factory (one
//! per adapter), and a bus that records what use cases publish.

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use swath_application::ports::{BusError, Directory, TelemetryStore, TimeWindow, WatchStore};
use swath_application::publish_only::{PublishOnly, Publisher};
use swath_application::Ingest;
use swath_domain::watch::{Alert, AlertChanges, AlertKind, WatchChanges};
use swath_domain::{
    rules::DEFAULT_BLADE_THRESHOLD_MS, Account, AccountId, HealthTotals, Mower, MowerId, Site,
    SiteId, StateOutcome,
};
use uuid::Uuid;

pub mod http;

/// One adapter's store, seen through each port it implements.
#[derive(Clone)]
pub struct TestStore {
    pub directory: Arc<dyn Directory>,
    pub telemetry: Arc<dyn TelemetryStore>,
    /// W8's sessions, written by the telemetry batches.
    pub sessions: Arc<dyn swath_application::ports::SessionStore>,
    /// The PostgreSQL store itself, for scenarios that look at the database directly.
    pub postgres: Option<swath_postgres::PostgresStore>,
}

impl TestStore {
    /// A memory store.
    pub fn memory(store: swath_memory::MemoryStore) -> Self {
        let store = Arc::new(store);
        Self {
            directory: store.clone(),
            sessions: store.clone(),
            telemetry: store,
            postgres: None,
        }
    }
}

impl TestStore {
    /// A mower's health totals (`None` before its first state); the store must answer.
    pub async fn health(&self, mower: MowerId) -> Option<HealthTotals> {
        let health = self.telemetry.health(mower).await;
        health.expect("read the health totals")
    }
}

/// Makes a fresh, empty store (for PostgreSQL: a new database).
#[async_trait]
pub trait StoreFactory: Send + Sync {
    async fn fresh(&self) -> TestStore;

    /// The history and position rows per mower the store keeps (the memory store's cap), `None`
    /// when it keeps every row (PostgreSQL): what `reads_say_where_the_kept_rows_begin` expects
    /// of this adapter.
    fn kept_per_mower(&self) -> Option<usize>;
}

/// The stores of another factory with the telemetry store seen through the latest-state cache
/// that `swath serve` puts in front of it (decision 134), its bound an hour: only the cache's
/// forgetting on commit can keep its reads of committed rows right.
pub struct WithLatestCache<F>(pub F);

#[async_trait]
impl<F: StoreFactory> StoreFactory for WithLatestCache<F> {
    async fn fresh(&self) -> TestStore {
        let mut store = self.0.fresh().await;
        store.telemetry = swath_application::latest_cache::LatestCache::wrap(
            store.telemetry,
            Arc::new(swath_application::ports::SystemClock),
            std::time::Duration::from_secs(3600),
        );
        store
    }

    fn kept_per_mower(&self) -> Option<usize> {
        self.0.kept_per_mower()
    }
}

/// The fleet every telemetry scenario uses: two accounts, sites in three time zones (one far from
/// UTC so that local days differ), and one mower id that is in no directory.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub account_a: AccountId,
    pub account_b: AccountId,
    /// Mowers 0 and 1 belong to account A (Berlin, Auckland), mower 2 to account B (New York).
    pub mowers: [MowerId; 3],
    pub unknown_mower: MowerId,
}

impl Fleet {
    /// Fixed ids: the same fleet in every store, so rows compare equal.
    pub fn new() -> Self {
        Self {
            account_a: AccountId(Uuid::from_u128(0xa)),
            account_b: AccountId(Uuid::from_u128(0xb)),
            mowers: [1, 2, 3].map(|n| MowerId(Uuid::from_u128(n))),
            unknown_mower: MowerId(Uuid::from_u128(0xdead)),
        }
    }

    /// The account a mower belongs to.
    pub fn account_of(&self, mower: MowerId) -> AccountId {
        if mower == self.mowers[2] {
            self.account_b
        } else {
            self.account_a
        }
    }

    /// Creates the accounts, sites and mowers in `directory`. `blade_threshold_ms` applies to
    /// every mower (scenarios lower it to see W6 happen).
    pub async fn seed(&self, directory: &dyn Directory, blade_threshold_ms: i64) {
        for (id, name) in [(self.account_a, "A"), (self.account_b, "B")] {
            add_account(directory, id, &format!("Account {name}")).await;
        }
        let zones = [
            chrono_tz::Europe::Berlin,
            chrono_tz::Pacific::Auckland,
            chrono_tz::America::New_York,
        ];
        for (i, (&mower_id, tz)) in self.mowers.iter().zip(zones).enumerate() {
            let account_id = self.account_of(mower_id);
            let site_id = SiteId(Uuid::from_u128(0x5000 + i as u128));
            add_site(
                directory,
                site(site_id, account_id, &format!("Site {i}"), tz, i),
            )
            .await;
            add_mower(
                directory,
                Mower {
                    blade_threshold_ms,
                    ..mower(mower_id, account_id, site_id, format!("Mower {i}"), i)
                },
            )
            .await;
        }
    }
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

/// Creates one account with one site (Europe/Berlin) and `count` mowers named `M0`, `M1`, …, for
/// suites and benchmarks that need many mowers rather than the fixed [`Fleet`].
pub async fn seed_account_with_mowers(
    directory: &dyn Directory,
    count: usize,
    blade_threshold_ms: i64,
) -> (AccountId, Vec<MowerId>) {
    let account = AccountId::new();
    add_account(directory, account, "Seeded").await;
    let site_id = SiteId::new();
    let berlin = chrono_tz::Europe::Berlin;
    add_site(directory, site(site_id, account, "Seeded site", berlin, 0)).await;
    let mut mowers = Vec::with_capacity(count);
    for i in 0..count {
        let id = MowerId::new();
        let mower = Mower {
            model: "X".into(),
            serial: format!("S{i}"),
            display_order: i32::try_from(i).unwrap_or(i32::MAX),
            blade_threshold_ms,
            ..mower(id, account, site_id, format!("M{i}"), i)
        };
        add_mower(directory, mower).await;
        mowers.push(id);
    }
    (account, mowers)
}

/// Creates the account `id` named `name`.
pub async fn add_account<D: Directory + ?Sized>(directory: &D, id: AccountId, name: &str) {
    let name = name.to_owned();
    let account = Account { id, name };
    directory
        .create_account(account)
        .await
        .expect("seed account");
}

/// A site of `account` in `time_zone`, at `display_order`.
pub fn site(
    id: SiteId,
    account_id: AccountId,
    name: &str,
    time_zone: Tz,
    display_order: usize,
) -> Site {
    Site {
        id,
        account_id,
        name: name.to_owned(),
        time_zone,
        display_order: i32::try_from(display_order).expect("a small display order"),
    }
}

/// Creates `site`.
pub async fn add_site<D: Directory + ?Sized>(directory: &D, site: Site) {
    directory.create_site(site).await.expect("seed site");
}

/// A mower of `account_id` on `site_id` as the scenarios seed them, where nothing depends on
/// the rest: model `M1`, serial `SN<n>`, first in display order, the default blade threshold.
pub fn mower(
    id: MowerId,
    account_id: AccountId,
    site_id: SiteId,
    name: impl Into<String>,
    n: usize,
) -> Mower {
    Mower {
        id,
        account_id,
        site_id,
        name: name.into(),
        model: "M1".into(),
        serial: format!("SN{n}"),
        display_order: 0,
        blade_threshold_ms: DEFAULT_THRESHOLD,
    }
}

/// Creates `mower`.
pub async fn add_mower<D: Directory + ?Sized>(directory: &D, mower: Mower) {
    directory.create_mower(mower).await.expect("seed mower");
}

/// The first `limit` rows of a mower, at any time: the window of "is anything stored at all".
pub fn first_rows(limit: usize) -> TimeWindow {
    TimeWindow {
        from: None,
        to: None,
        after: None,
        limit,
    }
}

/// An open alert of `kind` on `mower_id`, raised at `raised_at` (a fresh event id, no code).
pub fn open_alert(
    mower_id: MowerId,
    account_id: AccountId,
    kind: AlertKind,
    raised_at: DateTime<Utc>,
) -> Alert {
    Alert {
        id: Uuid::now_v7(),
        mower_id,
        account_id,
        kind,
        severity: kind.severity(),
        raised_at,
        cleared_at: None,
        code: None,
    }
}

/// Stores `raised` in one watch batch of `mowers`, as the watcher would have raised them.
pub async fn store_alerts(watch: &dyn WatchStore, mowers: &[MowerId], raised: Vec<Alert>) {
    let alerts = AlertChanges {
        clears: Vec::new(),
        raised,
    };
    let changes = WatchChanges {
        alerts,
        ..WatchChanges::default()
    };
    commit_watch(watch, mowers, changes).await;
}

/// Commits `changes` in one watch batch of `mowers`, as the watcher would.
pub async fn commit_watch(watch: &dyn WatchStore, mowers: &[MowerId], changes: WatchChanges) {
    let (_, batch) = watch
        .begin_watch(mowers, &[])
        .await
        .expect("begin a watch batch");
    batch.commit(changes).await.expect("commit the watch batch");
}

/// The default blade threshold, for scenarios that do not care about W6.
pub const DEFAULT_THRESHOLD: i64 = DEFAULT_BLADE_THRESHOLD_MS;

/// The instant traces start at; the test clock stands a day later.
pub fn trace_start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 20, 0, 0).unwrap()
}

/// A runtime on the calling thread, with its I/O and timers: for the property tests, whose
/// cases are synchronous, and the benchmarks, which time one thread.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

/// Runs `future` to its end on a [`current_thread_runtime`] of its own.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    current_thread_runtime().block_on(future)
}

/// Parses and records one batch of JSON reports through `ingest`; the store must accept the batch.
pub async fn ingest_json(ingest: &Ingest, reports: &[Value]) -> Vec<StateOutcome> {
    let batch = reports
        .iter()
        .map(|r| ingest.parse(r.to_string().as_bytes()))
        .collect();
    ingest
        .record_states(batch)
        .await
        .expect("the store accepts the batch")
}

/// An event bus that only records what is published: for use cases whose subscriptions are not
/// under test. Subscribing through it is refused.
pub type RecordingBus = PublishOnly<Recording>;

/// What a [`RecordingBus`] was given.
#[derive(Default)]
pub struct Recording {
    published: Mutex<Vec<(String, Bytes, Option<String>)>>,
}

impl Recording {
    /// Everything published so far: subject, payload, dedup id.
    pub fn published(&self) -> Vec<(String, Bytes, Option<String>)> {
        self.published.lock().unwrap().clone()
    }
}

impl Publisher for Recording {
    const REFUSAL: &'static str = "the recording bus does not deliver";

    fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        self.published
            .lock()
            .unwrap()
            .push((subject.to_string(), payload, dedup_id));
        Ok(())
    }
}
