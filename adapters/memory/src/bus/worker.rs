//! The worker task of one lane of a batch subscription: (hold the lane,) wait for a batch, run
//! the handler, settle, repeat. See the module documentation of `bus` for the whole design.

use super::holders::Hold;
use super::Inner;
use std::sync::Arc;
use swath_application::bus_rules::{
    call_handler, is_stopped, judge, linger_left, stopped, warn_outlived_drain, HandlerResult,
    Settled, Verdict,
};
use swath_application::ports::{BatchHandler, BatchSettings, HandlerError, Message, Settle};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub(super) struct LaneWorker {
    pub inner: Arc<Inner>,
    pub consumer: String,
    pub lane: usize,
    /// The subscription's id on a partitioned consumer, whose lanes it must hold to take from;
    /// `None` on a plain consumer's lane, which every subscription takes from.
    pub member: Option<u64>,
    /// The lane's: wakes this worker when messages are added to it.
    pub notify: Arc<Notify>,
    /// The consumer's: wakes this worker when a lane is released or a subscription comes or
    /// goes.
    pub ownership: Arc<Notify>,
    /// `settings.max_batch` clamped to `1..=MAX_IN_FLIGHT`.
    pub max_batch: usize,
    pub settings: BatchSettings,
    pub handler: Arc<dyn BatchHandler>,
    /// Turns `true` on unsubscribe. A dropped `Subscription` (sender gone) stops the worker too,
    /// rather than leaving it running with nobody able to stop it.
    pub stop: watch::Receiver<bool>,
}

/// What waiting for a batch ended with.
enum Ready {
    /// Messages are there (and the linger is over).
    Batch,
    /// The subscription holds more lanes than its share: give this one up before going on.
    GiveUp,
    /// Unsubscribed meanwhile (nothing was taken, so nothing needs putting back).
    Stopped,
}

impl LaneWorker {
    pub(super) async fn run(mut self) {
        loop {
            if !self.hold().await {
                break;
            }
            match self.wait_for_batch().await {
                Ready::Batch => {}
                Ready::GiveUp => continue,
                Ready::Stopped => break,
            }
            let batch = self.inner.take(&self.consumer, self.lane, self.max_batch);
            if batch.is_empty() {
                // Another subscription of the same plain consumer took the messages meanwhile.
                continue;
            }
            let batch: Arc<[Message]> = batch.into();
            let mut call = call_handler(&self.handler, Arc::clone(&batch));
            let settled = tokio::select! {
                biased;
                result = &mut call => self.settle(&batch, result),
                () = stopped(&mut self.stop) => {
                    self.drain(&batch, call).await;
                    break;
                }
            };
            if settled.pauses() && !self.settings.redelivery_delay.is_zero() {
                // A partition stays held during the pause: nobody retries its batch sooner.
                tokio::select! {
                    biased;
                    () = stopped(&mut self.stop) => break,
                    () = tokio::time::sleep(self.settings.redelivery_delay) => {}
                }
            }
        }
        // After the drain: what stayed unsettled is back at the front of the lane.
        self.inner.release(&self.consumer, self.lane, self.member);
    }

    /// Between batches: waits until this subscription holds the lane (at once on a plain lane),
    /// giving it up first when the subscription holds more than its share. `false` when the
    /// subscription was stopped meanwhile.
    async fn hold(&mut self) -> bool {
        loop {
            if is_stopped(&self.stop) {
                return false;
            }
            let changed = self.ownership.notified();
            tokio::pin!(changed);
            // Registered before looking at the holders, so a release in between is not missed.
            changed.as_mut().enable();
            if self.inner.hold(&self.consumer, self.lane, self.member) == Hold::Mine {
                return true;
            }
            tokio::select! {
                biased;
                () = stopped(&mut self.stop) => return false,
                () = &mut changed => {}
            }
        }
    }

    /// Waits for a first message, then lingers up to `max_wait` until `max_batch` messages are
    /// there. While idle, a holder gives its lane up as soon as its subscription holds more than
    /// its share (a new subscription came).
    async fn wait_for_batch(&mut self) -> Ready {
        loop {
            if is_stopped(&self.stop) {
                return Ready::Stopped;
            }
            let notified = self.notify.notified();
            tokio::pin!(notified);
            let changed = self.ownership.notified();
            tokio::pin!(changed);
            // Registered before looking at the lane, so a publish in between is not missed.
            notified.as_mut().enable();
            changed.as_mut().enable();
            if !self.inner.keeps(&self.consumer, self.lane, self.member) {
                return Ready::GiveUp;
            }
            if self.inner.lane_len(&self.consumer, self.lane) > 0 {
                break;
            }
            tokio::select! {
                biased;
                () = stopped(&mut self.stop) => return Ready::Stopped,
                () = &mut notified => {}
                () = &mut changed, if self.member.is_some() => {}
            }
        }
        let first = Instant::now();
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.lane_len(&self.consumer, self.lane) >= self.max_batch {
                return Ready::Batch;
            }
            let Some(left) = linger_left(first, self.settings.max_wait) else {
                return Ready::Batch;
            };
            tokio::select! {
                biased;
                () = stopped(&mut self.stop) => return Ready::Stopped,
                () = tokio::time::sleep(left) => return Ready::Batch,
                () = &mut notified => {}
            }
        }
    }

    /// Settles a finished handler call.
    fn settle(&self, batch: &[Message], result: HandlerResult) -> Settled {
        let (consumer, lane) = (self.consumer.as_str(), self.lane);
        let verdict = judge(consumer, batch.iter().map(|m| m.subject.as_str()), result);
        let settled = Settled::of(&verdict);
        match verdict {
            Verdict::Failed => self.inner.put_back(consumer, lane, batch.to_vec()),
            Verdict::Settle(answers) => {
                let redeliver = batch
                    .iter()
                    .zip(answers)
                    .filter(|(_, answer)| *answer == Settle::Redeliver)
                    .map(|(message, _)| message.clone())
                    .collect();
                self.inner.put_back(consumer, lane, redeliver);
            }
        }
        settled
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
                warn_outlived_drain(&self.consumer, batch.len(), self.settings.drain_timeout);
                self.inner
                    .put_back(&self.consumer, self.lane, batch.to_vec());
            }
        }
    }
}
