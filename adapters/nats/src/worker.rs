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
//! retries it sooner, and the next pull of this worker starts with it, in order. While a handler
//! or such a pause runs longer than a third of `ack_wait`, the worker tells the server it is
//! still at work (`+WPI`) so that the batch is not redelivered behind its back.
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
//! sorted by stream sequence (`await_predecessor`, decision 88).
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

use crate::pinning::{unpin, Pinning, Turn};
use crate::provision::{provision_consumer, published_subject};
use async_nats::jetstream::consumer::{pull, pull::BatchConfig, PullConsumer};
use async_nats::jetstream::{self, AckKind};
use async_nats::{Client, StatusCode, Subject, Subscriber};
use bytes::Bytes;
use futures::StreamExt;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::bus_rules::{
    batch_limit, call_handler, is_stopped, judge, linger_left, stopped, warn_outlived_drain,
    HandlerResult, Settled, Verdict,
};
use swath_application::ports::{
    BatchHandler, BatchSettings, HandlerError, Message, Settle, MAX_IN_FLIGHT,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What to allow beyond two heartbeat intervals before a silent request counts as lost.
const HEARTBEAT_SLACK: Duration = Duration::from_millis(500);
/// The longest pause between two pull requests that keep failing.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How many `ack_wait`s a newly pinned worker waits at most for its predecessor's deliveries.
const PREDECESSOR_PATIENCE: u32 = 4;
/// The header naming the pin of a partition's deliveries.
const PIN_HEADER: &str = "Nats-Pin-Id";

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
    /// next pull, wait for the consumer's earlier deliveries to be settled or to expire (see
    /// "Order after a crash" in the module documentation).
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
            // partition's worker ignores this (its pin waits for them, decision 63).
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

    // -----------------------------------------------------------------------------------------
    // Pulling.

    /// The next batch, or `None` once stopped (what was pulled meanwhile has been handed back).
    async fn next_batch(&mut self) -> Option<Vec<jetstream::Message>> {
        if self.pinning.is_some() {
            return self.next_pinned_batch().await;
        }
        if self.recovering.load(Ordering::Relaxed) && !self.await_earlier_deliveries().await {
            return None;
        }
        let mut batch = Vec::with_capacity(self.max_batch);
        // 1. What is there already.
        let end = self.pull(self.no_wait(self.max_batch), &mut batch).await;
        if !self.carry_on(end, &mut batch).await {
            return None;
        }
        if !self.held.is_empty() {
            // A newer message taken while waiting for redeliveries goes after them: JetStream
            // serves them first, so a full batch of older ones may be followed by more.
            let held_from = self.held.iter().map(stream_sequence).min().unwrap_or(0);
            let all_older = batch.iter().all(|m| stream_sequence(m) < held_from);
            if all_older && batch.len() == self.max_batch {
                return Some(batch);
            }
            batch.append(&mut self.held);
            batch.sort_by_key(stream_sequence);
            if batch.len() > self.max_batch {
                // The newest delivered ones: handed back, they come next, still in order.
                let excess = batch.split_off(self.max_batch);
                self.give_back(&excess).await;
            }
        }
        // 2. Nothing there: wait for a first message.
        let waited = batch.is_empty();
        while batch.is_empty() {
            let end = self.pull(self.waiting(), &mut batch).await;
            if !self.carry_on(end, &mut batch).await {
                return None;
            }
            if batch.is_empty() && self.until_drained && self.drained().await {
                return None;
            }
        }
        self.linger(&mut batch, waited).await.then_some(batch)
    }

    /// A partition's next batch (see "Pulling a batch" and `pinning.rs`): held messages first;
    /// else, once it is this worker's turn, steps 1–3 (step 1 only as the holder: a standby's
    /// pull waits for the pin), then every leading redelivery, sorted by stream sequence.
    async fn next_pinned_batch(&mut self) -> Option<Vec<jetstream::Message>> {
        if !self.held.is_empty() {
            let n = self.held.len().min(self.max_batch);
            return Some(self.held.drain(..n).collect());
        }
        loop {
            if !self.await_turn().await {
                return None;
            }
            let holding = self.pinning.as_ref().is_some_and(|p| p.id.is_some());
            let mut batch = Vec::with_capacity(self.max_batch);
            if holding {
                let end = self.pull(self.no_wait(self.max_batch), &mut batch).await;
                if !self.carry_on(end, &mut batch).await {
                    return None;
                }
                let still = self.pinning.as_ref().is_some_and(|p| p.id.is_some());
                if batch.is_empty() && !still {
                    // The pin is another replica's now: compete only within the share.
                    continue;
                }
            }
            let waited = batch.is_empty();
            if waited {
                let end = self.pull(self.waiting(), &mut batch).await;
                if !self.carry_on(end, &mut batch).await {
                    return None;
                }
                if batch.is_empty() {
                    // Nothing came: look at the turn again (the share may have changed).
                    continue;
                }
            }
            if !self.linger(&mut batch, waited).await
                || !self.gather_redeliveries(&mut batch).await
                || !self.await_predecessor(&mut batch).await
            {
                return None;
            }
            return Some(batch);
        }
    }

    /// Waits until this partition worker may pull (`Pinning::turn`), releasing the partition
    /// first when its replica holds more than its share. `false` when stopped meanwhile.
    async fn await_turn(&mut self) -> bool {
        loop {
            let Some(pinning) = self.pinning.as_mut() else {
                return true;
            };
            match pinning.turn() {
                Turn::Pull => return true,
                Turn::Release => {
                    // Only with nothing of the partition unsettled (a settlement NATS did not
                    // confirm would come back to the next holder after newer messages).
                    let settled =
                        matches!(self.consumer.info().await, Ok(info) if info.num_ack_pending == 0);
                    let Some(pinning) = self.pinning.as_mut() else {
                        return true;
                    };
                    if !settled || !pinning.try_release() {
                        return true;
                    }
                    let stream = self.stream.cached_info().config.name.clone();
                    unpin(
                        &self.client,
                        &stream,
                        &self.name,
                        self.timings.request_timeout,
                    )
                    .await;
                }
                Turn::Wait => {}
            }
            let mut sleep = pin!(tokio::time::sleep(Duration::from_millis(250)));
            if let Kept::Stopped = self.keep_alive(&mut sleep, &[], None, true).await {
                return false;
            }
        }
    }

    /// When a batch holds redeliveries: pulls on until a first delivery or nothing comes, so
    /// that every redelivery served ahead of newer messages is in hand, and sorts them all by
    /// stream sequence (a moved pin gets them rotated, `pinning.rs`). What exceeds one batch is
    /// held, in order, for the next ones. `false` when stopped meanwhile.
    async fn gather_redeliveries(&mut self, batch: &mut Vec<jetstream::Message>) -> bool {
        if batch.iter().all(|m| delivery_count(m) <= 1) {
            return true;
        }
        loop {
            let mut more = Vec::new();
            // A batch at a time: enough to reach the first newer message behind them.
            let room = MAX_IN_FLIGHT
                .saturating_sub(batch.len())
                .clamp(1, self.max_batch);
            let end = self.pull(self.no_wait(room), &mut more).await;
            let lost = matches!(end, PullEnd::Lost { .. });
            if !self.carry_on(end, &mut more).await {
                self.give_back(batch).await;
                return false;
            }
            let done = lost || more.is_empty() || more.iter().any(|m| delivery_count(m) <= 1);
            batch.append(&mut more);
            if done || batch.len() >= MAX_IN_FLIGHT {
                break;
            }
        }
        batch.sort_by_key(stream_sequence);
        if batch.len() > self.max_batch {
            self.held = batch.split_off(self.max_batch);
        }
        true
    }

    /// After a new pin, before the first batch under it is handled: waits until the consumer
    /// has nothing unsettled but what this worker holds, taking the redeliveries that come due
    /// meanwhile, and sorts it all by stream sequence. `false` when stopped meanwhile.
    ///
    /// The pin can move before the previous holder's deliveries are due, which decision 63's
    /// timing does not cover: the consumer's leader changed (its node was killed or paused: the
    /// new leader pins the oldest waiting pull) while the holder was handling a batch, or the
    /// holder's renewals were lost during an election. The previous holder, alive, still
    /// settles what it holds (a settlement needs no pin); dead, its deliveries come due within
    /// `ack_wait` and are served before newer messages. Either way this worker must not handle
    /// newer messages of the partition first. A wait longer than `PREDECESSOR_PATIENCE` times
    /// `ack_wait` (a holder still at work on one batch after that long) is given up with a
    /// warning: a partition must not stall for good.
    async fn await_predecessor(&mut self, batch: &mut Vec<jetstream::Message>) -> bool {
        if !std::mem::take(&mut self.newly_pinned) {
            return true;
        }
        let started = Instant::now();
        let mut last_pull = Instant::now();
        let mut logged = false;
        loop {
            let mine = batch.len() + self.held.len();
            let others = match self.consumer.info().await {
                Ok(info) => info.num_ack_pending.saturating_sub(mine),
                Err(e) => {
                    tracing::debug!(consumer = %self.name, error = %e, "Could not read the consumer's state; retrying.");
                    1
                }
            };
            if others == 0 {
                break;
            }
            if started.elapsed() >= self.timings.ack_wait * PREDECESSOR_PATIENCE {
                tracing::warn!(consumer = %self.name, unsettled = others, "Deliveries of the partition's previous holder are still unsettled; handling newer messages now, so their order may not hold.");
                break;
            }
            if !logged {
                tracing::info!(consumer = %self.name, unsettled = others, "The partition's previous holder has deliveries unsettled; waiting for them to be settled or due.");
                logged = true;
            }
            // Due redeliveries are served before newer messages: ask for as many as are
            // missing, once they may be due (a pull sooner would bring newer messages only).
            let room = MAX_IN_FLIGHT.saturating_sub(mine).min(others);
            if room > 0 && last_pull.elapsed() >= self.timings.ack_wait {
                let mut more = Vec::new();
                let end = self.pull(self.no_wait(room), &mut more).await;
                last_pull = Instant::now();
                if !self.carry_on(end, &mut more).await {
                    self.give_back(batch).await;
                    return false;
                }
                batch.append(&mut more);
                continue;
            }
            let mut sleep = pin!(tokio::time::sleep(Duration::from_millis(250)));
            if let Kept::Stopped = self.keep_alive(&mut sleep, batch, None, true).await {
                self.give_back(batch).await;
                return false;
            }
        }
        if logged {
            tracing::info!(consumer = %self.name, waited = ?started.elapsed(), "Handling the partition after its previous holder's deliveries.");
        }
        batch.append(&mut self.held);
        batch.sort_by_key(stream_sequence);
        if batch.len() > self.max_batch {
            self.held = batch.split_off(self.max_batch);
        }
        true
    }

    /// Whether the consumer has nothing left to deliver or settle (`until_drained`); a consumer
    /// that is gone (another replica deleted it once drained) is drained too.
    async fn drained(&mut self) -> bool {
        match self.consumer.info().await {
            Ok(info) => info.num_pending == 0 && info.num_ack_pending == 0,
            Err(e) => {
                let gone = e.to_string().to_ascii_lowercase().contains("not found");
                if !gone {
                    tracing::debug!(consumer = %self.name, error = %e, "Could not read the consumer's state; pulling on.");
                }
                gone
            }
        }
    }

    /// Step 3: lingers for the rest of the batch. `false` when stopped meanwhile.
    async fn linger(&mut self, batch: &mut Vec<jetstream::Message>, waited: bool) -> bool {
        let first = Instant::now();
        let rest = self.max_batch.saturating_sub(batch.len());
        if rest > 0 {
            let request = if self.settings.max_wait.is_zero() {
                // Zero batches only what queued up meanwhile; after step 1 that was taken.
                waited.then(|| self.no_wait(rest))
            } else {
                linger_left(first, self.settings.max_wait).map(|left| self.lingering(rest, left))
            };
            if let Some(request) = request {
                let end = self.pull(request, batch).await;
                if !self.carry_on(end, batch).await {
                    return false;
                }
            }
        }
        true
    }

    fn no_wait(&self, batch: usize) -> BatchConfig {
        BatchConfig {
            batch,
            no_wait: true,
            ..BatchConfig::default()
        }
    }

    /// A request for one message that waits `pull_expiry`, with heartbeats.
    fn waiting(&self) -> BatchConfig {
        BatchConfig {
            batch: 1,
            expires: Some(self.timings.pull_expiry),
            idle_heartbeat: self.heartbeat_for(self.timings.pull_expiry),
            ..BatchConfig::default()
        }
    }

    /// A request for the rest of a batch that the server ends after `left`.
    fn lingering(&self, batch: usize, left: Duration) -> BatchConfig {
        BatchConfig {
            batch,
            expires: Some(left),
            idle_heartbeat: self.heartbeat_for(left),
            ..BatchConfig::default()
        }
    }

    /// Heartbeats only where they can come: JetStream refuses one longer than half the expiry,
    /// and a short request is watched by its expiry alone.
    fn heartbeat_for(&self, expires: Duration) -> Duration {
        let heartbeat = self.timings.idle_heartbeat;
        if !heartbeat.is_zero() && expires >= heartbeat * 2 {
            heartbeat
        } else {
            Duration::ZERO
        }
    }

    /// The subject of this consumer's pull requests.
    fn next_subject(&self) -> String {
        format!(
            "$JS.API.CONSUMER.MSG.NEXT.{}.{}",
            self.stream.cached_info().config.name,
            self.name
        )
    }

    /// Publishes a pull request whose deliveries go to `inbox`; a partition's carries its
    /// priority group and, when held, its pin (which async-nats's `request_batch` cannot send).
    async fn request(
        &self,
        request: &BatchConfig,
        inbox: Subject,
    ) -> Result<(), async_nats::PublishError> {
        let mut body = serde_json::to_value(request).unwrap_or_default();
        if let Some(pinning) = &self.pinning {
            pinning.request_fields(&mut body);
        }
        self.client
            .publish_with_reply(self.next_subject(), inbox, Bytes::from(body.to_string()))
            .await
    }

    /// Sends one pull request and collects what it delivers into `into`.
    async fn pull(&mut self, request: BatchConfig, into: &mut Vec<jetstream::Message>) -> PullEnd {
        // Checked before asking: once stopped, anything pulled would only be handed back, which
        // counts as a delivery.
        if is_stopped(&self.stop) {
            return PullEnd::Stopped;
        }
        let inbox = Subject::from(self.client.new_inbox());
        let mut inbox_sub = match self.client.subscribe(inbox.clone()).await {
            Ok(subscriber) => subscriber,
            Err(e) => {
                return PullEnd::Lost {
                    reason: format!("subscribing to a pull inbox: {e}"),
                    gone: false,
                }
            }
        };
        if let Err(e) = self.request(&request, inbox).await {
            return PullEnd::Lost {
                reason: format!("sending a pull request: {e}"),
                gone: false,
            };
        }
        // Silence longer than this means the request is lost: two heartbeats, or the expiry
        // (zero for `no_wait`, answered at once) plus the time a round trip may take.
        let silence = if request.idle_heartbeat.is_zero() {
            request.expires.unwrap_or_default() + self.timings.request_timeout
        } else {
            request.idle_heartbeat * 2 + HEARTBEAT_SLACK
        };
        let mut received = 0;
        loop {
            let next = tokio::select! {
                biased;
                () = stopped(&mut self.stop) => None,
                next = tokio::time::timeout(silence, inbox_sub.next()) => Some(next),
            };
            let message = match next {
                None => {
                    self.abandon(inbox_sub, into).await;
                    return PullEnd::Stopped;
                }
                Some(Err(_elapsed)) => {
                    self.abandon(inbox_sub, into).await;
                    return PullEnd::Lost {
                        reason: format!("no answer to a pull request within {silence:?}"),
                        gone: false,
                    };
                }
                Some(Ok(None)) => {
                    return PullEnd::Lost {
                        reason: "the pull inbox was closed".to_owned(),
                        gone: false,
                    }
                }
                Some(Ok(Some(message))) => message,
            };
            match message.status {
                None | Some(StatusCode::OK) => {
                    if let Some(pinning) = self.pinning.as_mut() {
                        let pin = message
                            .headers
                            .as_ref()
                            .and_then(|h| h.get(PIN_HEADER))
                            .map(|v| v.as_str());
                        if pinning.delivered_with(pin) {
                            tracing::info!(consumer = %self.name, partition = pinning.partition, "Holding the partition.");
                            self.newly_pinned = true;
                        }
                    }
                    into.push(jetstream::Message {
                        message,
                        context: self.js.clone(),
                    });
                    received += 1;
                    if received >= request.batch {
                        return PullEnd::Ended;
                    }
                }
                Some(StatusCode::IDLE_HEARTBEAT) => {}
                // No messages (`no_wait`), or the request expired.
                Some(StatusCode::NOT_FOUND) | Some(StatusCode::TIMEOUT) => return PullEnd::Ended,
                // The pin this request carried is not the partition's (any more): another
                // replica holds it, or it was released.
                Some(status) if u16::from(status) == 423 && self.pinning.is_some() => {
                    if let Some(pinning) = self.pinning.as_mut() {
                        if pinning.lost() {
                            tracing::info!(consumer = %self.name, partition = pinning.partition, "The partition is held by another replica now.");
                        }
                    }
                    return PullEnd::Ended;
                }
                Some(status) => {
                    let description = message.description.unwrap_or_default();
                    // `no_wait` while `max_ack_pending` messages are in flight (other
                    // replicas): nothing to take now, the waiting request will wait for room.
                    if status == StatusCode::REQUEST_TERMINATED
                        && description.contains("MaxAckPending")
                    {
                        return PullEnd::Ended;
                    }
                    let gone = status == StatusCode::NO_RESPONDERS
                        || description.to_ascii_lowercase().contains("deleted");
                    return PullEnd::Lost {
                        reason: format!(
                            "the server ended a pull request with {status} {description}"
                        ),
                        gone,
                    };
                }
            }
        }
    }

    /// Gives up a pull request: unsubscribes its inbox and keeps what the server sent before it
    /// processed the unsubscription (those messages are delivered and must be settled).
    async fn abandon(&self, mut inbox_sub: Subscriber, into: &mut Vec<jetstream::Message>) {
        if inbox_sub.drain().await.is_err() {
            return;
        }
        let collect = async {
            while let Some(message) = inbox_sub.next().await {
                if matches!(message.status, None | Some(StatusCode::OK)) {
                    into.push(jetstream::Message {
                        message,
                        context: self.js.clone(),
                    });
                }
            }
        };
        if tokio::time::timeout(self.timings.request_timeout, collect)
            .await
            .is_err()
        {
            tracing::debug!(consumer = %self.name, "A pull inbox did not drain in time; what it held comes back after ack_wait.");
        }
    }

    /// After a pull: `false` when stopped (the messages in hand were handed back). A lost pull is
    /// logged (an outage once), and unless messages are in hand, followed by a pause that grows
    /// while pulls keep failing, and by provisioning the consumer again if it seems gone.
    async fn carry_on(&mut self, end: PullEnd, batch: &mut Vec<jetstream::Message>) -> bool {
        match end {
            PullEnd::Ended => {
                if self.failures > 0 {
                    tracing::info!(consumer = %self.name, "The durable consumer is pulling again.");
                    self.failures = 0;
                }
                true
            }
            PullEnd::Stopped => {
                self.give_back(batch).await;
                batch.clear();
                false
            }
            PullEnd::Lost { reason, gone } => {
                self.failures = self.failures.saturating_add(1);
                self.recovering.store(true, Ordering::Relaxed);
                if self.failures == 1 {
                    tracing::warn!(consumer = %self.name, %reason, "Lost a pull request; pulling again.");
                } else {
                    tracing::debug!(consumer = %self.name, %reason, failures = self.failures, "Lost a pull request again.");
                }
                if !batch.is_empty() {
                    // Delivered messages are in hand: handle them first.
                    return true;
                }
                let exponent = self.failures.saturating_sub(1).min(5);
                let backoff = (Duration::from_millis(100) * 2u32.pow(exponent)).min(MAX_BACKOFF);
                let mut sleep = pin!(tokio::time::sleep(backoff));
                if let Kept::Stopped = self.keep_alive(&mut sleep, &[], None, true).await {
                    return false;
                }
                if gone || self.failures.is_multiple_of(3) {
                    self.reprovision().await;
                }
                true
            }
        }
    }

    /// Provisions the durable consumer again (after a NATS restart that lost it, or a deleted
    /// stream recreated); failures are logged and retried on the next lost pull.
    async fn reprovision(&mut self) {
        match provision_consumer(&self.stream, self.wanted.clone()).await {
            Ok(consumer) => self.consumer = consumer,
            Err(e) => {
                tracing::warn!(consumer = %self.name, error = %e, "Could not provision the durable consumer again; retrying.");
            }
        }
    }

    /// Before pulling (at start, after a lost pull or unconfirmed settlements): when the
    /// consumer has deliveries still unsettled, makes sure they come before anything newer.
    /// `false` when stopped meanwhile (what it took was handed back).
    ///
    /// Unsettled deliveries are either given back already (`-NAK`: JetStream serves them at
    /// once, before new messages), in another replica's hands, or orphaned (a dead process's,
    /// or lost with a connection: served again only once `ack_wait` expired). So: while the ack
    /// floor is below the last delivered sequence seen at the start and `ack_wait` (plus a
    /// margin) has not passed, one message is probed. A redelivery (sequence up to that last
    /// delivered one) means they are being served: pull as usual. A newer message means some
    /// are orphaned: it is kept (alive, unhandled) and the wait goes on, until they are settled
    /// by their holder or due; it is then handled after them (see `next_batch`).
    async fn await_earlier_deliveries(&mut self) -> bool {
        let started = Instant::now();
        let expired =
            self.timings.ack_wait + (self.timings.ack_wait / 10).max(Duration::from_secs(1));
        let mut target = None;
        let mut held: Vec<jetstream::Message> = Vec::new();
        let mut logged = false;
        loop {
            match self.consumer.get_info().await {
                Ok(info) if info.num_ack_pending <= held.len() => break,
                Ok(info) => {
                    let target = *target.get_or_insert(info.delivered.stream_sequence);
                    if info.ack_floor.stream_sequence >= target {
                        break;
                    }
                    if held.is_empty() {
                        let mut probe = Vec::new();
                        let end = self.pull(self.no_wait(1), &mut probe).await;
                        if let PullEnd::Stopped = end {
                            self.give_back(&probe).await;
                            return false;
                        }
                        if let Some(message) = probe.pop() {
                            let redelivery = stream_sequence(&message) <= target;
                            held.push(message);
                            if redelivery {
                                break;
                            }
                        }
                    }
                    if !logged {
                        tracing::info!(
                            consumer = %self.name,
                            unsettled = info.num_ack_pending,
                            ack_wait = ?self.timings.ack_wait,
                            "Earlier deliveries are unsettled; waiting for them to be settled or due before handling newer messages."
                        );
                        logged = true;
                    }
                }
                Err(e) => {
                    tracing::debug!(consumer = %self.name, error = %e, "Could not read the consumer's state; retrying.");
                }
            }
            if started.elapsed() >= expired {
                break;
            }
            let mut sleep = pin!(tokio::time::sleep(Duration::from_millis(250)));
            if let Kept::Stopped = self.keep_alive(&mut sleep, &held, None, true).await {
                self.give_back(&held).await;
                return false;
            }
        }
        if logged {
            tracing::info!(consumer = %self.name, waited = ?started.elapsed(), "Handling messages again after earlier deliveries.");
        }
        self.recovering.store(false, Ordering::Relaxed);
        self.held = held;
        true
    }

    // -----------------------------------------------------------------------------------------
    // Settling.

    /// Settles a finished handler call as it answered. A failed call settles nothing.
    /// A message answered `Redeliver` comes back before newer ones only if nothing newer is
    /// handled first: so the held messages (newer than the batch) go back after it.
    async fn settle(&mut self, batch: &[jetstream::Message], result: HandlerResult) -> Settled {
        let subjects = batch.iter().map(|m| m.message.subject.as_str());
        let verdict = judge(&self.name, subjects, result);
        let settled = Settled::of(&verdict);
        let Verdict::Settle(answers) = verdict else {
            return settled;
        };
        let redelivered = answers.contains(&Settle::Redeliver);
        let kinds = answers.into_iter().map(|answer| match answer {
            Settle::Ack => AckKind::Ack,
            Settle::Redeliver => AckKind::Nak(None),
            Settle::Drop => AckKind::Term,
        });
        self.send(batch, kinds).await;
        if redelivered {
            self.give_back_held().await;
        }
        settled
    }

    /// Hands the held messages back, in order (they are newer than anything handed back
    /// before them).
    async fn give_back_held(&mut self) {
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.give_back(&held).await;
        }
    }

    /// Hands a whole batch back for redelivery, at once.
    async fn give_back(&self, batch: &[jetstream::Message]) {
        self.send(batch, std::iter::repeat(AckKind::Nak(None)))
            .await;
    }

    /// Publishes one settlement per message, in order; the last as a request whose reply
    /// confirms that the server processed all of them.
    async fn send(&self, batch: &[jetstream::Message], kinds: impl Iterator<Item = AckKind>) {
        let last = batch.len().saturating_sub(1);
        for (i, (message, kind)) in batch.iter().zip(kinds).enumerate() {
            let Some(reply) = message.message.reply.clone() else {
                continue;
            };
            let payload = Bytes::from(kind);
            if i < last {
                if let Err(e) = self.client.publish(reply, payload).await {
                    tracing::warn!(consumer = %self.name, error = %e, "Could not send a settlement; the message will be redelivered.");
                    self.recovering.store(true, Ordering::Relaxed);
                }
                continue;
            }
            let confirmed = tokio::time::timeout(
                self.timings.request_timeout,
                self.client.request(reply, payload),
            )
            .await;
            if !matches!(confirmed, Ok(Ok(_))) {
                tracing::warn!(consumer = %self.name, batch = batch.len(), "NATS did not confirm a batch's settlements; some messages may be redelivered.");
                self.recovering.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Sleeps `redelivery_delay`, keeping `batch` alive meanwhile. `false` when stopped.
    async fn pause(&mut self, batch: &[jetstream::Message]) -> bool {
        if self.settings.redelivery_delay.is_zero() {
            return !is_stopped(&self.stop);
        }
        let mut sleep = pin!(tokio::time::sleep(self.settings.redelivery_delay));
        !matches!(
            self.keep_alive(&mut sleep, batch, None, true).await,
            Kept::Stopped
        )
    }

    /// On unsubscribe while a handler runs: gives it the drain timeout to finish and be settled;
    /// past it, aborts it and hands its whole batch back.
    async fn drain(
        &mut self,
        mut call: JoinHandle<Result<Vec<Settle>, HandlerError>>,
        batch: &[jetstream::Message],
    ) {
        let deadline = Instant::now() + self.settings.drain_timeout;
        match self
            .keep_alive(&mut call, batch, Some(deadline), false)
            .await
        {
            Kept::Done(result) => {
                if let Settled::Failed = self.settle(batch, result).await {
                    self.give_back(batch).await;
                }
            }
            Kept::Stopped | Kept::Deadline => {
                call.abort();
                warn_outlived_drain(&self.name, batch.len(), self.settings.drain_timeout);
                self.give_back(batch).await;
            }
        }
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
        let mut every = self.timings.ack_wait / 3;
        if let Some(pinning) = &self.pinning {
            every = every.min(pinning.timeout / 3);
        }
        let every = every.max(Duration::from_millis(100));
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
                _ = progress.tick() => {
                    for message in batch.iter().chain(&self.held) {
                        if let Some(reply) = message.message.reply.clone() {
                            let _ = self.client.publish(reply, Bytes::from(AckKind::Progress)).await;
                        }
                    }
                    if let Some(pinning) = &self.pinning {
                        pinning.keep(&self.client, &self.next_subject(), &self.name);
                    }
                }
            }
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
