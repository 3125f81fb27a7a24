//! `swath-migrations`: sea-orm-migration's CLI (`up`, `down`, `status`, `fresh`, …) for Swath's
//! schema. Reads `DATABASE_URL` (or `-u`). `swath` itself migrates at start-up; this CLI is for
//! operators who want to look before they leap.

use sea_orm_migration::prelude::*;

#[tokio::main]
async fn main() {
    cli::run_cli(swath_migrations::Migrator).await;
}
