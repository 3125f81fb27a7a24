//! What every handler can reach: the ports, chosen once by `main` (or a test), behind `Arc<dyn _>`.

use std::sync::Arc;
use swath_application::live_feed::LiveFeed;
use swath_application::ports::{Clock, DirectoryAdmin, EventBus, TelemetryStore, TokenStore};
use swath_application::{Access, Imports, Ingest, MowerData, Submissions, Webhooks};

/// The revocations of this process: see [`swath_application::Revocations`].
pub use swath_application::Revocations;

/// The notification side's ports: see [`swath_application::ports::NotificationPorts`].
pub use swath_application::ports::NotificationPorts;

/// The application state shared by every request. Cheap to clone: only `Arc`s.
///
/// Handlers see ports, never adapters, so the same router serves the memory adapters, PostgreSQL
/// and NATS alike.
#[derive(Clone)]
pub struct AppState {
    /// Accounts, sites and mowers.
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
    /// `None`: those routes answer `503`. Set with [`AppState::with_notifications`].
    pub notifications: Option<NotificationPorts>,
    /// The live projections (`/v1/live/fleet`, `/wall`, `/health` and the `/live/…` pages) and the
    /// operator assignments; `None`: those routes answer `503`. Set with
    /// [`AppState::with_projections`].
    pub projections: Option<LiveViews>,
    /// Tells this process's principal cache and open streams that a token was revoked, so that
    /// it is refused at once instead of at their next periodic check. The same as
    /// `access.revocations()`.
    pub revocations: Revocations,
    /// Who may see what, and tokens to principals: every route asks it (decision 76).
    pub access: Access,
    /// A mower's own data, of the principal's account only, and its deletion.
    pub mower_data: MowerData,
    /// State reports received over HTTP: the tenant filter, ingestion and their publication.
    pub submissions: Submissions,
    /// Imports over HTTP (`POST /v1/imports`) and this process's records of them.
    pub imports: Imports,
    /// Webhook endpoints and their deliveries (`/v1/webhooks`); `None`: those routes answer
    /// `503`. Set with [`AppState::with_webhooks`].
    pub webhooks: Option<Webhooks>,
    /// The numbered feed the live stream sends and resumes from, one per process, started by
    /// the first stream (decision 101).
    pub live_feed: Arc<tokio::sync::OnceCell<LiveFeed>>,
    /// The map tiles behind `/live/map` (`SWATH_MAP_TILE_URL`): a URL template with `{z}`, `{x}`
    /// and `{y}`; empty: no tiles, the map draws on a plain background. Set with
    /// [`AppState::with_map_tile_url`].
    pub map_tile_url: Arc<str>,
    /// Live streams per token and in all, and the request bodies' idle timeout (decision 140).
    /// Set with [`AppState::with_http_limits`].
    pub limits: crate::limits::RequestLimits,
    /// The key the live pages' sessions are signed with (`SWATH_SESSION_SECRET`; random per
    /// process unless set with [`AppState::with_session_secret`]).
    pub sessions: crate::pages::session::SessionKey,
}

/// The default of `SWATH_MAP_TILE_URL`: OpenStreetMap's standard tiles.
pub const DEFAULT_MAP_TILE_URL: &str = "https://tile.openstreetmap.org/{z}/{x}/{y}.png";

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
        let revocations = Revocations::default();
        let access = Access::new(
            directory.clone(),
            tokens.clone(),
            clock.clone(),
            revocations.clone(),
        );
        let submissions = Submissions::new(access.clone(), ingest.clone(), bus.clone());
        let imports = Imports::new(access.clone(), telemetry.clone(), clock.clone());
        let mower_data = MowerData::new(access.clone(), directory.clone(), telemetry.clone(), None);
        Self {
            directory,
            tokens,
            telemetry,
            bus,
            clock,
            ingest,
            notifications: None,
            projections: None,
            revocations,
            access,
            mower_data,
            submissions,
            imports,
            webhooks: None,
            live_feed: Arc::default(),
            map_tile_url: Arc::from(DEFAULT_MAP_TILE_URL),
            limits: crate::limits::RequestLimits::default(),
            sessions: crate::pages::session::SessionKey::random(),
        }
    }

    /// Signs the live pages' sessions with `secret` (`SWATH_SESSION_SECRET`), so that every
    /// replica given the same secret accepts them and they outlive a restart.
    pub fn with_session_secret(mut self, secret: &[u8]) -> Self {
        self.sessions = crate::pages::session::SessionKey::from_secret(secret);
        self
    }

    /// The limits of `SWATH_STREAMS_PER_TOKEN`, `SWATH_HTTP_MAX_CONNECTIONS` (the streams' share)
    /// and `SWATH_HTTP_BODY_IDLE_TIMEOUT_SECONDS`; the defaults otherwise.
    pub fn with_http_limits(mut self, limits: &crate::server::HttpLimits) -> Self {
        self.limits = crate::limits::RequestLimits::new(limits);
        self
    }

    /// Another tile URL template for `/live/map` (empty: no tiles).
    pub fn with_map_tile_url(mut self, url: &str) -> Self {
        self.map_tile_url = Arc::from(url.trim());
        self
    }

    /// Another bound for the principal and mower caches (zero: every request asks the stores).
    pub fn with_cache_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.access = self.access.with_cache_ttl(ttl);
        self.submissions =
            Submissions::new(self.access.clone(), self.ingest.clone(), self.bus.clone());
        self.imports = self.imports.with_access(self.access.clone());
        self.mower_data = self.mower_data();
        self.webhooks = self
            .webhooks
            .take()
            .map(|w| w.with_access(self.access.clone()));
        self
    }

    /// Adds the webhooks use case over `store`; `allow_http`: plain `http` URLs are accepted
    /// (`SWATH_WEBHOOK_ALLOW_PRIVATE`).
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

    /// The mower data use case over this state's access, ports and notification ports.
    fn mower_data(&self) -> MowerData {
        MowerData::new(
            self.access.clone(),
            self.directory.clone(),
            self.telemetry.clone(),
            self.notifications.clone(),
        )
    }

    /// Adds the notification side's ports.
    pub fn with_notifications(mut self, ports: NotificationPorts) -> Self {
        self.notifications = Some(ports);
        self.mower_data = self.mower_data();
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
