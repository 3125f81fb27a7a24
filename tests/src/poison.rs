//! A state the store refuses every time never blocks the stream, and a store that is down never
//! loses or drops a state (issue 13): the ingest consumer's handler on a real bus, for every bus
//! and store pair. `tests/bus_memory.rs` runs the scenarios on the memory bus and store (the
//! store refusing through [`Faulty`]), `tests/bus_nats.rs` on NATS JetStream and PostgreSQL (the
//! store refusing through a `CHECK` constraint the test adds).
//!
//! The subject root is the scenario's own: states are published on
//! `<root>.telemetry.mower.<mower id>` (the subject's last two tokens name the mower, see
//! `swath_application::subjects::telemetry_mower`).

use crate::support::{Fleet, DEFAULT_THRESHOLD};
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use swath_application::ports::{
    BatchHandler, BatchSettings, Directory, EventBus, HandlerError, Message, Settle, StoreError,
    Subscription, SystemClock, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows,
};
use swath_application::Ingest;
use swath_domain::{
    BatchChanges, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, MowerSnapshot,
    PositionRow, TelemetryRows,
};
use tokio::time::Instant;

/// The `error_code` the faulty stores refuse.
pub const POISON: &str = "POISON";

/// How long a scenario waits for the stream to drain.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A telemetry store over another that refuses ([`StoreError::Rejected`]) every batch holding a
/// state whose `error_code` is [`POISON`], and answers [`StoreError::Unavailable`] to every
/// batch while [`Faulty::down`] is set.
pub struct Faulty {
    inner: Arc<dyn TelemetryStore>,
    pub down: AtomicBool,
}

impl Faulty {
    pub fn new(inner: Arc<dyn TelemetryStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            down: AtomicBool::new(false),
        })
    }
}

struct FaultyBatch(Box<dyn TelemetryBatch>);

#[async_trait]
impl TelemetryBatch for FaultyBatch {
    async fn neighbours(
        &mut self,
        late: &[(MowerId, chrono::DateTime<chrono::Utc>)],
        snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
    ) -> Result<(), StoreError> {
        self.0.neighbours(late, snapshots).await
    }

    async fn session_windows(
        &mut self,
        late: &[(
            MowerId,
            chrono::DateTime<chrono::Utc>,
            chrono::DateTime<chrono::Utc>,
        )],
    ) -> Result<Vec<swath_application::ports::SessionWindow>, StoreError> {
        self.0.session_windows(late).await
    }

    async fn commit(
        self: Box<Self>,
        changes: BatchChanges,
        notifications: swath_domain::watch::IngestNotifications,
    ) -> Result<(), StoreError> {
        if changes
            .history
            .iter()
            .any(|h| h.error_code.as_deref() == Some(POISON))
        {
            return Err(StoreError::Rejected(
                "new row violates check constraint \"no_poison\" (the test's fake)".into(),
            ));
        }
        self.0.commit(changes, notifications).await
    }
}

#[async_trait]
impl TelemetryStore for Faulty {
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable(
                "connection refused (the test's fake)".into(),
            ));
        }
        let (snapshots, batch) = self.inner.begin(mowers).await?;
        Ok((snapshots, Box::new(FaultyBatch(batch))))
    }
    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        self.inner.latest(mowers).await
    }
    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError> {
        self.inner.health(mower).await
    }
    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError> {
        self.inner.export(mowers).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError> {
        self.inner.history(mower, window).await
    }
    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError> {
        self.inner.track(mower, window).await
    }
    async fn days(
        &self,
        mower: MowerId,
        from: chrono::NaiveDate,
        to: chrono::NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError> {
        self.inner.days(mower, from, to).await
    }
}

/// The handler under test, recording the last settlement of each message (by payload) and its
/// delivery count.
pub struct Settlements {
    inner: Arc<dyn BatchHandler>,
    last: Mutex<HashMap<Bytes, (Settle, u32)>>,
    failed_batches: Mutex<usize>,
}

impl Settlements {
    pub fn new(inner: Arc<dyn BatchHandler>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            last: Mutex::default(),
            failed_batches: Mutex::default(),
        })
    }

    /// The last settlement of a payload and the delivery it was given on.
    pub fn of(&self, payload: &Bytes) -> Option<(Settle, u32)> {
        self.last.lock().unwrap().get(payload).copied()
    }

    pub fn failed_batches(&self) -> usize {
        *self.failed_batches.lock().unwrap()
    }

    fn settled(&self, payloads: &[Bytes], settle: Settle) -> usize {
        let last = self.last.lock().unwrap();
        payloads
            .iter()
            .filter(|p| last.get(*p).is_some_and(|(s, _)| *s == settle))
            .count()
    }
}

#[async_trait]
impl BatchHandler for Settlements {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        let result = self.inner.handle(batch).await;
        match &result {
            Ok(outcomes) => {
                let mut last = self.last.lock().unwrap();
                for (message, outcome) in batch.iter().zip(outcomes) {
                    last.insert(message.payload.clone(), (*outcome, message.delivery));
                }
            }
            Err(_) => *self.failed_batches.lock().unwrap() += 1,
        }
        result
    }
}

/// How many messages a bus still owes a durable consumer (not delivered, or delivered and not
/// settled).
#[async_trait]
pub trait Backlog: Send + Sync {
    async fn backlog(&self, consumer: &str) -> u64;
}

/// The fleet seeded in `directory`, and the ingest handler on `store` subscribed (through
/// [`Settlements`]) as durable consumer `consumer` of the scenario's telemetry subjects.
async fn start(
    bus: &Arc<dyn EventBus>,
    root: &str,
    store: Arc<dyn TelemetryStore>,
    directory: &dyn Directory,
    consumer: &str,
) -> (Fleet, Arc<Settlements>, Subscription) {
    let fleet = Fleet::new();
    fleet.seed(directory, DEFAULT_THRESHOLD).await;
    let ingest = Arc::new(Ingest::new(store, bus.clone(), Arc::new(SystemClock)));
    let handler = Settlements::new(ingest.handler());
    let subscription = bus
        .subscribe_batch(
            &format!("{root}.telemetry.mower.*"),
            consumer,
            settings(),
            handler.clone(),
        )
        .await
        .expect("subscribe the ingest handler");
    (fleet, handler, subscription)
}

/// A mower's subject under the scenario's root.
fn subject(root: &str, mower: MowerId) -> String {
    format!("{root}.telemetry.mower.{mower}")
}

fn report(fleet: &Fleet, mower: MowerId, at: DateTime<Utc>, error_code: Option<&str>) -> Bytes {
    let mut report = json!({
        "mower_id": mower,
        "account_id": fleet.account_of(mower),
        "observed_at": at.to_rfc3339(),
        "activity": "mowing",
        "battery_percent": 70,
        "blade_on": true,
        "position": {"lat": 52.5, "lon": 13.4},
    });
    if let Some(code) = error_code {
        report["error_code"] = json!(code);
    }
    Bytes::from(report.to_string())
}

fn settings() -> BatchSettings {
    BatchSettings {
        max_batch: 16,
        max_wait: Duration::from_millis(20),
        drain_timeout: Duration::from_secs(5),
        redelivery_delay: Duration::from_millis(50),
        ..BatchSettings::default()
    }
}

async fn history_rows(store: &dyn TelemetryStore, fleet: &Fleet) -> usize {
    store
        .export(&fleet.mowers)
        .await
        .map(|rows| rows.history.len())
        .unwrap_or(0)
}

async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < PATIENCE, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A state the store refuses every time, then 100 valid states of the fleet's three mowers: all
/// 100 are stored, the refused one is terminated (its last settlement is a drop, after more
/// than `ISOLATE_AFTER_FAILED_DELIVERIES` deliveries), and the consumer owes nothing.
///
/// `store` refuses a state whose `error_code` is [`POISON`] ([`Faulty`], or PostgreSQL with a
/// constraint); `directory` is where the fleet is seeded.
pub async fn a_refused_state_never_blocks_the_stream(
    bus: Arc<dyn EventBus>,
    backlog: &dyn Backlog,
    root: &str,
    store: Arc<dyn TelemetryStore>,
    directory: &dyn Directory,
) {
    let consumer = "poison-ingest";
    let (fleet, handler, subscription) =
        start(&bus, root, store.clone(), directory, consumer).await;
    let subject = |mower| subject(root, mower);

    let t0 = Utc::now() - ChronoDuration::hours(1);
    let poison = report(&fleet, fleet.mowers[0], t0, Some(POISON));
    bus.publish(&subject(fleet.mowers[0]), poison.clone(), None)
        .await
        .unwrap();
    let mut valid = Vec::new();
    for i in 0..100 {
        let mower = fleet.mowers[i % 3];
        let payload = report(
            &fleet,
            mower,
            t0 + ChronoDuration::seconds(1 + i as i64),
            None,
        );
        bus.publish(&subject(mower), payload.clone(), None)
            .await
            .unwrap();
        valid.push(payload);
    }

    eventually("the 100 valid states are stored", || async {
        history_rows(store.as_ref(), &fleet).await == 100
    })
    .await;
    eventually("the refused state is terminated", || async {
        handler.of(&poison).is_some()
    })
    .await;
    let (settle, delivery) = handler.of(&poison).unwrap();
    assert_eq!(settle, Settle::Drop, "the refused state's last settlement");
    assert!(
        delivery > swath_application::ingest::ISOLATE_AFTER_FAILED_DELIVERIES,
        "isolated on delivery {delivery}"
    );
    assert_eq!(handler.settled(&valid, Settle::Ack), 100);
    eventually("the consumer owes nothing", || async {
        backlog.backlog(consumer).await == 0
    })
    .await;
    subscription.unsubscribe().await;
    assert_eq!(
        history_rows(store.as_ref(), &fleet).await,
        100,
        "the refused state is not stored"
    );
}

/// While the store is down every batch fails (also past the deliveries that make the consumer
/// isolate): nothing is dropped; once it is back, every state is stored.
pub async fn a_store_that_is_down_drops_nothing(
    bus: Arc<dyn EventBus>,
    backlog: &dyn Backlog,
    root: &str,
    store: Arc<Faulty>,
    directory: &dyn Directory,
) {
    store.down.store(true, Ordering::SeqCst);
    let consumer = "down-ingest";
    let (fleet, handler, subscription) =
        start(&bus, root, store.clone(), directory, consumer).await;
    let subject = |mower| subject(root, mower);
    let t0 = Utc::now() - ChronoDuration::hours(1);
    let mut payloads = Vec::new();
    for i in 0..30 {
        let mower = fleet.mowers[i % 3];
        let payload = report(&fleet, mower, t0 + ChronoDuration::seconds(i as i64), None);
        bus.publish(&subject(mower), payload.clone(), None)
            .await
            .unwrap();
        payloads.push(payload);
    }
    // Past the deliveries that make the consumer isolate: still nothing dropped.
    eventually("several failed deliveries", || async {
        handler.failed_batches()
            > 2 * swath_application::ingest::ISOLATE_AFTER_FAILED_DELIVERIES as usize
    })
    .await;
    assert_eq!(history_rows(store.as_ref(), &fleet).await, 0);
    assert_eq!(handler.settled(&payloads, Settle::Drop), 0);
    store.down.store(false, Ordering::SeqCst);
    eventually("every state is stored once the store is back", || async {
        history_rows(store.as_ref(), &fleet).await == 30
    })
    .await;
    assert_eq!(
        handler.settled(&payloads, Settle::Drop),
        0,
        "nothing dropped"
    );
    eventually("the consumer owes nothing", || async {
        backlog.backlog(consumer).await == 0
    })
    .await;
    subscription.unsubscribe().await;
}

/// The subject is the gateway's identity: a report published on another mower's subject (of
/// another account, too) and one on a subject that names no mower are dropped
/// (`subject_mismatch`), never stored; a report on its own subject is stored.
pub async fn the_subject_is_the_gateways_identity(
    bus: Arc<dyn EventBus>,
    backlog: &dyn Backlog,
    root: &str,
    store: Arc<dyn TelemetryStore>,
    directory: &dyn Directory,
) {
    let consumer = "identity-ingest";
    let (fleet, handler, subscription) =
        start(&bus, root, store.clone(), directory, consumer).await;
    let subject = |mower| subject(root, mower);
    let t0 = Utc::now() - ChronoDuration::hours(1);
    // Mower 2 is account B's; the gateway of account A's mower 0 publishes for it.
    let spoofed = report(&fleet, fleet.mowers[2], t0, None);
    bus.publish(&subject(fleet.mowers[0]), spoofed.clone(), None)
        .await
        .unwrap();
    let malformed = report(&fleet, fleet.mowers[1], t0, None);
    bus.publish(
        &format!("{root}.telemetry.mower.not-a-uuid"),
        malformed.clone(),
        None,
    )
    .await
    .unwrap();
    let own = report(
        &fleet,
        fleet.mowers[0],
        t0 + ChronoDuration::seconds(1),
        None,
    );
    bus.publish(&subject(fleet.mowers[0]), own.clone(), None)
        .await
        .unwrap();
    eventually("all three are settled", || async {
        [&spoofed, &malformed, &own]
            .iter()
            .all(|p| handler.of(p).is_some())
    })
    .await;
    assert_eq!(handler.of(&spoofed).unwrap().0, Settle::Drop);
    assert_eq!(handler.of(&malformed).unwrap().0, Settle::Drop);
    assert_eq!(handler.of(&own).unwrap().0, Settle::Ack);
    let rows = store.export(&fleet.mowers).await.unwrap();
    assert_eq!(rows.history.len(), 1, "only the report on its own subject");
    assert_eq!(rows.history[0].mower_id, fleet.mowers[0]);
    eventually("the consumer owes nothing", || async {
        backlog.backlog(consumer).await == 0
    })
    .await;
    subscription.unsubscribe().await;
}
