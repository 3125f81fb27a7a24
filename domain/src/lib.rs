//! Swath's domain: the values a mower reports, the rows Swath keeps, and the write rules that turn
//! one into the other. Pure: no async, no I/O, no clock (callers pass the time in).
//!
//! # Layout
//! - [`ids`]: typed identifiers (UUID v7 where Swath creates them).
//! - [`directory`]: the directory's entities (accounts, sites, mowers) and their list order.
//! - [`principal`]: who is asking ([`Principal`]) and what a token may do ([`Scope`]).
//! - [`assignment`]: operators assigned to mowers, and how the one on duty is ranked.
//! - [`report`]: the state report a gateway publishes, its validation and the Home Assistant
//!   `lawn_mower` activity mapping (docs/rules.md §2).
//! - [`rows`]: the rows of the telemetry store: history, positions, latest, health and day totals.
//! - [`exported`]: every row a store keeps of some mowers ([`TelemetryRows`]), sessions included,
//!   as tests and the end-to-end verifier compare them.
//! - [`rules`]: write rules W0–W6 (docs/rules.md §3) applied to a batch of states over rows held in memory.
//! - [`sessions`]: W8 mowing sessions, a pure fold over a mower's states.
//! - [`valid`]: the values of a request checked once (display text, blade threshold, time zone).
//! - [`text`]: what every store can keep (no NUL in strings, instants in a four-digit-year
//!   range), checked at the door.
//! - [`events`]: events raised by the write rules, published after the commit.
//! - [`live`]: the live stream's "changes only" rule.
//! - [`watch`]: notification rules (events, alerts, geofences), virtual zones (W7) and the
//!   scheduler's busy check.
//! - [`webhook`]: webhook endpoints, their secrets and which messages each gets.
//!
//! The ports that store these values (traits, their queries and errors) are in
//! `swath_application::ports`; the entities themselves live here.

pub mod assignment;
pub mod directory;
pub mod events;
pub mod exported;
pub mod ids;
pub mod live;
pub mod principal;
pub mod report;
pub mod rows;
pub mod rules;
pub mod sessions;
pub mod text;
pub mod valid;
pub mod watch;
pub mod webhook;

pub use assignment::{list_order, Assignment, Priority, MAX_OPERATOR_CHARS};
pub use directory::{Account, Mower, OrderKey, Site};
pub use events::IngestEvent;
pub use exported::TelemetryRows;
pub use ids::{AccountId, MowerId, SiteId};
pub use principal::{Principal, Scope};
pub use report::{Activity, DropReason, InvalidReport, LawnMowerActivity, Position, StateReport};
pub use rows::{
    DayTotals, HealthTotals, HistoryRow, LatestKey, LatestRow, PositionRow, StoredState,
};
pub use rules::{
    apply_states, late_states, BatchChanges, DirectoryEntry, MowerSnapshot, Neighbourhood,
    StateCounts, StateOutcome,
};
