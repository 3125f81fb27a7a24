//! Pulling a batch: the pull requests (no_wait, waiting, lingering), their inbox, what a lost
//! one leads to, and a partition's turn (see "Pulling a batch" and "Reconnects" in the module
//! documentation of `worker`).

use super::{stream_sequence, Kept, PullEnd, Worker};
use crate::pinning::{unpin, Turn};
use crate::provision::provision_consumer;
use async_nats::jetstream::{self, consumer::pull::BatchConfig};
use async_nats::{StatusCode, Subject, Subscriber};
use bytes::Bytes;
use futures::StreamExt;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;
use swath_application::bus_rules::{is_stopped, linger_left, stopped};
use swath_application::ports::chain;
use tokio::time::Instant;

/// What to allow beyond two heartbeat intervals before a silent request counts as lost.
const HEARTBEAT_SLACK: Duration = Duration::from_millis(500);
/// The longest pause between two pull requests that keep failing.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// The header naming the pin of a partition's deliveries.
const PIN_HEADER: &str = "Nats-Pin-Id";

impl Worker {
    /// The next batch, or `None` once stopped (what was pulled meanwhile has been handed back).
    pub(super) async fn next_batch(&mut self) -> Option<Vec<jetstream::Message>> {
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
            super::predecessor::in_stream_order(&mut batch);
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
            let mut batch = self.held.drain(..n).collect();
            // As the partition's holder only: what went astray comes back to the holder. A
            // worker that lost the pin would wait for the new holder's deliveries while the
            // new holder waits for these (its own wait, under its new pin): both would stall
            // until their patience ran out. The flag stays for this worker's next pulled batch.
            if self.holds_the_pin() {
                self.wait_after_a_loss();
                if !self.await_predecessor(&mut batch).await {
                    return None;
                }
            }
            return Some(batch);
        }
        loop {
            if !self.await_turn().await {
                return None;
            }
            let holding = self.holds_the_pin();
            let mut batch = Vec::with_capacity(self.max_batch);
            if holding {
                let end = self.pull(self.no_wait(self.max_batch), &mut batch).await;
                if !self.carry_on(end, &mut batch).await {
                    return None;
                }
                let still = self.holds_the_pin();
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
            if !self.linger(&mut batch, waited).await || !self.gather_redeliveries(&mut batch).await
            {
                return None;
            }
            self.wait_after_a_loss();
            if !self.await_predecessor(&mut batch).await {
                return None;
            }
            return Some(batch);
        }
    }

    /// Whether this partition worker holds the partition's pin (as far as it knows).
    fn holds_the_pin(&self) -> bool {
        self.pinning.as_ref().is_some_and(|p| p.id.is_some())
    }

    /// After a lost pull or settlements NATS did not confirm, a partition's next batch waits as
    /// under a new pin ("Order after a loss" in the module documentation of `worker`): messages
    /// of the partition may be out, delivered into a pull this worker gave up on (in a cluster,
    /// a request the consumer's leader served after the inbox was drained) or handed back
    /// (`-NAK`) without the server hearing of it, and they come back only once due, behind
    /// newer ones.
    fn wait_after_a_loss(&mut self) {
        if self.recovering.swap(false, Ordering::Relaxed) {
            tracing::debug!(consumer = %self.name, "After a loss, the next batch waits as under a new pin.");
            self.newly_pinned = true;
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

    /// Whether the consumer has nothing left to deliver or settle (`until_drained`); a consumer
    /// that is gone (another replica deleted it once drained) is drained too.
    pub(super) async fn drained(&mut self) -> bool {
        match self.consumer.info().await {
            Ok(info) => info.num_pending == 0 && info.num_ack_pending == 0,
            Err(e) => {
                let gone = e.to_string().to_ascii_lowercase().contains("not found");
                if !gone {
                    tracing::debug!(consumer = %self.name, error = %chain(&e), "Could not read the consumer's state; pulling on.");
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

    pub(super) fn no_wait(&self, batch: usize) -> BatchConfig {
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
    pub(super) fn next_subject(&self) -> String {
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
    pub(super) async fn pull(
        &mut self,
        request: BatchConfig,
        into: &mut Vec<jetstream::Message>,
    ) -> PullEnd {
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
    pub(super) async fn carry_on(
        &mut self,
        end: PullEnd,
        batch: &mut Vec<jetstream::Message>,
    ) -> bool {
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
                tracing::warn!(consumer = %self.name, error = %chain(&e), "Could not provision the durable consumer again; retrying.");
            }
        }
    }
}
