//! How fast an account may create accounts and tokens (issue 42 item 2, decision 181): one token
//! bucket per account and kind, holding an hour's allowance and refilled evenly over the hour, so
//! a burst of a whole allowance is served and then one creation per refill. Without it a tenant
//! could mint tokens (each with its own live-stream share) and accounts without end.
//!
//! Per replica, like the stream slots: a client spread over replicas by the load balancer gets
//! the allowance on each, which still bounds it. Kept in memory: buckets refilled whole are
//! dropped once many are held, so the table is bounded by the accounts that created something
//! within the last hour.

use crate::ports::Clock;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use swath_domain::AccountId;

/// How many accounts and tokens one account may create per hour (`SWATH_ACCOUNTS_PER_HOUR`,
/// `SWATH_TOKENS_PER_HOUR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreationLimits {
    pub accounts_per_hour: u32,
    pub tokens_per_hour: u32,
}

impl Default for CreationLimits {
    fn default() -> Self {
        Self {
            accounts_per_hour: 10,
            tokens_per_hour: 60,
        }
    }
}

/// What is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Creation {
    Account,
    Token,
}

impl Creation {
    fn plural(self) -> &'static str {
        match self {
            Creation::Account => "accounts",
            Creation::Token => "tokens",
        }
    }
}

/// A creation refused: the account used its allowance; one more is possible after
/// `retry_after_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "This account may create {limit} {} per hour and used that allowance; try again in \
     {retry_after_seconds} s.",
    .creation.plural()
)]
pub struct RateLimited {
    pub creation: Creation,
    pub limit: u32,
    pub retry_after_seconds: u64,
}

/// Above this many buckets, those refilled whole are dropped (they hold nothing a new one would
/// not).
const PRUNE_ABOVE: usize = 4096;

/// The buckets of every account (see the module). Cheap to clone: one `Arc`.
#[derive(Clone)]
pub struct CreationRate {
    limits: CreationLimits,
    clock: Arc<dyn Clock>,
    buckets: Arc<Mutex<HashMap<(AccountId, Creation), Bucket>>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    /// What is left, in thousandths of an hour of one creation (see [`ONE`]).
    left: u64,
    /// When `left` was computed.
    at: DateTime<Utc>,
}

/// One creation, in the units a bucket counts: a bucket of `limit` per hour gains `limit` units
/// a millisecond, so integers refill it exactly.
const ONE: u64 = 3_600_000;

impl CreationRate {
    pub fn new(limits: CreationLimits, clock: Arc<dyn Clock>) -> Self {
        Self {
            limits,
            clock,
            buckets: Arc::default(),
        }
    }

    /// Fresh buckets with another allowance.
    pub fn with_limits(&self, limits: CreationLimits) -> Self {
        Self::new(limits, Arc::clone(&self.clock))
    }

    fn limit(&self, creation: Creation) -> u32 {
        match creation {
            Creation::Account => self.limits.accounts_per_hour,
            Creation::Token => self.limits.tokens_per_hour,
        }
    }

    /// Takes one `creation` of `account`'s allowance, or answers when the next is possible.
    pub fn take(&self, account: AccountId, creation: Creation) -> Result<(), RateLimited> {
        let limit = self.limit(creation);
        let capacity = u64::from(limit) * ONE;
        let now = self.clock.now();
        let refilled = |bucket: &Bucket| {
            let ms = (now - bucket.at).num_milliseconds().max(0) as u64;
            bucket
                .left
                .saturating_add(ms.saturating_mul(u64::from(limit)))
                .min(capacity)
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, bucket| refilled(bucket) < capacity);
        }
        let bucket = buckets.entry((account, creation)).or_insert(Bucket {
            left: capacity,
            at: now,
        });
        let left = refilled(bucket);
        if left >= ONE {
            *bucket = Bucket {
                left: left - ONE,
                at: now,
            };
            return Ok(());
        }
        *bucket = Bucket { left, at: now };
        let retry_after_seconds = match limit {
            // No allowance at all: an hour is as good an answer as any.
            0 => 3600,
            limit => (ONE - left)
                .div_ceil(u64::from(limit))
                .div_ceil(1000)
                .max(1),
        };
        Err(RateLimited {
            creation,
            limit,
            retry_after_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::ManualClock;

    #[test]
    fn an_hours_allowance_then_one_per_refill_per_account_and_kind() {
        let clock = Arc::new(ManualClock::new("2026-06-01T12:00:00Z".parse().unwrap()));
        let rate = CreationRate::new(
            CreationLimits {
                accounts_per_hour: 2,
                tokens_per_hour: 3,
            },
            clock.clone(),
        );
        let (a, b) = (AccountId::new(), AccountId::new());
        let taken = (0..5)
            .filter(|_| rate.take(a, Creation::Token).is_ok())
            .count();
        assert_eq!(taken, 3);
        let refused = rate.take(a, Creation::Token).unwrap_err();
        assert_eq!(refused.retry_after_seconds, 1200, "an hour over three");
        assert!(rate.take(b, Creation::Token).is_ok(), "another account");
        assert!(rate.take(a, Creation::Account).is_ok(), "another kind");
        clock.advance(chrono::Duration::seconds(1200));
        assert!(rate.take(a, Creation::Token).is_ok());
        assert!(rate.take(a, Creation::Token).is_err());
    }
}
