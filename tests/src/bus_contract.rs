//! The event bus contract (docs/rules.md §5, the `EventBus` doc comment), as scenarios any adapter must
//! pass.
//!
//! Each scenario is a `pub async fn(bus, prefix)`. `prefix` is a subject prefix (one or more
//! tokens, no wildcards) unique to the scenario *and the run*: every subject a scenario uses
//! starts with it, and every durable consumer name is derived from it, so that scenarios can share
//! one real broker (whose durable consumers and duplicate windows outlive a run) without seeing
//! each other's messages. Against JetStream the prefix must fall inside a stream's subjects,
//! e.g. `telemetry.contract.<scenario>_<uuid>`.
//!
//! The scenarios only rely on the port's contract: they create a durable consumer (by
//! subscribing once) before publishing what it must see, and they measure time with
//! `tokio::time`, so they run as well with Tokio's clock paused (the memory bus) as in real time
//! (a broker). Waits are bounded by [`PATIENCE`]; timing assertions only check bounds the
//! contract promises (a linger lasts at least `max_wait`, a drain at most `drain_timeout`).
//!
//! [`contract_suite!`](crate::contract_suite) turns every scenario into a test for one adapter.

use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use swath_application::ports::{
    BatchHandler, BatchSettings, BusError, EventBus, HandlerError, LiveOptions, Message,
    Publication, Settle, Subscription, MAX_IN_FLIGHT,
};
use tokio::time::Instant;

/// The bus under test.
pub type DynBus = Arc<dyn EventBus>;

/// The longest a scenario waits for something the bus must do (a broker needs real time).
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A run-unique prefix for a scenario: `<root>.<scenario>_<uuid>`.
pub fn unique_prefix(root: &str, scenario: &str) -> String {
    format!("{root}.{scenario}_{}", uuid::Uuid::new_v4().simple())
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// A subject under the scenario's prefix.
pub fn subject(prefix: &str, tail: &str) -> String {
    format!("{prefix}.{tail}")
}

/// A durable consumer name unique to the scenario (JetStream names allow no dots or wildcards).
pub fn consumer(prefix: &str, name: &str) -> String {
    let base: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{base}_{name}")
}

fn payload(text: impl Into<String>) -> Bytes {
    Bytes::from(text.into())
}

fn text(message: &Message) -> String {
    String::from_utf8_lossy(&message.payload).into_owned()
}

/// The payloads of `messages`, as text.
pub fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(text).collect()
}

fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:04}")).collect()
}

async fn publish_all(bus: &DynBus, subject: &str, payloads: &[String]) {
    for p in payloads {
        bus.publish(subject, payload(p.clone()), None)
            .await
            .unwrap_or_else(|e| panic!("publishing {p} to {subject}: {e}"));
    }
}

/// Settings with short, explicit timings.
pub fn settings(max_batch: usize, max_wait_ms: u64) -> BatchSettings {
    BatchSettings {
        max_batch,
        max_wait: Duration::from_millis(max_wait_ms),
        drain_timeout: Duration::from_secs(5),
        redelivery_delay: Duration::from_millis(200),
        ..BatchSettings::default()
    }
}

/// Waits until `next` was handed `a`, `b`, `c` and `d`, then a while longer; asserts that they
/// came in that order, each once (`why`: what another order means), and answers how many times
/// each was delivered.
pub async fn delivered_in_order(next: &Recorder, why: &str) -> Vec<u32> {
    wait_until("all four are delivered", || next.delivered().len() >= 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let delivered = next.delivered();
    assert_eq!(texts(&delivered), ["a", "b", "c", "d"], "{why}");
    delivered.iter().map(|m| m.delivery).collect()
}

/// Polls `done` until it holds; panics after [`PATIENCE`].
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Creates a durable consumer (subscribes once and unsubscribes), so that what is published
/// next queues up for it.
pub async fn create_consumer(bus: &DynBus, subject: &str, consumer: &str) {
    let recorder = Recorder::acking();
    let subscription = bus
        .subscribe_batch(subject, consumer, settings(10, 0), recorder.clone())
        .await
        .expect("create the durable consumer");
    subscription.unsubscribe().await;
    assert!(
        recorder.batches().is_empty(),
        "a new durable consumer delivered old messages"
    );
}

async fn subscribe(
    bus: &DynBus,
    subject: &str,
    consumer: &str,
    settings: BatchSettings,
    recorder: &Arc<Recorder>,
) -> Subscription {
    bus.subscribe_batch(subject, consumer, settings, recorder.clone())
        .await
        .expect("subscribe_batch")
}

/// What a [`Recorder`] does with one call.
pub enum Reply {
    /// Return these outcomes.
    Answer(Vec<Settle>),
    /// Return a handler error.
    Fail,
    /// Never return.
    Hang,
}

impl Reply {
    /// What a handler planned to answer, after yielding once (so that a concurrent call would
    /// overlap this one) and `delay`: the outcomes (the acknowledged messages of `batch` go to
    /// `acked`), an error, or nothing ever.
    pub async fn after(
        self,
        delay: Duration,
        batch: &[Message],
        acked: &Mutex<Vec<Message>>,
    ) -> Result<Vec<Settle>, HandlerError> {
        tokio::task::yield_now().await;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        match self {
            Reply::Answer(outcomes) => {
                let mut acked = acked.lock().unwrap();
                for (message, outcome) in batch.iter().zip(&outcomes) {
                    if *outcome == Settle::Ack {
                        acked.push(message.clone());
                    }
                }
                Ok(outcomes)
            }
            Reply::Fail => Err(HandlerError("the store is down".into())),
            Reply::Hang => std::future::pending().await,
        }
    }
}

type Plan = dyn Fn(usize, &[Message]) -> (Duration, Reply) + Send + Sync;

/// A batch handler that records every call and answers as its plan says; it detects overlapping
/// calls.
pub struct Recorder {
    plan: Box<Plan>,
    calls: Mutex<Vec<Call>>,
    active: AtomicUsize,
    overlapped: AtomicBool,
    finished: AtomicUsize,
    /// Messages in the order they were acknowledged.
    acked: Mutex<Vec<Message>>,
}

/// One handler call as recorded.
#[derive(Clone, Debug)]
pub struct Call {
    pub at: Instant,
    pub batch: Vec<Message>,
}

impl Recorder {
    /// `plan(call_index, batch)` says how long the call takes and what it answers.
    pub fn new(
        plan: impl Fn(usize, &[Message]) -> (Duration, Reply) + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            plan: Box::new(plan),
            calls: Mutex::default(),
            active: AtomicUsize::new(0),
            overlapped: AtomicBool::new(false),
            finished: AtomicUsize::new(0),
            acked: Mutex::default(),
        })
    }

    /// Acknowledges everything at once.
    pub fn acking() -> Arc<Self> {
        Self::new(|_, batch| {
            (
                Duration::ZERO,
                Reply::Answer(vec![Settle::Ack; batch.len()]),
            )
        })
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    pub fn batches(&self) -> Vec<Vec<Message>> {
        self.calls().into_iter().map(|c| c.batch).collect()
    }

    /// Every message delivered, in delivery order.
    pub fn delivered(&self) -> Vec<Message> {
        self.batches().concat()
    }

    pub fn acked(&self) -> Vec<Message> {
        self.acked.lock().unwrap().clone()
    }

    pub fn started(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }

    pub fn overlapped(&self) -> bool {
        self.overlapped.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl BatchHandler for Recorder {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        if self.active.fetch_add(1, Ordering::SeqCst) > 0 {
            self.overlapped.store(true, Ordering::SeqCst);
        }
        let index = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(Call {
                at: Instant::now(),
                batch: batch.to_vec(),
            });
            calls.len() - 1
        };
        let (delay, reply) = (self.plan)(index, batch);
        let result = reply.after(delay, batch, &self.acked).await;
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.finished.fetch_add(1, Ordering::SeqCst);
        result
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

/// Once a first message is there, a batch lingers `max_wait` and collects what arrives
/// meanwhile; what comes later goes into the next batch.
pub async fn linger_collects_what_arrives_within_max_wait(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "linger");
    let max_wait = Duration::from_millis(600);
    let recorder = Recorder::acking();
    let sub = subscribe(
        &bus,
        &subject,
        &consumer(prefix, "linger"),
        settings(10, 600),
        &recorder,
    )
    .await;

    let first = Instant::now();
    publish_all(&bus, &subject, &["a".into()]).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    publish_all(&bus, &subject, &["b".into()]).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    publish_all(&bus, &subject, &["c".into()]).await;
    wait_until("the first batch", || recorder.started() >= 1).await;
    let calls = recorder.calls();
    assert_eq!(
        texts(&calls[0].batch),
        ["a", "b", "c"],
        "the batch did not linger for more"
    );
    assert!(
        calls[0].at.duration_since(first) >= max_wait - Duration::from_millis(20),
        "the batch started after {:?}, before max_wait {max_wait:?}",
        calls[0].at.duration_since(first)
    );
    assert!(
        calls[0].at.duration_since(first) < max_wait + PATIENCE / 2,
        "the batch lingered far too long"
    );

    wait_until("the first batch is settled", || recorder.finished() >= 1).await;
    publish_all(&bus, &subject, &["d".into()]).await;
    wait_until("the second batch", || recorder.started() >= 2).await;
    assert_eq!(texts(&recorder.calls()[1].batch), ["d"]);
    sub.unsubscribe().await;
}

/// With `max_wait` zero, a batch holds what queued up while the previous batch ran.
pub async fn zero_wait_batches_what_queued_during_the_previous_batch(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "zero");
    let recorder = Recorder::new(|call, batch| {
        let delay = if call == 0 {
            Duration::from_millis(500)
        } else {
            Duration::ZERO
        };
        (delay, Reply::Answer(vec![Settle::Ack; batch.len()]))
    });
    let sub = subscribe(
        &bus,
        &subject,
        &consumer(prefix, "zero"),
        settings(10, 0),
        &recorder,
    )
    .await;
    publish_all(&bus, &subject, &["a".into()]).await;
    wait_until("the first batch", || recorder.started() >= 1).await;
    publish_all(&bus, &subject, &["b".into(), "c".into(), "d".into()]).await;
    wait_until("all four are delivered", || recorder.delivered().len() >= 4).await;
    let batches: Vec<Vec<String>> = recorder.batches().iter().map(|b| texts(b)).collect();
    assert_eq!(batches, [vec!["a"], vec!["b", "c", "d"]]);
    sub.unsubscribe().await;
}

/// No batch is larger than `max_batch`; a backlog is cut into full batches.
pub async fn max_batch_is_respected(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "max");
    let name = consumer(prefix, "max");
    create_consumer(&bus, &subject, &name).await;
    let sent = numbered("m", 25);
    publish_all(&bus, &subject, &sent).await;

    let recorder = Recorder::acking();
    let sub = subscribe(&bus, &subject, &name, settings(10, 100), &recorder).await;
    wait_until("all 25 are delivered", || recorder.delivered().len() >= 25).await;
    let sizes: Vec<usize> = recorder.batches().iter().map(Vec::len).collect();
    assert!(
        sizes.iter().all(|&n| n <= 10),
        "a batch exceeded max_batch 10: {sizes:?}"
    );
    assert_eq!(
        sizes[0], 10,
        "a backlog of 25 did not fill the first batch: {sizes:?}"
    );
    assert_eq!(texts(&recorder.delivered()), sent);
    sub.unsubscribe().await;
}

/// A durable consumer outlives its subscriptions: what is published while nobody is subscribed
/// is delivered to the next subscriber, in order, once.
pub async fn durable_consumer_keeps_messages_while_unsubscribed(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "durable");
    let name = consumer(prefix, "durable");
    let first = Recorder::acking();
    let sub = subscribe(&bus, &subject, &name, settings(10, 50), &first).await;
    publish_all(&bus, &subject, &["a".into()]).await;
    wait_until("a is settled", || first.finished() >= 1).await;
    sub.unsubscribe().await;

    let sent = numbered("m", 5);
    publish_all(&bus, &subject, &sent).await;
    let second = Recorder::acking();
    let sub = subscribe(&bus, &subject, &name, settings(10, 50), &second).await;
    wait_until("the queued messages are delivered", || {
        second.delivered().len() >= 5
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        texts(&second.delivered()),
        sent,
        "acknowledged a was delivered again, or order was lost"
    );
    assert!(second.delivered().iter().all(|m| m.delivery == 1));
    sub.unsubscribe().await;
}

/// Publication order holds across batches and across redeliveries: a handler that acknowledges a
/// prefix of each batch and redelivers the rest acknowledges everything in publication order.
pub async fn order_is_kept_across_batches_and_redeliveries(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "order");
    let name = consumer(prefix, "order");
    create_consumer(&bus, &subject, &name).await;
    let sent = numbered("m", 30);
    publish_all(&bus, &subject, &sent).await;

    // Even calls acknowledge the first half and redeliver the rest; odd calls acknowledge all.
    let recorder = Recorder::new(|call, batch| {
        let keep = if call % 2 == 0 {
            batch.len() / 2
        } else {
            batch.len()
        };
        let outcomes = (0..batch.len())
            .map(|i| {
                if i < keep {
                    Settle::Ack
                } else {
                    Settle::Redeliver
                }
            })
            .collect();
        (Duration::ZERO, Reply::Answer(outcomes))
    });
    let sub = subscribe(&bus, &subject, &name, settings(7, 50), &recorder).await;
    wait_until("all 30 are acknowledged", || recorder.acked().len() >= 30).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let acked = recorder.acked();
    assert_eq!(
        texts(&acked),
        sent,
        "acknowledged out of publication order, or twice"
    );
    assert!(
        acked.iter().any(|m| m.delivery == 2),
        "no message was redelivered"
    );
    for batch in recorder.batches() {
        assert!(batch.len() <= 7);
    }
    sub.unsubscribe().await;
}

/// The handler of one subscription is never entered while a previous call still runs.
pub async fn batches_never_overlap(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "overlap");
    let recorder = Recorder::new(|_, batch| {
        (
            Duration::from_millis(40),
            Reply::Answer(vec![Settle::Ack; batch.len()]),
        )
    });
    let sub = subscribe(
        &bus,
        &subject,
        &consumer(prefix, "overlap"),
        settings(3, 0),
        &recorder,
    )
    .await;
    let sent = numbered("m", 20);
    for chunk in sent.chunks(4) {
        publish_all(&bus, &subject, chunk).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    wait_until("all 20 are delivered", || recorder.delivered().len() >= 20).await;
    assert!(
        !recorder.overlapped(),
        "two batches of one subscription overlapped"
    );
    assert!(
        recorder.started() >= 7,
        "20 messages in batches of at most 3 took fewer than 7 calls"
    );
    assert_eq!(texts(&recorder.delivered()), sent);
    sub.unsubscribe().await;
}

/// Each message is settled as answered: acknowledged and dropped ones never come again; a
/// redelivered one comes again with `delivery` 2.
pub async fn per_message_outcomes(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "outcomes");
    let recorder = Recorder::new(|_, batch| {
        let outcomes = batch
            .iter()
            .map(|m| match (text(m).as_str(), m.delivery) {
                ("drop", _) => Settle::Drop,
                ("redeliver", 1) => Settle::Redeliver,
                _ => Settle::Ack,
            })
            .collect();
        (Duration::ZERO, Reply::Answer(outcomes))
    });
    let sub = subscribe(
        &bus,
        &subject,
        &consumer(prefix, "outcomes"),
        settings(10, 100),
        &recorder,
    )
    .await;
    publish_all(
        &bus,
        &subject,
        &["ack".into(), "drop".into(), "redeliver".into()],
    )
    .await;
    wait_until("the redelivered message is acknowledged", || {
        recorder.acked().iter().any(|m| text(m) == "redeliver")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let delivered = recorder.delivered();
    let deliveries = |p: &str| -> Vec<u32> {
        delivered
            .iter()
            .filter(|m| text(m) == p)
            .map(|m| m.delivery)
            .collect()
    };
    assert_eq!(deliveries("ack"), [1], "an acknowledged message came again");
    assert_eq!(deliveries("drop"), [1], "a dropped message came again");
    assert_eq!(
        deliveries("redeliver"),
        [1, 2],
        "a redelivered message did not come again exactly once"
    );
    assert!(delivered.iter().all(|m| m.subject == subject));
    sub.unsubscribe().await;
}

async fn whole_batch_redelivery(bus: DynBus, prefix: &str, first_reply: fn(usize) -> Reply) {
    let subject = subject(prefix, "whole");
    let name = consumer(prefix, "whole");
    create_consumer(&bus, &subject, &name).await;
    let sent = numbered("m", 3);
    publish_all(&bus, &subject, &sent).await;

    let recorder = Recorder::new(move |call, batch| {
        let reply = if call == 0 {
            first_reply(batch.len())
        } else {
            Reply::Answer(vec![Settle::Ack; batch.len()])
        };
        (Duration::ZERO, reply)
    });
    let mut s = settings(10, 50);
    s.redelivery_delay = Duration::from_millis(400);
    let sub = subscribe(&bus, &subject, &name, s, &recorder).await;
    wait_until("the batch is delivered again", || recorder.started() >= 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = recorder.calls();
    assert_eq!(
        calls.len(),
        2,
        "the redelivered batch was not settled once and for all"
    );
    assert_eq!(texts(&calls[0].batch), sent);
    assert_eq!(
        texts(&calls[1].batch),
        sent,
        "the whole batch was not redelivered, in order"
    );
    assert!(
        calls[1].batch.iter().all(|m| m.delivery == 2),
        "redelivered messages must have delivery 2"
    );
    let pause = calls[1].at.duration_since(calls[0].at);
    assert!(
        pause >= s.redelivery_delay - Duration::from_millis(20),
        "redelivered after {pause:?}, before the redelivery delay"
    );
    sub.unsubscribe().await;
}

/// A handler error redelivers the whole batch, in order, after `redelivery_delay`.
pub async fn handler_error_redelivers_the_whole_batch(bus: DynBus, prefix: &str) {
    whole_batch_redelivery(bus, prefix, |_| Reply::Fail).await;
}

/// Answering a list of the wrong length counts as an error: the whole batch is redelivered.
pub async fn wrong_number_of_answers_redelivers_the_whole_batch(bus: DynBus, prefix: &str) {
    whole_batch_redelivery(bus, prefix, |n| Reply::Answer(vec![Settle::Ack; n - 1])).await;
}

/// Unsubscribing while a slow handler runs lets it finish and settles its batch within the drain
/// timeout; no batch starts after it.
pub async fn unsubscribe_drains_the_running_batch(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "drain");
    let name = consumer(prefix, "drain");
    let slow = Recorder::new(|_, batch| {
        (
            Duration::from_millis(500),
            Reply::Answer(vec![Settle::Ack; batch.len()]),
        )
    });
    let mut s = settings(10, 50);
    s.drain_timeout = Duration::from_secs(3);
    let sub = subscribe(&bus, &subject, &name, s, &slow).await;
    publish_all(&bus, &subject, &["a".into()]).await;
    wait_until("the slow batch starts", || slow.started() >= 1).await;
    publish_all(&bus, &subject, &["b".into()]).await;

    let asked = Instant::now();
    sub.unsubscribe().await;
    let took = asked.elapsed();
    assert_eq!(
        slow.finished(),
        1,
        "unsubscribe returned before the running batch finished"
    );
    assert!(
        took < s.drain_timeout,
        "the drain took {took:?}, past the drain timeout"
    );

    publish_all(&bus, &subject, &["c".into()]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(slow.started(), 1, "a batch started after unsubscribe");
    assert_eq!(texts(&slow.delivered()), ["a"]);

    let next = Recorder::acking();
    let sub = subscribe(&bus, &subject, &name, settings(10, 50), &next).await;
    wait_until("b and c are delivered", || next.delivered().len() >= 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        texts(&next.delivered()),
        ["b", "c"],
        "the drained batch was not settled"
    );
    sub.unsubscribe().await;
}

/// A handler that outlives the drain timeout leaves its batch unsettled: unsubscribe returns after
/// the drain timeout and the next subscriber gets the batch again.
pub async fn unsettled_after_the_drain_timeout_are_redelivered(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "unsettled");
    let name = consumer(prefix, "unsettled");
    let stuck = Recorder::new(|_, _| (Duration::ZERO, Reply::Hang));
    let mut s = settings(10, 50);
    s.drain_timeout = Duration::from_millis(400);
    let sub = subscribe(&bus, &subject, &name, s, &stuck).await;
    publish_all(&bus, &subject, &["a".into(), "b".into()]).await;
    wait_until("the stuck batch starts", || stuck.started() >= 1).await;
    wait_until("both are in flight", || stuck.delivered().len() >= 2).await;

    let asked = Instant::now();
    sub.unsubscribe().await;
    let took = asked.elapsed();
    assert!(
        took >= s.drain_timeout - Duration::from_millis(20),
        "gave up after {took:?}, before the drain timeout"
    );
    assert!(
        took < s.drain_timeout + PATIENCE / 2,
        "unsubscribe hung ({took:?})"
    );

    let next = Recorder::acking();
    let sub = subscribe(&bus, &subject, &name, settings(10, 50), &next).await;
    wait_until("the unsettled messages are redelivered", || {
        next.delivered().len() >= 2
    })
    .await;
    let delivered = next.delivered();
    assert_eq!(texts(&delivered), ["a", "b"]);
    assert!(
        delivered.iter().all(|m| m.delivery >= 2),
        "a redelivery must count: {delivered:?}"
    );
    sub.unsubscribe().await;
}

/// The order after a crash (docs/rules.md §5, docs/decisions.md 30): the deliveries a subscriber
/// left unsettled when it vanished come back before any message published after them, whether
/// that newer message was published while they were in flight or once the subscriber was gone.
/// The subscriber vanishes as the port lets one: its handler never returns and unsubscribing
/// gives up on it after the drain timeout. The next subscriber takes one message per batch, so
/// that the order is the order of its batches, not of one batch's contents.
pub async fn redeliveries_of_a_vanished_subscriber_come_before_newer_messages(
    bus: DynBus,
    prefix: &str,
) {
    let subject = subject(prefix, "vanished");
    let name = consumer(prefix, "vanished");
    // a and b queue up before the subscriber comes, so that its one batch holds both.
    create_consumer(&bus, &subject, &name).await;
    publish_all(&bus, &subject, &["a".into(), "b".into()]).await;
    let stuck = Recorder::new(|_, _| (Duration::ZERO, Reply::Hang));
    let mut s = settings(2, 0);
    s.drain_timeout = Duration::from_millis(300);
    let sub = subscribe(&bus, &subject, &name, s, &stuck).await;
    wait_until("a and b are in flight", || stuck.delivered().len() >= 2).await;
    assert_eq!(texts(&stuck.delivered()), ["a", "b"]);
    // Newer, while a and b are in flight; the stuck subscriber never asks for it.
    publish_all(&bus, &subject, &["c".into()]).await;
    sub.unsubscribe().await;
    // Newer, once the subscriber is gone.
    publish_all(&bus, &subject, &["d".into()]).await;

    let next = Recorder::acking();
    let sub = subscribe(&bus, &subject, &name, settings(1, 0), &next).await;
    let why = "a newer message came before an unsettled delivery, or something came twice";
    let deliveries = delivered_in_order(&next, why).await;
    assert!(
        deliveries[0] >= 2 && deliveries[1] >= 2,
        "a and b are redeliveries: {deliveries:?}"
    );
    assert_eq!(deliveries[2..], [1, 1], "c and d are first deliveries");
    assert_eq!(stuck.started(), 1, "the vanished subscriber took one batch");
    sub.unsubscribe().await;
}

/// `max_batch` above [`MAX_IN_FLIGHT`] is clamped: no batch carries more.
pub async fn in_flight_is_bounded(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "inflight");
    let name = consumer(prefix, "inflight");
    create_consumer(&bus, &subject, &name).await;
    let sent = numbered("m", 2500);
    publish_all(&bus, &subject, &sent).await;

    let recorder = Recorder::acking();
    let sub = subscribe(&bus, &subject, &name, settings(5000, 200), &recorder).await;
    wait_until("all 2500 are delivered", || {
        recorder.delivered().len() >= 2500
    })
    .await;
    let sizes: Vec<usize> = recorder.batches().iter().map(Vec::len).collect();
    assert!(
        sizes.iter().all(|&n| n <= MAX_IN_FLIGHT),
        "a batch exceeded MAX_IN_FLIGHT: {sizes:?}"
    );
    assert_eq!(
        sizes[0], MAX_IN_FLIGHT,
        "a backlog of 2500 did not fill the first batch: {sizes:?}"
    );
    assert_eq!(texts(&recorder.delivered()), sent);
    sub.unsubscribe().await;
}

/// Several subscriptions to one durable consumer share its messages: each goes to exactly one,
/// and both get some.
pub async fn subscriptions_of_one_consumer_share_its_messages(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "shared");
    let name = consumer(prefix, "shared");
    let plan = |_: usize, batch: &[Message]| {
        (
            Duration::from_millis(30),
            Reply::Answer(vec![Settle::Ack; batch.len()]),
        )
    };
    let (a, b) = (Recorder::new(plan), Recorder::new(plan));
    let sub_a = subscribe(&bus, &subject, &name, settings(2, 0), &a).await;
    let sub_b = subscribe(&bus, &subject, &name, settings(2, 0), &b).await;
    let sent = numbered("m", 20);
    publish_all(&bus, &subject, &sent).await;
    wait_until("all 20 are delivered", || {
        a.delivered().len() + b.delivered().len() >= 20
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut all = texts(&a.delivered());
    all.extend(texts(&b.delivered()));
    all.sort();
    assert_eq!(
        all, sent,
        "a message was delivered to both subscriptions, or lost"
    );
    // Shared, not one taking everything: each handler call takes 30 ms for at most two of the
    // twenty, so while one subscription handles a batch the other takes the next.
    assert!(
        !a.delivered().is_empty() && !b.delivered().is_empty(),
        "one subscription got nothing: {:?} / {:?}",
        texts(&a.delivered()),
        texts(&b.delivered())
    );
    sub_a.unsubscribe().await;
    sub_b.unsubscribe().await;
}

/// A durable consumer's subject filter follows NATS wildcards: `*` one token, `>` the rest.
pub async fn durable_consumers_match_wildcards(bus: DynBus, prefix: &str) {
    let star = Recorder::acking();
    let rest = Recorder::acking();
    let sub_star = subscribe(
        &bus,
        &subject(prefix, "w.*.state"),
        &consumer(prefix, "star"),
        settings(10, 50),
        &star,
    )
    .await;
    let sub_rest = subscribe(
        &bus,
        &subject(prefix, "w.>"),
        &consumer(prefix, "rest"),
        settings(10, 50),
        &rest,
    )
    .await;
    let subjects = [
        "w.m1.state",
        "w.m1.other",
        "w.m1.state.x",
        "w.m2.state",
        "x.m1.state",
    ];
    for tail in subjects {
        bus.publish(&subject(prefix, tail), payload(tail), None)
            .await
            .unwrap();
    }
    wait_until("`>` gets its four", || rest.delivered().len() >= 4).await;
    wait_until("`*` gets its two", || star.delivered().len() >= 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(texts(&star.delivered()), ["w.m1.state", "w.m2.state"]);
    assert_eq!(
        texts(&rest.delivered()),
        ["w.m1.state", "w.m1.other", "w.m1.state.x", "w.m2.state"]
    );
    let subjects: Vec<String> = star.delivered().iter().map(|m| m.subject.clone()).collect();
    assert_eq!(
        subjects,
        [subject(prefix, "w.m1.state"), subject(prefix, "w.m2.state")]
    );
    sub_star.unsubscribe().await;
    sub_rest.unsubscribe().await;
}

/// `subscribe` is ack-less: it refuses acknowledgements, durable names and queue groups.
pub async fn ackless_subscribe_refuses_acknowledged_durable_and_queue_consumers(
    bus: DynBus,
    prefix: &str,
) {
    let subject = subject(prefix, "refused");
    let refusals = [
        (
            "acknowledge",
            LiveOptions {
                acknowledge: true,
                ..LiveOptions::default()
            },
        ),
        (
            "durable",
            LiveOptions {
                durable: Some(consumer(prefix, "live")),
                ..LiveOptions::default()
            },
        ),
        (
            "queue group",
            LiveOptions {
                queue_group: Some(consumer(prefix, "group")),
                ..LiveOptions::default()
            },
        ),
    ];
    for (what, options) in refusals {
        match bus.subscribe(&subject, options).await {
            Err(BusError::Refused(_)) => {}
            Err(e) => panic!("{what}: expected Refused, got {e}"),
            Ok(_) => panic!("{what}: an ack-less subscription with {what} was accepted"),
        }
    }
}

/// A plain live subscriber gets the messages matching its filter published from the moment it
/// subscribed, in order, each once (`delivery` 1).
pub async fn live_subscribers_get_matching_messages_from_subscription_on(
    bus: DynBus,
    prefix: &str,
) {
    let live = |tail: &str| subject(prefix, &format!("live.{tail}"));
    bus.publish(&live("a"), payload("before"), None)
        .await
        .unwrap();
    let mut star = bus
        .subscribe(&live("*"), LiveOptions::default())
        .await
        .expect("subscribe live.*");
    let mut rest = bus
        .subscribe(&live(">"), LiveOptions::default())
        .await
        .expect("subscribe live.>");

    for (tail, body) in [("a.deep", "deep"), ("a", "one"), ("b", "two"), ("c", "end")] {
        bus.publish(&live(tail), payload(body), None).await.unwrap();
    }
    bus.publish(&subject(prefix, "other.a"), payload("other"), None)
        .await
        .unwrap();
    bus.publish(&live("z.end"), payload("end"), None)
        .await
        .unwrap();

    async fn until_end(sub: &mut swath_application::ports::LiveSubscription) -> Vec<Message> {
        let mut got = Vec::new();
        loop {
            let message = tokio::time::timeout(PATIENCE, sub.messages.recv())
                .await
                .expect("a live message in time")
                .expect("the live subscription is open");
            let end = text(&message) == "end";
            got.push(message);
            if end {
                return got;
            }
        }
    }
    let got = until_end(&mut star).await;
    assert_eq!(texts(&got), ["one", "two", "end"], "`*` live subscriber");
    assert_eq!(got[0].subject, live("a"));
    assert!(got.iter().all(|m| m.delivery == 1));
    let mut got = until_end(&mut rest).await;
    got.extend(until_end(&mut rest).await);
    assert_eq!(
        texts(&got),
        ["deep", "one", "two", "end", "end"],
        "`>` live subscriber"
    );
}

/// A publish with a de-duplication id seen before succeeds and does nothing.
pub async fn publish_with_a_seen_dedup_id_is_a_no_op(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "dedup");
    let recorder = Recorder::acking();
    let sub = subscribe(
        &bus,
        &subject,
        &consumer(prefix, "dedup"),
        settings(10, 50),
        &recorder,
    )
    .await;
    let id = |n: &str| Some(format!("{prefix}-{n}"));
    bus.publish(&subject, payload("x1"), id("x"))
        .await
        .expect("first publish with id x");
    bus.publish(&subject, payload("x2"), id("x"))
        .await
        .expect("a duplicate publish must succeed");
    bus.publish(&subject, payload("y"), id("y")).await.unwrap();
    bus.publish(&subject, payload("n1"), None).await.unwrap();
    bus.publish(&subject, payload("n2"), None).await.unwrap();
    bus.publish(&subject, payload("x3"), id("x"))
        .await
        .expect("a duplicate publish must succeed");
    bus.publish(&subject, payload("end"), id("end"))
        .await
        .unwrap();
    wait_until("end is delivered", || {
        recorder.delivered().iter().any(|m| text(m) == "end")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(texts(&recorder.delivered()), ["x1", "y", "n1", "n2", "end"]);
    sub.unsubscribe().await;
}

/// `publish_all` stores its messages in the order given, a seen de-duplication id included as a
/// no-op, and answers one result per message (here: every one succeeds).
pub async fn publish_all_stores_in_order_and_answers_each(bus: DynBus, prefix: &str) {
    let subject = subject(prefix, "all");
    let recorder = Recorder::acking();
    let sub = subscribe(
        &bus,
        &subject,
        &consumer(prefix, "all"),
        settings(100, 50),
        &recorder,
    )
    .await;
    let id = |n: usize| Some(format!("{prefix}-{n}"));
    // More than a pipelining window (NATS: 256), with a repeated id in the middle.
    let mut messages: Vec<Publication> = (0..600)
        .map(|n| Publication {
            subject: subject.clone(),
            payload: payload(format!("m{n}")),
            dedup_id: if n % 2 == 0 { id(n) } else { None },
        })
        .collect();
    messages.insert(
        300,
        Publication {
            subject: subject.clone(),
            payload: payload("repeat"),
            dedup_id: id(4),
        },
    );
    let results = bus.publish_all(messages).await;
    assert_eq!(results.len(), 601);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    wait_until("the last message is delivered", || {
        recorder.delivered().iter().any(|m| text(m) == "m599")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let expected: Vec<String> = (0..600).map(|n| format!("m{n}")).collect();
    assert_eq!(texts(&recorder.delivered()), expected);
    sub.unsubscribe().await;
}
