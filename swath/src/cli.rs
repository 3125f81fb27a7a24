//! The command line of `swath`: its command tree, each subcommand with its arguments (their
//! settings are in [`crate::config`], the subcommands' own in their modules), and [`parse_cli`].

use crate::admin_cli::{AccountCommand, TokenCommand};
use crate::config::{ImportArgs, LogArgs, ServeArgs, SimulateArgs};
use crate::maintenance_cli::MaintenanceCommand;
use clap::{Parser, Subcommand};

/// Swath: telemetry of a robot lawn mower fleet.
#[derive(Debug, Parser)]
#[command(name = "swath", version)]
pub struct Cli {
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub log: LogArgs,
}

/// `swath` without a subcommand serves with the settings of the environment. Parsed only then, so
/// that `swath openapi` does not depend on the serve settings.
#[derive(Debug, Parser)]
#[command(name = "swath")]
pub struct ServeFromEnv {
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API on the configured adapters (the default).
    Serve(Box<ServeArgs>),
    /// Print the OpenAPI document (pretty JSON) to stdout. Regenerates the committed copy:
    /// `cargo run -p swath -- openapi > openapi/openapi.json`.
    Openapi,
    /// Import state reports from an NDJSON file (one report per line), 200 per transaction
    /// through the ingest path, with a progress bar and a summary.
    Import(ImportArgs),
    /// Print the states the demo fleet (created in the store if missing) would have reported over
    /// the past hours, as NDJSON for `swath import`: `swath simulate --hours 1 > states.ndjson`.
    Simulate(SimulateArgs),
    /// API tokens: `swath token create --account <id> --scopes read,write,admin`.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Accounts: `swath account create --name <name>`.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Maintenance: `swath maintenance retention [--dry-run]`.
    #[command(subcommand)]
    Maintenance(MaintenanceCommand),
}

/// Parses the command line. `swath --help` also lists every setting of `swath serve` (what
/// `swath` alone runs) with its variable and default, so that one page names them all.
pub fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let mut settings = String::from(
        "Settings of `swath` and `swath serve` (environment variable [default]; details: \
         `swath serve --help`):\n",
    );
    for arg in ServeFromEnv::command().get_arguments() {
        let Some(env) = arg.get_env() else { continue };
        let default = arg
            .get_default_values()
            .first()
            .map_or_else(|| "-".to_owned(), |v| v.to_string_lossy().into_owned());
        settings.push_str(&format!("  {} [{default}]\n", env.to_string_lossy()));
    }
    let matches = Cli::command().after_help(settings).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}
