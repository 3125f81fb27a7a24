//! The scenarios of the partition contract (see the parent module).

use super::*;
use crate::bus_contract::create_consumer;

/// Per-key order across the subscriptions of one consumer: with keys in every partition, two
/// subscriptions (the first leaving half-way, so that its partitions change holder), handlers
/// taking random short times, some `Redeliver` answers and one failed batch, every key's
/// messages are acknowledged in publication order, each exactly once.
pub async fn per_key_order_holds_across_two_subscriptions(bus: DynBus, pattern: &str) {
    let keys = keys_over_every_partition(pattern, 3);
    let name = consumer(base(pattern), "order");
    let failed = Arc::new(AtomicBool::new(false));
    let redelivered = Arc::new(AtomicUsize::new(0));
    let plan = {
        let (failed, redelivered) = (Arc::clone(&failed), Arc::clone(&redelivered));
        move |batch: &[Message]| {
            let delay = Duration::from_millis(u64::from(dice(&batch[0], 1, 15)));
            // One failed batch: the first to hold a message numbered 7.
            if batch.iter().any(|m| key_seq(m).1 == 7) && !failed.swap(true, Ordering::SeqCst) {
                return (delay, Reply::Fail);
            }
            // Some first deliveries are answered Redeliver, and then every later message of
            // the same key in the batch too, as an order-keeping handler does (acknowledging a
            // key's later message before its earlier one would break the order by itself).
            let mut held = BTreeSet::new();
            let answers = batch
                .iter()
                .map(|m| {
                    let (key, _) = key_seq(m);
                    if held.contains(&key) || (m.delivery == 1 && dice(m, 2, 5) == 0) {
                        held.insert(key);
                        redelivered.fetch_add(1, Ordering::SeqCst);
                        Settle::Redeliver
                    } else {
                        Settle::Ack
                    }
                })
                .collect();
            (delay, Reply::Answer(answers))
        }
    };
    let tracker = Tracker::new(pattern, plan);
    let mut s = settings(4, 20);
    s.redelivery_delay = Duration::from_millis(50);

    let first = subscribe(&bus, pattern, &name, s, &tracker).await;
    publish_rounds(&bus, pattern, &keys, 0..4).await;
    let second = subscribe(&bus, pattern, &name, s, &tracker).await;
    publish_rounds(&bus, pattern, &keys, 4..8).await;
    until_acked(&tracker, &all_payloads(&keys, 0..4)).await;
    // The first leaves: the second takes its partitions, after what it left unsettled.
    first.unsubscribe().await;
    publish_rounds(&bus, pattern, &keys, 8..12).await;
    until_acked(&tracker, &all_payloads(&keys, 0..12)).await;
    // Room for a wrong redelivery of something already acknowledged.
    tokio::time::sleep(Duration::from_millis(300)).await;
    second.unsubscribe().await;

    let mut by_key: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for message in tracker.acked() {
        let (key, seq) = key_seq(&message);
        by_key.entry(key).or_default().push(seq);
    }
    let expected: Vec<usize> = (0..12).collect();
    for key in &keys {
        assert_eq!(
            by_key.get(key),
            Some(&expected),
            "key {key} (partition {}) was not acknowledged in publication order, exactly once",
            partitioning(pattern).partition_of_key(key)
        );
    }
    assert!(failed.load(Ordering::SeqCst), "no batch failed");
    assert!(
        redelivered.load(Ordering::SeqCst) > 0,
        "no message was answered Redeliver"
    );
}

/// The partitions of one subscription run concurrently: a batch of key `a` that waits until a
/// batch of key `b` (another partition) has been handled completes.
pub async fn partitions_run_concurrently_inside_one_subscription(bus: DynBus, pattern: &str) {
    let p = partitioning(pattern);
    let a = "k0".to_owned();
    let b = (1..)
        .map(|i| format!("k{i}"))
        .find(|k| p.partition_of_key(k) != p.partition_of_key(&a))
        .expect("a key in another partition");
    let gate = Arc::new(Gate {
        a: key_subject(pattern, &a),
        b_done: watch::channel(false).0,
        a_started: AtomicBool::new(false),
        a_finished: AtomicBool::new(false),
        a_timed_out: AtomicBool::new(false),
    });
    let sub = bus
        .subscribe_batch(
            pattern,
            &consumer(base(pattern), "concurrent"),
            settings(10, 0),
            gate.clone(),
        )
        .await
        .expect("subscribe_batch");
    publish(&bus, pattern, &a, 0).await;
    wait_until("a's batch has started", || {
        gate.a_started.load(Ordering::SeqCst)
    })
    .await;
    publish(&bus, pattern, &b, 0).await;
    // a's handler gives up waiting for b after PATIENCE; wait a little longer than that.
    let start = Instant::now();
    while !gate.a_finished.load(Ordering::SeqCst) {
        assert!(start.elapsed() < PATIENCE * 2, "a's handler never returned");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !gate.a_timed_out.load(Ordering::SeqCst),
        "b's partition was not handled while a's batch ran: partitions do not run concurrently"
    );
    sub.unsubscribe().await;
}

/// Holds a batch of key `a` until one of another key has been handled.
struct Gate {
    a: String,
    b_done: watch::Sender<bool>,
    a_started: AtomicBool,
    a_finished: AtomicBool,
    a_timed_out: AtomicBool,
}

#[async_trait]
impl BatchHandler for Gate {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        if batch.iter().any(|m| m.subject == self.a) {
            self.a_started.store(true, Ordering::SeqCst);
            let mut done = self.b_done.subscribe();
            if tokio::time::timeout(PATIENCE, done.wait_for(|d| *d))
                .await
                .is_err()
            {
                self.a_timed_out.store(true, Ordering::SeqCst);
            }
            self.a_finished.store(true, Ordering::SeqCst);
        } else {
            self.b_done.send_replace(true);
        }
        Ok(vec![Settle::Ack; batch.len()])
    }
}

/// The batches of one partition never overlap, across the subscriptions of its consumer, also
/// while partitions change holder (a subscription comes, another goes).
pub async fn batches_of_one_partition_never_overlap_across_subscriptions(
    bus: DynBus,
    pattern: &str,
) {
    let keys = keys_over_every_partition(pattern, 4);
    let name = consumer(base(pattern), "overlap");
    let tracker = Tracker::new(pattern, |batch| {
        let delay = Duration::from_millis(1 + u64::from(dice(&batch[0], 3, 10)));
        (delay, Reply::Answer(vec![Settle::Ack; batch.len()]))
    });
    let s = settings(3, 10);
    let first = subscribe(&bus, pattern, &name, s, &tracker).await;
    publish_rounds(&bus, pattern, &keys, 0..5).await;
    let second = subscribe(&bus, pattern, &name, s, &tracker).await;
    publish_rounds(&bus, pattern, &keys, 5..10).await;
    until_acked(&tracker, &all_payloads(&keys, 0..10)).await;
    first.unsubscribe().await;
    publish_rounds(&bus, pattern, &keys, 10..12).await;
    until_acked(&tracker, &all_payloads(&keys, 0..12)).await;
    second.unsubscribe().await;
    assert_eq!(
        tracker.most_at_once(),
        vec![1; PARTITIONS as usize],
        "the most calls at once per partition: a partition's batches overlapped (or one \
         partition was never handled)"
    );
}

/// A holder that vanishes (unsubscribed while its handler never returns, given up after the
/// drain timeout) leaves what it had unsettled to the partition's next holder, before the
/// partition's newer messages: one published while they were in flight (of another key of the
/// partition) and one published once the holder was gone.
pub async fn a_vanished_holder_leaves_its_unsettled_to_the_next_holder(bus: DynBus, pattern: &str) {
    let p = partitioning(pattern);
    let key = "k0".to_owned();
    let neighbour = (1..)
        .map(|i| format!("k{i}"))
        .find(|k| p.partition_of_key(k) == p.partition_of_key(&key))
        .expect("another key in the same partition");
    let name = consumer(base(pattern), "vanished");
    create_consumer(&bus, pattern, &name).await;
    publish(&bus, pattern, &key, 0).await;
    publish(&bus, pattern, &key, 1).await;

    let stuck = Tracker::new(pattern, |_| (Duration::ZERO, Reply::Hang));
    let mut s = settings(2, 0);
    s.drain_timeout = Duration::from_millis(300);
    let holder = subscribe(&bus, pattern, &name, s, &stuck).await;
    wait_until("the first two are in flight", || {
        stuck.batches().concat().len() >= 2
    })
    .await;
    let in_flight: Vec<String> = stuck.batches().concat().iter().map(text).collect();
    assert_eq!(in_flight, [text_of(&key, 0), text_of(&key, 1)]);
    publish(&bus, pattern, &neighbour, 0).await;
    holder.unsubscribe().await;
    publish(&bus, pattern, &key, 2).await;

    let next = Tracker::acking(pattern, Duration::ZERO);
    let sub = subscribe(&bus, pattern, &name, settings(1, 0), &next).await;
    wait_until("all four are acknowledged", || next.acked().len() >= 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    sub.unsubscribe().await;
    let acked = next.acked();
    assert_eq!(
        acked.iter().map(text).collect::<Vec<_>>(),
        [
            text_of(&key, 0),
            text_of(&key, 1),
            text_of(&neighbour, 0),
            text_of(&key, 2)
        ],
        "a newer message of the partition came before an unsettled delivery, or something \
         came twice"
    );
    let deliveries: Vec<u32> = acked.iter().map(|m| m.delivery).collect();
    assert!(
        deliveries[0] >= 2 && deliveries[1] >= 2,
        "the first two are redeliveries: {deliveries:?}"
    );
    assert_eq!(
        deliveries[2..],
        [1, 1],
        "the newer two are first deliveries"
    );
}

/// A consumer filter that overlaps the partitioned pattern without being it (all of its tokens'
/// subjects, one key's subject) is refused; the pattern itself is accepted.
pub async fn a_filter_overlapping_the_pattern_is_refused(bus: DynBus, pattern: &str) {
    let handler = Tracker::acking(pattern, Duration::ZERO);
    let overlapping = [
        ("all", format!("{}.>", base(pattern))),
        ("one_key", key_subject(pattern, "k0")),
    ];
    for (what, filter) in overlapping {
        let name = consumer(base(pattern), what);
        match bus
            .subscribe_batch(&filter, &name, settings(10, 0), handler.clone())
            .await
        {
            Err(BusError::Refused(_)) => {}
            Err(e) => panic!("{filter}: expected Refused, got {e}"),
            Ok(sub) => {
                sub.unsubscribe().await;
                panic!("{filter} overlaps {pattern} and was accepted");
            }
        }
    }
    let exact = subscribe(
        &bus,
        pattern,
        &consumer(base(pattern), "exact"),
        settings(10, 0),
        &handler,
    )
    .await;
    exact.unsubscribe().await;
}

/// `partitions_owned` says who holds what: a lone subscription holds every partition once each
/// has had a message; with two, they share them (P/2 ± 1 each, P in all) after a while; when one
/// ends, the other takes its partitions back. Messages keep coming meanwhile, one per partition
/// every 100 ms (a broker may move a partition only when it delivers).
pub async fn subscriptions_share_and_balance_the_partitions(bus: DynBus, pattern: &str) {
    let keys = keys_over_every_partition(pattern, 1);
    let name = consumer(base(pattern), "balance");
    let tracker = Tracker::acking(pattern, Duration::from_millis(5));
    let s = settings(4, 0);
    let p = PARTITIONS as usize;
    let mut seq = 0;

    let first = subscribe(&bus, pattern, &name, s, &tracker).await;
    publish_rounds(&bus, pattern, &keys, 0..1).await;
    until_acked(&tracker, &all_payloads(&keys, 0..1)).await;
    seq += 1;
    until_owned(
        &bus,
        pattern,
        &keys,
        &mut seq,
        "the lone subscription holds all",
        || first.partitions_owned() == p,
    )
    .await;

    let second = subscribe(&bus, pattern, &name, s, &tracker).await;
    let fair = |n: usize| n.abs_diff(p / 2) <= 1;
    until_owned(
        &bus,
        pattern,
        &keys,
        &mut seq,
        "two subscriptions share",
        || {
            let (a, b) = (first.partitions_owned(), second.partitions_owned());
            a + b == p && fair(a) && fair(b)
        },
    )
    .await;

    second.unsubscribe().await;
    until_owned(
        &bus,
        pattern,
        &keys,
        &mut seq,
        "the remaining one holds all",
        || first.partitions_owned() == p,
    )
    .await;
    until_acked(&tracker, &all_payloads(&keys, 0..seq)).await;
    first.unsubscribe().await;
}

/// Publishes a message per key every 100 ms until `done` holds; panics after [`PATIENCE`].
async fn until_owned(
    bus: &DynBus,
    pattern: &str,
    keys: &[String],
    seq: &mut usize,
    what: &str,
    done: impl Fn() -> bool,
) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting until {what}");
        publish_rounds(bus, pattern, keys, *seq..*seq + 1).await;
        *seq += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A new consumer created with `StartAt::New` gets what is published from its creation on, not
/// what an older consumer of the same pattern got before.
pub async fn a_new_consumer_starts_with_what_is_published_after_it(bus: DynBus, pattern: &str) {
    let keys = keys_over_every_partition(pattern, 1);
    let old = Tracker::acking(pattern, Duration::ZERO);
    let old_sub = subscribe(
        &bus,
        pattern,
        &consumer(base(pattern), "old"),
        settings(10, 0),
        &old,
    )
    .await;
    publish_rounds(&bus, pattern, &keys, 0..2).await;
    until_acked(&old, &all_payloads(&keys, 0..2)).await;

    let fresh = Tracker::acking(pattern, Duration::ZERO);
    let s = BatchSettings {
        start: StartAt::New,
        ..settings(10, 0)
    };
    let fresh_sub = subscribe(&bus, pattern, &consumer(base(pattern), "fresh"), s, &fresh).await;
    publish_rounds(&bus, pattern, &keys, 2..4).await;
    until_acked(&fresh, &all_payloads(&keys, 2..4)).await;
    until_acked(&old, &all_payloads(&keys, 0..4)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    fresh_sub.unsubscribe().await;
    old_sub.unsubscribe().await;
    let mut got = fresh.acked_texts();
    got.sort();
    let expected: Vec<String> = all_payloads(&keys, 2..4).into_iter().collect();
    assert_eq!(
        got, expected,
        "the new consumer saw older messages, or some twice"
    );
}
