//! What every handler can reach: the use cases, built once by `main` (or a test) over the ports
//! it chose. No handler reaches a port: the rules of who sees what, and the account filter of
//! every per-mower read, live in the use cases (`swath_application`), once.

use std::sync::Arc;
use swath_application::live_feed::SharedFeed;
use swath_application::ports::{
    Assignments, Clock, DirectoryAdmin, EventBus, TelemetryStore, TokenStore,
};
use swath_application::{
    Access, CreationLimits, CreationRate, Exports, FleetDirectory, Imports, Ingest, MowerData,
    MowerSettings, Projections, Readiness, Submissions, TokenAdmin, Webhooks,
};

/// The revocations of this process: see [`swath_application::Revocations`].
pub use swath_application::Revocations;

/// The notification side's ports: see [`swath_application::ports::NotificationPorts`].
pub use swath_application::ports::NotificationPorts;

/// The application state shared by every request. Cheap to clone: only `Arc`s and use cases
/// (themselves `Arc`s).
///
/// Handlers see use cases, never ports or adapters, so the same router serves the memory
/// adapters, PostgreSQL and NATS alike. Beside the use cases it holds the HTTP layer's own
/// settings (tiles, limits, the sessions' key) and the clock (see [`AppState::clock`]).
#[derive(Clone)]
pub struct AppState {
    /// Who may see what, and tokens to principals: every route asks it (decision 76).
    pub access: Access,
    /// The read side of a mower: as every read shows it (latest state, site, availability), its
    /// telemetry and child data of the principal's account only, and its deletion.
    pub mower_data: MowerData,
    /// Fleet-wide exports (`/v1/exports/…`): the visible mowers' rows, page by page.
    pub exports: Exports,
    /// What is set on a mower: geofence, zones, assignments, blade resets.
    pub mower_settings: MowerSettings,
    /// Accounts, sites and mowers as a principal manages them.
    pub fleet: FleetDirectory,
    /// API tokens as an admin lists, issues and revokes them.
    pub token_admin: TokenAdmin,
    /// State reports received over HTTP: the tenant filter, ingestion and their publication.
    pub submissions: Submissions,
    /// Imports over HTTP (`POST /v1/imports`) and this process's records of them.
    pub imports: Imports,
    /// Webhook endpoints and their deliveries (`/v1/webhooks`); `None`: those routes answer
    /// `503`. Set with [`AppState::with_webhooks`].
    pub webhooks: Option<Webhooks>,
    /// W8's mowing sessions (`/v1/sessions`, `/v1/mowers/{id}/sessions`); `None`: those routes
    /// answer `503`. Set with [`AppState::with_mowing_sessions`].
    pub mowing_sessions: Option<swath_application::Sessions>,
    /// The live projections (`/v1/live/fleet`, `/wall`, `/health` and the `/live/…` pages);
    /// `None`: those routes answer `503`. Set with [`AppState::with_projections`].
    pub live_views: Option<Projections>,
    /// Whether the store and the bus answer and ingestion progresses (`/readyz`, `/metrics`).
    pub readiness: Readiness,
    /// The numbered feed the live stream sends and resumes from, one per process, started by
    /// the first stream (decision 101).
    pub live_feed: SharedFeed,
    /// The time of the HTTP layer's own answers: when a state report was received, a live
    /// document generated, a page's session issued. Not a use case: these instants belong to the
    /// request, and a test sets them.
    pub clock: Arc<dyn Clock>,
    /// The map tiles behind `/live/map` (`SWATH_MAP_TILE_URL`): a URL template with `{z}`, `{x}`
    /// and `{y}`; empty: no tiles, the map draws on a plain background. Set with
    /// [`AppState::with_map_tile_url`].
    pub map_tile_url: Arc<str>,
    /// Live streams per token and in all, and the request bodies' timeouts (decisions 140, 181).
    /// Set with [`AppState::with_http_limits`].
    pub limits: crate::limits::RequestLimits,
    /// The key the live pages' sessions are signed with (`SWATH_SESSION_SECRET`; random per
    /// process unless set with [`AppState::with_session_secret`]).
    pub sessions: crate::live_pages::session::SessionKey,
    /// Becomes `true` when the process begins to shut down: each live stream then sends its
    /// last event `end` (`shutdown`) and closes, before the HTTP grace period runs out. Set with
    /// [`AppState::with_shutdown`]; never `true` otherwise.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// How fast an account creates accounts and tokens, shared by [`AppState::fleet`] and
    /// [`AppState::token_admin`]. Set with [`AppState::with_creation_limits`].
    pub creation_rate: CreationRate,
}

/// The default of `SWATH_MAP_TILE_URL`: OpenStreetMap's standard tiles.
pub const DEFAULT_MAP_TILE_URL: &str = "https://tile.openstreetmap.org/{z}/{x}/{y}.png";

impl AppState {
    /// Builds the use cases over the ports. The memory store implements the first three, so
    /// `main` passes the same store three times; other adapters may split them.
    pub fn new(
        directory: Arc<dyn DirectoryAdmin>,
        tokens: Arc<dyn TokenStore>,
        telemetry: Arc<dyn TelemetryStore>,
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
        ingest: Arc<Ingest>,
    ) -> Self {
        let revocations = Revocations::default();
        let rate = CreationRate::new(CreationLimits::default(), clock.clone());
        let access = Access::new(
            directory.clone(),
            tokens.clone(),
            clock.clone(),
            revocations.clone(),
        );
        Self {
            mower_data: MowerData::new(access.clone(), directory.clone(), telemetry.clone(), None),
            exports: Exports::new(access.clone(), telemetry.clone()),
            mower_settings: MowerSettings::new(access.clone(), bus.clone(), clock.clone()),
            fleet: FleetDirectory::new(access.clone(), directory, rate.clone()),
            token_admin: TokenAdmin::new(tokens, revocations, rate.clone()),
            submissions: Submissions::new(access.clone(), ingest.clone(), bus.clone()),
            imports: Imports::new(access.clone(), telemetry.clone(), clock.clone()),
            webhooks: None,
            mowing_sessions: None,
            live_views: None,
            readiness: Readiness::new(telemetry, bus.clone(), ingest),
            live_feed: SharedFeed::new(bus, clock.clone()),
            access,
            clock,
            map_tile_url: Arc::from(DEFAULT_MAP_TILE_URL),
            limits: crate::limits::RequestLimits::default(),
            sessions: crate::live_pages::session::SessionKey::random(),
            // Its sender dropped at once: a state without `with_shutdown` never shuts streams.
            shutdown: tokio::sync::watch::channel(false).1,
            creation_rate: rate,
        }
    }

    /// Ends the live streams when `shutdown` becomes `true` (the start of `swath serve`'s
    /// shutdown), so that clients reconnect elsewhere at once instead of being cut off when the
    /// HTTP grace period ends.
    pub fn with_shutdown(mut self, shutdown: tokio::sync::watch::Receiver<bool>) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// How many accounts and tokens an account may create per hour (`SWATH_ACCOUNTS_PER_HOUR`,
    /// `SWATH_TOKENS_PER_HOUR`, decision 181); the defaults otherwise.
    pub fn with_creation_limits(mut self, limits: CreationLimits) -> Self {
        let rate = self.creation_rate.with_limits(limits);
        self.fleet = self.fleet.with_rate(rate.clone());
        self.token_admin = self.token_admin.with_rate(rate.clone());
        self.creation_rate = rate;
        self
    }

    /// Signs the live pages' sessions with `secret` (`SWATH_SESSION_SECRET`), so that every
    /// replica given the same secret accepts them and they outlive a restart.
    pub fn with_session_secret(mut self, secret: &[u8]) -> Self {
        self.sessions = crate::live_pages::session::SessionKey::from_secret(secret);
        self
    }

    /// The limits of `SWATH_STREAMS_PER_TOKEN`, `SWATH_HTTP_MAX_CONNECTIONS` (the streams' share)
    /// and the request bodies' timeouts (`SWATH_HTTP_BODY_IDLE_TIMEOUT_SECONDS`,
    /// `SWATH_HTTP_BODY_TIMEOUT_SECONDS`, `SWATH_IMPORT_BODY_TIMEOUT_SECONDS`); the defaults
    /// otherwise.
    pub fn with_http_limits(mut self, limits: &crate::server::HttpLimits) -> Self {
        self.limits = crate::limits::RequestLimits::new(limits);
        self
    }

    /// Exports read `rows` rows per page (tests: many pages of few rows).
    pub fn with_export_page_rows(mut self, rows: usize) -> Self {
        self.exports = self.exports.with_page_rows(rows);
        self
    }

    /// Another tile URL template for `/live/map` (empty: no tiles).
    pub fn with_map_tile_url(mut self, url: &str) -> Self {
        self.map_tile_url = Arc::from(url.trim());
        self
    }

    /// Another bound for the principal and mower caches (zero: every request asks the stores).
    pub fn with_cache_ttl(mut self, ttl: std::time::Duration) -> Self {
        let access = self.access.with_cache_ttl(ttl);
        self.submissions = self.submissions.with_access(access.clone());
        self.imports = self.imports.with_access(access.clone());
        self.mower_data = self.mower_data.with_access(access.clone());
        self.exports = self.exports.with_access(access.clone());
        self.mower_settings = self.mower_settings.with_access(access.clone());
        self.fleet = self.fleet.with_access(access.clone());
        self.webhooks = self.webhooks.take().map(|w| w.with_access(access.clone()));
        self.mowing_sessions = self
            .mowing_sessions
            .take()
            .map(|s| s.with_access(access.clone()));
        self.access = access;
        self
    }

    /// Adds the webhooks use case over `store`; `allow_http`: plain `http` URLs are accepted
    /// (`SWATH_WEBHOOK_ALLOW_PRIVATE`).
    /// Serves W8's sessions from `store`.
    pub fn with_mowing_sessions(
        mut self,
        store: Arc<dyn swath_application::ports::SessionStore>,
    ) -> Self {
        self.exports = self.exports.with_sessions(Arc::clone(&store));
        self.mowing_sessions = Some(swath_application::Sessions::new(self.access.clone(), store));
        self
    }

    pub fn with_webhooks(
        mut self,
        store: Arc<dyn swath_application::ports::WebhookStore>,
        allow_http: bool,
    ) -> Self {
        self.webhooks = Some(Webhooks::new(
            store,
            self.access.clone(),
            self.clock.clone(),
            allow_http,
        ));
        self
    }

    /// Other limits for the webhooks use case (`SWATH_WEBHOOKS_PER_ACCOUNT`,
    /// `SWATH_WEBHOOK_TESTS_PER_MINUTE`); nothing without one.
    pub fn with_webhook_limits(mut self, limits: swath_application::WebhookLimits) -> Self {
        self.webhooks = self.webhooks.take().map(|w| w.with_limits(limits));
        self
    }

    /// Adds the notification side's ports to the use cases that read and set a mower's
    /// notification data.
    pub fn with_notifications(mut self, ports: NotificationPorts) -> Self {
        self.mower_data = self.mower_data.with_notifications(ports.clone());
        self.mower_settings = self.mower_settings.with_notifications(Some(ports));
        self
    }

    /// Adds the live projections and the operator assignments.
    pub fn with_projections(
        mut self,
        projections: Projections,
        assignments: Arc<dyn Assignments>,
    ) -> Self {
        self.live_views = Some(projections);
        self.mower_settings = self.mower_settings.with_assignments(Some(assignments));
        self
    }
}
