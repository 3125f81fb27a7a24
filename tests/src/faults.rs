//! A watch store and zone store that delegate to real ones and misbehave on demand, so that
//! scenarios can put a failure or a concurrent change exactly between two steps of a use case,
//! without sleeps.
//!
//! - [`FaultyWatch::fail_zone_commits`]: the next `n` W7 units of work fail at their commit
//!   (the real unit of work is dropped: rolled back, nothing stored).
//! - [`FaultyWatch::after_next_watch_read`]: runs a future once, right after the next watcher
//!   batch read its rows (its unit of work open, its locks held) and before the watcher sees
//!   them: a change made there is concurrent with that batch.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use swath_application::ports::{
    WatchBatch, WatchError, WatchRead, WatchRows, WatchStore, ZoneBatch, ZoneRows, ZoneStore,
};
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Zone, ZoneChanges, ZoneWatch};
use swath_domain::MowerId;
use uuid::Uuid;

type Hook = Pin<Box<dyn Future<Output = ()> + Send>>;

/// See the module.
pub struct FaultyWatch {
    watch: Arc<dyn WatchStore>,
    zones: Arc<dyn ZoneStore>,
    zone_commit_failures: AtomicUsize,
    after_watch_read: Mutex<Option<Hook>>,
}

impl FaultyWatch {
    /// Over the real watcher's store and zone store (the two concerns it can fail).
    pub fn new(watch: Arc<dyn WatchStore>, zones: Arc<dyn ZoneStore>) -> Arc<Self> {
        Arc::new(Self {
            watch,
            zones,
            zone_commit_failures: AtomicUsize::new(0),
            after_watch_read: Mutex::new(None),
        })
    }

    /// The next `n` W7 commits fail with [`WatchError::Unavailable`], storing nothing.
    pub fn fail_zone_commits(&self, n: usize) {
        self.zone_commit_failures.store(n, Ordering::SeqCst);
    }

    /// Runs `hook` once, after the next watcher batch's read and before it returns.
    pub fn after_next_watch_read(&self, hook: impl Future<Output = ()> + Send + 'static) {
        *self.after_watch_read.lock().unwrap() = Some(Box::pin(hook));
    }

    /// Whether the hook has run (or none was set).
    pub fn hook_ran(&self) -> bool {
        self.after_watch_read.lock().unwrap().is_none()
    }
}

/// A W7 unit of work that fails at its commit; the real one is dropped (rolled back).
struct FailingZoneBatch;

#[async_trait]
impl ZoneBatch for FailingZoneBatch {
    async fn commit(self: Box<Self>, _changes: ZoneChanges) -> Result<(), WatchError> {
        Err(WatchError::Unavailable(
            "injected: the zone step failed at its commit".into(),
        ))
    }
}

#[async_trait]
impl WatchStore for FaultyWatch {
    async fn begin_watch(
        &self,
        mowers: &[MowerId],
        parsed: &[Uuid],
    ) -> Result<(WatchRead, Box<dyn WatchBatch>), WatchError> {
        let read = self.watch.begin_watch(mowers, parsed).await?;
        let hook = self.after_watch_read.lock().unwrap().take();
        if let Some(hook) = hook {
            hook.await;
        }
        Ok(read)
    }

    async fn begin_sweep(
        &self,
        silent_before: DateTime<Utc>,
        due_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<(Vec<swath_domain::watch::Watch>, Box<dyn WatchBatch>), WatchError> {
        self.watch
            .begin_sweep(silent_before, due_before, limit)
            .await
    }

    async fn busy(&self, mowers: &[MowerId]) -> Result<Vec<BusyStatus>, WatchError> {
        self.watch.busy(mowers).await
    }

    async fn write_busy(&self, statuses: &[BusyStatus]) -> Result<(), WatchError> {
        self.watch.write_busy(statuses).await
    }

    async fn export_watch(&self, mowers: &[MowerId]) -> Result<WatchRows, WatchError> {
        self.watch.export_watch(mowers).await
    }
}

#[async_trait]
impl ZoneStore for FaultyWatch {
    async fn begin_zones(
        &self,
        mowers: &[MowerId],
    ) -> Result<(ZoneRows, Box<dyn ZoneBatch>), WatchError> {
        let (rows, unit) = self.zones.begin_zones(mowers).await?;
        let fail = self
            .zone_commit_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            drop(unit);
            return Ok((rows, Box::new(FailingZoneBatch)));
        }
        Ok((rows, unit))
    }

    async fn zones(&self, mower: MowerId) -> Result<Vec<Zone>, WatchError> {
        self.zones.zones(mower).await
    }

    async fn create_zone(&self, zone: Zone) -> Result<(), WatchError> {
        self.zones.create_zone(zone).await
    }

    async fn update_zone(&self, zone: Zone) -> Result<bool, WatchError> {
        self.zones.update_zone(zone).await
    }

    async fn delete_zone(&self, mower: MowerId, zone: Uuid) -> Result<bool, WatchError> {
        self.zones.delete_zone(mower, zone).await
    }

    async fn zone_watch(&self, mower: MowerId) -> Result<Option<ZoneWatch>, WatchError> {
        self.zones.zone_watch(mower).await
    }
}
