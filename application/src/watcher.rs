//! The watcher (docs/rules.md §4): the second durable consumer of every state. Per batch it
//! reads each mower's account, geofence version and watch row once (the watch rows locked in
//! mower id order), runs the notification rules state by state, writes each changed watch once
//! and stores the derived events and alerts in the same transaction, then publishes the events
//! after the commit, in order, with their id as the de-duplication id, and with them the alerts
//! it cleared without an event (decision 130).
//!
//! A redelivered state is older than or equal to `watched_until` and skipped, so an event is never
//! derived twice; so is any late state (a backfill, or one overtaken by a newer one): the
//! notification rules are about the present, while the totals merge late states (docs/rules.md §3 W4); an event is stored before it is published, so a crash after the commit loses a
//! publication but never the event (the feed has it).
//!
//! Geofences are parsed once per (mower, version): versions are never reused, so the cache needs
//! no invalidation, only a bound. The cache keeps the newest parsed version of each mower; the
//! batch's read returns the polygon of every current version the cache does not hold, in the
//! same read as the version itself, so a geofence replaced while the batch runs is judged from
//! the next batch on and never mistaken for none (decision 48).

use crate::consume;
use crate::ports::{
    chain, BatchHandler, Clock, EventBus, HandlerError, Message, NotificationFeed, Settle,
    WatchError, WatchStore,
};
use crate::publish::{publish, publish_told};
use crate::scheduler::SchedulerStatus;
use async_trait::async_trait;
use chrono::{Duration, SubsecRound};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use swath_domain::sessions::DEFAULT_SESSION_MERGE_GAP;
use swath_domain::watch::geometry::Fence;
use swath_domain::watch::{
    apply_watch, sweep_watch, AlertKind, ClearCause, ClearedAlert, EventKind, GeoPolygon,
    GeofenceRef, WatchChanges,
};
use swath_domain::{AccountId, InvalidReport, MowerId, StateOutcome, StateReport};
use uuid::Uuid;

/// Parsed geofences kept at most; past it the cache starts over (a fence is parsed again when
/// next needed).
const FENCE_CACHE_MAX: usize = 100_000;
/// Watches marked offline per sweep transaction.
const SWEEP_BATCH: usize = 500;

/// The watcher use case.
pub struct Watcher {
    store: Arc<dyn WatchStore>,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
    offline_after: Duration,
    /// W8's merge gap (`SWATH_SESSION_MERGE_GAP_SECONDS`), for `session_ended`.
    merge_gap: Duration,
    /// The newest parsed geofence version of each mower.
    fences: Mutex<HashMap<MowerId, (Uuid, Arc<Fence>)>>,
    fence_parses: AtomicU64,
}

impl Watcher {
    pub fn new(
        store: Arc<dyn WatchStore>,
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
        offline_after: Duration,
    ) -> Self {
        Self {
            store,
            bus,
            clock,
            offline_after,
            merge_gap: DEFAULT_SESSION_MERGE_GAP,
            fences: Mutex::default(),
            fence_parses: AtomicU64::new(0),
        }
    }

    /// W8's merge gap, the one the ingest folds the stored sessions with: a session's
    /// `session_ended` is raised once no stretch can merge into it any more.
    pub fn with_session_merge_gap(mut self, merge_gap: Duration) -> Self {
        self.merge_gap = merge_gap;
        self
    }

    /// How many geofences this watcher has parsed (turned into a [`Fence`]) so far.
    pub fn geofence_parses(&self) -> u64 {
        self.fence_parses.load(Ordering::Relaxed)
    }

    /// Parses and validates one report's JSON bytes, received now.
    pub fn parse(&self, payload: &[u8]) -> Result<StateReport, InvalidReport> {
        StateReport::parse(payload, self.clock.now())
    }

    /// Watches a batch: one outcome per element, in order. Invalid reports are dropped (ingestion
    /// logs and counts them; the watcher does not count them twice). A store failure stores
    /// nothing and is returned, so that the caller redelivers the batch.
    pub async fn on_states(
        &self,
        batch: &[Result<StateReport, InvalidReport>],
    ) -> Result<Vec<StateOutcome>, WatchError> {
        let received_at = self.clock.now_micros();
        let valid: Vec<StateReport> = batch.iter().filter_map(|r| r.clone().ok()).collect();
        let mut applied = Vec::new();
        if !valid.is_empty() {
            let mut mowers: Vec<MowerId> = valid.iter().map(|s| s.mower_id).collect();
            mowers.sort_unstable();
            mowers.dedup();
            let known = self.cached_fences(&mowers);
            let parsed: Vec<Uuid> = known.values().map(|(version, _)| *version).collect();
            let (read, unit) = self.store.begin_watch(&mowers, &parsed).await?;
            let mut snapshots = read.snapshots;
            let fences = self.fences_for(&snapshots, known, read.geofences)?;
            let refs: BTreeMap<MowerId, GeofenceRef<'_>> = fences
                .iter()
                .map(|(m, (version, fence))| {
                    (
                        *m,
                        GeofenceRef {
                            version: *version,
                            fence: fence.as_ref(),
                        },
                    )
                })
                .collect();
            let (outcomes, changes) =
                apply_watch(&mut snapshots, &refs, &valid, received_at, self.merge_gap);
            let events = changes.events.clone();
            let cleared = changes.cleared_without_event.clone();
            unit.commit(changes).await?;
            metrics::histogram!("swath_watch_batch_size").record(valid.len() as f64);
            publish_told(self.bus.as_ref(), &events, &cleared).await;
            applied = outcomes;
        }
        let mut applied = applied.into_iter();
        Ok(batch
            .iter()
            .map(|r| match r {
                Ok(_) => applied.next().unwrap_or(StateOutcome::Stored),
                Err(invalid) => StateOutcome::Dropped(invalid.reason),
            })
            .collect())
    }

    /// The parsed fences the cache holds for these mowers (taken out before the batch's read, so
    /// that the batch uses what it told the store it had parsed).
    fn cached_fences(&self, mowers: &[MowerId]) -> BTreeMap<MowerId, (Uuid, Arc<Fence>)> {
        let cache = self.fences.lock().unwrap_or_else(|e| e.into_inner());
        mowers
            .iter()
            .filter_map(|m| cache.get(m).map(|(v, f)| (*m, (*v, Arc::clone(f)))))
            .collect()
    }

    /// The parsed current geofence of every mower whose snapshot names one: from the cache, or
    /// parsed once from the polygon the batch's read returned with the version. A version found
    /// in neither is a store that broke its contract: an error (the batch is redelivered), never
    /// "no geofence".
    fn fences_for(
        &self,
        snapshots: &BTreeMap<MowerId, swath_domain::watch::WatchSnapshot>,
        mut known: BTreeMap<MowerId, (Uuid, Arc<Fence>)>,
        mut polygons: BTreeMap<MowerId, GeoPolygon>,
    ) -> Result<BTreeMap<MowerId, (Uuid, Arc<Fence>)>, WatchError> {
        let mut found = BTreeMap::new();
        let mut parsed = Vec::new();
        for (mower, snapshot) in snapshots {
            let Some(version) = snapshot.geofence_version else {
                continue;
            };
            if let Some(polygon) = polygons.remove(mower) {
                let fence = Arc::new(polygon.fence());
                self.fence_parses.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("swath_geofence_parses_total").increment(1);
                parsed.push((*mower, (version, Arc::clone(&fence))));
                found.insert(*mower, (version, fence));
                continue;
            }
            match known.remove(mower) {
                Some((cached, fence)) if cached == version => {
                    found.insert(*mower, (version, fence));
                }
                _ => {
                    return Err(WatchError::Corrupt(
                        format!(
                            "the store named geofence version {version} of mower {mower} \
                             without its polygon"
                        )
                        .into(),
                    ))
                }
            }
        }
        if !parsed.is_empty() {
            let mut cache = self.fences.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() + parsed.len() > FENCE_CACHE_MAX {
                cache.clear();
            }
            cache.extend(parsed);
        }
        Ok(found)
    }

    /// One offline sweep: every mower silent for the offline period (and not offline yet) is
    /// marked offline, with a `went_offline` event and an open offline alert, and every pending
    /// session whose merge gap has passed gets its `session_ended` (decision 203), in
    /// transactions of at most 500 mowers. Returns how many went offline.
    pub async fn sweep_offline(&self) -> Result<usize, WatchError> {
        let now = self.clock.now_micros();
        let silent_before = now - self.offline_after;
        let mut total = 0;
        loop {
            let (watches, unit) = self
                .store
                .begin_sweep(silent_before, now, SWEEP_BATCH)
                .await?;
            let found = watches.len();
            if found == 0 {
                return Ok(total);
            }
            let mut changes = WatchChanges::default();
            for mut watch in watches {
                sweep_watch(&mut watch, now, self.offline_after, &mut changes);
            }
            // A store that answered watches the rules leave as they are would be answered them
            // again: stop rather than loop.
            let changed = changes.watches.len();
            let events = changes.events.clone();
            unit.commit(changes).await?;
            let mut offline = 0;
            for event in &events {
                match event.kind() {
                    EventKind::WentOffline => {
                        offline += 1;
                        tracing::info!(mower_id = %event.mower_id, "A mower went offline.");
                    }
                    _ => tracing::info!(
                        mower_id = %event.mower_id,
                        "A mowing session ended: its merge gap passed without a newer state."
                    ),
                }
            }
            publish(self.bus.as_ref(), &events).await;
            total += offline;
            if found < SWEEP_BATCH || changed == 0 {
                return Ok(total);
            }
        }
    }

    /// A bus handler that feeds this use case (the watcher durable consumer), followed by the
    /// scheduler's busy check on the same batch.
    pub fn handler(
        self: &Arc<Self>,
        scheduler: Option<Arc<SchedulerStatus>>,
    ) -> Arc<WatcherHandler> {
        Arc::new(WatcherHandler {
            watcher: Arc::clone(self),
            scheduler,
        })
    }
}

/// A blade reset (`POST /v1/mowers/{id}/blade-reset`): W6 re-armed and the open `blade_due`
/// alert cleared by the store, then, when there was one, the clear published like the
/// watcher's clears without an event (decision 130), so that live streams see it.
pub async fn reset_blade(
    feed: &dyn NotificationFeed,
    bus: &dyn EventBus,
    mower: MowerId,
    account: AccountId,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), WatchError> {
    // To the microsecond, like every stored instant.
    let at = at.trunc_subsecs(6);
    if feed.reset_blade(mower, at).await? {
        let clear = ClearedAlert {
            mower_id: mower,
            account_id: account,
            kind: AlertKind::BladeDue,
            cleared_at: at,
            cause: ClearCause::BladeReset,
        };
        publish_told(bus, &[], &[(0, clear)]).await;
    }
    Ok(())
}

/// The watcher consumer's batch handler: parses each message, watches the batch, runs the busy
/// check on the states it accepted, and answers one settlement per message. A store failure is an
/// error: the bus redelivers the whole batch (the watcher then skips what it had committed).
///
/// Each batch is watched in a unit of work of its own, unlike the ingest's (decision 84): the
/// notification rules depend on arrival order, and a batch that waits for a grouped unit of work
/// stays unsettled longer, which the end-to-end cluster test showed to expose the order rule.
pub struct WatcherHandler {
    watcher: Arc<Watcher>,
    scheduler: Option<Arc<SchedulerStatus>>,
}

impl WatcherHandler {
    /// Watches `reports` in one unit of work and records the busy status of what it accepted.
    async fn watch(
        &self,
        reports: Vec<Result<StateReport, InvalidReport>>,
    ) -> Result<Vec<StateOutcome>, HandlerError> {
        let outcomes = self.watcher.on_states(&reports).await.map_err(|e| {
            tracing::error!(error = %chain(&e), states = reports.len(), "Could not watch a batch of states; it will be redelivered.");
            HandlerError(e.into())
        })?;
        if let Some(scheduler) = &self.scheduler {
            let states = reports.len();
            let accepted: Vec<StateReport> = reports
                .into_iter()
                .zip(&outcomes)
                .filter(|(_, o)| **o == StateOutcome::Stored)
                .filter_map(|(r, _)| r.ok())
                .collect();
            scheduler.record(&accepted).await.map_err(|e| {
                tracing::error!(error = %chain(&e), states, "Could not write the busy status of a batch; it will be redelivered.");
                HandlerError(e.into())
            })?;
        }
        Ok(outcomes)
    }
}

#[async_trait]
impl BatchHandler for WatcherHandler {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        let reports: Vec<_> = batch
            .iter()
            .map(|m| consume::parse_message(m, self.watcher.clock.now()))
            .collect();
        let outcomes = self.watch(reports).await?;
        Ok(outcomes.into_iter().map(consume::settle).collect())
    }
}
