//! Swath's application layer: the ports the use cases need (traits, each with its contract) and
//! the use cases themselves. Adapters implement the ports; the `swath` binary's `wiring` chooses them once.
//! The simulated demo fleet, which drives the ports like a gateway, is an adapter of its own
//! (`swath-simulator`, docs/decisions.md 85).
//!
//! # Layout
//! - [`visibility`]: who may see what (accounts, sites, mowers, feeds, state reports), and the
//!   short-lived cache of token principals.
//! - [`availability`]: whether a mower is online, the live views' rule, for every mower read.
//! - [`ports`]: [`ports::Clock`], [`ports::Directory`], [`ports::TokenStore`],
//!   [`ports::TelemetryStore`] (a batch unit of work plus the reads) and [`ports::EventBus`].
//! - [`ingest`]: `Ingest::record_states`, the batched ingestion of state reports (docs/rules.md §3), and
//!   the bus handler that feeds it.
//! - [`group_commit`]: the batches several partitions hand over at once, written in one unit of
//!   work (the ingest consumer's handler).
//! - [`latest_cache`]: the telemetry store with a mower's latest row kept for a second, so that
//!   polls of a mower's state seldom reach the store; forgotten on every commit of this process.
//! - [`live_feed`]: the live stream's numbered feed of states and events, the window it resumes
//!   from, and each stream's visibility and filters.
//! - [`mower_reads`]: what a principal reads of a mower: as every read shows it (latest state,
//!   site, availability), its own data (latest state, health, telemetry, zones, geofence, busy
//!   status, events, alerts), filtered by the principal's account. Reads only.
//! - [`mower_settings`]: what a principal sets on a mower (geofence, zones, assignments, blade
//!   reset).
//! - [`fleet_directory`]: accounts, sites and mowers as a principal manages them (pages,
//!   creation, changes, deletions; a mower's deletion takes everything stored of it along).
//! - [`token_admin`]: API tokens as an admin principal lists, issues and revokes them.
//! - [`read_routing`]: the read-only API on a second store (a standby), falling back to the
//!   primary when it does not answer.
//! - [`readiness`]: whether the store and the bus answer and ingestion progresses (`/readyz`).
//! - [`submissions`]: state reports received over HTTP: the tenant filter, ingestion, and their
//!   publication on the bus.
//! - [`exports`]: fleet-wide CSV exports' rows (history, day totals), read page by page for a
//!   principal, its token checked before each page.
//! - [`import_lines`]: NDJSON history import, 200 states per transaction through the same path,
//!   for an operator (`swath import`) or a token's principal.
//! - [`import_jobs`]: the imports made over the API (`Imports`), each run for its principal, and
//!   the records their importers poll.
//! - [`subjects`]: the bus subjects Swath publishes and consumes.
//! - [`consume`]: what both consumers of the telemetry stream do with a message (parse it, settle
//!   its outcome); [`publish`]: what a commit tells the bus after it (events, alerts cleared).
//! - [`watcher`]: the notification rules' consumer (events, alerts, geofences) and the offline
//!   sweep (docs/rules.md §4).
//! - [`retention`]: retention and downsampling of history and positions, by steps under a
//!   store-wide lock, on a schedule or from `swath maintenance retention`.
//! - [`scheduler`]: the scheduler's busy check, run on the watcher's batches.
//! - [`projections`]: the bounded live projections (fleet dashboard, site wall, health wall) and
//!   their ceilings (docs/rules.md §6).
//! - [`ttl_cache`]: answers of a store kept for a bound and forgotten on a change (the access
//!   caches, the latest states).
//! - [`sentinel`]: the sentinel row that tells every bounded read (the projections' levels, the
//!   HTTP lists' pages) whether it was cut.
//! - [`webhooks`]: webhook endpoints (the API's rules), their delivery and its signatures.

pub mod availability;
pub mod bus_rules;
pub mod consume;
pub mod creation_rate;
pub mod exports;
pub mod fleet_directory;
pub mod group_commit;
pub mod import_jobs;
pub mod import_lines;
pub mod ingest;
pub mod latest_cache;
pub mod live_feed;
pub mod live_streams;
pub mod mower_reads;
pub mod mower_settings;
pub mod ports;
pub mod projections;
pub mod publish;
pub mod publish_only;
pub mod rate_limit;
pub mod read_routing;
pub mod readiness;
pub mod retention;
pub mod scheduler;
pub mod sentinel;
pub mod sessions;
pub mod subjects;
pub mod submissions;
pub mod ticks;
pub mod token_admin;
pub mod ttl_cache;
pub mod visibility;
pub mod watcher;
pub mod webhooks;

pub use consume::parse_message;
pub use creation_rate::{Creation, CreationLimits, CreationRate, RateLimited};
pub use exports::{
    DaysExport, Export, ExportError, ExportSource, Exports, HistoryExport, SessionsExport,
    SessionsSource,
};
pub use fleet_directory::{
    CreatedMower, FleetDirectory, FleetError, MowerChanges, MowerRequest, SiteChanges, SiteRequest,
};
pub use import_jobs::{ImportFailure, ImportRecord, ImportStatus, Imports};
pub use ingest::{Ingest, IngestError, IngestHandler};
pub use mower_reads::{MowerDays, MowerReads, MowerReadsError, MowerView, MowerZones};
pub use mower_settings::{AssignmentSpec, MowerSettings, MowerSettingsError};
/// The types the use cases take and answer that the ports define too (queries, ids, a token's
/// hash): named from here by the API, whose routes name no port (decision 197).
pub use ports::{
    hash_token, AlertCursor, AlertQuery, EventQuery, ProjectionError, TimeWindow, TokenId,
    TokenInfo, MAX_ASSIGNMENTS_PER_MOWER,
};
pub use projections::Projections;
pub use readiness::{Readiness, ReadinessReport};
pub use retention::{Retention, RetentionOutcome, RetentionPolicy, RetentionSummary};
pub use scheduler::SchedulerStatus;
pub use sessions::{FleetSessions, SessionRange, Sessions, SessionsError};
pub use submissions::{SubmissionError, Submissions, Submitted};
pub use token_admin::{IssueError, IssuedToken, TokenAdmin, TokenRequest};
pub use visibility::{Access, AccessError, Hidden, Revocations};
pub use watcher::{Watcher, WatcherHandler};
pub use webhooks::{EndpointPatch, EndpointSpec, WebhookLimits, Webhooks, WebhooksError};
