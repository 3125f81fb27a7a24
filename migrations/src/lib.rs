//! Swath's PostgreSQL schema as sea-orm-migration migrations. Run by `swath` at start-up, by the
//! `swath-migrations` CLI and by test setup, always through [`migrate`], which holds an advisory
//! lock so that replicas starting at once never race.
//!
//! # Layout
//! - [`Migrator`]: the ordered list of migrations.
//! - `m20261130_000001_initial`: directory, tokens, latest states, history and positions
//!   (partitioned by month of `observed_at`), health and day totals.
//! - `m20261130_000002_api`: token ids and names; directory list indexes in byte order of names.
//! - `m20261130_000003_watch`: watch rows, geofences, zones, events feed, alerts, busy statuses.
//! - `m20261130_000004_projections`: operator assignments; the indexes of the live projections.
//! - `m20261130_000005_retention`: retention's downsampling watermark.
//! - `m20261130_000006_hot_watches`: watch rows updated in place (no index on `last_seen_at`).
//! - `m20261130_000007_merged_totals`: what merging late states into the totals needs
//!   (`counted_from`, `blade_reset_until` on `health_totals`).
//! - `m20261203_000008_mower_children`: busy statuses deleted with their mower (a foreign key),
//!   and the rows late writes left of deleted mowers removed.
//! - `m20261203_000009_webhooks`: webhook endpoints and their deliveries.
//! - `m20261205_000010_sessions`: W8's mowing sessions.
//! - `m20261206_000011_session_watch`: what the watcher keeps of W8 for `session_ended`.
//! - `m20261206_000012_newest_session`: each mower's newest session kept with its health totals;
//!   the view `mower_sessions_now` that every read of sessions goes through.
//! - `m20261206_000013_watch_session_columns`: that pending session in typed columns.
//! - `m20261207_000014_session_carry`: the newest session on `health_totals` as one text.
//! - `m20261207_000015_watch_session_carry`: the watcher's pending session as one text.

pub use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectOptions, Database};

/// Declares a module's `Migration`: named `$name` (the version recorded in `seaql_migrations`, so
/// never renamed), running the module's `UP` SQL text up and its `DOWN` text down. Every
/// migration is plain SQL run unprepared, so only the texts and the name differ between modules.
macro_rules! sql_migration {
    ($name:literal) => {
        use sea_orm_migration::prelude::*;
        use sea_orm_migration::sea_orm::ConnectionTrait;

        pub struct Migration;

        impl MigrationName for Migration {
            fn name(&self) -> &str {
                $name
            }
        }

        #[async_trait::async_trait]
        impl MigrationTrait for Migration {
            async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
                manager.get_connection().execute_unprepared(UP).await?;
                Ok(())
            }

            async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
                manager.get_connection().execute_unprepared(DOWN).await?;
                Ok(())
            }
        }
    };
}

mod m20261130_000001_initial;
mod m20261130_000002_api;
mod m20261130_000003_watch;
mod m20261130_000004_projections;
mod m20261130_000005_retention;
mod m20261130_000006_hot_watches;
mod m20261130_000007_merged_totals;
mod m20261203_000008_mower_children;
mod m20261203_000009_webhooks;
mod m20261205_000010_sessions;
mod m20261206_000011_session_watch;
mod m20261206_000012_newest_session;
mod m20261206_000013_watch_session_columns;
mod m20261207_000014_session_carry;
mod m20261207_000015_watch_session_carry;

/// An arbitrary constant that names Swath's migration lock among PostgreSQL advisory locks.
const MIGRATION_LOCK: i64 = 0x5357_4154_4800_0001;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_initial::Migration),
            Box::new(m20261130_000002_api::Migration),
            Box::new(m20261130_000003_watch::Migration),
            Box::new(m20261130_000004_projections::Migration),
            Box::new(m20261130_000005_retention::Migration),
            Box::new(m20261130_000006_hot_watches::Migration),
            Box::new(m20261130_000007_merged_totals::Migration),
            Box::new(m20261203_000008_mower_children::Migration),
            Box::new(m20261203_000009_webhooks::Migration),
            Box::new(m20261205_000010_sessions::Migration),
            Box::new(m20261206_000011_session_watch::Migration),
            Box::new(m20261206_000012_newest_session::Migration),
            Box::new(m20261206_000013_watch_session_columns::Migration),
            Box::new(m20261207_000014_session_carry::Migration),
            Box::new(m20261207_000015_watch_session_carry::Migration),
        ]
    }
}

/// Applies every pending migration. Takes a session advisory lock on a single connection first,
/// so that two replicas (or two test processes) migrating the same database run one after the
/// other; the second finds nothing to do.
pub async fn migrate(database_url: &str) -> Result<(), DbErr> {
    let mut options = ConnectOptions::new(database_url.to_owned());
    // One connection: the advisory lock belongs to a session, and every statement below must run
    // in that session.
    options
        .max_connections(1)
        .min_connections(1)
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    db.execute_unprepared(&format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))
        .await?;
    let result = Migrator::up(&db, None).await;
    let unlock = db
        .execute_unprepared(&format!("SELECT pg_advisory_unlock({MIGRATION_LOCK})"))
        .await;
    db.close().await?;
    result?;
    unlock?;
    Ok(())
}
