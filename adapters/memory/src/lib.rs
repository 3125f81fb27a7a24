//! Swath's in-memory adapters: the store (directory, tokens, telemetry, the notification side,
//! retention, projections, webhooks) and the event bus. They are the product's embedded default
//! (`cargo run` serves everything on them), held to the same contract suites as PostgreSQL and
//! NATS.
//!
//! # Layout
//! One module per port, named as in `swath-postgres`, so that a reader who knows one adapter
//! knows where the other keeps the same thing (decision 162):
//! - [`store`]: [`MemoryStore`], the state every port below is implemented on: its settings, its
//!   locks and the rows of each port (`telemetry_rows`, `watch_rows`); it imports none of the
//!   port modules. PostgreSQL's counterpart is `PostgresStore` (the pool) and its tables.
//! - `directory`: `Directory` and `DirectoryAdmin`.
//! - `tokens`: `TokenStore`.
//! - `telemetry`: `TelemetryStore`, the batch unit of work and the reads; `batch` the open batch.
//! - [`watch`]: `WatchStore`, `ZoneStore`, `GeofenceStore` and `NotificationFeed`: watch rows,
//!   geofences, zones, events, alerts.
//! - `retention`: `RetentionStore`: the same limits as PostgreSQL.
//! - [`projections`]: [`MemoryProjections`], `ProjectionStore` and `Assignments` over a
//!   [`MemoryStore`].
//! - [`webhooks`]: [`MemoryWebhooks`], webhook endpoints and their queues of deliveries.
//! - `bus`: `MemoryBus`, implementing `EventBus` with JetStream's batch semantics (NATS's is in
//!   `swath-nats`).

pub mod store;
pub use store::{MemoryStore, MemoryStoreSettings, DEFAULT_HISTORY_PER_MOWER};

mod directory;
mod telemetry;
mod tokens;

pub mod watch;

mod retention;
mod sessions;

pub mod projections;
pub use projections::MemoryProjections;

pub mod webhooks;
pub use webhooks::MemoryWebhooks;

pub mod bus;
pub use bus::{MemoryBus, MemoryBusSettings};
