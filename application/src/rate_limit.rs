//! A sliding-window rate limit per key, kept in this process: at most `per_window` takes per key
//! in any `window`, on the instants of the [`Clock`](crate::ports::Clock) the caller passes, so
//! that tests move time by hand.
//!
//! Memory is bounded by the keys taken within the last window: each key keeps at most
//! `per_window` instants, and keys whose instants have all left the window are dropped whenever
//! the map has doubled since it was last pruned.

use chrono::{DateTime, Duration, Utc};
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;

/// The fewest keys kept before stale ones are pruned.
const PRUNE_FLOOR: usize = 1024;

/// At most `per_window` takes per key in any `window`.
pub struct RateLimit<K> {
    per_window: usize,
    window: Duration,
    held: Mutex<Held<K>>,
}

struct Held<K> {
    /// Per key, the instants of its takes within the window, oldest first.
    takes: HashMap<K, VecDeque<DateTime<Utc>>>,
    /// The map's size at which stale keys are pruned next.
    prune_at: usize,
}

impl<K: Eq + Hash + Clone> RateLimit<K> {
    /// `per_window` takes per key in any `window` (zero: none at all).
    pub fn new(per_window: usize, window: Duration) -> Self {
        Self {
            per_window,
            window,
            held: Mutex::new(Held {
                takes: HashMap::new(),
                prune_at: PRUNE_FLOOR,
            }),
        }
    }

    /// Takes one for `key` at `now`, or answers how long until one is free again (at least a
    /// second: the unit of `Retry-After`).
    pub fn take(&self, key: &K, now: DateTime<Utc>) -> Result<(), Duration> {
        let start = now - self.window;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.takes.len() >= held.prune_at {
            held.takes
                .retain(|_, instants| instants.back().is_some_and(|&last| last > start));
            held.prune_at = (held.takes.len() * 2).max(PRUNE_FLOOR);
        }
        let instants = held.takes.entry(key.clone()).or_default();
        while instants.front().is_some_and(|&first| first <= start) {
            instants.pop_front();
        }
        if instants.len() < self.per_window {
            instants.push_back(now);
            return Ok(());
        }
        let free_at = instants
            .front()
            .map_or(now + self.window, |&f| f + self.window);
        Err((free_at - now).max(Duration::seconds(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap() + Duration::seconds(seconds)
    }

    #[test]
    fn each_key_gets_its_share_per_window_and_learns_when_the_next_is_free() {
        let limit = RateLimit::new(3, Duration::seconds(60));
        let taken: Vec<bool> = (0..10).map(|s| limit.take(&"a", at(s)).is_ok()).collect();
        assert_eq!(taken.iter().filter(|t| **t).count(), 3);
        assert_eq!(limit.take(&"a", at(10)), Err(Duration::seconds(50)));
        assert!(limit.take(&"b", at(10)).is_ok(), "another key has its own");
        assert!(
            limit.take(&"a", at(60)).is_ok(),
            "the first take left the window"
        );
        assert_eq!(limit.take(&"a", at(60)), Err(Duration::seconds(1)));
        assert!(RateLimit::new(0, Duration::seconds(60))
            .take(&"a", at(0))
            .is_err());
    }

    #[test]
    fn keys_that_left_the_window_are_pruned() {
        let limit = RateLimit::new(1, Duration::seconds(60));
        for key in 0..PRUNE_FLOOR {
            limit.take(&key, at(0)).unwrap();
        }
        limit.take(&PRUNE_FLOOR, at(61)).unwrap();
        let held = limit.held.lock().unwrap();
        assert_eq!(held.takes.len(), 1);
        assert_eq!(held.prune_at, PRUNE_FLOOR);
    }
}
