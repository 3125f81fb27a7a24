//! PostgreSQL test databases: each store a test asks for is a new database with a random name,
//! cloned from a template migrated once per factory, and dropped when the factory is dropped.
//!
//! `SWATH_TEST_DATABASE_URL` names the server (any database on it; e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`). Unset at build time: the PostgreSQL tests are
//! reported as ignored. Set but unreachable: they fail.

use crate::support::{StoreFactory, TestStore};
use async_trait::async_trait;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestRunner};
use sqlx::{Connection, Executor, PgConnection};
use std::sync::{Arc, Mutex};
use swath_postgres::PostgresStore;
use tokio::runtime::Runtime;
use tokio::sync::OnceCell;

/// The server URL of the PostgreSQL suites. The tests that call it are ignored when the variable
/// was unset at build time (`tests/build.rs`), so reaching here without it is a mistake worth
/// failing on, not a skip.
pub fn test_database_url() -> String {
    database_url_from_env().unwrap_or_else(|| {
        panic!("SWATH_TEST_DATABASE_URL is not set: run this test through `cargo test` with it set")
    })
}

/// The server URL of `SWATH_TEST_DATABASE_URL`, if set: for the benchmarks, which say so and stop.
pub fn database_url_from_env() -> Option<String> {
    std::env::var("SWATH_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// `url` with its database name replaced.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// Makes fresh migrated databases on the test server.
pub struct PostgresFactory {
    server_url: String,
    template: OnceCell<String>,
    created: Mutex<Vec<String>>,
}

impl PostgresFactory {
    pub fn new(server_url: String) -> Self {
        Self {
            server_url,
            template: OnceCell::new(),
            created: Mutex::new(Vec::new()),
        }
    }

    async fn admin(&self) -> PgConnection {
        PgConnection::connect(&self.server_url)
            .await
            .expect("SWATH_TEST_DATABASE_URL is set but PostgreSQL does not answer")
    }

    /// Creates a database named `prefix` and a random suffix, with `options` (`TEMPLATE …`), to be
    /// dropped with the factory; answers its name.
    async fn create(&self, prefix: &str, options: &str) -> String {
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let mut admin = self.admin().await;
        admin
            .execute(format!("CREATE DATABASE {name} {options}").as_str())
            .await
            .unwrap_or_else(|e| panic!("create the database {name}: {e}"));
        self.created.lock().unwrap().push(name.clone());
        name
    }

    async fn template(&self) -> &str {
        self.template
            .get_or_init(|| async {
                let name = self.create("swath_tpl", "").await;
                swath_migrations::migrate(&with_database(&self.server_url, &name))
                    .await
                    .expect("migrate template database");
                name
            })
            .await
    }

    /// The URL of a new empty database, not migrated (a test of the migrations themselves),
    /// dropped with the factory.
    pub async fn empty_database(&self) -> String {
        let name = self.create("swath_test", "").await;
        with_database(&self.server_url, &name)
    }

    /// A new empty, migrated database and a store on it.
    pub async fn fresh_store(&self) -> PostgresStore {
        let template = self.template().await.to_owned();
        let name = self
            .create("swath_test", &format!("TEMPLATE {template}"))
            .await;
        let store = PostgresStore::connect(&with_database(&self.server_url, &name), 8)
            .await
            .expect("connect to the test database");
        store
    }
}

impl PostgresFactory {
    /// A pool on the database of a harness built by this factory (to look or meddle directly).
    pub fn pool_of(harness: &crate::telemetry_contract::Harness) -> sqlx::PgPool {
        harness
            .store
            .postgres
            .as_ref()
            .expect("a harness made by the PostgreSQL factory")
            .pool()
            .clone()
    }
}

#[async_trait]
impl StoreFactory for PostgresFactory {
    async fn fresh(&self) -> TestStore {
        let store = self.fresh_store().await;
        TestStore {
            directory: Arc::new(store.clone()),
            telemetry: Arc::new(store.clone()),
            sessions: Arc::new(store.clone()),
            postgres: Some(store),
        }
    }

    fn kept_per_mower(&self) -> Option<usize> {
        None
    }
}

impl Drop for PostgresFactory {
    fn drop(&mut self) {
        let mut names: Vec<String> = std::mem::take(&mut *self.created.lock().unwrap());
        // Clones first, the template last.
        names.reverse();
        drop_databases(&self.server_url, names);
    }
}

/// Drops the databases `names`, in this order, on the server of `server_url`; FORCE ends the
/// sessions of pools still open. Drop runs inside or outside a runtime: a thread with its own
/// runtime works in both. A server that cannot be reached drops nothing.
pub fn drop_databases(server_url: &str, names: Vec<String>) {
    let url = server_url.to_owned();
    let cleanup = std::thread::spawn(move || {
        crate::support::block_on(async move {
            let Ok(mut admin) = PgConnection::connect(&url).await else {
                return;
            };
            for name in names {
                let _ = admin
                    .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                    .await;
            }
        });
    });
    let _ = cleanup.join();
}

/// Runs a property with one factory (one template database) for all its cases: `cases` cases of
/// `strategy`, shrunk at most `max_shrink_iters` times, each checked on a runtime of two workers.
/// The factory (and its databases) goes before the runtime.
pub fn property<F, S: Strategy>(
    factory: F,
    cases: u32,
    max_shrink_iters: u32,
    strategy: S,
    check: impl Fn(&F, S::Value, &Runtime),
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters,
        ..Config::default()
    });
    runner
        .run(&strategy, |value| {
            check(&factory, value, &rt);
            Ok(())
        })
        .unwrap();
    drop(factory);
}

/// The tests of scenarios that need PostgreSQL, one `#[test]` per scenario of `$module`, named
/// like it: each is reported as ignored, with the reason, when `SWATH_TEST_DATABASE_URL` was
/// unset at build time (the `swath_no_postgres` cfg of `tests/build_services.rs`), like the
/// suites' `postgres = …` (decision 131). An asynchronous scenario runs on two worker threads and
/// is handed a factory of fresh databases on that server; a `sync` one (a property, which runs
/// its own runtime) makes its factories itself.
#[macro_export]
macro_rules! postgres_tests {
    ($module:ident: $($scenario:ident),* $(,)? $(; sync: $($sync:ident),* $(,)?)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(swath_no_postgres, ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL")]
            async fn $scenario() {
                let url = $crate::postgres::test_database_url();
                $module::$scenario($crate::postgres::PostgresFactory::new(url)).await;
            }
        )*
        $($(
            #[test]
            #[cfg_attr(swath_no_postgres, ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL")]
            fn $sync() {
                $module::$sync();
            }
        )*)?
    };
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn database_names_are_replaced() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
        assert_eq!(
            with_database("postgres://h:1/db?sslmode=disable", "x"),
            "postgres://h:1/x?sslmode=disable"
        );
    }
}
