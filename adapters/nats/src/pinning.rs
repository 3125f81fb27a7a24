//! One partition's worker as a member of a pinned priority group: which pin it holds, when it
//! competes for a partition, when it gives one up, and the requests that keep and release a pin.
//!
//! # Why pins, and how they move
//!
//! A partition's durable consumer uses the `pinned_client` priority policy: the server delivers
//! its messages to one pull client at a time (the pinned one, whose deliveries carry a
//! `Nats-Pin-Id` header that its next pulls send back), and other replicas' pulls wait on
//! standby. So one replica handles a partition, batch after batch, in stream order. The pin moves
//! when the holder stops pulling for the consumer's `priority_timeout` (it died, or it is cut off)
//! or when it is released with the UNPIN API; the server then pins the oldest standby pull.
//!
//! A holder keeps pulling while a batch runs: a pull that can deliver nothing (`max_bytes` 1,
//! `no_wait`; answered 409 or 404) renews the pin without taking a message, so a slow batch never
//! loses its partition to a standby replica that would handle newer messages meanwhile.
//!
//! # Order when a pin moves
//!
//! `priority_timeout` is `ack_wait` + pull expiry + 1 s (`NatsBusSettings::priority_timeout`):
//! by the time a dead holder's pin moves, everything it was delivered (by a pull that lived at
//! most the pull expiry, kept alive at most until its last pull) is due for redelivery, and the
//! server serves due redeliveries before new messages. It serves them *rotated* when only standby
//! pulls were waiting (5..10 then 1..4), so the worker gathers every leading redelivery and sorts
//! them by stream sequence before handling them (`worker/mod.rs`, "Pulling a batch").
//!
//! In a cluster the pin can move sooner, when the consumer's leader changes while the holder is
//! at work: a worker that gets a new pin therefore first waits until the consumer has nothing
//! unsettled but its own deliveries (`worker/mod.rs`, "Order when a pin moves").
//!
//! # Balance
//!
//! The server pins the oldest waiting pull; nothing in it spreads partitions across replicas.
//! Each replica therefore counts the replicas subscribed to the consumer (`membership.rs`) and
//! holds at most `ceil(P / replicas)` partitions: a worker competes (keeps a standby pull) only
//! while its replica holds fewer, and a worker whose replica holds more releases its partition
//! between two batches, once everything it took is settled.

use async_nats::Client;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// One partition worker's view of its pin and of its replica's share.
pub(crate) struct Pinning {
    /// The partition this worker pulls.
    pub partition: u32,
    /// How many partitions the consumer has.
    pub partitions: u32,
    /// The pin this worker holds (the `Nats-Pin-Id` of its deliveries), if any.
    pub id: Option<String>,
    /// Partitions of this consumer this replica holds now (shared by its partition workers and
    /// reported by `Subscription::partitions_owned`).
    pub owned: Arc<AtomicUsize>,
    /// Replicas subscribed to the consumer, this one included.
    pub members: watch::Receiver<usize>,
    /// The consumer's `priority_timeout`.
    pub timeout: Duration,
}

/// What a worker does before it pulls its next batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Pull: as the holder (with its pin), or on standby (competing for the partition).
    Pull,
    /// The replica holds more than its share: give the partition up if nothing of it is
    /// unsettled ([`Pinning::try_release`]), else pull on as the holder.
    Release,
    /// Hold back: the replica has its share; look again a little later.
    Wait,
}

/// The most partitions of `partitions` one of `members` replicas holds.
pub(crate) fn quota(partitions: u32, members: usize) -> usize {
    (partitions as usize).div_ceil(members.max(1))
}

impl Pinning {
    fn share(&self) -> usize {
        quota(self.partitions, *self.members.borrow())
    }

    /// Whether to pull, release or wait, given the replica's holdings now.
    pub(crate) fn turn(&self) -> Turn {
        let held = self.owned.load(Ordering::Acquire);
        match (self.id.is_some(), held > self.share(), held < self.share()) {
            (true, true, _) => Turn::Release,
            (true, false, _) | (false, _, true) => Turn::Pull,
            (false, _, false) => Turn::Wait,
        }
    }

    /// Gives the pin up if the replica still holds more than its share: takes one from the
    /// replica's count by compare-and-swap, so that of several workers seeing their replica over
    /// its share only as many release as it holds too many. `false`: keep holding.
    pub(crate) fn try_release(&mut self) -> bool {
        let share = self.share();
        let released = self.id.is_some()
            && self
                .owned
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                    (held > share).then(|| held - 1)
                })
                .is_ok();
        if released {
            self.id = None;
        }
        released
    }

    /// Records the pin a delivery carried. Returns `true` when it is a new pin: the partition was
    /// not held before, or was held with another pin (the server pinned this worker again, and
    /// another may have held the partition in between). The worker then waits for whatever the
    /// consumer has delivered elsewhere (`worker/mod.rs`, "Order when a pin moves").
    pub(crate) fn delivered_with(&mut self, pin: Option<&str>) -> bool {
        let Some(pin) = pin else {
            return false;
        };
        if self.id.as_deref() == Some(pin) {
            return false;
        }
        if self.id.is_none() {
            self.owned.fetch_add(1, Ordering::AcqRel);
        }
        self.id = Some(pin.to_owned());
        true
    }

    /// The server says the pin this worker sent is not (any more) the partition's: another
    /// replica holds it, or it was released. Returns `true` when one was held.
    pub(crate) fn lost(&mut self) -> bool {
        if self.id.take().is_some() {
            self.owned.fetch_sub(1, Ordering::AcqRel);
            return true;
        }
        false
    }

    /// The fields a pull request adds for the priority group: the group, and the pin if held.
    pub(crate) fn request_fields(&self, request: &mut serde_json::Value) {
        request["group"] = serde_json::Value::from(crate::provision::PIN_GROUP);
        if let Some(id) = &self.id {
            request["id"] = serde_json::Value::from(id.as_str());
        }
    }

    /// Renews the pin without taking a message (while a batch runs): a pull that can deliver
    /// nothing. Sent in the background; a refusal (423) is logged, the next pull learns it too.
    pub(crate) fn keep(&self, client: &Client, next_subject: &str, consumer: &str) {
        let Some(id) = self.id.clone() else {
            return;
        };
        let request = serde_json::json!({
            "batch": 1,
            "max_bytes": 1,
            "no_wait": true,
            "group": crate::provision::PIN_GROUP,
            "id": id,
        });
        let client = client.clone();
        let subject = next_subject.to_owned();
        let consumer = consumer.to_owned();
        tokio::spawn(async move {
            let payload = Bytes::from(request.to_string());
            if let Ok(Ok(answer)) =
                tokio::time::timeout(Duration::from_secs(5), client.request(subject, payload)).await
            {
                if answer.status.map(u16::from) == Some(423) {
                    tracing::warn!(consumer = %consumer, "A partition's pin moved while its batch ran; newer messages may be handled elsewhere first.");
                }
            }
        });
    }
}

/// Releases a partition's pin (`$JS.API.CONSUMER.UNPIN`): the server pins another replica's
/// standby pull. Failures are logged; the pin then moves after `priority_timeout` anyway, since
/// this worker stops pulling with it.
pub(crate) async fn unpin(client: &Client, stream: &str, consumer: &str, timeout: Duration) {
    let subject = format!("$JS.API.CONSUMER.UNPIN.{stream}.{consumer}");
    let payload =
        Bytes::from(serde_json::json!({ "group": crate::provision::PIN_GROUP }).to_string());
    match tokio::time::timeout(timeout, client.request(subject, payload)).await {
        Ok(Ok(answer)) => {
            let body: serde_json::Value =
                serde_json::from_slice(&answer.payload).unwrap_or_default();
            if let Some(error) = body.get("error") {
                tracing::warn!(consumer, %error, "The server refused to release a partition; it moves once its pin times out.");
            } else {
                tracing::info!(consumer, "Released a partition to balance the replicas.");
            }
        }
        _ => {
            tracing::warn!(
                consumer,
                "Could not release a partition; it moves once its pin times out."
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinning(owned: usize, members: usize) -> (Pinning, Arc<AtomicUsize>, watch::Sender<usize>) {
        let owned = Arc::new(AtomicUsize::new(owned));
        let (tx, rx) = watch::channel(members);
        (
            Pinning {
                partition: 0,
                partitions: 8,
                id: None,
                owned: Arc::clone(&owned),
                members: rx,
                timeout: Duration::from_secs(7),
            },
            owned,
            tx,
        )
    }

    #[test]
    fn the_share_is_the_ceiling_of_partitions_over_replicas() {
        assert_eq!(quota(8, 1), 8);
        assert_eq!(quota(8, 2), 4);
        assert_eq!(quota(8, 3), 3);
        assert_eq!(quota(8, 0), 8);
        assert_eq!(quota(8, 9), 1);
    }

    #[test]
    fn a_standby_competes_only_below_its_replica_s_share() {
        let (p, owned, members) = pinning(2, 3);
        assert_eq!(p.turn(), Turn::Pull);
        owned.store(3, Ordering::SeqCst);
        assert_eq!(p.turn(), Turn::Wait);
        members.send(2).unwrap();
        assert_eq!(p.turn(), Turn::Pull);
    }

    #[test]
    fn only_the_excess_releases() {
        let owned = Arc::new(AtomicUsize::new(0));
        let (_tx, rx) = watch::channel(1usize);
        let mut workers: Vec<Pinning> = (0..8)
            .map(|partition| Pinning {
                partition,
                partitions: 8,
                id: None,
                owned: Arc::clone(&owned),
                members: rx.clone(),
                timeout: Duration::from_secs(7),
            })
            .collect();
        for (n, w) in workers.iter_mut().enumerate() {
            assert!(w.delivered_with(Some(&format!("pin{n}"))));
            assert!(!w.delivered_with(Some(&format!("pin{n}"))));
        }
        assert_eq!(owned.load(Ordering::SeqCst), 8);
        // A third replica joins: the share is 3, five partitions go.
        _tx.send(3).unwrap();
        assert!(workers.iter().all(|w| w.turn() == Turn::Release));
        let released = workers
            .iter_mut()
            .map(Pinning::try_release)
            .filter(|r| *r)
            .count();
        assert_eq!(released, 5);
        assert_eq!(owned.load(Ordering::SeqCst), 3);
        assert_eq!(workers.iter().filter(|w| w.id.is_some()).count(), 3);
        // A pin that changes while held is a new pin (another may have held the partition in
        // between), counted once.
        let held = owned.load(Ordering::SeqCst);
        let holder = workers.iter_mut().find(|w| w.id.is_some()).unwrap();
        assert!(holder.delivered_with(Some("another")));
        assert!(!holder.delivered_with(Some("another")));
        assert_eq!(owned.load(Ordering::SeqCst), held);
        // A lost pin counts once.
        let holder = workers.iter_mut().find(|w| w.id.is_some()).unwrap();
        assert!(holder.lost());
        assert!(!holder.lost());
        assert_eq!(owned.load(Ordering::SeqCst), 2);
    }
}
