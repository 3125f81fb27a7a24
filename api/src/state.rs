//! What every handler can reach: the ports, chosen once by `main` (or a test), behind `Arc<dyn _>`.

use std::sync::Arc;
use swath_application::ports::{
    Clock, DirectoryAdmin, EventBus, TelemetryStore, TokenStore, WatchStore,
};
use swath_application::Ingest;

/// The application state shared by every request. Cheap to clone: only `Arc`s.
///
/// Handlers see ports, never adapters, so the same router serves the memory adapters, PostgreSQL
/// and NATS alike.
#[derive(Clone)]
pub struct AppState {
    /// Accounts, sites and mowers: visibility is decided here.
    pub directory: Arc<dyn DirectoryAdmin>,
    /// Bearer tokens (hashed) to principals.
    pub tokens: Arc<dyn TokenStore>,
    /// Latest states and health totals.
    pub telemetry: Arc<dyn TelemetryStore>,
    /// The event bus.
    pub bus: Arc<dyn EventBus>,
    /// The time, so that tests can set it.
    pub clock: Arc<dyn Clock>,
    /// The ingest use case, for ingestion over HTTP.
    pub ingest: Arc<Ingest>,
    /// Geofences, zones, events, alerts and busy statuses (`/v1/events`, `/v1/alerts`, …);
    /// `None`: those routes answer `503`. Set with [`AppState::with_watch`].
    pub watch: Option<Arc<dyn WatchStore>>,
    /// The live projections (`/v1/live/fleet`, `/wall`, `/health` and the `/live/…` pages) and the
    /// operator assignments; `None`: those routes answer `503`. Set with
    /// [`AppState::with_projections`].
    pub projections: Option<LiveViews>,
    /// Tells this process's open streams that a token was revoked, so that they check their
    /// principal at once instead of at their next periodic check.
    pub revocations: Revocations,
}

/// A generation counter of token revocations in this process: `DELETE /v1/tokens/{id}` bumps it,
/// every open live stream watches it and checks its own token again when it changes. Other
/// replicas' streams find out at their periodic check (every 30 s).
#[derive(Clone)]
pub struct Revocations(Arc<tokio::sync::watch::Sender<u64>>);

impl Default for Revocations {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

impl Revocations {
    /// A token was revoked.
    pub fn notify(&self) {
        self.0
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// Changes whenever a token is revoked from now on.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// The live projections' use case and the assignments it ranks.
#[derive(Clone)]
pub struct LiveViews {
    pub projections: swath_application::Projections,
    pub assignments: Arc<dyn swath_application::ports::Assignments>,
}

impl AppState {
    /// Bundles the ports. The memory store implements the first three, so `main` passes the same
    /// store three times; other adapters may split them.
    pub fn new(
        directory: Arc<dyn DirectoryAdmin>,
        tokens: Arc<dyn TokenStore>,
        telemetry: Arc<dyn TelemetryStore>,
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
        ingest: Arc<Ingest>,
    ) -> Self {
        Self {
            directory,
            tokens,
            telemetry,
            bus,
            clock,
            ingest,
            watch: None,
            projections: None,
            revocations: Revocations::default(),
        }
    }

    /// Adds the notification store.
    pub fn with_watch(mut self, watch: Arc<dyn WatchStore>) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Adds the live projections and the operator assignments.
    pub fn with_projections(
        mut self,
        projections: swath_application::Projections,
        assignments: Arc<dyn swath_application::ports::Assignments>,
    ) -> Self {
        self.projections = Some(LiveViews {
            projections,
            assignments,
        });
        self
    }
}
