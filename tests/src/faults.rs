//! A watch store that delegates to a real one and misbehaves on demand, so that scenarios can
//! put a failure or a concurrent change exactly between two steps of a use case, without sleeps.
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
    AlertQuery, EventQuery, Geofence, WatchBatch, WatchError, WatchRead, WatchRows, WatchStore,
    ZoneBatch, ZoneRows,
};
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Zone, ZoneChanges, ZoneWatch};
use swath_domain::watch::{Alert, Event};
use swath_domain::MowerId;
use uuid::Uuid;

type Hook = Pin<Box<dyn Future<Output = ()> + Send>>;

/// See the module.
pub struct FaultyWatch {
    inner: Arc<dyn WatchStore>,
    zone_commit_failures: AtomicUsize,
    after_watch_read: Mutex<Option<Hook>>,
}

impl FaultyWatch {
    pub fn new(inner: Arc<dyn WatchStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
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
        let read = self.inner.begin_watch(mowers, parsed).await?;
        let hook = self.after_watch_read.lock().unwrap().take();
        if let Some(hook) = hook {
            hook.await;
        }
        Ok(read)
    }

    async fn begin_sweep(
        &self,
        silent_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<(Vec<swath_domain::watch::Watch>, Box<dyn WatchBatch>), WatchError> {
        self.inner.begin_sweep(silent_before, limit).await
    }

    async fn begin_zones(
        &self,
        mowers: &[MowerId],
    ) -> Result<(ZoneRows, Box<dyn ZoneBatch>), WatchError> {
        let (rows, unit) = self.inner.begin_zones(mowers).await?;
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

    async fn busy(&self, mowers: &[MowerId]) -> Result<Vec<BusyStatus>, WatchError> {
        self.inner.busy(mowers).await
    }

    async fn write_busy(&self, statuses: &[BusyStatus]) -> Result<(), WatchError> {
        self.inner.write_busy(statuses).await
    }

    async fn put_geofence(&self, geofence: Geofence) -> Result<(), WatchError> {
        self.inner.put_geofence(geofence).await
    }

    async fn geofence(&self, mower: MowerId) -> Result<Option<Geofence>, WatchError> {
        self.inner.geofence(mower).await
    }

    async fn delete_geofence(&self, mower: MowerId) -> Result<bool, WatchError> {
        self.inner.delete_geofence(mower).await
    }

    async fn zones(&self, mower: MowerId) -> Result<Vec<Zone>, WatchError> {
        self.inner.zones(mower).await
    }

    async fn create_zone(&self, zone: Zone) -> Result<(), WatchError> {
        self.inner.create_zone(zone).await
    }

    async fn update_zone(&self, zone: Zone) -> Result<bool, WatchError> {
        self.inner.update_zone(zone).await
    }

    async fn delete_zone(&self, mower: MowerId, zone: Uuid) -> Result<bool, WatchError> {
        self.inner.delete_zone(mower, zone).await
    }

    async fn zone_watch(&self, mower: MowerId) -> Result<Option<ZoneWatch>, WatchError> {
        self.inner.zone_watch(mower).await
    }

    async fn reset_blade(&self, mower: MowerId, at: DateTime<Utc>) -> Result<(), WatchError> {
        self.inner.reset_blade(mower, at).await
    }

    async fn events(&self, query: &EventQuery) -> Result<Vec<Event>, WatchError> {
        self.inner.events(query).await
    }

    async fn open_alerts(&self, query: &AlertQuery) -> Result<Vec<Alert>, WatchError> {
        self.inner.open_alerts(query).await
    }

    async fn export_watch(&self, mowers: &[MowerId]) -> Result<WatchRows, WatchError> {
        self.inner.export_watch(mowers).await
    }
}
