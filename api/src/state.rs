//! What every handler can reach: the use cases, built once by the wiring (`swath::wiring::wire`)
//! over the ports it chose, and the HTTP layer's own settings. No handler reaches a port or
//! decides who sees what: the rules live in the use cases (`swath_application`), once
//! (decisions 157, 197).

use std::sync::Arc;
use swath_application::live_streams::LiveStreams;
use swath_application::ports::Clock;
use swath_application::{
    Access, CreationLimits, CreationRate, Exports, FleetDirectory, Imports, MowerReads,
    MowerSettings, Projections, Readiness, Submissions, TokenAdmin, Webhooks,
};

/// The application state shared by every request. Cheap to clone: only `Arc`s and use cases
/// (themselves `Arc`s).
///
/// Handlers see use cases, never ports or adapters, so the same router serves the memory
/// adapters, PostgreSQL and NATS alike. Beside the use cases it holds the HTTP layer's own
/// settings (tiles, limits, the sessions' key) and the clock (see [`AppState::clock`]).
#[derive(Clone)]
pub struct AppState {
    /// Tokens to principals, for the extractors (`crate::auth`) and the live pages' sign-in;
    /// no route asks it (decision 197).
    pub(crate) access: Access,
    /// What a principal reads of a mower: as every read shows it (latest state, site,
    /// availability), its telemetry and child data of the principal's account only.
    pub mower_reads: MowerReads,
    /// Fleet-wide exports (`/v1/exports/…`): the visible mowers' rows, page by page.
    pub exports: Exports,
    /// What is set on a mower: geofence, zones, assignments, blade resets.
    pub mower_settings: MowerSettings,
    /// Accounts, sites and mowers as a principal manages them (a mower's deletion too).
    pub fleet: FleetDirectory,
    /// API tokens as an admin lists, issues and revokes them.
    pub token_admin: TokenAdmin,
    /// State reports received over HTTP: the tenant filter, ingestion and their publication.
    pub submissions: Submissions,
    /// Imports over HTTP (`POST /v1/imports`) and this process's records of them.
    pub imports: Imports,
    /// Webhook endpoints and their deliveries (`/v1/webhooks`); `None`: those routes answer
    /// `503`.
    pub webhooks: Option<Webhooks>,
    /// W8's mowing sessions (`/v1/sessions`, `/v1/mowers/{id}/sessions`); `None`: those routes
    /// answer `503`.
    pub mowing_sessions: Option<swath_application::Sessions>,
    /// The live projections (`/v1/live/fleet`, `/wall`, `/health` and the `/live/…` pages);
    /// `None`: those routes answer `503`.
    pub live_views: Option<Projections>,
    /// Whether the store and the bus answer and ingestion progresses (`/readyz`, `/metrics`).
    pub readiness: Readiness,
    /// The live streams: who may open one, how many, what each is sent and when it ends, over
    /// the process's numbered feed (decisions 101, 140, 181).
    pub live_streams: LiveStreams,
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
    /// How fast an account creates accounts and tokens, shared by [`AppState::fleet`] and
    /// [`AppState::token_admin`]. Set with [`AppState::with_creation_limits`].
    pub creation_rate: CreationRate,
}

/// The default of `SWATH_MAP_TILE_URL`: OpenStreetMap's standard tiles.
pub const DEFAULT_MAP_TILE_URL: &str = "https://tile.openstreetmap.org/{z}/{x}/{y}.png";

/// The use cases an [`AppState`] serves, as the wiring built them.
pub struct UseCases {
    pub access: Access,
    pub mower_reads: MowerReads,
    pub exports: Exports,
    pub mower_settings: MowerSettings,
    pub fleet: FleetDirectory,
    pub token_admin: TokenAdmin,
    pub submissions: Submissions,
    pub imports: Imports,
    pub webhooks: Option<Webhooks>,
    pub mowing_sessions: Option<swath_application::Sessions>,
    pub live_views: Option<Projections>,
    pub readiness: Readiness,
    pub live_streams: LiveStreams,
    /// The rate shared by `fleet` and `token_admin`.
    pub creation_rate: CreationRate,
    pub clock: Arc<dyn Clock>,
}

impl AppState {
    /// The state over `use_cases`, with the HTTP layer's default settings (the `with_…`
    /// methods change them).
    pub fn new(use_cases: UseCases) -> Self {
        let UseCases {
            access,
            mower_reads,
            exports,
            mower_settings,
            fleet,
            token_admin,
            submissions,
            imports,
            webhooks,
            mowing_sessions,
            live_views,
            readiness,
            live_streams,
            creation_rate,
            clock,
        } = use_cases;
        Self {
            access,
            mower_reads,
            exports,
            mower_settings,
            fleet,
            token_admin,
            submissions,
            imports,
            webhooks,
            mowing_sessions,
            live_views,
            readiness,
            live_streams,
            clock,
            map_tile_url: Arc::from(DEFAULT_MAP_TILE_URL),
            limits: crate::limits::RequestLimits::default(),
            sessions: crate::live_pages::session::SessionKey::random(),
            creation_rate,
        }
    }

    /// Ends the live streams when `shutdown` becomes `true` (the start of `swath serve`'s
    /// shutdown), so that clients reconnect elsewhere at once instead of being cut off when the
    /// HTTP grace period ends.
    pub fn with_shutdown(mut self, shutdown: tokio::sync::watch::Receiver<bool>) -> Self {
        self.live_streams = self.live_streams.with_shutdown(shutdown);
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
        self.live_streams = self.live_streams.with_slots(self.limits.streams.clone());
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
}
