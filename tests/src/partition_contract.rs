//! The partition contract of the event bus (the `EventBus` doc comment, "Partitions"; docs/rules.md
//! §5), as scenarios any adapter must pass.
//!
//! Each scenario is a `pub async fn(bus, pattern)`. `pattern` is the subject pattern the bus
//! was built to partition into [`PARTITIONS`] partitions: literal tokens then `*` (the key),
//! unique to the scenario *and the run* (`<root>.<scenario>_<uuid>.*`, see [`unique_pattern`]).
//! Since a bus is built with its partitioned pattern, every scenario gets a bus of its own;
//! every subject it uses is `<pattern minus *>.<key>`, and its durable consumer names derive from
//! the pattern, so scenarios can share one real broker.
//!
//! Like the bus contract, the scenarios measure time with `tokio::time` (they run with Tokio's
//! clock paused on the memory bus, in real time on a broker), bound every wait by [`PATIENCE`]
//! and assert counts and orders, never durations.
//!
//! [`contract_suite!`](crate::contract_suite) turns every scenario into a test for one adapter.

use crate::bus_contract::{consumer, settings, unique_prefix, wait_until, DynBus, Reply, PATIENCE};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use swath_application::ports::{
    fnv1a32, BatchHandler, BatchSettings, BusError, HandlerError, Message, Partitioning, Settle,
    StartAt, Subscription,
};
use tokio::sync::watch;
use tokio::time::Instant;

/// How many partitions the bus under test splits its pattern into.
pub const PARTITIONS: u32 = 4;

/// A run-unique partitioned pattern for a scenario: `<root>.<scenario>_<uuid>.*`.
pub fn unique_pattern(root: &str, scenario: &str) -> String {
    format!("{}.*", unique_prefix(root, scenario))
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// The partitioning the bus under test applies to `pattern`.
pub fn partitioning(pattern: &str) -> Partitioning {
    Partitioning::new(pattern, PARTITIONS).expect("a partitioned pattern")
}

/// The pattern without its `.*`: the subjects' common prefix.
fn base(pattern: &str) -> &str {
    pattern
        .strip_suffix(".*")
        .expect("a partitioned pattern ends with .*")
}

/// The subject of a key.
pub fn key_subject(pattern: &str, key: &str) -> String {
    format!("{}.{key}", base(pattern))
}

/// `per_partition` keys in each partition, the partitions' keys interleaved (`k…` names).
pub fn keys_over_every_partition(pattern: &str, per_partition: usize) -> Vec<String> {
    keys_covering(&partitioning(pattern), per_partition)
}

/// `per_partition` keys (`k0`, `k1`, …) in each partition of `p`, interleaved: one of each
/// partition, then a second of each, …
pub fn keys_covering(p: &Partitioning, per_partition: usize) -> Vec<String> {
    let mut by_partition: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for i in 0.. {
        let key = format!("k{i}");
        let keys = by_partition.entry(p.partition_of_key(&key)).or_default();
        if keys.len() < per_partition {
            keys.push(key);
        }
        let full = by_partition.len() == p.partitions() as usize
            && by_partition.values().all(|k| k.len() == per_partition);
        if full {
            break;
        }
    }
    (0..per_partition)
        .flat_map(|i| by_partition.values().map(move |keys| keys[i].clone()))
        .collect()
}

/// A payload `<key>/<seq>`.
fn body(key: &str, seq: usize) -> Bytes {
    Bytes::from(format!("{key}/{seq:03}"))
}

fn text(message: &Message) -> String {
    String::from_utf8_lossy(&message.payload).into_owned()
}

/// The key and sequence number of a `<key>/<seq>` payload.
fn key_seq(message: &Message) -> (String, usize) {
    let text = text(message);
    let (key, seq) = text.split_once('/').expect("a <key>/<seq> payload");
    (key.to_owned(), seq.parse().expect("a sequence number"))
}

async fn publish(bus: &DynBus, pattern: &str, key: &str, seq: usize) {
    let subject = key_subject(pattern, key);
    bus.publish(&subject, body(key, seq), None)
        .await
        .unwrap_or_else(|e| panic!("publishing {key}/{seq} to {subject}: {e}"));
}

/// Publishes sequence numbers `seqs` of every key, the keys interleaved.
async fn publish_rounds(
    bus: &DynBus,
    pattern: &str,
    keys: &[String],
    seqs: std::ops::Range<usize>,
) {
    for seq in seqs {
        for key in keys {
            publish(bus, pattern, key, seq).await;
        }
    }
}

async fn subscribe(
    bus: &DynBus,
    pattern: &str,
    name: &str,
    settings: BatchSettings,
    handler: &Arc<Tracker>,
) -> Subscription {
    bus.subscribe_batch(pattern, name, settings, handler.clone())
        .await
        .unwrap_or_else(|e| panic!("subscribing {name} to {pattern}: {e}"))
}

/// A pseudo-random number below `n` from a message (repeatable: no seed to report).
fn dice(message: &Message, salt: u32, n: u32) -> u32 {
    let mut bytes = message.payload.to_vec();
    bytes.extend_from_slice(&message.delivery.to_le_bytes());
    bytes.extend_from_slice(&salt.to_le_bytes());
    fnv1a32(&bytes) % n
}

type Plan = dyn Fn(&[Message]) -> (Duration, Reply) + Send + Sync;

/// A batch handler shared by every subscription of a scenario: it counts the calls running on
/// each partition at once (and the most ever), and logs the acknowledged messages in the order
/// it answered them.
pub struct Tracker {
    partitioning: Partitioning,
    plan: Box<Plan>,
    active: Vec<AtomicUsize>,
    most: Vec<AtomicUsize>,
    calls: AtomicUsize,
    batches: Mutex<Vec<Vec<Message>>>,
    acked: Mutex<Vec<Message>>,
}

impl Tracker {
    /// `plan(batch)` says how long the call takes and what it answers.
    pub fn new(
        pattern: &str,
        plan: impl Fn(&[Message]) -> (Duration, Reply) + Send + Sync + 'static,
    ) -> Arc<Self> {
        let counters = || (0..PARTITIONS).map(|_| AtomicUsize::new(0)).collect();
        Arc::new(Self {
            partitioning: partitioning(pattern),
            plan: Box::new(plan),
            active: counters(),
            most: counters(),
            calls: AtomicUsize::new(0),
            batches: Mutex::default(),
            acked: Mutex::default(),
        })
    }

    /// Acknowledges everything after `delay`.
    pub fn acking(pattern: &str, delay: Duration) -> Arc<Self> {
        Self::new(pattern, move |batch| {
            (delay, Reply::Answer(vec![Settle::Ack; batch.len()]))
        })
    }

    pub fn acked(&self) -> Vec<Message> {
        self.acked.lock().unwrap().clone()
    }

    /// The payloads acknowledged, in the order they were.
    pub fn acked_texts(&self) -> Vec<String> {
        self.acked().iter().map(text).collect()
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every batch delivered, in the order the calls started.
    pub fn batches(&self) -> Vec<Vec<Message>> {
        self.batches.lock().unwrap().clone()
    }

    /// The most calls that ever ran at once on each partition.
    pub fn most_at_once(&self) -> Vec<usize> {
        self.most.iter().map(|m| m.load(Ordering::SeqCst)).collect()
    }
}

/// Counts a call out of its partitions' running calls however it ends (an aborted call too).
struct Running<'a> {
    tracker: &'a Tracker,
    partitions: BTreeSet<u32>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        for p in &self.partitions {
            self.tracker.active[*p as usize].fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl BatchHandler for Tracker {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        let partitions: BTreeSet<u32> = batch
            .iter()
            .map(|m| {
                self.partitioning
                    .partition_of(&m.subject)
                    .unwrap_or_else(|| panic!("{} is not in the pattern", m.subject))
            })
            .collect();
        for p in &partitions {
            let now = self.active[*p as usize].fetch_add(1, Ordering::SeqCst) + 1;
            self.most[*p as usize].fetch_max(now, Ordering::SeqCst);
        }
        let _running = Running {
            tracker: self,
            partitions,
        };
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.batches.lock().unwrap().push(batch.to_vec());
        let (delay, reply) = (self.plan)(batch);
        reply.after(delay, batch, &self.acked).await
    }
}

/// Waits until every payload of `expected` was acknowledged at least once.
async fn until_acked(tracker: &Tracker, expected: &BTreeSet<String>) {
    wait_until("every message is acknowledged", || {
        let acked: BTreeSet<String> = tracker.acked_texts().into_iter().collect();
        expected.is_subset(&acked)
    })
    .await;
}

fn all_payloads(keys: &[String], seqs: std::ops::Range<usize>) -> BTreeSet<String> {
    seqs.flat_map(|seq| keys.iter().map(move |k| text_of(k, seq)))
        .collect()
}

fn text_of(key: &str, seq: usize) -> String {
    String::from_utf8_lossy(&body(key, seq)).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

mod scenarios;
pub use scenarios::*;
