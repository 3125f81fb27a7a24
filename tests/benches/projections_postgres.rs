//! The live projections on PostgreSQL with a large tenant: latency (p50, p99, max) of the fleet
//! dashboard, the site wall and the health wall through the use case (`Projections`, the same
//! call the HTTP handler makes, plus the JSON serialisation of its answer), the response size, and
//! the statements each costs, for a tenant of 100 000 mowers (and another tenant of 10 000 that
//! sorts first, so visibility is exercised).
//!
//! Run: `SWATH_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!       cargo bench -p swath-tests --bench projections_postgres` (optional args: mowers,
//!       iterations). Uses a fresh database.

use std::sync::Arc;
use std::time::{Duration, Instant};
use swath_api::dto::live_views::{FleetDashboard, HealthWall, SiteWall};
use swath_application::Projections;
use swath_domain::{AccountId, Principal, Scope};
use swath_postgres::PostgresStore;
use swath_tests::postgres::{database_url_from_env, PostgresFactory};
use uuid::Uuid;

mod args;
use args::Args;

/// Fills an account in a handful of statements: `mowers` mowers on `mowers / 500` sites, a
/// latest state for each (a third docked or charging), an open alert on every 10th mower, an
/// offline one on every 50th, and 3 active assignments on each of the first 2 000.
async fn tenant(store: &PostgresStore, mowers: i64, display_order: i32) -> AccountId {
    let pool = store.pool();
    let account = AccountId::new();
    let sites = (mowers / 500).max(1);
    sqlx::query("INSERT INTO accounts (id, name) VALUES ($1, 'Bench')")
        .bind(account.0)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO sites (id, account_id, name, time_zone, display_order) \
         SELECT gen_random_uuid(), $1, 'Site ' || lpad(g::text, 4, '0'), 'Europe/Berlin', $3 \
         FROM generate_series(1, $2) AS g",
    )
    .bind(account.0)
    .bind(sites)
    .bind(display_order)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO mowers (id, account_id, site_id, name, model, serial, display_order, \
         blade_threshold_ms) \
         SELECT gen_random_uuid(), $1, s.id, 'Mower ' || lpad(g::text, 6, '0'), 'M1', 'SN' || g, \
         $3, 360000000 FROM generate_series(1, $2) AS g \
         JOIN LATERAL (SELECT id FROM sites WHERE account_id = $1 \
         ORDER BY name OFFSET (g % $4) LIMIT 1) s ON true",
    )
    .bind(account.0)
    .bind(mowers)
    .bind(display_order)
    .bind(sites)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO latest_states (mower_id, account_id, observed_at, last_seen_at, state) \
         SELECT m.id, m.account_id, now(), now(), jsonb_build_object('mower_id', m.id, \
         'account_id', m.account_id, 'observed_at', to_char(now() AT TIME ZONE 'UTC', \
         'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), 'activity', (ARRAY['mowing','docked','charging',\
         'returning','error','mowing'])[1 + (row_number() OVER (ORDER BY m.id)) % 6], \
         'battery_percent', 50, 'blade_on', true) FROM mowers m WHERE m.account_id = $1",
    )
    .bind(account.0)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO alerts (id, mower_id, account_id, kind, severity, severity_rank, raised_at) \
         SELECT gen_random_uuid(), m.id, m.account_id, k.kind, k.severity, k.rank, now() \
         FROM (SELECT id, account_id, row_number() OVER (ORDER BY name) AS n FROM mowers \
         WHERE account_id = $1) m \
         JOIN (VALUES ('error', 'high', 3, 10), ('offline', 'high', 3, 50), \
         ('battery_low', 'normal', 2, 7)) AS k(kind, severity, rank, every) ON m.n % k.every = 0",
    )
    .bind(account.0)
    .execute(pool)
    .await
    .unwrap();
    // The watcher flags the watch row offline with the alert.
    sqlx::query(
        "UPDATE mower_watches w SET offline = true FROM alerts a WHERE a.mower_id = w.mower_id \
         AND a.kind = 'offline' AND a.cleared_at IS NULL AND a.account_id = $1",
    )
    .bind(account.0)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO assignments (id, mower_id, account_id, operator, priority, active, \
         updated_at) SELECT gen_random_uuid(), m.id, m.account_id, 'Operator ' || p.n, \
         p.priority, true, now() - make_interval(secs => p.n) \
         FROM (SELECT id, account_id FROM mowers WHERE account_id = $1 ORDER BY name LIMIT 2000) m \
         CROSS JOIN (VALUES (1, 'low'), (2, 'high'), (3, 'normal')) AS p(n, priority)",
    )
    .bind(account.0)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE").execute(pool).await.unwrap();
    account
}

struct Figures {
    p50: Duration,
    p99: Duration,
    max: Duration,
    bytes: usize,
    statements: f64,
}

async fn measure<F, Fut>(store: &PostgresStore, iterations: usize, mut call: F) -> Figures
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    for _ in 0..iterations / 10 {
        call().await;
    }
    let before = store.projection_counters().statements();
    let mut times = Vec::with_capacity(iterations);
    let mut bytes = 0;
    for _ in 0..iterations {
        let start = Instant::now();
        bytes = call().await;
        times.push(start.elapsed());
    }
    let statements = (store.projection_counters().statements() - before) as f64 / iterations as f64;
    times.sort();
    Figures {
        p50: times[times.len() / 2],
        p99: times[(times.len() * 99 / 100).min(times.len() - 1)],
        max: times[times.len() - 1],
        bytes,
        statements,
    }
}

fn report(name: &str, f: &Figures) {
    println!(
        "{name:<16} p50 {:>7.3} ms   p99 {:>7.3} ms   max {:>7.3} ms   {:>7} bytes   {:.1} statements",
        f.p50.as_secs_f64() * 1e3,
        f.p99.as_secs_f64() * 1e3,
        f.max.as_secs_f64() * 1e3,
        f.bytes,
        f.statements
    );
}

fn main() {
    let Some(url) = database_url_from_env() else {
        eprintln!("SWATH_TEST_DATABASE_URL is not set: nothing to measure.");
        return;
    };
    let args = Args::new(|a| a != "--bench");
    let mowers: i64 = args.get(0, 100_000);
    let iterations: usize = args.get(1, 2_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let factory = PostgresFactory::new(url);
        let store = factory.fresh_store().await;
        let seeded = Instant::now();
        // Another tenant sorting first: its rows must never be read into a window.
        tenant(&store, mowers / 10, -1).await;
        let account = tenant(&store, mowers, 0).await;
        println!(
            "Seeded {mowers} mowers (+{} in another tenant) in {:.1} s; {iterations} calls each.",
            mowers / 10,
            seeded.elapsed().as_secs_f64()
        );
        let principal = Principal {
            account_id: account,
            scopes: vec![Scope::Read],
            sites: None,
        };
        let projections = Projections::new(Arc::new(store.clone()));
        let now = chrono::Utc::now();
        let fleet = measure(&store, iterations, || async {
            let s = projections.fleet(&principal).await.unwrap();
            serde_json::to_vec(&FleetDashboard::of(s, now))
                .unwrap()
                .len()
        })
        .await;
        report("fleet dashboard", &fleet);
        let wall = measure(&store, iterations, || async {
            let s = projections.wall(&principal).await.unwrap();
            serde_json::to_vec(&SiteWall::of(s, now)).unwrap().len()
        })
        .await;
        report("site wall", &wall);
        let health = measure(&store, iterations, || async {
            let s = projections.health(&principal).await.unwrap();
            serde_json::to_vec(&HealthWall::of(s, now)).unwrap().len()
        })
        .await;
        report("health wall", &health);
        let target = Duration::from_millis(5);
        println!(
            "Fleet dashboard p99 {} the 5 ms target.",
            if fleet.p99 <= target {
                "meets"
            } else {
                "misses"
            }
        );
        let _ = Uuid::nil();
    });
}
