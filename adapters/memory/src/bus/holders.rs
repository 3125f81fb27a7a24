//! Who holds which partition of a partitioned consumer: taking a lane, giving it up to balance
//! the subscriptions (at most `ceil(P / subscriptions)` each), releasing it when a worker ends,
//! and a subscription leaving its consumer. All of it under the bus's one lock; every change
//! wakes the consumer's workers through its `ownership` notification (decision 70).

use super::{Consumer, Inner};
use std::sync::atomic::Ordering;

impl Consumer {
    /// The most lanes one subscription may hold: `ceil(lanes / subscriptions)`.
    pub(super) fn quota(&self) -> usize {
        self.lanes.len().div_ceil(self.members.len().max(1))
    }

    pub(super) fn owned(&self, member: u64) -> usize {
        self.members
            .get(&member)
            .map_or(0, |owned| owned.load(Ordering::Relaxed))
    }

    pub(super) fn add_owned(&self, member: u64, delta: isize) {
        if let Some(owned) = self.members.get(&member) {
            let now = owned.load(Ordering::Relaxed).saturating_add_signed(delta);
            owned.store(now, Ordering::Relaxed);
        }
    }
}

/// What a lane's worker may do, as [`Inner::hold`] finds it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Hold {
    /// The lane is this subscription's (or a plain lane, which everyone may take from).
    Mine,
    /// Another subscription holds it, or this one already holds its quota: wait for a change.
    Wait,
}

impl Inner {
    /// Between batches: whether subscription `member` may take from `lane`. Takes a free lane
    /// when the subscription holds fewer than its quota; gives the lane up when the subscription
    /// holds more (someone else's share). A plain lane is everyone's.
    pub(super) fn hold(&self, consumer: &str, lane: usize, member: Option<u64>) -> Hold {
        let Some(member) = member else {
            return Hold::Mine;
        };
        let mut state = self.lock();
        let Some(c) = state.consumers.get_mut(consumer) else {
            return Hold::Wait;
        };
        let (quota, owned) = (c.quota(), c.owned(member));
        match c.lanes[lane].holder {
            Some(holder) if holder == member => {
                if owned <= quota {
                    return Hold::Mine;
                }
                c.lanes[lane].holder = None;
                c.add_owned(member, -1);
                tracing::debug!(
                    consumer,
                    partition = lane,
                    "A subscription gave a partition up to balance the consumer's subscriptions."
                );
                c.ownership.notify_waiters();
                Hold::Wait
            }
            None if owned < quota => {
                c.lanes[lane].holder = Some(member);
                c.add_owned(member, 1);
                tracing::debug!(
                    consumer,
                    partition = lane,
                    "A subscription took a partition."
                );
                Hold::Mine
            }
            _ => Hold::Wait,
        }
    }

    /// Whether subscription `member` keeps `lane` for its next batch (it holds it, and no more
    /// than its quota); always true on a plain lane.
    pub(super) fn keeps(&self, consumer: &str, lane: usize, member: Option<u64>) -> bool {
        let Some(member) = member else {
            return true;
        };
        let state = self.lock();
        state
            .consumers
            .get(consumer)
            .is_some_and(|c| c.lanes[lane].holder == Some(member) && c.owned(member) <= c.quota())
    }

    /// When a lane's worker ends: the lane is free for another subscription. Whatever the worker
    /// left unsettled is already back at the front of the lane.
    pub(super) fn release(&self, consumer: &str, lane: usize, member: Option<u64>) {
        let Some(member) = member else {
            return;
        };
        let mut state = self.lock();
        if let Some(c) = state.consumers.get_mut(consumer) {
            if c.lanes[lane].holder == Some(member) {
                c.lanes[lane].holder = None;
                c.add_owned(member, -1);
                c.ownership.notify_waiters();
            }
        }
    }

    /// A partitioned subscription ended: the others' quota grows, and they take its lanes.
    pub(super) fn leave(&self, consumer: &str, member: u64) {
        let mut state = self.lock();
        if let Some(c) = state.consumers.get_mut(consumer) {
            for lane in &mut c.lanes {
                if lane.holder == Some(member) {
                    // Only a worker that ended abnormally leaves a lane held.
                    lane.holder = None;
                }
            }
            if let Some(owned) = c.members.remove(&member) {
                owned.store(0, Ordering::Relaxed);
            }
            c.ownership.notify_waiters();
        }
    }
}
