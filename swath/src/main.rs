//! `swath`: the one binary. It reads its settings from the environment (or flags), picks the
//! adapters, wires the use cases and serves the API.
//!
//! `swath` (or `swath serve`) serves everything on the memory adapters with a simulated demo
//! fleet; `swath openapi` prints the OpenAPI document (the command that regenerates
//! `openapi/openapi.json`). The command line is in [`swath::cli`], the settings in
//! [`swath::config`], the wiring in [`swath::wiring`], serving in [`swath::serve`].

use anyhow::Context;
use clap::Parser;
use swath::cli::{parse_cli, Cli, Command, ServeFromEnv};
use swath::config::init_tracing;
use swath::serve::serve;
use swath::{admin_cli, import_cli, maintenance_cli};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = parse_cli();
    let serving = matches!(cli.command, None | Some(Command::Serve(_)));
    init_tracing(&cli.log, serving);
    match cli.command {
        Some(Command::Openapi) => {
            let document = swath_api::openapi()
                .to_pretty_json()
                .context("could not serialise the OpenAPI document")?;
            println!("{document}");
            Ok(())
        }
        Some(Command::Serve(args)) => serve(*args).await,
        Some(Command::Import(args)) => import_cli::import(args).await,
        Some(Command::Simulate(args)) => import_cli::simulate(args).await,
        Some(Command::Token(command)) => admin_cli::token(command).await,
        Some(Command::Account(command)) => admin_cli::account(command).await,
        Some(Command::Maintenance(command)) => maintenance_cli::maintenance::<Cli>(command).await,
        None => serve(ServeFromEnv::parse_from(["swath"]).serve).await,
    }
}
