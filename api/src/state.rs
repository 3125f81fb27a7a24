//! What every handler can reach: the ports, chosen once by `main` (or a test), behind `Arc<dyn _>`.

use std::sync::Arc;
use swath_application::ports::{
    Clock, Directory, EventBus, TelemetryStore, TokenStore, WatchStore,
};
use swath_application::Ingest;

/// The application state shared by every request. Cheap to clone: only `Arc`s.
///
/// Handlers see ports, never adapters, so the same router serves the memory adapters, PostgreSQL
/// and NATS alike. The bus, the clock and the ingest use case are not read by the routes of this
/// first cut; they are here because the routes that come next (`POST /v1/states`, `/readyz`, the
/// live stream) need them, and wiring them once now keeps `main` and the tests stable.
#[derive(Clone)]
pub struct AppState {
    /// Accounts, sites and mowers: visibility is decided here.
    pub directory: Arc<dyn Directory>,
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
}

impl AppState {
    /// Bundles the ports. The memory store implements the first three, so `main` passes the same
    /// store three times; other adapters may split them.
    pub fn new(
        directory: Arc<dyn Directory>,
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
        }
    }

    /// Adds the notification store.
    pub fn with_watch(mut self, watch: Arc<dyn WatchStore>) -> Self {
        self.watch = Some(watch);
        self
    }
}
