//! Settling a batch: the handler's answers sent in order and confirmed, a failed batch held and
//! handed back, and the drain on unsubscribe (see "Settling" and "Unsubscribing" in the module
//! documentation of `worker`).

use super::{Kept, Worker};
use async_nats::jetstream::{self, AckKind};
use bytes::Bytes;
use std::pin::pin;
use std::sync::atomic::Ordering;
use swath_application::bus_rules::{
    is_stopped, judge, warn_outlived_drain, HandlerResult, Settled, Verdict,
};
use swath_application::ports::{chain, HandlerError, Settle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

impl Worker {
    /// Settles a finished handler call as it answered. A failed call settles nothing.
    /// A message answered `Redeliver` comes back before newer ones only if nothing newer is
    /// handled first: so the held messages (newer than the batch) go back after it.
    pub(super) async fn settle(
        &mut self,
        batch: &[jetstream::Message],
        result: HandlerResult,
    ) -> Settled {
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
    pub(super) async fn give_back_held(&mut self) {
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.give_back(&held).await;
        }
    }

    /// Hands a whole batch back for redelivery, at once.
    pub(super) async fn give_back(&self, batch: &[jetstream::Message]) {
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
                    tracing::warn!(consumer = %self.name, error = %chain(&e), "Could not send a settlement; the message will be redelivered.");
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
    pub(super) async fn pause(&mut self, batch: &[jetstream::Message]) -> bool {
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
    pub(super) async fn drain(
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
}
