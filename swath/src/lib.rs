//! The `swath` binary's library: its settings, the one wiring of the adapters to the use cases
//! and the API, serving, and the command-line tools. `src/main.rs` only dispatches; the in-process
//! test app (`tests/helpers`) builds through the same [`wiring`]. Only this crate names an adapter
//! crate: `swath-api` sees ports only.
//!
//! # Layout
//! - [`cli`]: the command line, the subcommands and their arguments.
//! - [`config`]: the `SWATH_*` settings, every one of them (the HTTP server's too).
//! - [`wiring`]: settings to adapters, ports to use cases and the API state, background tasks.
//! - [`serve`]: `swath serve`, start-up and shutdown in order.
//! - [`demo`]: when the demo account and token are made, and the demo token's rules.
//! - [`import_cli`], [`admin_cli`], [`maintenance_cli`]: the other subcommands.

pub mod admin_cli;
pub mod cli;
pub mod config;
pub mod demo;
pub mod import_cli;
pub mod maintenance_cli;
pub mod serve;
pub mod wiring;
