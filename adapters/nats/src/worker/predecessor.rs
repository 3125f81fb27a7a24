//! The order of redeliveries: an unpartitioned consumer's earlier deliveries, a partition's
//! leading redeliveries gathered and sorted, and a new pin's wait for its predecessor (see
//! "Order after a crash" and "Order when a pin moves" in the module documentation of `worker`).
//!
//! What is in hand is counted and sorted by stream sequence, one delivery each: a message held
//! past its `ack_wait` without the server hearing of it (a NATS restart loses the progress
//! notes) is delivered again to the same worker, and counting both deliveries made the wait for
//! a predecessor end while one of its messages was still out, so that message was handled after
//! newer ones (decision 113).

use super::{delivery_count, stream_sequence, Kept, PullEnd, Worker};
use async_nats::jetstream;
use std::collections::BTreeSet;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;
use swath_application::ports::{chain, MAX_IN_FLIGHT};
use tokio::time::Instant;

/// How many `ack_wait`s a newly pinned worker waits at most for its predecessor's deliveries.
const PREDECESSOR_PATIENCE: u32 = 4;

impl Worker {
    /// When a batch holds redeliveries: pulls on until a first delivery or nothing comes, so
    /// that every redelivery served ahead of newer messages is in hand, and sorts them all by
    /// stream sequence (a moved pin gets them rotated, `pinning.rs`). What exceeds one batch is
    /// held, in order, for the next ones. `false` when stopped meanwhile.
    pub(super) async fn gather_redeliveries(
        &mut self,
        batch: &mut Vec<jetstream::Message>,
    ) -> bool {
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
        in_stream_order(batch);
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
    pub(super) async fn await_predecessor(&mut self, batch: &mut Vec<jetstream::Message>) -> bool {
        if !std::mem::take(&mut self.newly_pinned) {
            return true;
        }
        let started = Instant::now();
        let mut last_pull = Instant::now();
        let mut pull_again = false;
        let mut reported = Instant::now();
        let mut logged = false;
        loop {
            let mine = distinct(batch.iter().chain(&self.held).map(stream_sequence));
            let (others, state) = match self.consumer.info().await {
                Ok(info) => (
                    info.num_ack_pending.saturating_sub(mine),
                    Some(info.clone()),
                ),
                Err(e) => {
                    tracing::debug!(consumer = %self.name, error = %chain(&e), "Could not read the consumer's state; retrying.");
                    (1, None)
                }
            };
            if others == 0 {
                break;
            }
            if started.elapsed() >= self.timings.ack_wait * PREDECESSOR_PATIENCE {
                let in_hand = batch.iter().chain(&self.held).map(stream_sequence);
                tracing::warn!(
                    consumer = %self.name,
                    unsettled = others,
                    in_hand = mine,
                    first_in_hand = in_hand.clone().min().unwrap_or(0),
                    last_in_hand = in_hand.max().unwrap_or(0),
                    ack_floor = state.as_ref().map(|s| s.ack_floor.stream_sequence),
                    delivered = state.as_ref().map(|s| s.delivered.stream_sequence),
                    redelivered = state.as_ref().map(|s| s.num_redelivered),
                    "Deliveries of the partition made elsewhere (to its previous holder, or into a lost pull) are still unsettled; handling newer messages now, so their order may not hold."
                );
                break;
            }
            if !logged {
                tracing::info!(consumer = %self.name, unsettled = others, "Deliveries of the partition made elsewhere (to its previous holder, or into a lost pull) are unsettled; waiting for them to be settled or due.");
                logged = true;
            }
            // Due redeliveries are served before newer messages, lowest stream sequence first:
            // pull once they may be due (a pull sooner would bring newer messages only), and
            // again at once while a pull brings redeliveries. Those may be of messages this
            // worker holds: a NATS restart loses the progress notes, so what it holds comes
            // due too, ahead of the missing ones when older. Asking only for as many as were
            // missing, once per `ack_wait`, brought those again and again and never reached the
            // missing ones (decision 173).
            let room = MAX_IN_FLIGHT.saturating_sub(mine).min(self.max_batch);
            if room > 0 && (pull_again || last_pull.elapsed() >= self.timings.ack_wait) {
                let mut more = Vec::new();
                let end = self.pull(self.no_wait(room), &mut more).await;
                last_pull = Instant::now();
                pull_again = more.iter().any(|m| delivery_count(m) > 1);
                tracing::debug!(
                    consumer = %self.name,
                    asked = room,
                    came = ?more.iter().map(|m| (stream_sequence(m), delivery_count(m))).collect::<Vec<_>>(),
                    "Pulled for the deliveries made elsewhere."
                );
                if !self.carry_on(end, &mut more).await {
                    self.give_back(batch).await;
                    return false;
                }
                batch.append(&mut more);
                continue;
            }
            self.progress_if_due(batch, &mut reported).await;
            let mut sleep = pin!(tokio::time::sleep(Duration::from_millis(250)));
            if let Kept::Stopped = self.keep_alive(&mut sleep, batch, None, true).await {
                self.give_back(batch).await;
                return false;
            }
        }
        if logged {
            tracing::info!(consumer = %self.name, waited = ?started.elapsed(), "Handling the partition after the deliveries made elsewhere.");
        }
        batch.append(&mut self.held);
        in_stream_order(batch);
        if batch.len() > self.max_batch {
            self.held = batch.split_off(self.max_batch);
        }
        true
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
    pub(super) async fn await_earlier_deliveries(&mut self) -> bool {
        let started = Instant::now();
        let expired =
            self.timings.ack_wait + (self.timings.ack_wait / 10).max(Duration::from_secs(1));
        let mut target = None;
        let mut held: Vec<jetstream::Message> = Vec::new();
        let mut reported = Instant::now();
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
                    tracing::debug!(consumer = %self.name, error = %chain(&e), "Could not read the consumer's state; retrying.");
                }
            }
            if started.elapsed() >= expired {
                break;
            }
            self.progress_if_due(&held, &mut reported).await;
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
}

/// Sorts `messages` by stream sequence and keeps one delivery of each: the latest, whose
/// acknowledgement is the one the server waits for (the earlier one is simply dropped).
pub(super) fn in_stream_order(messages: &mut Vec<jetstream::Message>) {
    keep_latest_in_order(messages, |m| (stream_sequence(m), delivery_count(m)));
}

/// The rule of [`in_stream_order`] over any item: sorted by sequence, and of the items with one
/// sequence only the one with the highest delivery count. A sequence of 0 (unknown) is never
/// merged.
fn keep_latest_in_order<T>(items: &mut Vec<T>, key: impl Fn(&T) -> (u64, u32)) {
    items.sort_by_key(|item| {
        let (sequence, delivery) = key(item);
        (sequence, std::cmp::Reverse(delivery))
    });
    items.dedup_by(|later, kept| {
        let sequence = key(later).0;
        sequence != 0 && sequence == key(kept).0
    });
}

/// How many different stream sequences `sequences` holds: the messages in hand as the server
/// counts them in `num_ack_pending` (once each, however often delivered).
fn distinct(sequences: impl Iterator<Item = u64>) -> usize {
    sequences.collect::<BTreeSet<_>>().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A NATS restart while a new holder waits for its predecessor's 64 deliveries (acknowledged
    /// messages whose acknowledgements the restart lost: sequences 100 to 163), with its own 64
    /// first deliveries in hand (200 to 263) passing their `ack_wait` unheard: the server then
    /// redelivers 128 messages, rotated, and a pull of 64 brings 63 of the predecessor's and one
    /// of its own again. The server counts 128 unsettled; the worker has 127 of them.
    #[test]
    fn a_message_delivered_twice_is_in_hand_once() {
        let own: Vec<(u64, u32)> = (200..264).map(|s| (s, 1)).collect();
        let pulled: Vec<(u64, u32)> = (101..164).map(|s| (s, 2)).chain([(200, 2)]).collect();
        let in_hand: Vec<(u64, u32)> = own.iter().chain(&pulled).copied().collect();
        let num_ack_pending = 128;

        // Counted per delivery, nothing seemed to be missing, and sequence 100 was handled
        // after 101..=263.
        assert_eq!(num_ack_pending - in_hand.len(), 0);
        // Counted per sequence, one message is still out: the wait goes on.
        assert_eq!(num_ack_pending - distinct(in_hand.iter().map(|m| m.0)), 1);

        // Once it came, everything is handled in stream order, each message once, through its
        // latest delivery.
        let mut all = in_hand;
        all.push((100, 2));
        keep_latest_in_order(&mut all, |m| *m);
        let sequences: Vec<u64> = all.iter().map(|m| m.0).collect();
        assert_eq!(sequences, (100..164).chain(200..264).collect::<Vec<_>>());
        assert_eq!(all.iter().find(|m| m.0 == 200), Some(&(200, 2)));
        assert_eq!(all.len(), 128);
    }

    #[test]
    fn unknown_sequences_are_never_merged() {
        let mut items = vec![(0, 1), (5, 1), (0, 2), (5, 3), (3, 1)];
        keep_latest_in_order(&mut items, |m| *m);
        assert_eq!(items, vec![(0, 2), (0, 1), (3, 1), (5, 3)]);
    }
}
