//! Settling a batch: the handler's answers sent in order and confirmed, a failed batch held and
//! handed back, and the drain on unsubscribe (see "Settling" and "Unsubscribing" in the module
//! documentation of `worker`).

use super::{stream_sequence, Kept, Worker};
use async_nats::jetstream::{self, AckKind};
use bytes::Bytes;
use std::pin::pin;
use std::sync::atomic::Ordering;
use swath_application::ports::bus_rules::{
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
        let result = self.with_answered_ahead(batch, result);
        let subjects = batch.iter().map(|m| m.message.subject.as_str());
        let verdict = judge(&self.name, subjects, result);
        let settled = Settled::of(&verdict);
        let Verdict::Settle(answers) = verdict else {
            return settled;
        };
        let redelivered = answers.contains(&Settle::Redeliver);
        if self.ack_all {
            self.send_acking_all(batch, &answers).await;
        } else {
            let kinds = answers.iter().map(|answer| kind(*answer));
            self.send(batch.iter().zip(kinds)).await;
        }
        if redelivered {
            self.give_back_held().await;
        }
        settled
    }

    /// The handler's answers for `batch` with those of the messages answered ahead (which it
    /// was not given) put back in their places; they are forgotten once used.
    fn with_answered_ahead(
        &mut self,
        batch: &[jetstream::Message],
        result: HandlerResult,
    ) -> HandlerResult {
        if self.answered_ahead.is_empty() {
            return result;
        }
        let ahead: Vec<Option<Settle>> = batch
            .iter()
            .map(|m| self.answered_ahead.get(&stream_sequence(m)).copied())
            .collect();
        if ahead.iter().all(Option::is_none) {
            return result;
        }
        let Ok(Ok(handled)) = result else {
            return result;
        };
        if handled.len() != ahead.iter().filter(|a| a.is_none()).count() {
            // A wrong number of answers: `judge` refuses the batch as it would have.
            return Ok(Ok(handled));
        }
        for m in batch {
            self.answered_ahead.remove(&stream_sequence(m));
        }
        let mut handled = handled.into_iter();
        Ok(Ok(ahead
            .into_iter()
            .map(|a| a.or_else(|| handled.next()).unwrap_or(Settle::Redeliver))
            .collect()))
    }

    /// Settles a batch of a consumer that acknowledges all: every message before the first
    /// one answered `Redeliver` with one acknowledgement (the last of them; a `Drop` among them
    /// is sent as `+TERM`, which settles the older ones as well), everything from it on handed
    /// back, its `Ack` and `Drop` answers kept for when it comes again.
    async fn send_acking_all(&mut self, batch: &[jetstream::Message], answers: &[Settle]) {
        let first_back = answers
            .iter()
            .position(|a| *a == Settle::Redeliver)
            .unwrap_or(answers.len());
        let mut sends = Vec::new();
        for (i, (message, answer)) in batch.iter().zip(answers).enumerate() {
            if i < first_back {
                if *answer == Settle::Drop {
                    sends.push((message, AckKind::Term));
                } else if i + 1 == first_back {
                    sends.push((message, AckKind::Ack));
                }
            } else {
                if *answer != Settle::Redeliver {
                    self.answered_ahead
                        .insert(stream_sequence(message), *answer);
                }
                sends.push((message, AckKind::Nak(None)));
            }
        }
        self.send(sends.into_iter()).await;
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
        self.send(batch.iter().map(|m| (m, AckKind::Nak(None))))
            .await;
    }

    /// Publishes the settlements, in order; the last as a request whose reply confirms that
    /// the server processed all of them.
    async fn send<'m>(
        &self,
        settlements: impl ExactSizeIterator<Item = (&'m jetstream::Message, AckKind)>,
    ) {
        let count = settlements.len();
        let last = count.saturating_sub(1);
        for (i, (message, kind)) in settlements.enumerate() {
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
                tracing::warn!(consumer = %self.name, settlements = count, "NATS did not confirm a batch's settlements; some messages may be redelivered.");
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

/// The JetStream settlement of an answer.
fn kind(answer: Settle) -> AckKind {
    match answer {
        Settle::Ack => AckKind::Ack,
        Settle::Redeliver => AckKind::Nak(None),
        Settle::Drop => AckKind::Term,
    }
}
