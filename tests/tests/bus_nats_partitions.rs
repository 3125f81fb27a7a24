//! What the JetStream bus does with a partitioned stream (docs/rules.md §5, decisions 63–66):
//! subjects stored under the partition the port computes, one pinned consumer per partition,
//! a dead holder's partition moving to a standby with its redeliveries first and in order, a new
//! holder reaching its live predecessor's deliveries behind its own redeliveries, replicas sharing
//! partitions, the upgrade from an unpartitioned consumer, and a refused change
//! of the partition count.
//!
//! Runs against the server of `SWATH_TEST_NATS_URL` (NATS 2.11 or newer: CI runs the pinned
//! release); each test has a stream and subject root of its own. Timings are short (`ack_wait`
//! 2 s, pull expiry 1 s, so a pin moves 4 s after its holder's last pull). Real time.

use bytes::Bytes;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::time::Duration;
use swath_application::ports::{
    BatchSettings, BusError, EventBus, LiveOptions, Message, Settle, StartAt, Subscription,
};
use swath_nats::{NatsBus, NatsBusSettings, StreamSpec};
use swath_tests::bus_contract::{settings, wait_until, Recorder, Reply};
use swath_tests::partition_contract::keys_covering;

const URL_VAR: &str = "SWATH_TEST_NATS_URL";

fn nats_url() -> String {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("{URL_VAR} is not set: run this test through `cargo test` with it set"),
    }
}

/// A stream name and a partitioned pattern no other test uses.
fn fresh(partitions: u32) -> (String, String, StreamSpec) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let id = &id[..16];
    let stream = format!("SWATH_TEST_{}", id.to_uppercase());
    let pattern = format!("swathtest.{id}.mower.*");
    let spec = StreamSpec {
        max_age: Some(Duration::from_secs(600)),
        ..StreamSpec::new(&stream, [pattern.clone()])
    }
    .partitioned(partitions);
    (stream, pattern, spec)
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

fn key_subject(pattern: &str, key: &str) -> String {
    format!("{}.{key}", pattern.trim_end_matches(".*"))
}

/// `key:n` payloads, so that order can be read per key.
async fn publish_seq(bus: &NatsBus, pattern: &str, key: &str, n: usize) {
    bus.publish(
        &key_subject(pattern, key),
        Bytes::from(format!("{key}:{n}")),
        None,
    )
    .await
    .expect("publish");
}

/// Per key, the numbers of its payloads in the order given.
fn per_key(messages: &[Message]) -> BTreeMap<String, Vec<usize>> {
    let mut keys: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for m in messages {
        let text = String::from_utf8_lossy(&m.payload);
        let (key, n) = text.split_once(':').expect("key:n");
        keys.entry(key.to_owned())
            .or_default()
            .push(n.parse().expect("n"));
    }
    keys
}

async fn delete(bus: &NatsBus, stream: &str) {
    bus.delete_stream(stream).await.expect("delete the stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn the_stream_stores_each_subject_in_the_partition_the_port_computes() {
    let (stream, pattern, spec) = fresh(4);
    let partitioning = spec.partitioning().unwrap().unwrap();
    let bus = connect(&quick(spec)).await;
    let keys = keys_covering(&partitioning, 3);
    for key in &keys {
        publish_seq(&bus, &pattern, key, 0).await;
    }
    let client = async_nats::connect(nats_url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let info = js.get_stream(&stream).await.unwrap();
    let subjects: Vec<String> = info
        .info_with_subjects(">")
        .await
        .unwrap()
        .map(|s| s.unwrap().0)
        .collect()
        .await;
    assert_eq!(subjects.len(), keys.len(), "{subjects:?}");
    // `swathtest.<id>.mower.*` is stored as `swathtest.p.<N>.<id>.mower.<key>`.
    let (first, rest) = pattern.trim_end_matches(".*").split_once('.').unwrap();
    for key in &keys {
        let n = partitioning.partition_of_key(key);
        let stored = format!("{first}.p.{n}.{rest}.{key}");
        assert!(subjects.contains(&stored), "{stored} not in {subjects:?}");
    }
    // What was published with its own partitioned form is not captured by the stream.
    let sneaky = format!("{first}.p.0.{rest}.m1");
    assert!(bus.publish(&sneaky, Bytes::from("x"), None).await.is_err());
    delete(&bus, &stream).await;
}

/// A holder killed with a batch in hand (its runtime dropped: no settlement, no unsubscribe):
/// its partition moves to the standby replica, which gets the six redeliveries before the three
/// newer messages and handles them in publication order, each acknowledged once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_dead_holder_s_partition_moves_with_its_redeliveries_first_and_in_order() {
    let (stream, pattern, spec) = fresh(1);
    let nats = quick(spec);
    let bus = connect(&nats).await;
    // The consumer exists and holds six messages before the holder subscribes.
    bus.subscribe_batch(&pattern, "order", settings(6, 0), Recorder::acking())
        .await
        .unwrap()
        .unsubscribe()
        .await;
    for n in 0..6 {
        publish_seq(&bus, &pattern, "k", n).await;
    }
    let stuck = Recorder::new(|_, _| (Duration::ZERO, Reply::Hang));
    let (holder_nats, holder_pattern, holder_stuck) =
        (nats.clone(), pattern.clone(), stuck.clone());
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
                .subscribe_batch(
                    &holder_pattern,
                    "order",
                    settings(6, 0),
                    holder_stuck.clone(),
                )
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
    // The standby joins while the holder lives, then the holder dies.
    let next = Recorder::acking();
    let standby = bus
        .subscribe_batch(&pattern, "order", settings(4, 0), next.clone())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        next.delivered().is_empty(),
        "the standby took a held partition"
    );
    die.send(()).unwrap();
    holder.await.unwrap();
    for n in 6..9 {
        publish_seq(&bus, &pattern, "k", n).await;
    }
    wait_until("the standby handled all nine", || next.acked().len() >= 9).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let acked = next.acked();
    assert_eq!(per_key(&acked)["k"], (0..9).collect::<Vec<_>>());
    assert!(acked[..6].iter().all(|m| m.delivery >= 2), "{acked:?}");
    assert_eq!(standby.partitions_owned(), 1);
    standby.unsubscribe().await;
    delete(&bus, &stream).await;
}

/// Three replicas share six partitions two each; when one leaves the others take its two; when
/// it comes back it gets its share again. Meanwhile every key's messages are handled once each,
/// in publication order, whichever replica held its partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn replicas_share_the_partitions_and_take_over_a_leaver_s() {
    let (stream, pattern, spec) = fresh(6);
    let partitioning = spec.partitioning().unwrap().unwrap();
    let nats = quick(spec);
    let publisher = connect(&nats).await;
    let handled = Recorder::acking();
    let batch = BatchSettings {
        start: StartAt::Stored,
        ..settings(8, 20)
    };
    let replicas = [
        connect(&nats).await,
        connect(&nats).await,
        connect(&nats).await,
    ];
    let mut subs: Vec<Option<Subscription>> = Vec::new();
    for replica in &replicas {
        let sub = replica
            .subscribe_batch(&pattern, "share", batch, handled.clone())
            .await
            .unwrap();
        subs.push(Some(sub));
    }
    let keys = keys_covering(&partitioning, 2);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let trickle = {
        let (bus, pattern, keys) = (publisher.clone(), pattern.clone(), keys.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !*stop_rx.borrow() {
                for key in &keys {
                    publish_seq(&bus, &pattern, key, n).await;
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            n
        })
    };
    let owned = |subs: &[Option<Subscription>]| -> Vec<usize> {
        subs.iter()
            .map(|s| s.as_ref().map_or(0, Subscription::partitions_owned))
            .collect()
    };
    let patience = Duration::from_secs(40);
    wait_long("two partitions each", patience, || {
        owned(&subs) == [2, 2, 2]
    })
    .await;
    subs[1].take().unwrap().unsubscribe().await;
    wait_long("three each without the leaver", patience, || {
        owned(&subs) == [3, 0, 3]
    })
    .await;
    let back = replicas[1]
        .subscribe_batch(&pattern, "share", batch, handled.clone())
        .await
        .unwrap();
    subs[1] = Some(back);
    wait_long("two each again", patience, || owned(&subs) == [2, 2, 2]).await;
    let _ = stop_tx.send(true);
    let rounds = trickle.await.unwrap();
    let total = rounds * keys.len();
    wait_long("everything handled", patience, || {
        handled.acked().len() >= total
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let acked = handled.acked();
    assert_eq!(acked.len(), total, "each message handled once");
    for (key, numbers) in per_key(&acked) {
        assert_eq!(numbers, (0..rounds).collect::<Vec<_>>(), "key {key}");
    }
    for sub in subs.into_iter().flatten() {
        sub.unsubscribe().await;
    }
    delete(&publisher, &stream).await;
}

async fn wait_long(what: &str, patience: Duration, mut done: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < patience, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An earlier version's stream (`<root>.>`, no transform) and unpartitioned consumer with
/// messages it never delivered: the partitioned bus updates the stream, handles the old messages
/// first, then the new ones, each once and in order per key, and deletes the old consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn an_earlier_version_s_consumer_is_drained_before_the_partitions_take_over() {
    let (stream, pattern, spec) = fresh(4);
    let root = pattern.trim_end_matches(".mower.*").to_owned();
    let old_spec = StreamSpec {
        partitions: None,
        ..StreamSpec::new(&stream, [format!("{root}.>")])
    };
    let old = connect(&quick(old_spec)).await;
    // Slow batches of 5: the old version cannot handle all 30 before it is stopped, however
    // fast or busy the machine (a quick handler did, on a loaded machine).
    let old_handled = Recorder::new(|_, batch| {
        (
            Duration::from_millis(300),
            Reply::Answer(vec![Settle::Ack; batch.len()]),
        )
    });
    let sub = old
        .subscribe_batch(&pattern, "upgrade", settings(5, 0), old_handled.clone())
        .await
        .unwrap();
    let keys = ["a", "b", "c", "d", "e", "f"];
    for n in 0..5 {
        for key in keys {
            publish_seq(&old, &pattern, key, n).await;
        }
    }
    wait_until("the old version handled some", || {
        !old_handled.acked().is_empty()
    })
    .await;
    sub.unsubscribe().await;
    let handled_before = old_handled.acked().len();
    assert!(
        handled_before < 30,
        "the old version must leave some undelivered"
    );
    for n in 5..10 {
        for key in keys {
            publish_seq(&old, &pattern, key, n).await;
        }
    }

    let new = connect(&quick(spec)).await;
    let handled = Recorder::acking();
    let sub = new
        .subscribe_batch(&pattern, "upgrade", settings(4, 0), handled.clone())
        .await
        .unwrap();
    for n in 10..15 {
        for key in keys {
            publish_seq(&new, &pattern, key, n).await;
        }
    }
    let total = keys.len() * 15;
    wait_until("everything handled", || {
        handled_before + handled.acked().len() >= total
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut all = old_handled.acked();
    all.extend(handled.acked());
    assert_eq!(all.len(), total, "each message handled once");
    for (key, numbers) in per_key(&all) {
        assert_eq!(numbers, (0..15).collect::<Vec<_>>(), "key {key}");
    }
    let client = async_nats::connect(nats_url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let stream_handle = js.get_stream(&stream).await.unwrap();
    let gone = stream_handle
        .get_consumer::<async_nats::jetstream::consumer::pull::Config>("upgrade")
        .await;
    assert!(gone.is_err(), "the drained old consumer is deleted");
    sub.unsubscribe().await;
    delete(&new, &stream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn another_partition_count_is_refused_by_name() {
    let (stream, _pattern, spec) = fresh(4);
    let first = connect(&quick(spec.clone())).await;
    let e = NatsBus::connect(&nats_url(), quick(spec.clone().partitioned(2)))
        .await
        .expect_err("a different partition count");
    match e {
        BusError::Refused(why) => assert!(
            why.contains("partition(4,1)") && why.contains("partition(2,1)"),
            "{why}"
        ),
        other => panic!("refused, not {other:?}"),
    }
    // The same count connects.
    connect(&quick(spec)).await;
    delete(&first, &stream).await;
}

/// `StartAt::Stored` starts a new consumer with what the stream holds; `New` skips it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_new_consumer_starts_where_it_is_told() {
    let (stream, pattern, spec) = fresh(2);
    let bus = connect(&quick(spec)).await;
    for n in 0..3 {
        publish_seq(&bus, &pattern, "k", n).await;
    }
    let stored = Recorder::acking();
    let fresh_only = Recorder::acking();
    let a = bus
        .subscribe_batch(
            &pattern,
            "stored",
            BatchSettings {
                start: StartAt::Stored,
                ..settings(10, 0)
            },
            stored.clone(),
        )
        .await
        .unwrap();
    let b = bus
        .subscribe_batch(&pattern, "new", settings(10, 0), fresh_only.clone())
        .await
        .unwrap();
    publish_seq(&bus, &pattern, "k", 3).await;
    wait_until("both see the newest", || {
        stored.acked().len() >= 4 && !fresh_only.acked().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(per_key(&stored.acked())["k"], [0, 1, 2, 3]);
    assert_eq!(per_key(&fresh_only.acked())["k"], [3]);
    // Handlers see the subject that was published, not the partition's.
    assert_eq!(stored.acked()[0].subject, key_subject(&pattern, "k"));
    a.unsubscribe().await;
    b.unsubscribe().await;
    delete(&bus, &stream).await;
}

/// A live view of the pattern sees every partition, a view of one subject sees that subject,
/// both with the subjects as published; a view of part of the pattern is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn live_views_of_a_partitioned_stream_see_what_was_published() {
    let (stream, pattern, spec) = fresh(4);
    let partitioning = spec.partitioning().unwrap().unwrap();
    let bus = connect(&quick(spec)).await;
    let keys = keys_covering(&partitioning, 1);
    let mut all = bus
        .subscribe(&pattern, LiveOptions::default())
        .await
        .unwrap();
    let one_subject = key_subject(&pattern, &keys[1]);
    let mut one = bus
        .subscribe(&one_subject, LiveOptions::default())
        .await
        .unwrap();
    let root = pattern.trim_end_matches(".mower.*");
    assert!(bus
        .subscribe(&format!("{root}.>"), LiveOptions::default())
        .await
        .is_err());
    for key in &keys {
        publish_seq(&bus, &pattern, key, 0).await;
    }
    let mut seen = Vec::new();
    for _ in &keys {
        let m = tokio::time::timeout(Duration::from_secs(10), all.messages.recv())
            .await
            .expect("a live message")
            .expect("open");
        seen.push(m.subject);
    }
    let published: Vec<String> = keys.iter().map(|k| key_subject(&pattern, k)).collect();
    assert_eq!(seen, published);
    let m = tokio::time::timeout(Duration::from_secs(10), one.messages.recv())
        .await
        .expect("the one subject's message")
        .expect("open");
    assert_eq!(m.subject, one_subject);
    drop((all, one));
    delete(&bus, &stream).await;
}

/// A new holder waits for what its predecessor was delivered before handling anything, taking
/// the redeliveries as they come due (decision 88). After a NATS restart lost the progress notes,
/// what the new holder holds itself comes due too, and is served first when older than what it
/// waits for. Here the previous holder (a client of the test) is delivered 66 messages, hands the
/// first 64 back, keeps two and gives the partition up; once the new holder has the 64 in hand
/// and waits for the two, stale `-NAK`s of the previous holder put the 64 back in the redelivery
/// queue ahead of the two, as such a restart does, without its timing. The two must still be
/// handled before anything newer (decision 173).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn a_new_holder_reaches_what_it_waits_for_behind_its_own_redeliveries() {
    let (stream, pattern, spec) = fresh(1);
    let nats = quick(spec);
    let bus = connect(&nats).await;
    bus.subscribe_batch(&pattern, "behind", settings(64, 0), Recorder::acking())
        .await
        .unwrap()
        .unsubscribe()
        .await;
    for n in 0..70 {
        publish_seq(&bus, &pattern, "k", n).await;
    }

    // The previous holder: pinned by its pull, with the first 66 delivered.
    let client = async_nats::connect(nats_url()).await.expect("connect");
    let consumer = "behind-p0";
    let inbox = client.new_inbox();
    let mut inbox_sub = client.subscribe(inbox.clone()).await.unwrap();
    let pull = serde_json::json!({ "batch": 66, "expires": 5_000_000_000u64, "group": "swath" });
    client
        .publish_with_reply(
            format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
            inbox,
            Bytes::from(pull.to_string()),
        )
        .await
        .unwrap();
    let mut held = Vec::new();
    while held.len() < 66 {
        let m = tokio::time::timeout(Duration::from_secs(10), inbox_sub.next())
            .await
            .expect("the previous holder's deliveries")
            .expect("open");
        assert!(m.status.is_none(), "{:?} {:?}", m.status, m.description);
        held.push(m);
    }
    let nak = |m: &async_nats::Message| {
        client.publish(
            m.reply.clone().expect("a reply"),
            Bytes::from_static(b"-NAK"),
        )
    };
    for m in &held[..64] {
        nak(m).await.unwrap();
    }
    client.flush().await.unwrap();

    // The new holder on standby; the partition is handed over.
    let next = Recorder::acking();
    let standby = bus
        .subscribe_batch(&pattern, "behind", settings(64, 0), next.clone())
        .await
        .unwrap();
    let unpinned = client
        .request(
            format!("$JS.API.CONSUMER.UNPIN.{stream}.{consumer}"),
            Bytes::from(serde_json::json!({ "group": "swath" }).to_string()),
        )
        .await
        .expect("unpin");
    assert!(
        !String::from_utf8_lossy(&unpinned.payload).contains("error"),
        "{unpinned:?}"
    );
    // It has the 64 in hand and a first newer message (its gathering ends there), and waits for
    // the two.
    let js = async_nats::jetstream::new(client.clone());
    let mut info_of = js
        .get_stream(&stream)
        .await
        .unwrap()
        .get_consumer::<async_nats::jetstream::consumer::pull::Config>(consumer)
        .await
        .unwrap();
    let start = std::time::Instant::now();
    while info_of.info().await.unwrap().delivered.stream_sequence < 67 {
        assert!(start.elapsed() < Duration::from_secs(10), "no handover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(next.delivered().is_empty(), "handled before the two came");

    // The 64 due again, ahead of the two; then the two are given back too.
    for m in &held {
        nak(m).await.unwrap();
    }
    client.flush().await.unwrap();

    wait_long(
        "the new holder handled all seventy",
        Duration::from_secs(30),
        || {
            let acked = next.acked();
            let numbers = per_key(&acked).remove("k").unwrap_or_default();
            numbers
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == 70
        },
    )
    .await;
    let acked = next.acked();
    let mut first_seen = Vec::new();
    for n in &per_key(&acked)["k"] {
        if !first_seen.contains(n) {
            first_seen.push(*n);
        }
    }
    assert_eq!(
        first_seen,
        (0..70).collect::<Vec<_>>(),
        "handled out of order"
    );
    // The case under test happened: of the 64, what was still queued came a third time while it
    // waited (the pin's renewals may have moved some behind the two: no matter).
    assert!(
        acked[..64].iter().any(|m| m.delivery >= 3),
        "{:?}",
        acked[..64].iter().map(|m| m.delivery).collect::<Vec<_>>()
    );
    standby.unsubscribe().await;
    delete(&bus, &stream).await;
}
