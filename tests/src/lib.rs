//! Swath's contract suites and end-to-end tests.
//!
//! # Layout
//! - [`postgres`]: fresh PostgreSQL test databases (`SWATH_TEST_DATABASE_URL`).
//! - [`support`]: the seeded fleet, store factories, a recording bus.
//! - [`traces`]: proptest strategies for random traces of state reports.
//! - [`telemetry_contract`]: the telemetry store's scenarios, for every adapter.
//! - `bus_contract`: the event bus's scenarios, for every adapter.
//! - [`watch_contract`]: the notification side's scenarios (watcher, W6, W7, sweep, busy check).
//!
//! The suites themselves are in `tests/`: one file per adapter runs the same scenarios.

pub mod bus_contract;
pub mod postgres;
pub mod support;
pub mod telemetry_contract;
pub mod traces;
pub mod watch_contract;
