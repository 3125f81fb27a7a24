//! An exclusive consumer on JetStream (`BatchSettings::exclusive`, decision 153): one pinned
//! consumer of an unpartitioned subject, so that a holder killed with messages in hand leaves
//! them to the next holder before anything newer, in stream order; and the hand-over from an
//! earlier version's unpinned consumer of the same name.
//!
//! Runs against the server of `SWATH_TEST_NATS_URL` (NATS 2.11 or newer); each test has a stream
//! and subject root of its own. Timings are short (`ack_wait` 2 s, pull expiry 1 s, so a pin
//! moves 4 s after its holder's last pull). Real time.

use bytes::Bytes;
use std::time::Duration;
use swath_application::ports::{BatchSettings, EventBus, Message};
use swath_nats::{NatsBus, NatsBusSettings, StreamSpec};
use swath_tests::bus_contract::{settings, wait_until, Recorder, Reply};

const URL_VAR: &str = "SWATH_TEST_NATS_URL";

fn nats_url() -> String {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("{URL_VAR} is not set: run this test through `cargo test` with it set"),
    }
}

/// A stream name and an unpartitioned subject root (`<root>.>`) no other test uses.
fn fresh() -> (String, String, StreamSpec) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let id = &id[..16];
    let stream = format!("SWATH_TEST_{}", id.to_uppercase());
    let root = format!("swathtest.{id}");
    let spec = StreamSpec {
        max_age: Some(Duration::from_secs(600)),
        ..StreamSpec::new(&stream, [format!("{root}.>")])
    };
    (stream, root, spec)
}

/// Short timings: a pin moves 4 s after its holder's last pull.
fn quick(spec: StreamSpec) -> NatsBusSettings {
    NatsBusSettings {
        ack_wait: Duration::from_secs(2),
        pull_expiry: Duration::from_secs(1),
        idle_heartbeat: Duration::from_millis(500),
        membership_heartbeat: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        ..NatsBusSettings::with_streams(vec![spec])
    }
}

async fn connect(settings: &NatsBusSettings) -> NatsBus {
    NatsBus::connect(&nats_url(), settings.clone())
        .await
        .expect("connect to NATS")
}

fn exclusive(max_batch: usize) -> BatchSettings {
    BatchSettings {
        exclusive: true,
        ..settings(max_batch, 0)
    }
}

/// Message `n` goes to one of three subjects (`<root>.mower.m<n % 3>.event`, like the
/// notifications' subjects), its payload is `n`: the order asserted is the stream's, across
/// subjects.
async fn publish_n(bus: &NatsBus, root: &str, n: usize) {
    bus.publish(
        &format!("{root}.mower.m{}.event", n % 3),
        Bytes::from(n.to_string()),
        None,
    )
    .await
    .expect("publish");
}

fn numbers(messages: &[Message]) -> Vec<usize> {
    messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).parse().expect("n"))
        .collect()
}

/// A holder killed with six messages in hand (its runtime dropped: no settlement, no
/// unsubscribe) while a second replica's subscription waits: the second gets the six
/// redeliveries before the three messages published after the kill, and handles all nine in
/// stream order. Without the pin, the waiting subscription would have taken the newer three at
/// once and the six `ack_wait` later (decision 147's gap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_dead_holder_s_messages_come_to_the_next_before_newer_ones_in_stream_order() {
    let (stream, root, spec) = fresh();
    let subject = format!("{root}.>");
    let nats = quick(spec);
    let bus = connect(&nats).await;
    // The consumer exists and holds six messages before the holder subscribes.
    bus.subscribe_batch(&subject, "order", exclusive(6), Recorder::acking())
        .await
        .unwrap()
        .unsubscribe()
        .await;
    for n in 0..6 {
        publish_n(&bus, &root, n).await;
    }
    let stuck = Recorder::new(|_, _| (Duration::ZERO, Reply::Hang));
    let (holder_nats, holder_subject, holder_stuck) =
        (nats.clone(), subject.clone(), stuck.clone());
    let (die, dying) = std::sync::mpsc::channel::<()>();
    let holder = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let bus = connect(&holder_nats).await;
            let sub = bus
                .subscribe_batch(&holder_subject, "order", exclusive(6), holder_stuck.clone())
                .await
                .unwrap();
            wait_until("the holder has all six", || {
                holder_stuck.delivered().len() >= 6
            })
            .await;
            std::mem::forget(sub);
        });
        // Dropping the runtime cancels every task of the holder, its connection with them.
        let _ = dying.recv();
        drop(runtime);
    });
    wait_until("the holder has all six", || stuck.delivered().len() >= 6).await;
    // The standby joins while the holder lives, and gets nothing while it does, newer messages
    // included.
    let next = Recorder::acking();
    let standby = bus
        .subscribe_batch(&subject, "order", exclusive(4), next.clone())
        .await
        .unwrap();
    publish_n(&bus, &root, 6).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        next.delivered().is_empty(),
        "the standby took messages of a held exclusive consumer: {:?}",
        numbers(&next.delivered())
    );
    die.send(()).unwrap();
    holder.await.unwrap();
    for n in 7..9 {
        publish_n(&bus, &root, n).await;
    }
    wait_until("the standby handled all nine", || next.acked().len() >= 9).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let acked = next.acked();
    assert_eq!(
        numbers(&acked),
        (0..9).collect::<Vec<_>>(),
        "a newer message came before a dead holder's, or one came twice"
    );
    assert!(
        acked[..6].iter().all(|m| m.delivery >= 2),
        "the first six are redeliveries: {acked:?}"
    );
    assert_eq!(standby.partitions_owned(), 1);
    standby.unsubscribe().await;
    bus.delete_stream(&stream).await.unwrap();
}

/// An earlier version's unpinned consumer of the same name (what Swath made before decision 153)
/// is drained first and deleted; the pinned one then goes on. Every message is handled, in
/// order, the ones both consumers saw possibly twice (the handler is at-least-once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn an_earlier_unpinned_consumer_is_drained_before_the_pinned_one_takes_over() {
    let (stream, root, spec) = fresh();
    let subject = format!("{root}.>");
    let nats = quick(spec);
    let bus = connect(&nats).await;
    // The earlier version: an unpinned consumer with ten messages it never got to.
    bus.subscribe_batch(&subject, "legacy", settings(10, 0), Recorder::acking())
        .await
        .unwrap()
        .unsubscribe()
        .await;
    for n in 0..10 {
        publish_n(&bus, &root, n).await;
    }
    let handled = Recorder::acking();
    let sub = bus
        .subscribe_batch(&subject, "legacy", exclusive(4), handled.clone())
        .await
        .unwrap();
    for n in 10..15 {
        publish_n(&bus, &root, n).await;
    }
    wait_until("all fifteen handled", || {
        let seen = numbers(&handled.acked());
        (0..15).all(|n| seen.contains(&n))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut seen = numbers(&handled.acked());
    // What both consumers saw comes again once the earlier one is gone: drop the repeats and the
    // order of first sightings is the stream's.
    let mut firsts = Vec::new();
    for n in seen.drain(..) {
        if !firsts.contains(&n) {
            firsts.push(n);
        }
    }
    assert_eq!(firsts, (0..15).collect::<Vec<_>>());
    let (pending, unacked) = bus.consumer_backlog(&stream, "legacy-p0").await.unwrap();
    assert_eq!((pending, unacked), (0, 0));
    assert!(
        bus.consumer_backlog(&stream, "legacy").await.is_err(),
        "the earlier consumer is deleted"
    );
    sub.unsubscribe().await;
    bus.delete_stream(&stream).await.unwrap();
}
