//! Swath's contract suites and end-to-end tests.
//!
//! # Layout
//! - [`webhook_contract`]: the webhook store's scenarios, for every adapter.
//! - [`postgres`]: fresh PostgreSQL test databases (`SWATH_TEST_DATABASE_URL`).
//! - [`support`]: the seeded fleet, store factories, a recording bus.
//! - [`proxy`]: a TCP proxy a test cuts as a failover does (half-open, refused, healed).
//! - [`faults`]: a watch and zone store that fails a step or runs a concurrent change on demand.
//! - [`traces`]: proptest strategies for random traces of state reports.
//! - [`telemetry_contract`]: the telemetry store's scenarios, for every adapter.
//! - `bus_contract`: the event bus's scenarios, for every adapter.
//! - `partition_contract`: the event bus's partition scenarios (per-key order across
//!   subscriptions, concurrency, hand-over, balance), for every adapter.
//! - [`api_contract`]: what the REST API needs from a store (directory pages and changes,
//!   tokens, telemetry reads), for every adapter.
//! - [`load`]: the load generator and verifier (`swath-load`): a seeded plan of states, its
//!   one-pass reference, and the comparison of stored rows with it.
//! - [`reference`]: an independent reference, written from the rule text: the rows, events,
//!   alerts, watch rows, zone watches and busy statuses a sequence of states must give; the
//!   property tests and the end-to-end verifier compare stores with it.
//! - [`reference_contract`]: property scenarios comparing a store with the reference, for every
//!   adapter.
//! - [`e2e`]: end-to-end harness: private NATS and PostgreSQL servers, test databases, the
//!   `swath` binary as a child process.
//! - [`cluster`]: a three-node NATS JetStream cluster on loopback (kill, restart, pause a node;
//!   the stream's leader; `sync_interval: always`).
//! - [`retention_contract`]: retention and downsampling, for every adapter, on a manual clock.
//! - [`projections_contract`]: the live projections' scenarios (windows, sentinels, visibility,
//!   operator on duty, reads per level), for every adapter.
//! - [`poison`]: a state the store refuses every time never blocks the stream; a store that is
//!   down drops nothing (the ingest handler on every bus and store pair).
//! - [`hostile`]: hostile input at the HTTP door (NUL in any string of any request body, bad
//!   cursors): the table of bodies, driven by the OpenAPI document.
//! - [`watch_contract`]: the watch store's scenarios (the watcher's batches, the offline sweep, the
//!   busy check), the notification side's shared factory and harness, and its batch property.
//! - [`zone_contract`], [`geofence_contract`], [`feed_contract`]: the zone store's (W7), the
//!   geofence store's and the notification feed's scenarios (events, alerts, blade resets), for
//!   every adapter.
//! - [`reuse_contract`]: a mower id deleted by one account and created by another: nothing of
//!   the first owner left in any store or shown to the second, for every adapter.
//!
//! - [`suites`]: [`contract_suite!`](crate::contract_suite), every suite's scenarios as one
//!   `#[test]` each for an adapter.
//!
//! The suites themselves are in `tests/`: one file per adapter runs the same scenarios.

pub mod api_contract;
pub mod bus_contract;
pub mod cluster;
pub mod cross_tenant;
pub mod e2e;
pub mod faults;
pub mod feed_contract;
pub mod geofence_contract;
pub mod hostile;
pub mod load;
pub mod partition_contract;
pub mod poison;
pub mod postgres;
pub mod projections_contract;
pub mod proxy;
pub mod reference;
pub mod reference_contract;
pub mod retention_contract;
pub mod reuse_contract;
pub mod sessions_contract;
pub mod suites;
pub mod support;
pub mod telemetry_contract;
pub mod traces;
pub mod watch_contract;
pub mod webhook_access;
pub mod webhook_contract;
pub mod zone_contract;
