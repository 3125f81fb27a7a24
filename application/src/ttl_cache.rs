//! Short-lived answers of a store: a token's principal and which account and site a mower is on
//! ([`crate::visibility::Access`]), a mower's latest state ([`crate::latest_cache`]). Each answer is
//! kept for at most a bound after the store gave it, and never across a change made through this
//! process (a generation counter that the change bumps).

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// One remembered answer: the value, when the store gave it, and under which generation.
struct Entry<V> {
    value: V,
    at: DateTime<Utc>,
    generation: u64,
}

/// A bounded map of answers, each fresh for at most `ttl` and only within its generation.
///
/// The generation is read by the caller *before* it asks the store, and passed to
/// [`TtlCache::remember`]: a change during the store's read bumps the counter, so the answer read
/// before the change is never kept as current.
pub struct TtlCache<K, V> {
    ttl: Duration,
    max_entries: usize,
    entries: Mutex<HashMap<K, Entry<V>>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// A cache keeping at most `max_entries` answers for at most `ttl` each; a zero `ttl` keeps
    /// nothing.
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            ttl,
            max_entries,
            entries: Mutex::default(),
        }
    }

    /// The answer for `key` if it is fresh at `now` under `generation`.
    pub fn get(&self, key: &K, now: DateTime<Utc>, generation: u64) -> Option<V> {
        if self.ttl.is_zero() {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.get(key)?;
        self.fresh(entry, now, generation)
            .then(|| entry.value.clone())
    }

    /// Keeps the store's answer for `key`, read at `now` under `generation`. When the cache is
    /// full, stale entries (judged under `current`, the generation now) are dropped first; if it
    /// is still full, the answer is not kept.
    pub fn remember(&self, key: &K, value: V, now: DateTime<Utc>, generation: u64, current: u64) {
        self.remember_unless(key, value, now, generation, current, |_| false);
    }

    /// [`TtlCache::remember`], unless the answer kept for `key`, fresh under `current`, is one
    /// that `keeps` says must stay (a newer one, read by a concurrent caller).
    pub fn remember_unless(
        &self,
        key: &K,
        value: V,
        now: DateTime<Utc>,
        generation: u64,
        current: u64,
        keeps: impl FnOnce(&V) -> bool,
    ) {
        if self.ttl.is_zero() || generation != current {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = entries.get(key) {
            if self.fresh(kept, now, current) && keeps(&kept.value) {
                return;
            }
        }
        if entries.len() >= self.max_entries && !entries.contains_key(key) {
            entries.retain(|_, entry| self.fresh(entry, now, current));
            if entries.len() >= self.max_entries {
                return;
            }
        }
        entries.insert(
            key.clone(),
            Entry {
                value,
                at: now,
                generation,
            },
        );
    }

    /// The answer for `key`: a fresh one kept, or else the store's (`read`), kept when it is
    /// one. `generation` is asked before the store is read and again after it (see
    /// [`TtlCache::remember`]).
    pub async fn read_through<E>(
        &self,
        key: &K,
        now: DateTime<Utc>,
        generation: impl Fn() -> u64,
        read: impl Future<Output = Result<Option<V>, E>>,
    ) -> Result<Option<V>, E> {
        self.read_through_unless(key, now, generation, read, |_, _| false)
            .await
    }

    /// [`TtlCache::read_through`], except that the store's answer does not replace one kept
    /// meanwhile that `keeps(kept, read)` says must stay (see [`TtlCache::remember_unless`]).
    pub async fn read_through_unless<E>(
        &self,
        key: &K,
        now: DateTime<Utc>,
        generation: impl Fn() -> u64,
        read: impl Future<Output = Result<Option<V>, E>>,
        keeps: impl Fn(&V, &V) -> bool,
    ) -> Result<Option<V>, E> {
        // Read before the store is asked: a change during the read makes its answer stale.
        let before = generation();
        if let Some(value) = self.get(key, now, before) {
            return Ok(Some(value));
        }
        let value = read.await?;
        if let Some(value) = &value {
            let current = generation();
            let stays = |kept: &V| keeps(kept, value);
            self.remember_unless(key, value.clone(), now, before, current, stays);
        }
        Ok(value)
    }

    /// Fresh: of the current generation, and stored no longer than the bound ago (a clock that
    /// went back makes every entry stale rather than immortal).
    fn fresh(&self, entry: &Entry<V>, now: DateTime<Utc>, generation: u64) -> bool {
        entry.generation == generation
            && now >= entry.at
            && (now - entry.at).to_std().is_ok_and(|age| age < self.ttl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + seconds, 0).unwrap()
    }

    #[test]
    fn an_answer_is_kept_for_the_bound_only() {
        let cache = TtlCache::new(Duration::from_secs(2), 10);
        cache.remember(&1, "a", at(0), 0, 0);
        assert_eq!(cache.get(&1, at(1), 0), Some("a"));
        assert_eq!(cache.get(&1, at(2), 0), None);
        assert_eq!(cache.get(&1, at(-1), 0), None, "a clock that went back");
    }

    #[test]
    fn a_change_forgets_every_answer_and_refuses_one_read_before_it() {
        let cache = TtlCache::new(Duration::from_secs(2), 10);
        cache.remember(&1, "a", at(0), 0, 0);
        assert_eq!(cache.get(&1, at(0), 1), None);
        // Read under generation 1, the change to 2 happened during the read.
        cache.remember(&2, "b", at(0), 1, 2);
        assert_eq!(cache.get(&2, at(0), 1), None);
        assert_eq!(cache.get(&2, at(0), 2), None);
    }

    #[test]
    fn a_full_cache_drops_stale_answers_and_keeps_no_more_than_its_bound() {
        let cache = TtlCache::new(Duration::from_secs(2), 2);
        cache.remember(&1, "a", at(0), 0, 0);
        cache.remember(&2, "b", at(0), 0, 0);
        cache.remember(&3, "c", at(1), 0, 0);
        assert_eq!(cache.get(&3, at(1), 0), None, "full of fresh answers");
        cache.remember(&3, "c", at(3), 0, 0);
        assert_eq!(cache.get(&3, at(3), 0), Some("c"), "stale ones dropped");
        assert_eq!(cache.get(&1, at(1), 0), None);
    }

    #[test]
    fn an_answer_the_caller_says_must_stay_is_not_replaced() {
        let cache = TtlCache::new(Duration::from_secs(2), 10);
        cache.remember(&1, 5, at(0), 0, 0);
        cache.remember_unless(&1, 4, at(1), 0, 0, |kept| *kept > 4);
        assert_eq!(cache.get(&1, at(1), 0), Some(5), "the newer answer stays");
        cache.remember_unless(&1, 6, at(1), 0, 0, |kept| *kept > 6);
        assert_eq!(cache.get(&1, at(1), 0), Some(6));
        cache.remember_unless(&1, 3, at(4), 0, 0, |kept| *kept > 3);
        assert_eq!(
            cache.get(&1, at(4), 0),
            Some(3),
            "a stale answer does not stay"
        );
    }

    #[test]
    fn a_zero_bound_keeps_nothing() {
        let cache = TtlCache::new(Duration::ZERO, 10);
        cache.remember(&1, "a", at(0), 0, 0);
        assert_eq!(cache.get(&1, at(0), 0), None);
    }
}
