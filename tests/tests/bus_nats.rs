//! The event bus contract against [`NatsBus`] on a real NATS JetStream server, plus what only the
//! JetStream bus promises (limits, replicas, provisioning, keep-alive, restarts).
//!
//! Runs when `SWATH_TEST_NATS_URL` is set (e.g. `nats://127.0.0.1:4222`); built without it, every
//! test is reported as ignored (see `tests/build.rs`). With it set, an unreachable server fails.
//!
//! Each test gets a stream of its own (`SWATH_TEST_<id>`, file storage) holding a subject root of
//! its own (`swathtest.<id>.>`), so tests can run in parallel on one server and never see each
//! other's messages or consumers; the stream is deleted when the test's bus is dropped. The
//! contract macro builds the bus before it derives the scenario's prefix from `root`, so the bus
//! future leaves its root in a thread-local that the `root` expression reads back (the test
//! body runs on one thread).
//!
//! Real time, not paused: the broker lives in real time.

use async_trait::async_trait;
use bytes::Bytes;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::{
    BatchHandler, BatchSettings, BusError, EventBus, LiveOptions, LiveSubscription, Message,
    Settle, Subscription,
};
use swath_nats::{NatsBus, NatsBusSettings, StreamSpec, StreamStorage};
use swath_postgres::PostgresStore;
use swath_tests::bus_contract::{
    delivered_in_order, settings, texts, wait_until, DynBus, Recorder, Reply,
};
use swath_tests::e2e::{free_port, NatsServer};
use swath_tests::poison;
use tokio::time::Instant;

const URL_VAR: &str = "SWATH_TEST_NATS_URL";

thread_local! {
    /// The subject root of the bus most recently made on this thread (see the module docs).
    static ROOT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The shared server's URL. Every test that calls this is ignored when the variable was unset at
/// build time (`build.rs`), so reaching here without it is a mistake worth failing on.
fn nats_url() -> String {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("{URL_VAR} is not set: run this test through `cargo test` with it set"),
    }
}

/// A fresh test id: a stream name and a subject root that no other test uses.
fn fresh_names() -> (String, String) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let id = &id[..16];
    (
        format!("SWATH_TEST_{}", id.to_uppercase()),
        format!("swathtest.{id}"),
    )
}

fn spec(stream: &str, root: &str) -> StreamSpec {
    StreamSpec {
        // Whatever a failed run leaves behind empties itself.
        max_age: Some(Duration::from_secs(600)),
        ..StreamSpec::new(stream, [format!("{root}.>")])
    }
}

/// A [`NatsBus`] on a stream of its own, which it deletes when dropped.
struct TestBus {
    bus: NatsBus,
    stream: String,
}

impl TestBus {
    async fn connect(url: &str, stream: &str, settings: NatsBusSettings) -> TestBus {
        let bus = NatsBus::connect(url, settings)
            .await
            .unwrap_or_else(|e| panic!("connecting to NATS at {url} ({URL_VAR}): {e}"));
        TestBus {
            bus,
            stream: stream.to_owned(),
        }
    }
}

impl Drop for TestBus {
    fn drop(&mut self) {
        // Only a multi-threaded runtime can block here; every test in this file uses one.
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (bus, stream) = (self.bus.clone(), self.stream.clone());
        tokio::task::block_in_place(|| {
            handle.block_on(async move {
                if let Err(e) = bus.delete_stream(&stream).await {
                    eprintln!("could not delete test stream {stream}: {e}");
                }
            })
        });
    }
}

#[async_trait]
impl EventBus for TestBus {
    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        self.bus.publish(subject, payload, dedup_id).await
    }

    async fn subscribe_batch(
        &self,
        subject: &str,
        consumer: &str,
        settings: BatchSettings,
        handler: Arc<dyn BatchHandler>,
    ) -> Result<Subscription, BusError> {
        self.bus
            .subscribe_batch(subject, consumer, settings, handler)
            .await
    }

    async fn subscribe(
        &self,
        subject: &str,
        options: LiveOptions,
    ) -> Result<LiveSubscription, BusError> {
        self.bus.subscribe(subject, options).await
    }

    async fn ping(&self) -> Result<(), BusError> {
        self.bus.ping().await
    }
}

/// The bus of one contract scenario, on the server of `SWATH_TEST_NATS_URL`.
async fn contract_bus() -> DynBus {
    let url = nats_url();
    let (stream, root) = fresh_names();
    let settings = NatsBusSettings::with_streams(vec![spec(&stream, &root)]);
    let bus = TestBus::connect(&url, &stream, settings).await;
    ROOT.with(|r| *r.borrow_mut() = root);
    Arc::new(bus)
}

fn contract_root() -> String {
    ROOT.with(|r| r.borrow().clone())
}

swath_tests::contract_suite!(
    bus_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
    bus = contract_bus(),
    root = &contract_root(),
);

// ---------------------------------------------------------------------------------------------
// The partition contract (`swath_tests::partition_contract`) on a partitioned stream of its own
// per scenario, with short timings: a pin moves 4 s after its holder's last pull.

async fn partitioned_bus(pattern: String) -> DynBus {
    let (stream, _) = fresh_names();
    let spec = StreamSpec {
        max_age: Some(Duration::from_secs(600)),
        ..StreamSpec::new(&stream, [pattern])
    }
    .partitioned(swath_tests::partition_contract::PARTITIONS);
    let settings = NatsBusSettings {
        ack_wait: Duration::from_secs(2),
        pull_expiry: Duration::from_secs(1),
        idle_heartbeat: Duration::from_millis(500),
        membership_heartbeat: Duration::from_millis(500),
        ..NatsBusSettings::with_streams(vec![spec])
    };
    Arc::new(TestBus::connect(&nats_url(), &stream, settings).await)
}

mod partitions {
    use super::*;

    swath_tests::contract_suite!(
        partition_contract,
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
        bus = partitioned_bus,
        root = "swathpart",
    );
}

// ---------------------------------------------------------------------------------------------
// What only the JetStream bus promises.

/// A bus for one NATS-specific test: its stream, its root, its URL.
struct Fixture {
    url: String,
    stream: String,
    root: String,
    settings: NatsBusSettings,
    bus: Arc<TestBus>,
}

impl Fixture {
    async fn new() -> Fixture {
        Self::with(|_| {}).await
    }

    async fn with(adjust: impl FnOnce(&mut NatsBusSettings)) -> Fixture {
        let url = nats_url();
        let (stream, root) = fresh_names();
        let mut settings = NatsBusSettings::with_streams(vec![spec(&stream, &root)]);
        adjust(&mut settings);
        let bus = Arc::new(TestBus::connect(&url, &stream, settings.clone()).await);
        Fixture {
            url,
            stream,
            root,
            settings,
            bus,
        }
    }

    fn subject(&self, tail: &str) -> String {
        format!("{}.{tail}", self.root)
    }

    fn dyn_bus(&self) -> DynBus {
        self.bus.clone()
    }

    /// Another connection (a replica, same settings) on the same stream; it does not delete
    /// the stream.
    async fn replica(&self) -> NatsBus {
        NatsBus::connect(&self.url, self.settings.clone())
            .await
            .expect("a second connection")
    }
}

async fn publish(bus: &dyn EventBus, subject: &str, body: &str) -> Result<(), BusError> {
    bus.publish(subject, Bytes::from(body.to_owned()), None)
        .await
}

fn refused<T>(result: Result<T, BusError>) -> bool {
    matches!(result, Err(BusError::Refused(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn invalid_names_subjects_and_filter_changes_are_refused() {
    let f = Fixture::new().await;
    let bus = f.dyn_bus();
    assert!(refused(publish(&*bus, &f.subject("*"), "a").await));
    assert!(refused(
        publish(&*bus, &format!("{}..a", f.root), "a").await
    ));
    let handler = Recorder::acking();
    let sub = |subject: String, consumer: &'static str| {
        let bus = bus.clone();
        let handler = handler.clone();
        async move {
            bus.subscribe_batch(&subject, consumer, settings(10, 0), handler)
                .await
        }
    };
    assert!(refused(sub(f.subject("a"), "has.dot").await));
    assert!(refused(sub(f.subject(">.a"), "bad-filter").await));
    sub(f.subject("a"), "ok")
        .await
        .expect("a valid subscription")
        .unsubscribe()
        .await;
    assert!(
        refused(sub(f.subject("b"), "ok").await),
        "a durable consumer's filter cannot change"
    );
    assert!(
        refused(sub("nowhere.swathtest.a".to_owned(), "nowhere").await),
        "a subject no stream holds"
    );
    assert!(refused(
        bus.subscribe("nowhere.swathtest.>", LiveOptions::default())
            .await
            .map(|_| ())
    ));
    bus.ping().await.expect("ping");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_publish_no_stream_holds_is_unavailable() {
    let f = Fixture::new().await;
    match publish(&*f.bus, "nowhere.swathtest.a", "a").await {
        Err(BusError::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_stream_at_its_limit_refuses_publishes_as_full() {
    let f = Fixture::with(|s| s.streams[0].max_messages = Some(2)).await;
    let subject = f.subject("full");
    let mut live = f
        .bus
        .subscribe(&subject, LiveOptions::default())
        .await
        .unwrap();
    publish(&*f.bus, &subject, "1").await.unwrap();
    publish(&*f.bus, &subject, "2").await.unwrap();
    match publish(&*f.bus, &subject, "3").await {
        Err(BusError::Full(s)) => assert_eq!(s, subject),
        other => panic!("expected Full, got {other:?}"),
    }
    let mut got = Vec::new();
    while let Ok(Some(m)) =
        tokio::time::timeout(Duration::from_millis(500), live.messages.recv()).await
    {
        got.push(m);
    }
    assert_eq!(
        texts(&got),
        ["1", "2"],
        "a refused message reached a live subscriber"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn live_subscribers_never_see_duplicates() {
    let f = Fixture::new().await;
    let subject = f.subject("dup");
    let mut live = f
        .bus
        .subscribe(&subject, LiveOptions::default())
        .await
        .unwrap();
    for (body, id) in [("a", "x"), ("a-again", "x"), ("end", "y")] {
        f.bus
            .publish(
                &subject,
                Bytes::from(body),
                Some(format!("{}-{id}", f.root)),
            )
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    while let Ok(Some(m)) =
        tokio::time::timeout(Duration::from_millis(500), live.messages.recv()).await
    {
        got.push(m);
    }
    assert_eq!(texts(&got), ["a", "end"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn provisioning_is_idempotent_and_refuses_a_storage_change() {
    let f = Fixture::new().await;
    // Same spec again: nothing to do.
    let again = f.replica().await;
    again.ping().await.unwrap();
    // A changed limit is applied to the existing stream.
    let mut changed = spec(&f.stream, &f.root);
    changed.max_messages = Some(1_000);
    NatsBus::connect(&f.url, NatsBusSettings::with_streams(vec![changed]))
        .await
        .expect("a limit change is applied");
    // Storage cannot be converted.
    let mut memory = spec(&f.stream, &f.root);
    memory.storage = StreamStorage::Memory;
    assert!(refused(
        NatsBus::connect(&f.url, NatsBusSettings::with_streams(vec![memory])).await
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn connecting_to_nothing_is_unavailable() {
    let port = free_port();
    match NatsBus::connect(
        &format!("nats://127.0.0.1:{port}"),
        NatsBusSettings::default(),
    )
    .await
    {
        Err(BusError::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn messages_published_before_the_consumer_exists_are_not_delivered() {
    let f = Fixture::new().await;
    let subject = f.subject("history");
    publish(&*f.bus, &subject, "old").await.unwrap();
    let recorder = Recorder::acking();
    let sub = f
        .bus
        .subscribe_batch(&subject, "history", settings(10, 0), recorder.clone())
        .await
        .unwrap();
    publish(&*f.bus, &subject, "new").await.unwrap();
    wait_until("new is delivered", || recorder.started() >= 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(texts(&recorder.delivered()), ["new"]);
    sub.unsubscribe().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn replicas_share_one_durable_consumer() {
    let f = Fixture::new().await;
    let replica = f.replica().await;
    let subject = f.subject("replicas");
    let plan = |_: usize, batch: &[Message]| {
        (
            Duration::from_millis(20),
            Reply::Answer(vec![Settle::Ack; batch.len()]),
        )
    };
    let (a, b) = (Recorder::new(plan), Recorder::new(plan));
    let sub_a = f
        .bus
        .subscribe_batch(&subject, "shared", settings(5, 0), a.clone())
        .await
        .unwrap();
    let sub_b = replica
        .subscribe_batch(&subject, "shared", settings(5, 0), b.clone())
        .await
        .unwrap();
    let sent: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
    for body in &sent {
        publish(&*f.bus, &subject, body).await.unwrap();
    }
    wait_until("all 100 are delivered", || {
        a.delivered().len() + b.delivered().len() >= 100
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut all = texts(&a.delivered());
    all.extend(texts(&b.delivered()));
    all.sort();
    assert_eq!(all, sent, "a message went to both replicas, or was lost");
    assert!(
        !a.delivered().is_empty() && !b.delivered().is_empty(),
        "one replica got nothing: {} / {}",
        a.delivered().len(),
        b.delivered().len()
    );
    sub_a.unsubscribe().await;
    sub_b.unsubscribe().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_handler_longer_than_ack_wait_is_not_redelivered_behind_its_back() {
    let f = Fixture::with(|s| s.ack_wait = Duration::from_secs(1)).await;
    let subject = f.subject("slow");
    let recorder = Recorder::new(|_, batch| {
        (
            Duration::from_millis(2_500),
            Reply::Answer(vec![Settle::Ack; batch.len()]),
        )
    });
    let sub = f
        .bus
        .subscribe_batch(&subject, "slow", settings(10, 0), recorder.clone())
        .await
        .unwrap();
    publish(&*f.bus, &subject, "a").await.unwrap();
    wait_until("the slow handler runs", || recorder.started() >= 1).await;
    // A second subscription of the same consumer, waiting: it would get the message if the
    // server redelivered it after `ack_wait` while the slow handler still runs.
    let watcher = Recorder::acking();
    let replica = f.replica().await;
    let sub2 = replica
        .subscribe_batch(&subject, "slow", settings(10, 0), watcher.clone())
        .await
        .unwrap();
    wait_until("a is settled", || recorder.finished() >= 1).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let all: Vec<Message> = [recorder.delivered(), watcher.delivered()].concat();
    assert_eq!(texts(&all), ["a"], "delivered again while being handled");
    sub.unsubscribe().await;
    sub2.unsubscribe().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn every_kind_of_settlement_is_confirmed_at_once() {
    // The last settlement of a batch is sent as a request and awaited; were one kind left
    // unanswered by the server, the worker would wait out `request_timeout` before its next
    // pull.
    let f = Fixture::with(|s| s.request_timeout = Duration::from_secs(10)).await;
    let subject = f.subject("kinds");
    let recorder = Recorder::new(|_, batch| {
        let outcomes = batch
            .iter()
            .map(|m| match (&m.payload[..], m.delivery) {
                (b"drop", _) => Settle::Drop,
                (b"nak", 1) => Settle::Redeliver,
                _ => Settle::Ack,
            })
            .collect();
        (Duration::ZERO, Reply::Answer(outcomes))
    });
    let mut s = settings(10, 0);
    s.redelivery_delay = Duration::from_millis(100);
    let sub = f
        .bus
        .subscribe_batch(&subject, "kinds", s, recorder.clone())
        .await
        .unwrap();
    let start = Instant::now();
    let mut calls = 0;
    for body in ["ack", "drop", "nak", "end"] {
        publish(&*f.bus, &subject, body).await.unwrap();
        // "nak" is handled twice: redelivered, then acknowledged.
        calls += if body == "nak" { 2 } else { 1 };
        wait_until("the message is settled", || recorder.finished() >= calls).await;
    }
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "settling stalled: {:?}",
        start.elapsed()
    );
    assert_eq!(
        texts(&recorder.delivered()),
        ["ack", "drop", "nak", "nak", "end"]
    );
    sub.unsubscribe().await;
}

/// Decision 30 with a real crash: a replica whose process dies (its runtime and connection
/// dropped, nothing settled, nothing unsubscribed, like `kill -9`) leaves `a` and `b` unsettled;
/// JetStream redelivers them only once `ack_wait` expires, so a new subscriber that pulled at once
/// would get the newer `c` and `d` first. The worker waits for them on start: it must deliver
/// `a`, `b` (redeliveries) before `c`, `d`, one message per batch. `ack_wait` is 2 s here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn after_a_crash_the_unsettled_deliveries_come_before_newer_messages() {
    let f = Fixture::with(|s| s.ack_wait = Duration::from_secs(2)).await;
    let subject = f.subject("crash");
    let stuck = Recorder::new(|_, _| (Duration::ZERO, Reply::Hang));
    let (url, nats, crash_subject, crash_stuck) = (
        f.url.clone(),
        f.settings.clone(),
        subject.clone(),
        stuck.clone(),
    );
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let bus = NatsBus::connect(&url, nats)
                .await
                .expect("the crashing replica");
            // a and b queue up before the replica subscribes, so that its one batch holds both.
            bus.subscribe_batch(&crash_subject, "crash", settings(2, 0), Recorder::acking())
                .await
                .unwrap()
                .unsubscribe()
                .await;
            for body in ["a", "b"] {
                publish(&bus, &crash_subject, body).await.unwrap();
            }
            let sub = bus
                .subscribe_batch(&crash_subject, "crash", settings(2, 0), crash_stuck.clone())
                .await
                .unwrap();
            wait_until("a and b are in flight", || {
                crash_stuck.delivered().len() >= 2
            })
            .await;
            // Newer, while a and b are in flight.
            publish(&bus, &crash_subject, "c").await.unwrap();
            // Never unsubscribed: the process dies with it.
            std::mem::forget(sub);
        });
        // Dropping the runtime cancels every task of the replica, its connection with them.
        drop(runtime);
    })
    .await
    .unwrap();
    assert_eq!(texts(&stuck.delivered()), ["a", "b"]);
    // Newer, once the replica is gone.
    publish(&*f.bus, &subject, "d").await.unwrap();

    let next = Recorder::acking();
    let sub = f
        .bus
        .subscribe_batch(&subject, "crash", settings(1, 0), next.clone())
        .await
        .unwrap();
    let why = "a newer message came before a delivery the crashed replica left unsettled";
    let deliveries = delivered_in_order(&next, why).await;
    // a and b are redeliveries. c may count a second delivery: the worker's wait probes one
    // message, and a newer one it got is handed back so that it comes after the redeliveries.
    assert_eq!(deliveries[..2], [2, 2], "{deliveries:?}");
    sub.unsubscribe().await;
}

// ---------------------------------------------------------------------------------------------
// A NATS restart, on a private server this test starts and stops itself.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_nats_restart_does_not_stall_subscriptions() {
    // A nats-server of this test's own, with JetStream in a directory of its own.
    let mut server = NatsServer::start().expect("a private nats-server");
    let (stream, root) = fresh_names();
    let mut settings = NatsBusSettings::with_streams(vec![spec(&stream, &root)]);
    settings.idle_heartbeat = Duration::from_millis(500);
    settings.pull_expiry = Duration::from_secs(3);
    settings.request_timeout = Duration::from_secs(2);
    let bus = NatsBus::connect(&server.url(), settings)
        .await
        .expect("connect to the private server");
    let subject = format!("{root}.restart");
    let recorder = Recorder::acking();
    let sub = bus
        .subscribe_batch(
            &subject,
            "restart",
            settings_for_restart(),
            recorder.clone(),
        )
        .await
        .unwrap();
    let mut live = bus
        .subscribe(&format!("{root}.>"), LiveOptions::default())
        .await
        .unwrap();
    publish(&bus, &subject, "before").await.unwrap();
    wait_until("before is settled", || recorder.finished() >= 1).await;
    assert_eq!(
        texts(&[live.messages.recv().await.expect("live before")]),
        ["before"]
    );

    // Killed at once (no lame-duck goodbye), as a crash would.
    server.stop(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        matches!(bus.ping().await, Err(BusError::Unavailable(_))),
        "ping succeeded while NATS was down"
    );
    server
        .restart_after(Duration::ZERO)
        .expect("nats-server restarts");

    // Publishing may fail until the client has reconnected; retry as a caller would.
    let start = Instant::now();
    while publish(&bus, &subject, "after").await.is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "never reconnected"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bus.ping().await.expect("ping after the restart");
    wait_until("after is delivered", || {
        recorder.delivered().iter().any(|m| m.payload == "after")
    })
    .await;
    // A killed server may come back without the acknowledgement of "before" (JetStream writes
    // consumer state lazily): then it is redelivered, as a redelivery, once `ack_wait` passed.
    // Whatever else, "after" came once, after "before".
    let delivered = recorder.delivered();
    let after: Vec<_> = delivered.iter().filter(|m| m.payload == "after").collect();
    assert_eq!(after.len(), 1, "{:?}", texts(&delivered));
    assert_eq!(texts(&delivered[..1]), ["before"]);
    for again in delivered[1..].iter().filter(|m| m.payload == "before") {
        assert!(again.delivery > 1, "a second 'before' is a redelivery");
    }
    let start = Instant::now();
    let got = loop {
        let m = tokio::time::timeout(Duration::from_secs(15), live.messages.recv())
            .await
            .expect("a live message after the restart")
            .expect("the live subscription is open");
        if m.payload == "after" {
            break m;
        }
        assert!(start.elapsed() < Duration::from_secs(15));
    };
    assert_eq!(got.delivery, 1);
    sub.unsubscribe().await;
    drop(live);
    bus.delete_stream(&stream).await.unwrap();
}

fn settings_for_restart() -> BatchSettings {
    settings(10, 50)
}

// ---------------------------------------------------------------------------------------------
// The ingest handler on NATS and PostgreSQL: a state PostgreSQL refuses every time (a CHECK
// constraint the test adds) is isolated and terminated, the 100 valid states behind it stored;
// a store that is down drops nothing (issue 13; the same scenarios run on the memory bus).

/// Runs one poison scenario (`swath_tests::poison`) on a NATS fixture and a fresh PostgreSQL
/// store: the scenario is given the bus, its backlog, its root and the store (also the
/// directory). The factory drops the database once the scenario is over.
async fn on_nats_and_postgres(
    scenario: impl AsyncFnOnce(DynBus, &dyn poison::Backlog, &str, Arc<PostgresStore>),
) {
    let fixture = Fixture::new().await;
    let factory =
        swath_tests::postgres::PostgresFactory::new(swath_tests::postgres::test_database_url());
    let store = Arc::new(factory.fresh_store().await);
    let backlog = NatsBacklog {
        bus: fixture.bus.clone(),
    };
    scenario(fixture.dyn_bus(), &backlog, &fixture.root, store).await;
}

struct NatsBacklog {
    bus: Arc<TestBus>,
}

#[async_trait]
impl poison::Backlog for NatsBacklog {
    async fn backlog(&self, consumer: &str) -> u64 {
        match self
            .bus
            .bus
            .consumer_backlog(&self.bus.stream, consumer)
            .await
        {
            Ok((pending, ack_pending)) => pending + ack_pending as u64,
            Err(e) => panic!("reading the consumer's backlog: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn a_state_postgres_refuses_never_blocks_the_stream() {
    on_nats_and_postgres(async |bus, backlog, root, store| {
        // What the store refuses, deterministically: SQLSTATE 23514 (check_violation).
        sqlx::query(&format!(
            "ALTER TABLE state_history ADD CONSTRAINT no_poison \
             CHECK (error_code IS DISTINCT FROM '{}')",
            poison::POISON
        ))
        .execute(store.pool())
        .await
        .expect("add the test's constraint");
        let directory = store.as_ref();
        poison::a_refused_state_never_blocks_the_stream(
            bus,
            backlog,
            root,
            store.clone(),
            directory,
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn a_postgres_store_that_is_down_drops_nothing() {
    on_nats_and_postgres(async |bus, backlog, root, store| {
        let faulty = poison::Faulty::new(store.clone());
        poison::a_store_that_is_down_drops_nothing(bus, backlog, root, faulty, store.as_ref())
            .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn the_subject_is_the_gateways_identity_on_postgres() {
    on_nats_and_postgres(async |bus, backlog, root, store| {
        let directory = store.as_ref();
        poison::the_subject_is_the_gateways_identity(bus, backlog, root, store.clone(), directory)
            .await;
    })
    .await;
}
