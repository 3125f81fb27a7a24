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
//! A durable consumer is a bounded `VecDeque` of messages plus a [`Notify`]. It is created by the
//! first `subscribe_batch` naming it and lives as long as the bus, like a JetStream durable
//! consumer outlives its subscribers: messages published while nobody is subscribed queue up
//! for it. The memory bus keeps **no stream history**: a consumer only sees messages published
//! after it was created (a JetStream consumer created with `DeliverPolicy::All` would also see
//! older ones; nothing in Swath relies on that).
//!
//! Each batch subscription is one worker task. The worker waits for a first message, lingers up
//! to `max_wait` for more (until `max_batch` are there), takes the batch out of the queue, runs
//! the handler, and only then settles: `Ack` and `Drop` forget a message, `Redeliver` puts it
//! back at the *front* of the queue so that publication order survives redeliveries. Since the
//! worker awaits the handler before it takes the next batch, batches of one subscription never
//! overlap and a subscription never has more than `max_batch` ≤ [`MAX_IN_FLIGHT`] messages in
//! flight. Several subscriptions to one consumer are several workers taking from the same queue,
//! so each message goes to exactly one of them.
//!
//! After a failed batch (handler error, wrong number of answers, panic) the batch goes back at
//! once, so another subscription of the consumer may take it, and this worker sleeps
//! `redelivery_delay` before its next batch. A batch in which *every* message asked to be
//! redelivered made no progress either, so it gets the same pause: without it a handler that
//! keeps answering `Redeliver` (say, while its database is down) would spin. A batch that made
//! some progress goes on at once.
//!
//! A consumer keeps the subject filter it was created with; subscribing to it with another filter
//! is refused rather than silently ignored. Dropping a [`Subscription`] without unsubscribing
//! stops its worker as unsubscribing does (nobody could stop it any more), without waiting for
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
//! *then* look at the queue, and only then await it.
//!
//! Live subscriptions are bounded `mpsc` channels fed with `try_send`: the publisher never waits
//! for a slow subscriber; what does not fit is dropped and counted
//! (`swath_bus_live_dropped_total`), like a NATS core subscriber that falls behind.

use async_trait::async_trait;
use bytes::Bytes;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use swath_application::ports::bus_rules::{
    check_consumer_name, check_filter, check_live, check_subject, is_stopped, judge, stopped,
    subject_matches, HandlerResult, Verdict,
};
use swath_application::ports::{
    BatchHandler, BatchSettings, BusError, EventBus, HandlerError, LiveOptions, LiveSubscription,
    Message, Settle, Subscription, MAX_IN_FLIGHT,
};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Settings of a [`MemoryBus`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBusSettings {
    /// The most messages waiting in one durable consumer's queue; a publish that would exceed it
    /// is refused with [`BusError::Full`] (the stream's limit). Redelivered messages go back
    /// even past it: they were accepted once and must not be lost.
    pub queue_capacity: usize,
    /// How many of the latest de-duplication ids are remembered (JetStream's duplicate window,
    /// counted in ids rather than time). Zero turns de-duplication off.
    pub dedup_window: usize,
    /// The buffer of each live subscription; a subscriber that falls further behind loses
    /// messages.
    pub live_buffer: usize,
}

impl Default for MemoryBusSettings {
    fn default() -> Self {
        Self {
            queue_capacity: 100_000,
            dedup_window: 10_000,
            live_buffer: 1024,
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
}

/// A durable consumer: its subject filter and the messages not yet delivered (or put back).
struct Consumer {
    filter: String,
    queue: VecDeque<Message>,
    /// Wakes the workers of this consumer when messages are added to its queue.
    notify: Arc<Notify>,
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
    pub fn settings(&self) -> MemoryBusSettings {
        self.inner.settings
    }

    /// How many messages of a durable consumer wait in its queue (not delivered yet, or given
    /// back for redelivery): JetStream's `num_pending` plus the redeliveries it owes.
    pub fn pending(&self, consumer: &str) -> usize {
        self.inner.queue_len(consumer)
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

    fn queue_len(&self, consumer: &str) -> usize {
        self.lock()
            .consumers
            .get(consumer)
            .map_or(0, |c| c.queue.len())
    }

    /// Takes up to `max` messages from the front of a consumer's queue.
    fn take(&self, consumer: &str, max: usize) -> Vec<Message> {
        let mut state = self.lock();
        match state.consumers.get_mut(consumer) {
            Some(c) => {
                let n = max.min(c.queue.len());
                c.queue.drain(..n).collect()
            }
            None => Vec::new(),
        }
    }

    /// Puts messages back at the front of a consumer's queue, in their order, counting a new
    /// delivery for each.
    fn put_back(&self, consumer: &str, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let notify = {
            let mut state = self.lock();
            let Some(c) = state.consumers.get_mut(consumer) else {
                return;
            };
            for mut message in messages.into_iter().rev() {
                message.delivery = message.delivery.saturating_add(1);
                c.queue.push_front(message);
            }
            Arc::clone(&c.notify)
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
        let settings = self.inner.settings;
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
                c.queue.len() >= settings.queue_capacity && subject_matches(&c.filter, subject)
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
                    consumer.queue.push_back(message.clone());
                    notifies.push(Arc::clone(&consumer.notify));
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
        check_filter(subject)?;
        check_consumer_name(consumer)?;
        let notify = {
            let mut state = self.inner.lock();
            let entry = state
                .consumers
                .entry(consumer.to_owned())
                .or_insert_with(|| {
                    tracing::debug!(consumer, subject, "Created a durable consumer.");
                    Consumer {
                        filter: subject.to_owned(),
                        queue: VecDeque::new(),
                        notify: Arc::new(Notify::new()),
                    }
                });
            if entry.filter != subject {
                return Err(BusError::Refused(format!(
                    "durable consumer {consumer} filters {}, not {subject}",
                    entry.filter
                )));
            }
            Arc::clone(&entry.notify)
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let worker = Worker {
            inner: Arc::clone(&self.inner),
            consumer: consumer.to_owned(),
            notify,
            max_batch: settings.max_batch.clamp(1, MAX_IN_FLIGHT),
            settings,
            handler,
            stop: stop_rx,
        };
        tracing::debug!(
            consumer,
            subject,
            max_batch = worker.max_batch,
            "Subscribed to a durable consumer."
        );
        Ok(Subscription::new(stop_tx, tokio::spawn(worker.run())))
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

/// One batch subscription's worker task.
struct Worker {
    inner: Arc<Inner>,
    consumer: String,
    notify: Arc<Notify>,
    /// `settings.max_batch` clamped to `1..=MAX_IN_FLIGHT`.
    max_batch: usize,
    settings: BatchSettings,
    handler: Arc<dyn BatchHandler>,
    /// Turns `true` on unsubscribe. A dropped `Subscription` (sender gone) stops the worker too,
    /// rather than leaving it running with nobody able to stop it.
    stop: watch::Receiver<bool>,
}

/// How a finished handler call is settled.
enum Settled {
    /// Settled as the handler answered; `all_redelivered` when no message made progress.
    Answered { all_redelivered: bool },
    /// The handler failed as a whole: the batch was put back.
    Failed,
}

impl Worker {
    async fn run(mut self) {
        loop {
            if !self.wait_for_batch().await {
                break;
            }
            let batch = self.inner.take(&self.consumer, self.max_batch);
            if batch.is_empty() {
                // Another subscription of the same consumer took the messages meanwhile.
                continue;
            }
            let batch: Arc<[Message]> = batch.into();
            let mut call = {
                let handler = Arc::clone(&self.handler);
                let batch = Arc::clone(&batch);
                tokio::spawn(async move { handler.handle(&batch).await })
            };
            let settled = tokio::select! {
                biased;
                result = &mut call => self.settle(&batch, result),
                () = stopped(&mut self.stop) => {
                    self.drain(&batch, call).await;
                    break;
                }
            };
            let pause = match settled {
                Settled::Failed => true,
                // A batch where every message asked to be redelivered made no progress: pause as
                // after an error rather than spin on it.
                Settled::Answered { all_redelivered } => all_redelivered,
            };
            if pause && !self.settings.redelivery_delay.is_zero() {
                tokio::select! {
                    biased;
                    () = stopped(&mut self.stop) => break,
                    () = tokio::time::sleep(self.settings.redelivery_delay) => {}
                }
            }
        }
        tracing::debug!(consumer = %self.consumer, "A durable consumer subscription ended.");
    }

    /// Waits for a first message, then lingers up to `max_wait` until `max_batch` messages are
    /// queued. Returns `false` when the subscription was stopped meanwhile (nothing was taken, so
    /// nothing needs putting back).
    async fn wait_for_batch(&mut self) -> bool {
        loop {
            if is_stopped(&self.stop) {
                return false;
            }
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before looking at the queue, so a publish in between is not missed.
            notified.as_mut().enable();
            if self.inner.queue_len(&self.consumer) > 0 {
                break;
            }
            tokio::select! {
                biased;
                () = stopped(&mut self.stop) => return false,
                () = &mut notified => {}
            }
        }
        if self.settings.max_wait.is_zero() {
            return true;
        }
        let deadline = Instant::now() + self.settings.max_wait;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.queue_len(&self.consumer) >= self.max_batch {
                return true;
            }
            tokio::select! {
                biased;
                () = stopped(&mut self.stop) => return false,
                () = tokio::time::sleep_until(deadline) => return true,
                () = &mut notified => {}
            }
        }
    }

    /// Settles a finished handler call.
    fn settle(&self, batch: &[Message], result: HandlerResult) -> Settled {
        let consumer = self.consumer.as_str();
        let verdict = judge(consumer, batch.iter().map(|m| m.subject.as_str()), result);
        let no_progress = verdict.made_no_progress();
        match verdict {
            Verdict::Failed => {
                self.inner.put_back(consumer, batch.to_vec());
                Settled::Failed
            }
            Verdict::Settle(answers) => {
                let redeliver = batch
                    .iter()
                    .zip(answers)
                    .filter(|(_, answer)| *answer == Settle::Redeliver)
                    .map(|(message, _)| message.clone())
                    .collect();
                self.inner.put_back(consumer, redeliver);
                Settled::Answered {
                    all_redelivered: no_progress,
                }
            }
        }
    }

    /// On unsubscribe while a handler call runs: gives it the drain timeout to finish and be
    /// settled; past it, aborts it and puts its whole batch back (unsettled ⇒ redelivered).
    async fn drain(
        &self,
        batch: &[Message],
        mut call: JoinHandle<Result<Vec<Settle>, HandlerError>>,
    ) {
        match tokio::time::timeout(self.settings.drain_timeout, &mut call).await {
            Ok(result) => {
                self.settle(batch, result);
            }
            Err(_) => {
                call.abort();
                tracing::warn!(
                    consumer = %self.consumer,
                    batch = batch.len(),
                    drain_timeout = ?self.settings.drain_timeout,
                    "A batch handler outlived the drain timeout; its batch will be redelivered."
                );
                self.inner.put_back(&self.consumer, batch.to_vec());
            }
        }
    }
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
}
