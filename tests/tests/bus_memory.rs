//! The event bus contract and its partition contract against [`MemoryBus`], with Tokio's clock
//! paused (timings are exact and the suite takes no real time), plus what only the memory bus
//! promises.

use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::{
    BatchHandler, BatchSettings, BusError, HandlerError, LiveOptions, Message, Partitioning,
    Settle, StartAt, Subscription,
};
use swath_memory::{MemoryBus, MemoryBusSettings};
use swath_tests::bus_contract::{
    self, create_consumer, settings, wait_until, DynBus, Recorder, Reply,
};
use swath_tests::partition_contract;
use tokio::time::Instant;

swath_tests::contract_suite!(
    bus_contract,
    #[tokio::test(start_paused = true)]
    bus = async { Arc::new(MemoryBus::default()) as DynBus },
    root = "contract",
);

/// A memory bus partitioning `pattern` into the suite's partitions.
fn partitioned_bus(pattern: &str) -> DynBus {
    bus_with(MemoryBusSettings {
        partitioning: Some(partition_contract::partitioning(pattern)),
        ..MemoryBusSettings::default()
    })
}

swath_tests::contract_suite!(
    partition_contract,
    #[tokio::test(start_paused = true)]
    bus = |pattern: String| async move { partitioned_bus(&pattern) },
    root = "partitions",
);

fn bus_with(settings: MemoryBusSettings) -> DynBus {
    Arc::new(MemoryBus::new(settings))
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect()
}

async fn publish(bus: &DynBus, subject: &str, body: &str) -> Result<(), BusError> {
    bus.publish(subject, Bytes::from(body.to_owned()), None)
        .await
}

#[tokio::test(start_paused = true)]
async fn linger_lasts_exactly_max_wait_from_the_first_message() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    let recorder = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.linger", "linger", settings(10, 250), recorder.clone())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first = Instant::now();
    publish(&bus, "t.linger", "a").await.unwrap();
    wait_until("the batch", || recorder.started() >= 1).await;
    assert_eq!(recorder.calls()[0].at - first, Duration::from_millis(250));
    sub.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn a_full_batch_does_not_wait_for_the_linger() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    let recorder = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.full", "full", settings(3, 10_000), recorder.clone())
        .await
        .unwrap();
    let first = Instant::now();
    for body in ["a", "b", "c"] {
        publish(&bus, "t.full", body).await.unwrap();
    }
    wait_until("the batch", || recorder.started() >= 1).await;
    assert_eq!(recorder.calls()[0].at, first, "a full batch lingered");
    sub.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn messages_published_before_the_consumer_exists_are_not_delivered() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    publish(&bus, "t.history", "old").await.unwrap();
    let recorder = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.history", "history", settings(10, 0), recorder.clone())
        .await
        .unwrap();
    publish(&bus, "t.history", "new").await.unwrap();
    wait_until("new is delivered", || recorder.started() >= 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(texts(&recorder.delivered()), ["new"]);
    sub.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn publish_to_a_full_queue_is_refused_for_every_consumer() {
    let bus = bus_with(MemoryBusSettings {
        queue_capacity: 2,
        ..MemoryBusSettings::default()
    });
    create_consumer(&bus, "t.cap.*", "narrow").await;
    publish(&bus, "t.cap.a", "1").await.unwrap();
    publish(&bus, "t.cap.a", "2").await.unwrap();
    // `wide` is created now, so its queue is empty while `narrow`'s is full.
    create_consumer(&bus, "t.cap.>", "wide").await;
    let mut live = bus
        .subscribe("t.cap.a", LiveOptions::default())
        .await
        .unwrap();
    match publish(&bus, "t.cap.a", "3").await {
        Err(BusError::Full(subject)) => assert_eq!(subject, "t.cap.a"),
        other => panic!("expected Full, got {other:?}"),
    }
    // A subject `narrow` does not match is still accepted.
    publish(&bus, "t.cap.a.b", "4").await.unwrap();
    assert!(
        live.messages.try_recv().is_err(),
        "a refused message reached a live subscriber"
    );

    let wide = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.cap.>", "wide", settings(10, 0), wide.clone())
        .await
        .unwrap();
    wait_until("wide gets 4", || wide.started() >= 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        texts(&wide.delivered()),
        ["4"],
        "the refused message was stored for another consumer"
    );
    sub.unsubscribe().await;

    let narrow = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.cap.*", "narrow", settings(10, 0), narrow.clone())
        .await
        .unwrap();
    wait_until("narrow drains", || narrow.delivered().len() >= 2).await;
    wait_until("narrow settles", || narrow.finished() >= 1).await;
    publish(&bus, "t.cap.a", "5")
        .await
        .expect("room again once drained");
    wait_until("narrow gets 5", || narrow.delivered().len() >= 3).await;
    assert_eq!(texts(&narrow.delivered()), ["1", "2", "5"]);
    sub.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn the_dedup_window_forgets_the_oldest_ids() {
    let bus = bus_with(MemoryBusSettings {
        dedup_window: 2,
        ..MemoryBusSettings::default()
    });
    let recorder = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.dedup", "dedup", settings(10, 0), recorder.clone())
        .await
        .unwrap();
    for (body, id) in [("a", "a"), ("b", "b"), ("b2", "b"), ("c", "c"), ("a2", "a")] {
        bus.publish("t.dedup", Bytes::from(body), Some(id.to_owned()))
            .await
            .unwrap();
    }
    wait_until("four are delivered", || recorder.delivered().len() >= 4).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(texts(&recorder.delivered()), ["a", "b", "c", "a2"]);
    sub.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn a_slow_live_subscriber_loses_messages_and_never_blocks_publishers() {
    let bus = bus_with(MemoryBusSettings {
        live_buffer: 2,
        ..MemoryBusSettings::default()
    });
    let mut live = bus
        .subscribe("t.live.>", LiveOptions::default())
        .await
        .unwrap();
    for i in 0..5 {
        publish(&bus, "t.live.a", &i.to_string())
            .await
            .expect("a slow subscriber must not fail a publish");
    }
    let mut got = Vec::new();
    while let Ok(message) = live.messages.try_recv() {
        got.push(message);
    }
    assert_eq!(texts(&got), ["0", "1"]);
    publish(&bus, "t.live.a", "5").await.unwrap();
    assert_eq!(texts(&[live.messages.try_recv().unwrap()]), ["5"]);

    // A closed subscription is pruned, not an error.
    drop(live);
    publish(&bus, "t.live.a", "6").await.unwrap();
}

struct Panicking {
    calls: AtomicUsize,
}

#[async_trait]
impl BatchHandler for Panicking {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("a handler bug");
        }
        Ok(vec![Settle::Ack; batch.len()])
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_is_treated_as_an_error() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    let handler = Arc::new(Panicking {
        calls: AtomicUsize::new(0),
    });
    let mut s = settings(10, 0);
    s.redelivery_delay = Duration::from_millis(300);
    let sub = bus
        .subscribe_batch("t.panic", "panic", s, handler.clone())
        .await
        .unwrap();
    let watcher = Recorder::acking();
    let watch = bus
        .subscribe_batch("t.panic", "watch", settings(10, 0), watcher.clone())
        .await
        .unwrap();
    publish(&bus, "t.panic", "a").await.unwrap();
    let start = Instant::now();
    wait_until("the batch is redelivered", || {
        handler.calls.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(
        start.elapsed() >= s.redelivery_delay,
        "redelivered before the redelivery delay"
    );
    publish(&bus, "t.panic", "b").await.unwrap();
    wait_until("the bus still delivers", || {
        handler.calls.load(Ordering::SeqCst) >= 3
    })
    .await;
    wait_until("other consumers still work", || {
        watcher.delivered().len() >= 2
    })
    .await;
    sub.unsubscribe().await;
    watch.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_only_redelivers_pauses_before_the_next_one() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    let recorder = Recorder::new(|call, batch| {
        let outcome = if call == 0 {
            Settle::Redeliver
        } else {
            Settle::Ack
        };
        (Duration::ZERO, Reply::Answer(vec![outcome; batch.len()]))
    });
    let mut s = settings(10, 0);
    s.redelivery_delay = Duration::from_millis(300);
    let sub = bus
        .subscribe_batch("t.nak", "nak", s, recorder.clone())
        .await
        .unwrap();
    publish(&bus, "t.nak", "a").await.unwrap();
    wait_until("a comes again", || recorder.started() >= 2).await;
    let calls = recorder.calls();
    assert_eq!(calls[1].at - calls[0].at, s.redelivery_delay);
    assert_eq!(calls[1].batch[0].delivery, 2);
    sub.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn unsubscribe_while_lingering_takes_nothing() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    let recorder = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.idle", "idle", settings(10, 10_000), recorder.clone())
        .await
        .unwrap();
    publish(&bus, "t.idle", "a").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    sub.unsubscribe().await;
    assert_eq!(recorder.started(), 0);
    let next = Recorder::acking();
    let sub = bus
        .subscribe_batch("t.idle", "idle", settings(10, 0), next.clone())
        .await
        .unwrap();
    wait_until("a is delivered", || next.started() >= 1).await;
    assert_eq!(
        next.calls()[0].batch[0].delivery,
        1,
        "a message never handed out was counted as delivered"
    );
    sub.unsubscribe().await;
}

#[tokio::test(start_paused = true)]
async fn dropping_a_subscription_stops_its_worker() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    let recorder = Recorder::acking();
    drop(
        bus.subscribe_batch("t.drop", "drop", settings(10, 0), recorder.clone())
            .await
            .unwrap(),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    publish(&bus, "t.drop", "a").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(recorder.started(), 0);
}

#[tokio::test]
async fn invalid_names_and_subjects_are_refused() {
    let bus: DynBus = Arc::new(MemoryBus::default());
    let refused = |r: Result<(), BusError>| matches!(r, Err(BusError::Refused(_)));
    assert!(refused(publish(&bus, "t.*", "a").await));
    assert!(refused(publish(&bus, "t..a", "a").await));
    let handler = Recorder::acking();
    let sub = |subject: &'static str, consumer: &'static str| {
        let bus = bus.clone();
        let handler = handler.clone();
        async move {
            bus.subscribe_batch(subject, consumer, settings(10, 0), handler)
                .await
                .map(|_| ())
        }
    };
    assert!(refused(sub("t.a", "has.dot").await));
    assert!(refused(sub("t.>.a", "bad-filter").await));
    sub("t.a", "ok").await.unwrap();
    assert!(
        refused(sub("t.b", "ok").await),
        "a durable consumer's filter cannot change"
    );
    assert!(bus.ping().await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn contract_suite_runs_on_a_shared_bus() {
    // Scenarios only touch their own prefix, so they may share one bus (as they will a broker).
    let bus: DynBus = Arc::new(MemoryBus::default());
    bus_contract::per_message_outcomes(bus.clone(), "shared.one").await;
    bus_contract::publish_with_a_seen_dedup_id_is_a_no_op(bus.clone(), "shared.two").await;
    bus_contract::durable_consumers_match_wildcards(bus, "shared.three").await;
}

// ---------------------------------------------------------------------------------------------
// The ingest handler on the memory bus and store: what the store refuses is isolated, a store
// that is down drops nothing (issue 13; the same scenarios run on NATS and PostgreSQL).

struct MemoryBacklog(MemoryBus);

#[async_trait]
impl swath_tests::poison::Backlog for MemoryBacklog {
    async fn backlog(&self, consumer: &str) -> u64 {
        self.0.pending(consumer) as u64
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_state_never_blocks_the_stream() {
    let bus = MemoryBus::default();
    let store = swath_memory::MemoryStore::new(swath_memory::MemoryStoreSettings::default());
    let faulty = swath_tests::poison::Faulty::new(Arc::new(store.clone()));
    swath_tests::poison::a_refused_state_never_blocks_the_stream(
        Arc::new(bus.clone()),
        &MemoryBacklog(bus),
        "poison",
        faulty,
        &store,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_down_drops_nothing() {
    let bus = MemoryBus::default();
    let store = swath_memory::MemoryStore::new(swath_memory::MemoryStoreSettings::default());
    let faulty = swath_tests::poison::Faulty::new(Arc::new(store.clone()));
    swath_tests::poison::a_store_that_is_down_drops_nothing(
        Arc::new(bus.clone()),
        &MemoryBacklog(bus),
        "down",
        faulty,
        &store,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subject_is_the_gateways_identity() {
    let bus = MemoryBus::default();
    let store = swath_memory::MemoryStore::new(swath_memory::MemoryStoreSettings::default());
    swath_tests::poison::the_subject_is_the_gateways_identity(
        Arc::new(bus.clone()),
        &MemoryBacklog(bus),
        "identity",
        Arc::new(store.clone()),
        &store,
    )
    .await;
}

/// The memory bus keeps no stream history: `StartAt::Stored` starts a new consumer with what is
/// published after it, like `StartAt::New`, partitioned or not (the module documentation).
#[tokio::test(start_paused = true)]
async fn a_stored_start_is_a_new_start_on_the_memory_bus() {
    for bus in [
        bus_with(MemoryBusSettings::default()),
        partitioned_bus("t.stored.*"),
    ] {
        publish(&bus, "t.stored.m1", "old").await.unwrap();
        let recorder = Recorder::acking();
        let s = BatchSettings {
            start: StartAt::Stored,
            ..settings(10, 0)
        };
        let sub = bus
            .subscribe_batch("t.stored.*", "stored", s, recorder.clone())
            .await
            .unwrap();
        publish(&bus, "t.stored.m1", "new").await.unwrap();
        wait_until("new is delivered", || recorder.started() >= 1).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(texts(&recorder.delivered()), ["new"]);
        sub.unsubscribe().await;
    }
}

/// On a partitioned bus, a consumer of other subjects keeps one queue and holds no partition;
/// the queue capacity counts a partitioned consumer's partitions together.
#[tokio::test(start_paused = true)]
async fn partitions_leave_other_consumers_alone_and_share_the_capacity() {
    let partitioning = Partitioning::new("t.part.*", 4).unwrap();
    let memory = MemoryBus::new(MemoryBusSettings {
        queue_capacity: 3,
        partitioning: Some(partitioning.clone()),
        ..MemoryBusSettings::default()
    });
    let bus: DynBus = Arc::new(memory.clone());
    create_consumer(&bus, "t.part.*", "parts").await;
    let other = Recorder::acking();
    let other_sub = bus
        .subscribe_batch("t.other.>", "other", settings(10, 0), other.clone())
        .await
        .unwrap();
    assert_eq!(other_sub.partitions_owned(), 0);

    let mut partitions = Vec::new();
    let keys: Vec<String> = (0..)
        .map(|i| format!("m{i}"))
        .filter(|k| {
            let p = partitioning.partition_of_key(k);
            let new = !partitions.contains(&p);
            partitions.push(p);
            new
        })
        .take(3)
        .collect();
    for key in &keys {
        publish(&bus, &format!("t.part.{key}"), key).await.unwrap();
    }
    assert_eq!(
        memory.pending("parts"),
        3,
        "one message in each of three partitions"
    );
    match publish(&bus, "t.part.m0", "over").await {
        Err(BusError::Full(_)) => {}
        other => panic!("expected Full for the whole consumer, got {other:?}"),
    }
    publish(&bus, "t.other.a", "o").await.unwrap();
    wait_until("the other consumer gets its message", || {
        other.started() >= 1
    })
    .await;
    assert_eq!(texts(&other.delivered()), ["o"]);
    other_sub.unsubscribe().await;
}

/// However many subscriptions, every partition is held and each subscription holds at most
/// `ceil(P / subscriptions)`, as they come and as they go. The memory bus takes partitions as a
/// subscription starts, before any message.
#[tokio::test(start_paused = true)]
async fn each_subscription_holds_at_most_its_share() {
    let bus = partitioned_bus("t.share.*");
    let p = partition_contract::PARTITIONS as usize;
    let recorder = Recorder::acking();
    let balanced = |subs: &[Subscription]| {
        let quota = p.div_ceil(subs.len());
        let owned: Vec<usize> = subs.iter().map(Subscription::partitions_owned).collect();
        owned.iter().sum::<usize>() == p && owned.iter().all(|&o| o <= quota)
    };
    let mut subs = Vec::new();
    for n in 1..=p + 1 {
        let sub = bus
            .subscribe_batch("t.share.*", "share", settings(10, 0), recorder.clone())
            .await
            .unwrap();
        subs.push(sub);
        wait_until(&format!("{n} subscriptions share"), || balanced(&subs)).await;
    }
    while subs.len() > 1 {
        subs.remove(0).unsubscribe().await;
        let n = subs.len();
        wait_until(&format!("{n} remaining subscriptions share"), || {
            balanced(&subs)
        })
        .await;
    }
    assert_eq!(subs[0].partitions_owned(), p);
}

/// The partition scenarios again in real time on a multi-threaded runtime: lane workers then
/// really run in parallel, which the paused single-threaded runs above cannot show. The bus is
/// given as a function of the pattern here (the form a broker's suite uses).
mod real_time {
    use super::*;

    async fn bus(pattern: String) -> DynBus {
        partitioned_bus(&pattern)
    }

    swath_tests::contract_suite!(
        partition_contract,
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        bus = bus,
        root = "partitions_rt",
    );
}
