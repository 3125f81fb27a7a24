//! The worker task of one batch subscription: pull a batch, run the handler, settle, repeat.
//!
//! # Pulling a batch
//!
//! JetStream has no pull request that means "wait for the first message, then linger
//! `max_wait` for more": a request either returns at once (`no_wait`) or stays open until its
//! batch is full or it expires, and an open request cannot be withdrawn. So a batch is collected
//! with up to three requests, none of which outlives the batch:
//!
//! 1. `no_wait`, `max_batch`: whatever is there already. Under load this fills the batch in one
//!    round trip and the next two steps are skipped.
//! 2. If nothing was there: a waiting request for **one** message, renewed every `pull_expiry`,
//!    with idle heartbeats. Asking for one keeps it from collecting more after the linger ends.
//! 3. The linger: a request for the rest of the batch that *expires on the server* when the
//!    linger does (`expires = max_wait` from the first message). With `max_wait` zero it is a
//!    `no_wait` request instead, after a wait only (what queued up meanwhile).
//!
//! Nothing is fetched ahead of the handler: a prefetched message would be delivered (and count
//! against `max_ack_pending`) while the handler still runs, and a message of the running batch
//! that is redelivered (`nak`) would then come back *after* the prefetched later ones, losing the
//! publication order the contract promises. Pulling only between batches, after the previous
//! batch's settlements are confirmed, keeps it: JetStream serves redeliveries before new
//! messages, in the order they were given back.
//!
//! Each request has an inbox subscription of its own. A request given up early (unsubscribe,
//! silence) is *drained*: NATS confirms the unsubscription, and messages it had sent meanwhile
//! are still received and handed back, so none waits out `ack_wait`. JetStream does not deliver
//! to a pull request whose inbox nobody listens to any more.
//!
//! # Settling
//!
//! After the handler returns, each message gets its answer (`+ACK`, `-NAK`, `+TERM`), published
//! in order; the last one is sent as a request, and the server's reply to it confirms that the
//! whole batch's settlements were processed (they are processed in order) before the next pull
//! is made. A failed batch (error, wrong number of answers, panic) is held for
//! `redelivery_delay` and then handed back whole (`-NAK`), so nobody — no other replica either —
//! retries it sooner, and the next pull of this worker starts with it, in order. While a handler,
//! such a pause or a wait for earlier deliveries runs longer than a third of `ack_wait`, the
//! worker tells the server it is still at work (`+WPI`) so that what it holds is not redelivered
//! behind its back; should it be all the same (a NATS restart loses those notes), the worker
//! counts and handles each stream sequence once (decision 113).
//!
//! # Unsubscribing
//!
//! The stop signal interrupts a pull (what it brought is handed back, which counts as a
//! delivery), a pause (the held batch is handed back) or a handler run: then the handler gets
//! `drain_timeout` to finish, its answers are settled, and past the timeout it is aborted and its
//! batch handed back. The connection is flushed before the worker ends, so the settlements have
//! reached the server when `unsubscribe` returns.
//!
//! # Order after a crash
//!
//! A partition's worker is pinned (`pinning.rs`): the next holder of a dead one's partition is
//! pinned only once its deliveries are due, and it gathers and sorts the leading redeliveries
//! (decision 63).
//!
//! # Order when a pin moves
//!
//! A pin can also move sooner: when the consumer's leader changes (its node killed or paused in
//! a cluster), the new leader pins the oldest waiting pull while the holder may still be at work
//! on a batch, or the holder's renewals were lost during the election. So a worker that gets a
//! new pin handles nothing before the consumer has nothing unsettled but what it holds itself:
//! the previous holder settles its batch (a settlement needs no pin), or, dead, its deliveries
//! come due and are served to this worker before newer messages; everything in hand is then
//! sorted by stream sequence (`await_predecessor`, decision 88). While it waits it pulls a batch
//! at a time, again at once while redeliveries come: after a NATS restart, what it holds itself
//! comes due too, and is served first when older than what it waits for (decision 173).
//!
//! # Order after a loss
//!
//! A pull given up (silence, an error status, an inbox that did not drain in time) may have
//! been served all the same: in a cluster, the consumer's leader can serve a request after the
//! worker drained its inbox, and what it delivered there comes back only once `ack_wait`
//! expired. A hand-back (`-NAK`) NATS did not confirm may be lost the same way. Meanwhile the
//! worker, still pinned, would pull and handle newer messages of the partition first, and the
//! watcher's rules derive nothing from a state older than one they handled. So after either
//! (`recovering`), a partition's next batch waits exactly as under a new pin: until the
//! consumer has nothing unsettled but what the worker holds, taking the redeliveries as they
//! come due, everything sorted by stream sequence (`wait_after_a_loss`, decision 135). A pull
//! made after the lost one is served after it, so by the time its batch is in hand the
//! consumer counts what went astray. Settlements that were processed after all leave nothing
//! unsettled, and the wait ends at once.
//!
//! What follows is the order rule of an unpartitioned consumer.
//!
//! JetStream serves redeliveries before new messages, but a delivery of a process that died
//! (`kill -9`), or one lost with a connection, is redelivered only once its `ack_wait` expired;
//! a pull made before that gets the newer messages first, and a mower's older states would then
//! be stored after its newer ones (which changes its health and day totals: late states count
//! nothing). So before its first pull, after a lost pull and after settlements NATS did not
//! confirm, a worker looks at the durable consumer: when deliveries are unsettled, it pulls only
//! once the ack floor has reached the last delivered sequence it saw (another replica settled
//! them: a second replica starting next to a busy one waits one batch) or once `ack_wait` and a
//! margin have passed (they are due and come first). A service restarted after a crash thus
//! resumes up to `ack_wait` later, in order. Across replicas sharing a consumer no order holds
//! anyway (each handles its own batches).
//!
//! # Reconnects
//!
//! async-nats reconnects on its own and re-subscribes inboxes, but a pull request the server
//! forgot (a NATS restart) would never be answered. A waiting request asks for idle heartbeats;
//! two missed ones and the request is given up and made again, with a growing pause while
//! requests keep failing, and the durable consumer is provisioned again when the server says it
//! is gone. Messages left unacknowledged by the restart come back after `ack_wait`.

mod predecessor;
mod pulling;
mod settle;

use crate::pinning::Pinning;
use crate::provision::published_subject;
use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::{self, AckKind};
use async_nats::Client;
use bytes::Bytes;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use swath_application::bus_rules::{batch_limit, call_handler, stopped, Settled};
use swath_application::ports::{BatchHandler, BatchSettings, Message};
use tokio::sync::watch;
use tokio::time::Instant;

/// The timings a worker takes from the bus settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timings {
    pub request_timeout: Duration,
    pub pull_expiry: Duration,
    pub idle_heartbeat: Duration,
    pub ack_wait: Duration,
}

pub(crate) struct Worker {
    pub client: Client,
    pub js: jetstream::Context,
    pub stream: jetstream::stream::Stream,
    pub consumer: PullConsumer,
    /// The durable consumer's configuration (provisioned again after a NATS restart lost it).
    pub wanted: pull::Config,
    pub name: String,
    /// `settings.max_batch` clamped to `1..=MAX_IN_FLIGHT`.
    pub max_batch: usize,
    pub settings: BatchSettings,
    pub timings: Timings,
    pub handler: Arc<dyn BatchHandler>,
    /// Turns `true` on unsubscribe; a dropped `Subscription` (sender gone) stops the worker too.
    pub stop: watch::Receiver<bool>,
    /// Pull requests lost in a row (for the back-off and for logging an outage once).
    pub failures: u32,
    /// Set at start, after a lost pull request and after unconfirmed settlements: before the
    /// next pull (unpartitioned) or the next batch (a partition's), wait for the consumer's
    /// earlier deliveries to be settled or to expire (see "Order after a crash" and "Order
    /// after a loss" in the module documentation).
    pub recovering: AtomicBool,
    /// Messages in hand, not handled yet, in the order they are to be handled: a newer message
    /// taken while waiting for earlier deliveries (unpartitioned), or leading redeliveries beyond
    /// one batch (partitioned). Kept alive while they wait.
    pub held: Vec<jetstream::Message>,
    /// A partition's consumer: the pin and the replica's share (`pinning.rs`); `None` for an
    /// unpartitioned consumer.
    pub pinning: Option<Pinning>,
    /// Ends the worker once the consumer has nothing left to deliver or settle (an old
    /// unpartitioned consumer drained before the partitions take over, `partitioned.rs`).
    pub until_drained: bool,
    /// A partition's worker got a new pin since its last batch: before handling anything, it
    /// waits for what the consumer delivered to anyone else ("Order when a pin moves").
    pub newly_pinned: bool,
}

/// How a pull request ended.
enum PullEnd {
    /// The server ended it: batch complete, no messages, or expired.
    Ended,
    /// Unsubscribed meanwhile.
    Stopped,
    /// Given up: an error status, silence, or a closed inbox. `gone` when the consumer seems
    /// to be missing on the server.
    Lost { reason: String, gone: bool },
}

/// The outcome of waiting for something while keeping a batch alive.
enum Kept<T> {
    Done(T),
    Stopped,
    Deadline,
}

impl Worker {
    /// A worker of an unpartitioned consumer; a partition's sets `pinning`, a drained old
    /// consumer's `until_drained` (`partitioned.rs`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: &Client,
        js: &jetstream::Context,
        bus: &crate::NatsBusSettings,
        stream: jetstream::stream::Stream,
        consumer: PullConsumer,
        wanted: pull::Config,
        name: String,
        settings: BatchSettings,
        handler: Arc<dyn BatchHandler>,
        stop: watch::Receiver<bool>,
    ) -> Worker {
        Worker {
            client: client.clone(),
            js: js.clone(),
            stream,
            consumer,
            wanted,
            name,
            max_batch: batch_limit(&settings),
            settings,
            timings: Timings {
                request_timeout: bus.request_timeout,
                pull_expiry: bus.pull_expiry,
                idle_heartbeat: bus.idle_heartbeat,
                ack_wait: bus.ack_wait,
            },
            handler,
            stop,
            failures: 0,
            // An unpartitioned consumer looks for earlier deliveries before its first pull; a
            // partition's worker waits for them before its first batch, as its pin is new.
            recovering: AtomicBool::new(true),
            held: Vec::new(),
            pinning: None,
            until_drained: false,
            newly_pinned: false,
        }
    }

    pub(crate) async fn run(mut self) {
        while let Some(batch) = self.next_batch().await {
            let partitioned = self.pinning.is_some();
            tracing::debug!(
                consumer = %self.name,
                messages = batch.len(),
                first = batch.first().map(stream_sequence).unwrap_or(0),
                last = batch.last().map(stream_sequence).unwrap_or(0),
                redelivered = batch.iter().filter(|m| delivery_count(m) > 1).count(),
                pin = self.pinning.as_ref().and_then(|p| p.id.as_deref()).unwrap_or("-"),
                "Handling a batch."
            );
            let messages: Arc<[Message]> =
                batch.iter().map(|m| to_message(m, partitioned)).collect();
            let mut call = call_handler(&self.handler, messages);
            match self.keep_alive(&mut call, &batch, None, true).await {
                Kept::Done(result) => match self.settle(&batch, result).await {
                    Settled::Answered {
                        all_redelivered: false,
                    } => {
                        if self.until_drained && self.drained().await {
                            break;
                        }
                    }
                    // No message made progress: pause as after an error rather than spin on it.
                    Settled::Answered {
                        all_redelivered: true,
                    } => {
                        if !self.pause(&[]).await {
                            break;
                        }
                    }
                    Settled::Failed => {
                        let go_on = self.pause(&batch).await;
                        self.give_back(&batch).await;
                        // What is held is newer: it goes back after the batch, in order.
                        self.give_back_held().await;
                        if !go_on {
                            break;
                        }
                    }
                },
                Kept::Stopped | Kept::Deadline => {
                    self.drain(call, &batch).await;
                    break;
                }
            }
        }
        self.give_back_held().await;
        if !matches!(
            tokio::time::timeout(self.timings.request_timeout, self.client.flush()).await,
            Ok(Ok(()))
        ) {
            tracing::warn!(consumer = %self.name, "Could not flush the NATS connection; the last settlements may be lost and redelivered.");
        }
        tracing::debug!(consumer = %self.name, "A durable consumer subscription ended.");
    }

    /// Awaits `future`, telling the server every third of `ack_wait` that `batch` is still being
    /// worked on; gives up at `deadline`, or on the stop signal when `stoppable`.
    async fn keep_alive<F: Future + Unpin>(
        &mut self,
        future: &mut F,
        batch: &[jetstream::Message],
        deadline: Option<Instant>,
        stoppable: bool,
    ) -> Kept<F::Output> {
        let every = self.progress_every();
        let mut progress = tokio::time::interval_at(Instant::now() + every, every);
        let deadline = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let mut deadline = pin!(deadline);
        loop {
            tokio::select! {
                biased;
                output = &mut *future => return Kept::Done(output),
                () = stopped(&mut self.stop), if stoppable => return Kept::Stopped,
                () = &mut deadline => return Kept::Deadline,
                _ = progress.tick() => self.send_progress(batch).await,
            }
        }
    }

    /// How often messages in hand are reported in progress: a third of `ack_wait` (and of the
    /// pin's timeout), at least 100 ms.
    fn progress_every(&self) -> Duration {
        let mut every = self.timings.ack_wait / 3;
        if let Some(pinning) = &self.pinning {
            every = every.min(pinning.timeout / 3);
        }
        every.max(Duration::from_millis(100))
    }

    /// Tells the server that `batch` and the held messages are still being worked on (`+WPI`),
    /// and keeps the pin.
    async fn send_progress(&self, batch: &[jetstream::Message]) {
        for message in batch.iter().chain(&self.held) {
            if let Some(reply) = message.message.reply.clone() {
                let _ = self
                    .client
                    .publish(reply, Bytes::from(AckKind::Progress))
                    .await;
            }
        }
        if let Some(pinning) = &self.pinning {
            pinning.keep(&self.client, &self.next_subject(), &self.name);
        }
    }

    /// For a wait made of short sleeps (each a [`Worker::keep_alive`] of its own, whose first
    /// report would come only after [`Worker::progress_every`]): reports `batch` in progress
    /// when that long has passed since `last`. Without it, what a worker holds while it waits
    /// for a predecessor passed its `ack_wait` unreported and was delivered to it again.
    async fn progress_if_due(&self, batch: &[jetstream::Message], last: &mut Instant) {
        if last.elapsed() >= self.progress_every() {
            self.send_progress(batch).await;
            *last = Instant::now();
        }
    }
}

/// A message's sequence in its stream (0 if the server did not say).
fn stream_sequence(message: &jetstream::Message) -> u64 {
    message.info().map(|info| info.stream_sequence).unwrap_or(0)
}

/// How many times JetStream delivered a message (1 on the first delivery).
fn delivery_count(message: &jetstream::Message) -> u32 {
    message
        .info()
        .ok()
        .and_then(|info| u32::try_from(info.delivered).ok())
        .unwrap_or(1)
        .max(1)
}

/// The port's view of a JetStream message; `delivery` is JetStream's delivery count. A
/// partitioned stream's stored subject is given back as it was published.
pub(crate) fn to_message(message: &jetstream::Message, partitioned: bool) -> Message {
    let stored = message.message.subject.as_str();
    Message {
        subject: if partitioned {
            published_subject(stored)
        } else {
            stored.to_owned()
        },
        payload: message.message.payload.clone(),
        delivery: delivery_count(message),
    }
}
