//! Swath's in-memory adapters: the store (directory, tokens, telemetry) and the event bus. They
//! are the product's embedded default (`cargo run` serves everything on them), held to the same
//! contract suites as PostgreSQL and NATS.
//!
//! # Layout
//! - [`store`]: [`MemoryStore`], implementing `Directory`, `TokenStore` and `TelemetryStore`; one
//!   file per concern (`rows`, `directory`, `tokens`, `telemetry`).
//! - `bus`: `MemoryBus`, implementing `EventBus` with JetStream's batch semantics.
//! - `retention`: `RetentionStore` on [`MemoryStore`]: the same limits as PostgreSQL.
//! - `watch`: `WatchStore`, `ZoneStore`, `GeofenceStore` and `NotificationFeed` on
//!   [`MemoryStore`]: watch rows, geofences, zones, events, alerts.
//! - [`projections`]: [`MemoryProjections`], the live projections' reads and operator
//!   assignments over a [`MemoryStore`].
//! - [`webhooks`]: [`MemoryWebhooks`], webhook endpoints and their queues of deliveries.

pub mod store;
pub use store::{MemoryStore, MemoryStoreSettings, DEFAULT_HISTORY_PER_MOWER};

pub mod bus;
pub use bus::{MemoryBus, MemoryBusSettings};

pub mod watch;

pub mod retention;

pub mod projections;

pub mod webhooks;
pub use projections::MemoryProjections;
pub use webhooks::MemoryWebhooks;
