//! The in-memory event bus: the embedded default behind [`EventBus`] when no NATS server is
//! configured, with the same contract as the JetStream adapter (docs/rules.md §5), minus durability
//! across restarts.
//!
//! # Design
//!
//! All the bus's state lives behind one `std::sync::Mutex` ([`State`]): the durable consumers
//! with their queues, the live subscribers and the de-duplication window. One lock keeps
//! `publish` atomic across consumers (a message is stored for every matching consumer or for
//! none, which is what a stream gives) without any lock ordering to get wrong. The lock is only
//! held for short, synchronous bookkeeping and never across an `.await`, so a `std` mutex is the
//! right tool (a Tokio mutex would only add overhead; see the Tokio tutorial on shared state).
//!
//! A durable consumer is created by the first `subscribe_batch` naming it and lives as long as
//! the bus, like a JetStream durable consumer outlives its subscribers: messages published while
//! nobody is subscribed queue up for it. The memory bus keeps **no stream history**: a consumer
//! only sees messages published after it was created, so `StartAt::Stored` is `StartAt::New`
//! here (JetStream would deliver what its stream still holds).
//!
//! # Lanes
//!
//! A consumer's messages wait in *lanes*: a bounded `VecDeque` plus a [`Notify`] each. A plain
//! consumer has one lane, shared by all its subscriptions. A consumer whose filter is exactly the
//! bus's partitioned pattern ([`MemoryBusSettings::partitioning`]) has one lane per partition;
//! a message goes to the lane of `Partitioning::partition_of(subject)`, and a lane is *held* by
//! one subscription at a time (see "Partitions"). A filter overlapping the pattern otherwise is
//! refused at `subscribe_batch`. An *exclusive* consumer (`BatchSettings::exclusive`) of any
//! other filter has one lane held like a partition: one subscription at a time handles it.
//!
//! Each subscription runs one worker task per lane (`bus/worker.rs`; who holds what is
//! `bus/holders.rs`). A worker waits for a first message, lingers up to `max_wait` for more
//! (until `max_batch` are there), takes the batch out of the lane, runs the handler, and only
//! then settles: `Ack` and `Drop` forget a message, `Redeliver` puts it back at the *front* of
//! the lane so that publication order survives redeliveries. Since the worker awaits the handler
//! before it takes the next batch, the batches of one lane never overlap inside a subscription,
//! and a worker never has more than `max_batch` ≤ `MAX_IN_FLIGHT` messages in flight. Several
//! subscriptions to a plain consumer are several workers taking from the same lane, so each
//! message goes to exactly one of them. The workers of a partitioned subscription run side by
//! side: its partitions are handled concurrently.
//!
//! After a failed batch (handler error, wrong number of answers, panic) the batch goes back at
//! once and the worker sleeps `redelivery_delay` before its next batch; on a plain lane another
//! subscription may take it meanwhile, on a partition the worker keeps holding it, so nobody
//! retries it sooner. A batch in which *every* message asked to be redelivered made no progress
//! either, so it gets the same pause: without it a handler that keeps answering `Redeliver`
//! (say, while its database is down) would spin. A batch that made some progress goes on at once.
//!
//! # Partitions
//!
//! A partition (lane) of a partitioned consumer has a holder: the subscription whose worker may
//! take from it. Modelled on JetStream's pinned clients: a holder keeps its partition while it
//! lives, and the subscriptions of a consumer balance, each holding at most
//! `ceil(P / subscriptions)` (its *quota*). A worker takes its lane when the lane is free and its
//! subscription holds fewer than its quota; it gives its lane up only *between batches* (after
//! the previous batch was settled, and after the pause that may follow it) when its subscription
//! holds more than its quota, or when the subscription ends (after the drain: what was left
//! unsettled is back at the front of the lane, so the next holder gets it before anything newer).
//! Every change of holders or of subscriptions wakes the consumer's workers through one
//! `ownership` [`Notify`]: a new subscription makes the others' idle workers give up their
//! extras at once and busy ones after their batch, so it gets its share within a batch; one that
//! ends leaves its partitions to the others, whose quota has grown. A subscription takes free
//! partitions as soon as it starts (JetStream pins on the first delivery instead), and
//! `Subscription::partitions_owned` counts what it holds.
//!
//! # Details
//!
//! A consumer keeps the subject filter it was created with; subscribing to it with another filter
//! is refused rather than silently ignored. Dropping a [`Subscription`] without unsubscribing
//! stops its workers as unsubscribing does (nobody could stop them any more), without waiting for
//! the drain.
//!
//! The handler runs in a task of its own, for two reasons: a panicking handler must not kill the
//! worker (the panic surfaces as a `JoinError` and is treated like a handler error, so the batch
//! is redelivered), and on unsubscribe the worker must be able to give up on a handler that
//! outlives the drain timeout (it aborts the task and puts the batch back, unsettled messages are
//! redelivered).
//!
//! Wake-ups use [`Notify::notify_waiters`], which only wakes tasks that are already waiting, so
//! each waiter follows the lost-wake-up-free pattern: create the `Notified` future, `enable` it,
//! *then* look at the state, and only then await it.
//!
//! Live subscriptions are bounded `mpsc` channels fed with `try_send`: the publisher never waits
//! for a slow subscriber; what does not fit is dropped and counted
//! (`swath_bus_live_dropped_total`), like a NATS core subscriber that falls behind.

mod backlog;
mod holders;
mod worker;

use async_trait::async_trait;
use bytes::Bytes;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use swath_application::bus_rules::{
    batch_limit, check_batch_subscription, check_live, check_subject, subject_matches,
};
use swath_application::ports::{
    BatchHandler, BatchSettings, BusError, EventBus, LiveOptions, LiveSubscription, Message,
    Partitioning, Subscription,
};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;
use worker::LaneWorker;

/// Settings of a [`MemoryBus`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryBusSettings {
    /// The most messages waiting in one durable consumer's queue (all its partitions together);
    /// a publish that would exceed it is refused with [`BusError::Full`] (the stream's limit).
    /// Redelivered messages go back even past it: they were accepted once and must not be lost.
    pub queue_capacity: usize,
    /// How many of the latest de-duplication ids are remembered (JetStream's duplicate window,
    /// counted in ids rather than time). Zero turns de-duplication off.
    pub dedup_window: usize,
    /// The buffer of each live subscription; a subscriber that falls further behind loses
    /// messages.
    pub live_buffer: usize,
    /// The subject pattern split into partitions (e.g. `telemetry.mower.*` by mower), if any: a
    /// durable consumer of exactly this pattern has one queue per partition, each handled by one
    /// subscription at a time (see the module documentation).
    pub partitioning: Option<Partitioning>,
}

impl Default for MemoryBusSettings {
    fn default() -> Self {
        Self {
            queue_capacity: 100_000,
            dedup_window: 10_000,
            live_buffer: 1024,
            partitioning: None,
        }
    }
}

/// The in-memory [`EventBus`] (see the module documentation). Cloning it gives another handle to
/// the same bus.
#[derive(Clone, Default)]
pub struct MemoryBus {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    settings: MemoryBusSettings,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    consumers: HashMap<String, Consumer>,
    live: Vec<LiveSubscriber>,
    dedup: Dedup,
    /// The id of the next batch subscription (a partition's holder is named by it).
    next_subscription: u64,
}

/// A durable consumer: its subject filter and its lanes of messages not yet delivered (or put
/// back).
struct Consumer {
    filter: String,
    /// One for a plain consumer, one per partition for a partitioned one.
    lanes: Vec<Lane>,
    /// Whether the lanes are partitions (or an exclusive consumer's one lane), each held by one
    /// subscription at a time.
    partitioned: bool,
    /// The live subscriptions of a partitioned consumer, with how many lanes each holds (the
    /// counter its `Subscription::partitions_owned` reads).
    members: HashMap<u64, Arc<AtomicUsize>>,
    /// Wakes the workers of a partitioned consumer when a lane is released or a subscription
    /// comes or goes.
    ownership: Arc<Notify>,
}

struct Lane {
    queue: VecDeque<Message>,
    /// Wakes the workers of this lane when messages are added to it.
    notify: Arc<Notify>,
    /// The subscription holding this partition (always `None` on a plain consumer's lane).
    holder: Option<u64>,
}

impl Consumer {
    fn new(filter: &str, lanes: usize, partitioned: bool) -> Self {
        Self {
            filter: filter.to_owned(),
            lanes: (0..lanes)
                .map(|_| Lane {
                    queue: VecDeque::new(),
                    notify: Arc::new(Notify::new()),
                    holder: None,
                })
                .collect(),
            partitioned,
            members: HashMap::new(),
            ownership: Arc::new(Notify::new()),
        }
    }

    fn pending(&self) -> usize {
        self.lanes.iter().map(|l| l.queue.len()).sum()
    }
}

struct LiveSubscriber {
    filter: String,
    sender: mpsc::Sender<Message>,
}

/// The last `window` de-duplication ids, in a set for look-ups and a queue for eviction order.
#[derive(Default)]
struct Dedup {
    seen: HashSet<String>,
    order: VecDeque<String>,
}

impl Dedup {
    fn contains(&self, id: &str) -> bool {
        self.seen.contains(id)
    }

    fn remember(&mut self, id: String, window: usize) {
        if window == 0 || !self.seen.insert(id.clone()) {
            return;
        }
        self.order.push_back(id);
        while self.order.len() > window {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
    }
}

impl MemoryBus {
    pub fn new(settings: MemoryBusSettings) -> Self {
        Self {
            inner: Arc::new(Inner {
                settings,
                state: Mutex::default(),
            }),
        }
    }

    /// The bus's settings.
    pub fn settings(&self) -> &MemoryBusSettings {
        &self.inner.settings
    }

    /// How many messages of a durable consumer wait in its queues (not delivered yet, or given
    /// back for redelivery): JetStream's `num_pending` plus the redeliveries it owes.
    pub fn pending(&self, consumer: &str) -> usize {
        self.inner
            .lock()
            .consumers
            .get(consumer)
            .map_or(0, Consumer::pending)
    }
}

impl Inner {
    /// Locks the state. A panic while the lock was held cannot leave the state half-updated in a
    /// way that matters more than losing the bus, so a poisoned lock is simply taken over.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lane_len(&self, consumer: &str, lane: usize) -> usize {
        self.lock()
            .consumers
            .get(consumer)
            .map_or(0, |c| c.lanes[lane].queue.len())
    }

    /// Takes up to `max` messages from the front of a lane.
    fn take(&self, consumer: &str, lane: usize, max: usize) -> Vec<Message> {
        let mut state = self.lock();
        match state.consumers.get_mut(consumer) {
            Some(c) => {
                let queue = &mut c.lanes[lane].queue;
                let n = max.min(queue.len());
                queue.drain(..n).collect()
            }
            None => Vec::new(),
        }
    }

    /// Puts messages back at the front of a lane, in their order, counting a new delivery for
    /// each.
    fn put_back(&self, consumer: &str, lane: usize, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let notify = {
            let mut state = self.lock();
            let Some(c) = state.consumers.get_mut(consumer) else {
                return;
            };
            let lane = &mut c.lanes[lane];
            for mut message in messages.into_iter().rev() {
                message.delivery = message.delivery.saturating_add(1);
                lane.queue.push_front(message);
            }
            Arc::clone(&lane.notify)
        };
        notify.notify_waiters();
    }
}

#[async_trait]
impl EventBus for MemoryBus {
    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        check_subject(subject)?;
        let settings = &self.inner.settings;
        // An exclusive consumer's one lane is lane 0, whatever the bus's partitioning says.
        let lane_of = |consumer: &Consumer| match &settings.partitioning {
            Some(p) if consumer.lanes.len() > 1 => p.partition_of(subject).unwrap_or(0) as usize,
            _ => 0,
        };
        let mut live_dropped = 0u64;
        let notifies = {
            let mut state = self.inner.lock();
            if let Some(id) = &dedup_id {
                if state.dedup.contains(id) {
                    tracing::debug!(subject, dedup_id = %id, "Ignored a duplicate publish.");
                    return Ok(());
                }
            }
            // Check every matching queue before storing anything: a publish is stored for all
            // consumers or for none, so a retry after `Full` cannot duplicate it for some.
            let full = state.consumers.values().any(|c| {
                c.pending() >= settings.queue_capacity && subject_matches(&c.filter, subject)
            });
            if full {
                tracing::warn!(subject, "Refused a publish: a consumer queue is full.");
                return Err(BusError::Full(subject.to_owned()));
            }
            let message = Message {
                subject: subject.to_owned(),
                payload,
                delivery: 1,
            };
            let mut notifies = Vec::new();
            for consumer in state.consumers.values_mut() {
                if subject_matches(&consumer.filter, subject) {
                    let lane = lane_of(consumer);
                    let lane = &mut consumer.lanes[lane];
                    lane.queue.push_back(message.clone());
                    notifies.push(Arc::clone(&lane.notify));
                }
            }
            if let Some(id) = dedup_id {
                state.dedup.remember(id, settings.dedup_window);
            }
            // Fanned out under the lock so that live subscribers see concurrent publishes in the
            // same order as the durable queues do; `try_send` never waits.
            state.live.retain(|live| {
                if !subject_matches(&live.filter, subject) {
                    return !live.sender.is_closed();
                }
                match live.sender.try_send(message.clone()) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        live_dropped += 1;
                        true
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                }
            });
            notifies
        };
        for notify in notifies {
            notify.notify_waiters();
        }
        if live_dropped > 0 {
            metrics::counter!("swath_bus_live_dropped_total").increment(live_dropped);
            tracing::debug!(
                subject,
                dropped = live_dropped,
                "A slow live subscriber lost a message."
            );
        }
        Ok(())
    }

    async fn subscribe_batch(
        &self,
        subject: &str,
        consumer: &str,
        settings: BatchSettings,
        handler: Arc<dyn BatchHandler>,
    ) -> Result<Subscription, BusError> {
        let partitioning =
            check_batch_subscription(subject, consumer, &self.inner.settings.partitioning)?;
        let lanes = partitioning.map_or(1, |p| p.partitions() as usize);
        // An exclusive consumer is a partitioned one with one partition: its one lane is held by
        // one subscription at a time, and handed over with what was left unsettled in front.
        let held = partitioning.is_some() || settings.exclusive;
        let (member, owned, lane_notifies, ownership) = {
            let mut state = self.inner.lock();
            let id = state.next_subscription;
            state.next_subscription += 1;
            let entry = state
                .consumers
                .entry(consumer.to_owned())
                .or_insert_with(|| {
                    tracing::debug!(consumer, subject, lanes, "Created a durable consumer.");
                    Consumer::new(subject, lanes, held)
                });
            if entry.filter != subject {
                return Err(BusError::Refused(format!(
                    "durable consumer {consumer} filters {}, not {subject}",
                    entry.filter
                )));
            }
            if entry.partitioned != held {
                return Err(BusError::Refused(format!(
                    "durable consumer {consumer} is {}exclusive; every subscription of it must agree",
                    if entry.partitioned { "" } else { "not " }
                )));
            }
            let owned = Arc::new(AtomicUsize::new(0));
            let member = entry.partitioned.then(|| {
                entry.members.insert(id, Arc::clone(&owned));
                // The others' quota shrank: their idle workers give up their extras now.
                entry.ownership.notify_waiters();
                id
            });
            let notifies: Vec<Arc<Notify>> =
                entry.lanes.iter().map(|l| Arc::clone(&l.notify)).collect();
            (member, owned, notifies, Arc::clone(&entry.ownership))
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(backlog::report(
            Arc::clone(&self.inner),
            consumer.to_owned(),
            stop_rx.clone(),
        ));
        let max_batch = batch_limit(&settings);
        let workers: Vec<LaneWorker> = lane_notifies
            .into_iter()
            .enumerate()
            .map(|(lane, notify)| LaneWorker {
                inner: Arc::clone(&self.inner),
                consumer: consumer.to_owned(),
                lane,
                member,
                notify,
                ownership: Arc::clone(&ownership),
                max_batch,
                settings,
                handler: Arc::clone(&handler),
                stop: stop_rx.clone(),
            })
            .collect();
        tracing::debug!(
            consumer,
            subject,
            max_batch,
            lanes = workers.len(),
            "Subscribed to a durable consumer."
        );
        let supervisor = run_subscription(
            Arc::clone(&self.inner),
            consumer.to_owned(),
            member,
            workers,
        );
        Ok(Subscription::new(stop_tx, tokio::spawn(supervisor)).with_partitions_owned(owned))
    }

    async fn subscribe(
        &self,
        subject: &str,
        options: LiveOptions,
    ) -> Result<LiveSubscription, BusError> {
        check_live(subject, &options)?;
        let (sender, messages) = mpsc::channel(self.inner.settings.live_buffer.max(1));
        let mut state = self.inner.lock();
        state.live.retain(|live| !live.sender.is_closed());
        state.live.push(LiveSubscriber {
            filter: subject.to_owned(),
            sender,
        });
        Ok(LiveSubscription {
            messages,
            guard: None,
        })
    }

    async fn ping(&self) -> Result<(), BusError> {
        Ok(())
    }
}

/// A batch subscription: its lanes' workers side by side; once they have all ended (drained,
/// their lanes released), a partitioned subscription leaves its consumer.
async fn run_subscription(
    inner: Arc<Inner>,
    consumer: String,
    member: Option<u64>,
    workers: Vec<LaneWorker>,
) {
    let mut running = JoinSet::new();
    for worker in workers {
        running.spawn(worker.run());
    }
    while let Some(ended) = running.join_next().await {
        if let Err(e) = ended {
            tracing::error!(consumer, error = %e, "A bus subscription worker ended abnormally.");
        }
    }
    if let Some(member) = member {
        inner.leave(&consumer, member);
    }
    tracing::debug!(consumer, "A durable consumer subscription ended.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_window_forgets_the_oldest_ids() {
        let mut dedup = Dedup::default();
        for id in ["a", "b", "c"] {
            dedup.remember(id.to_owned(), 2);
        }
        assert!(!dedup.contains("a"));
        assert!(dedup.contains("b") && dedup.contains("c"));
    }

    #[test]
    fn the_quota_is_the_ceiling_of_partitions_per_subscription() {
        let mut c = Consumer::new("a.*", 4, true);
        assert_eq!(c.quota(), 4, "no subscription yet");
        for (id, quota) in [(0, 4), (1, 2), (2, 2), (3, 1), (4, 1)] {
            c.members.insert(id, Arc::default());
            assert_eq!(c.quota(), quota, "{} subscriptions", id + 1);
        }
    }
}
