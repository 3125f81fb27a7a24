//! Swath's PostgreSQL adapters: the directory and tokens through SeaORM entities, the telemetry
//! store through constant SQL with array parameters (`UNNEST`) executed with sqlx on the same
//! pool, so each statement is prepared once per connection and a batch costs the same number of
//! statements whatever its size (docs/rules.md §3).
//!
//! # Layout
//! - [`PostgresStore`]: the pool, the SeaORM connection over it, and statement counters.
//! - `entities`: SeaORM entities of the directory tables.
//! - `directory`: `Directory` and `DirectoryAdmin`.
//! - `tokens`: `TokenStore`.
//! - `retention`: `RetentionStore`: partitions dropped, rows deleted in chunks, under an
//!   advisory lock.
//! - `telemetry`: `TelemetryStore`, the batch unit of work and the reads; one file per concern
//!   (`batch`, `rows`).
//! - `sessions`: `SessionStore`, the reads of W8's sessions (written by the telemetry batch).
//! - `watch`: `WatchStore`, `ZoneStore`, `GeofenceStore`, `NotificationFeed`: the watcher's unit
//!   of work, the offline sweep, virtual zones, the busy status, geofences, zones, the events feed
//!   and alerts; one file per concern (`unit_of_work`, `admin`, `feeds`, `rows`).
//! - `arrays`: the rows of the widest writes, built from their array parameters side by side.
//! - `carry_text`: the one-text carries of W8's folds on the health and watch rows.
//! - `reads`: the few connections of the latest-state read, put back without sqlx's ping
//!   (decision 124).
//! - `projections`: `ProjectionStore` (one constant statement per level of a live view) and
//!   `Assignments`.

/// A struct read from a row: `$ty { a, b; c: expr }` reads each field listed before the `;` from
/// the column of its name (as the field's type, a value that does not decode going through
/// `$corrupt`), and takes the fields after it as given. The column's name is written once, as the
/// field's.
macro_rules! from_row {
    ($row:expr, $corrupt:expr, $ty:ident { $($column:ident),* ; $($field:ident : $value:expr),* $(,)? }) => {
        $ty {
            $($column: sqlx::Row::try_get($row, stringify!($column)).map_err($corrupt)?,)*
            $($field: $value,)*
        }
    };
}

mod arrays;
mod carry_text;
mod directory;
mod entities;
mod projections;
mod reads;
mod retention;
mod sessions;
mod telemetry;
mod tokens;
mod watch;
mod webhooks;

pub use reads::READ_CONNECTIONS;

use reads::ReadConnections;
use sea_orm::{DatabaseConnection, SqlxPostgresConnector};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::{cause, Cause, StoreError};

/// Counts of what the telemetry path sent to PostgreSQL: the figures behind "one statement per
/// table per batch" and "commits per state" (tests and benchmarks read them).
#[derive(Debug, Default)]
pub struct Counters {
    statements: AtomicU64,
    commits: AtomicU64,
}

impl Counters {
    fn statement(&self) {
        self.statements.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("swath_postgres_statements_total").increment(1);
    }

    fn commit(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("swath_postgres_commits_total").increment(1);
    }

    /// Statements executed so far (`BEGIN` and `COMMIT` not included).
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    /// Transactions committed so far.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }
}

/// The PostgreSQL store. Cheap to clone.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// The latest-state read's own connections (decision 124), opened with the pool's options.
    reads: Arc<ReadConnections>,
    orm: DatabaseConnection,
    counters: Arc<Counters>,
    watch_counters: Arc<Counters>,
    projection_counters: Arc<Counters>,
}

/// Turns any database error into the port's "unavailable": the caller redelivers.
pub(crate) fn unavailable(e: impl Into<Cause>) -> StoreError {
    StoreError::Unavailable(e.into())
}

/// How long [`probe`] waits for the server to answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens one connection to `database_url` and closes it, to tell a person at once why the server
/// cannot be used: a pool retries a refused connection until its timeout and then says only "pool
/// timed out". The error names the URL with its password redacted.
pub async fn probe(database_url: &str) -> Result<(), StoreError> {
    use sqlx::Connection;
    let shown = redact_password(database_url);
    match tokio::time::timeout(PROBE_TIMEOUT, sqlx::PgConnection::connect(database_url)).await {
        Ok(Ok(connection)) => {
            let _ = connection.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(StoreError::Unavailable(cause::context(shown, e))),
        Err(_) => Err(StoreError::Unavailable(
            format!("{shown}: no answer within {} s", PROBE_TIMEOUT.as_secs()).into(),
        )),
    }
}

/// `url` with the password of its user info (`user:password@`) replaced by `***`.
pub fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// A failed statement of the ingest path, told apart: the data refused (SQLSTATE class 22 "data
/// exception", 23 "integrity constraint violation", 54 "program limit exceeded", P0 a trigger's
/// `RAISE`; or a value the driver could not encode) fails again with the same data and is
/// [`StoreError::Rejected`]; everything else (connection lost, pool timeout, serialization
/// failure, deadlock, shutdown, an unknown column after a bad deploy) is
/// [`StoreError::Unavailable`], and the batch is redelivered as it is.
pub(crate) fn store_error(e: sqlx::Error) -> StoreError {
    let rejected = match &e {
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            ["22", "23", "54", "P0"]
                .iter()
                .any(|class| code.starts_with(class))
        }),
        sqlx::Error::Encode(_) => true,
        _ => false,
    };
    if rejected {
        StoreError::Rejected(e.into())
    } else {
        StoreError::Unavailable(e.into())
    }
}

/// How the pool reaches PostgreSQL, and the time limits that make a dead or stuck server (a
/// primary that died, a failover under way behind the router) an error in seconds rather than a
/// wait at the TCP default (docs/operations.md, "A highly available PostgreSQL").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSettings {
    /// The most connections of the pool.
    pub max_connections: u32,
    /// How long taking a connection may wait, opening a new one included: a router whose
    /// primary is gone accepts and then never answers, or refuses; either fails this fast.
    pub connect_timeout: Duration,
    /// The server cancels a statement running longer (`statement_timeout`); zero: never.
    pub statement_timeout: Duration,
    /// The server ends a session idle inside a transaction this long
    /// (`idle_in_transaction_session_timeout`), so that the row locks of a batch whose replica
    /// died or hung are released; zero: never.
    pub idle_in_transaction_timeout: Duration,
    /// The server's TCP keepalive on the session (`tcp_keepalives_idle`, its interval a third of
    /// it, three probes) and `tcp_user_timeout`: a Swath host that vanished is noticed and its
    /// locks released; zero: the server's defaults.
    pub tcp_keepalive: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(60),
            idle_in_transaction_timeout: Duration::from_secs(15),
            tcp_keepalive: Duration::from_secs(10),
        }
    }
}

impl PoolSettings {
    /// The session settings sent in the start-up packet (`options=-c name=value`), so that every
    /// connection has them from its first statement, whichever path opened it.
    fn session_options(&self) -> Vec<(&'static str, String)> {
        let millis = |d: Duration| d.as_millis().to_string();
        let mut options = vec![
            ("statement_timeout", millis(self.statement_timeout)),
            (
                "idle_in_transaction_session_timeout",
                millis(self.idle_in_transaction_timeout),
            ),
        ];
        if !self.tcp_keepalive.is_zero() {
            let idle = self.tcp_keepalive.as_secs().max(1);
            let interval = (idle / 3).max(1);
            options.extend([
                ("tcp_keepalives_idle", idle.to_string()),
                ("tcp_keepalives_interval", interval.to_string()),
                ("tcp_keepalives_count", "3".to_owned()),
                ("tcp_user_timeout", millis(self.tcp_keepalive)),
            ]);
        }
        options
    }
}

impl PostgresStore {
    /// Connects with [`PoolSettings`]' defaults but `max_connections` (the schema must be
    /// migrated: `swath_migrations::migrate`).
    pub async fn connect(database_url: &str, max_connections: u32) -> Result<Self, StoreError> {
        Self::connect_with(
            database_url,
            &PoolSettings {
                max_connections,
                ..PoolSettings::default()
            },
        )
        .await
    }

    /// Connects with these settings (the schema must be migrated).
    pub async fn connect_with(
        database_url: &str,
        settings: &PoolSettings,
    ) -> Result<Self, StoreError> {
        let pool = Self::pool_options(settings)
            .connect_with(Self::connect_options(database_url, settings)?)
            .await
            .map_err(unavailable)?;
        Ok(Self::assemble(pool, settings.connect_timeout))
    }

    /// A store whose connections are opened when first needed: nothing is checked now (a read
    /// store whose standby is down at start-up).
    pub fn connect_lazy_with(
        database_url: &str,
        settings: &PoolSettings,
    ) -> Result<Self, StoreError> {
        let pool = Self::pool_options(settings)
            .connect_lazy_with(Self::connect_options(database_url, settings)?);
        Ok(Self::assemble(pool, settings.connect_timeout))
    }

    fn connect_options(
        database_url: &str,
        settings: &PoolSettings,
    ) -> Result<PgConnectOptions, StoreError> {
        Ok(PgConnectOptions::from_str(database_url)
            .map_err(unavailable)?
            .options(settings.session_options()))
    }

    fn pool_options(settings: &PoolSettings) -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(settings.max_connections)
            .acquire_timeout(settings.connect_timeout)
            // sqlx tests a connection when it goes back to the pool (a ping, off the caller's
            // path) and, by default, again when it is taken out: a second round trip on the
            // path of every batch and request (4-5 per pair of ingest and watcher batches).
            // The check on release stays; a connection that broke while idle (a PostgreSQL
            // restart) fails its next statement instead, the batch is redelivered or the
            // request answered 503, and the pool replaces the connection (decision 38).
            .test_before_acquire(false)
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: PgPool) -> Self {
        Self::assemble(pool, PoolSettings::default().connect_timeout)
    }

    fn assemble(pool: PgPool, connect_timeout: Duration) -> Self {
        let orm = SqlxPostgresConnector::from_sqlx_postgres_pool(pool.clone());
        Self {
            reads: Arc::new(ReadConnections::new(
                &pool,
                READ_CONNECTIONS,
                connect_timeout,
            )),
            pool,
            orm,
            counters: Arc::default(),
            watch_counters: Arc::default(),
            projection_counters: Arc::default(),
        }
    }

    /// What the telemetry path executed so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// What the watcher path (watch batches with their geofences, offline sweeps, busy statuses)
    /// executed so far.
    pub fn watch_counters(&self) -> &Counters {
        &self.watch_counters
    }

    /// What the live projections' reads (and the assignments) executed so far: one statement per
    /// level of a view.
    pub fn projection_counters(&self) -> &Counters {
        &self.projection_counters
    }

    /// The sqlx pool (for tests that need to look at the database directly).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Creates the monthly history and position partitions up to `months_ahead` months from now
    /// (idempotent; every replica calls it at start-up). Returns how many tables it created.
    pub async fn ensure_partitions(&self, months_ahead: i32) -> Result<i32, StoreError> {
        sqlx::query_scalar(
            "SELECT swath_ensure_partitions(date_trunc('month', now())::date, \
             (date_trunc('month', now()) + make_interval(months => $1))::date)",
        )
        .bind(months_ahead)
        .fetch_one(&self.pool)
        .await
        .map_err(unavailable)
    }

    /// How far this server's replay is behind its primary, in seconds: zero on a primary (a read
    /// pool that fell back to it, or a router that sent it there) and on a standby that has
    /// replayed everything it received; otherwise the age of the last transaction it replayed.
    /// An upper bound of how stale a read from it may be (docs/operations.md).
    pub async fn replay_lag(&self) -> Result<f64, StoreError> {
        sqlx::query_scalar(
            "SELECT CASE WHEN NOT pg_is_in_recovery() \
                OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 \
                ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0) \
             END::float8",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(unavailable)
    }

    pub async fn close(&self) {
        self.reads.close().await;
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::redact_password;

    #[test]
    fn passwords_are_redacted_and_the_rest_is_kept() {
        assert_eq!(
            redact_password("postgres://swath:s3cr@t@db:5432/swath?sslmode=disable"),
            "postgres://swath:***@db:5432/swath?sslmode=disable"
        );
        assert_eq!(
            redact_password("postgres://postgres@127.0.0.1/postgres"),
            "postgres://postgres@127.0.0.1/postgres"
        );
        assert_eq!(redact_password("not a url"), "not a url");
    }
}
