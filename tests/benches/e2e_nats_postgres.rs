//! End to end, JetStream (explicit acks) → `swath` (ingest and watcher consumers) → PostgreSQL:
//! states/s sustained over a window, service CPU per state, and resident memory with a backlog.
//!
//! One run, so that the figures are ratios of one machine state:
//! 1. a private NATS server (file storage) and a fresh database on `SWATH_TEST_DATABASE_URL`;
//! 2. a backlog of `--states` states of `--mowers` mowers (the `swath-load` plan) is published
//!    while no service runs;
//! 3. the release `swath` binary starts (`SWATH_BUS=nats`, `SWATH_STORE=postgres`, no simulated
//!    fleet); its resident memory (VmRSS) is sampled every 250 ms from the start, with the
//!    backlog still unconsumed, to the end;
//! 4. after `--warmup` seconds, states stored (history rows), the service's CPU time
//!    (`/proc/<pid>/stat` utime + stime) and NATS's are read at the start and the end of a
//!    `--window`-second window: states/s and CPU µs per state over the window;
//! 5. with `--drain`, the rest of the backlog is stored before the service stops, and with
//!    `--verify` the rows are compared with the one-pass reference (slow for a million states).
//!
//! Run (the service binary must be built first; the bench does not build it):
//! ```text
//! cargo build --release -p swath-api --bin swath
//! SWATH_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo bench -p swath-tests --bench e2e_nats_postgres -- --states 1000000 --window 60
//! ```
//! `--steady` publishes a usual fleet (10-minute activity runs) instead of states whose activity,
//! battery and blade are drawn anew every time (the default: the most work for the rules).
//! Extra `SWATH_*` settings of the service are passed through from the environment of the bench
//! (e.g. `SWATH_TELEMETRY_INGEST_BATCH_MAX=256`).

use std::time::{Duration, Instant};
use swath_nats::{NatsBus, NatsBusSettings};
use swath_postgres::PostgresStore;
use swath_tests::e2e::{cpu_time, resident_bytes, NatsServer, Service, TestDatabase};
use swath_tests::load::{stored_count, Plan};

struct Args {
    states: usize,
    mowers: usize,
    warmup: u64,
    window: u64,
    verify: bool,
    drain: bool,
    steady: bool,
}

fn args() -> Args {
    let mut args = Args {
        states: 1_000_000,
        mowers: 200,
        warmup: 5,
        window: 60,
        verify: false,
        drain: false,
        steady: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse::<u64>().ok());
        match a.as_str() {
            "--states" => args.states = value().expect("--states N") as usize,
            "--mowers" => args.mowers = value().expect("--mowers M") as usize,
            "--warmup" => args.warmup = value().expect("--warmup S"),
            "--window" => args.window = value().expect("--window S"),
            "--verify" => args.verify = true,
            "--drain" => args.drain = true,
            "--steady" => args.steady = true,
            _ => {} // `--bench` and the like, from cargo
        }
    }
    args
}

/// Busy and total jiffies of the whole machine, from `/proc/stat`.
fn machine_cpu() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle and iowait
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// CPU time of the PostgreSQL backends serving the database (the service's pooled connections,
/// alive for the whole window), by pid.
async fn backends_cpu(pool: &sqlx::PgPool) -> std::collections::HashMap<u32, Duration> {
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    pids.into_iter()
        .filter_map(|pid| Some((pid as u32, cpu_time(pid as u32).ok()?)))
        .collect()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() -> anyhow::Result<()> {
    let Some(server) = swath_tests::postgres::database_url_from_env() else {
        eprintln!("SWATH_TEST_DATABASE_URL is not set: nothing to measure.");
        return Ok(());
    };
    let args = args();
    let binary = std::env::var("SWATH_BIN").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/swath").to_owned()
    });
    anyhow::ensure!(
        std::path::Path::new(&binary).exists(),
        "{binary} is missing: cargo build --release -p swath-api --bin swath (or set SWATH_BIN)"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(args, server, binary))
}

async fn run(args: Args, server: String, binary: String) -> anyhow::Result<()> {
    let plan = Plan::new(0xbe7c, args.mowers, args.states).with_steady(args.steady);
    let nats = NatsServer::start()?;
    let db = TestDatabase::create(&server).await?;
    swath_migrations::migrate(&db.url).await?;
    let store = PostgresStore::connect(&db.url, 2).await?;
    plan.seed_directory(&store).await?;

    // The backlog, published with no consumer running. The service creates its consumers with
    // `DeliverPolicy::New`, so they must exist first: start and stop it once.
    let mut service = Service::start(&binary, &db.url, &nats.url(), &[]).await?;
    let idle_rss = resident_bytes(service.pid())?;
    anyhow::ensure!(
        service.terminate(Duration::from_secs(30)),
        "swath did not stop"
    );
    let bus = NatsBus::connect(&nats.url(), NatsBusSettings::default()).await?;
    let published = plan
        .publish(&bus, 0..plan.states, None, 1024, Duration::from_secs(60))
        .await?;
    println!(
        "Backlog: {} states of {} mowers ({}) published in {:.1} s ({:.0}/s), no consumer running.",
        plan.states,
        plan.mowers,
        if plan.steady {
            "steady: 10-minute activity runs"
        } else {
            "volatile: activity drawn at every state"
        },
        published.elapsed.as_secs_f64(),
        published.per_second()
    );
    drop(bus);

    let started = Instant::now();
    let mut service = Service::start(&binary, &db.url, &nats.url(), &[]).await?;
    let pid = service.pid();
    let ready_after = started.elapsed();
    let rss_with_backlog = resident_bytes(pid)?;
    let mowers = plan.mower_ids();

    // RSS sampler for the whole drain.
    let sampler = tokio::spawn(async move {
        let mut peak = 0u64;
        let mut samples = Vec::new();
        loop {
            match resident_bytes(pid) {
                Ok(rss) => {
                    peak = peak.max(rss);
                    samples.push(rss);
                }
                Err(_) => return (peak, samples),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });

    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    let (count0, cpu0, nats0, t0) = (
        stored_count(store.pool(), &mowers).await?,
        cpu_time(pid)?,
        cpu_time(nats.pid())?,
        Instant::now(),
    );
    let commits0 = service.metric("swath_postgres_commits_total").await?;
    let machine0 = machine_cpu();
    let pg0 = backends_cpu(store.pool()).await;
    let mut reached_end = false;
    while t0.elapsed() < Duration::from_secs(args.window) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // The service's counter, not a `count(*)`: the window's PostgreSQL CPU is the service's.
        if service.metric("swath_states_stored_total").await? >= plan.states as f64 {
            reached_end = true;
            break;
        }
    }
    let (count1, cpu1, nats1, elapsed) = (
        stored_count(store.pool(), &mowers).await?,
        cpu_time(pid)?,
        cpu_time(nats.pid())?,
        t0.elapsed(),
    );
    let commits1 = service.metric("swath_postgres_commits_total").await?;
    let machine1 = machine_cpu();
    let pg1 = backends_cpu(store.pool()).await;
    // Backends alive at both ends (those of the bench's own pool are excluded by pid only when
    // they are the querying one; they are idle and cost nothing).
    let pg_cpu: Duration = pg1
        .iter()
        .filter_map(|(pid, end)| pg0.get(pid).map(|start| end.saturating_sub(*start)))
        .sum();
    let rss_window_end = resident_bytes(pid)?;
    let stored = (count1 - count0) as f64;
    let metrics = service.get("/metrics").await?.1;

    println!(
        "Service ready {:.1} s after start; window of {:.1} s from {} s after ready{}.",
        ready_after.as_secs_f64(),
        elapsed.as_secs_f64(),
        args.warmup,
        if reached_end {
            " (the backlog ran out inside the window: shorten it or publish more)"
        } else {
            ""
        }
    );
    println!(
        "End to end, JetStream → PostgreSQL (ingest + watcher): {:>8.0} states/s ({} states stored in the window)",
        stored / elapsed.as_secs_f64(),
        count1 - count0
    );
    println!(
        "Service CPU per state (user + system):                  {:>8.1} µs",
        (cpu1 - cpu0).as_secs_f64() * 1e6 / stored
    );
    println!(
        "Service CPU use over the window:                         {:>8.0} % of one core",
        100.0 * (cpu1 - cpu0).as_secs_f64() / elapsed.as_secs_f64()
    );
    println!(
        "Machine CPU busy over the window (2 cores = 200 %):      {:>8.0} %",
        200.0 * (machine1.0 - machine0.0) as f64 / (machine1.1 - machine0.1).max(1) as f64
    );
    println!(
        "PostgreSQL backends' CPU per state:                      {:>8.1} µs",
        pg_cpu.as_secs_f64() * 1e6 / stored
    );
    println!(
        "NATS server CPU per state:                               {:>8.1} µs",
        (nats1 - nats0).as_secs_f64() * 1e6 / stored
    );
    println!(
        "PostgreSQL commits per state (ingest + watcher):        {:>8.4}",
        (commits1 - commits0) / stored
    );
    // Batch sizes of both consumers, and what was redelivered or dropped, since the start.
    for line in metrics.lines().filter(|l| {
        [
            "swath_ingest_batch_size_sum",
            "swath_ingest_batch_size_count",
            "swath_watch_batch_size_sum",
            "swath_watch_batch_size_count",
            "swath_ingest_redeliveries_total",
            "swath_states_dropped_total",
        ]
        .iter()
        .any(|name| l.starts_with(name))
    }) {
        println!("  {line}");
    }

    // Drain the rest (`--drain`), then the memory figures.
    let rss_drained = if args.drain || args.verify {
        swath_tests::load::wait_stored(
            store.pool(),
            &plan,
            plan.states,
            Duration::from_secs(120),
            None,
        )
        .await?;
        println!(
            "Whole backlog stored {:.1} s after the service started ({:.0} states/s overall).",
            started.elapsed().as_secs_f64(),
            plan.states as f64 / started.elapsed().as_secs_f64()
        );
        Some(resident_bytes(pid)?)
    } else {
        None
    };
    anyhow::ensure!(
        service.terminate(Duration::from_secs(30)),
        "swath did not stop"
    );
    let (peak, samples) = sampler.await?;
    let first_samples: Vec<String> = samples
        .iter()
        .take(8)
        .map(|b| format!("{:.0}", mib(*b)))
        .collect();
    println!(
        "Resident memory (VmRSS): idle, no backlog {:.1} MiB; at start with a backlog of {} \
         unconsumed states {:.1} MiB; first samples [{}] MiB; end of window {:.1} MiB; peak \
         while running {:.1} MiB; backlog drained {}.",
        mib(idle_rss),
        plan.states,
        mib(rss_with_backlog),
        first_samples.join(", "),
        mib(rss_window_end),
        mib(peak),
        rss_drained.map_or("not waited for (--drain)".to_owned(), |b| format!(
            "{:.1} MiB",
            mib(b)
        ))
    );

    if args.verify {
        let stored = swath_application::ports::TelemetryStore::export(&store, &mowers).await?;
        let reference = plan.reference().await?;
        let differences =
            swath_tests::load::compare(&reference, &stored, swath_tests::load::Checked::Everything);
        anyhow::ensure!(
            differences.is_empty(),
            "differences: {}",
            differences.join("\n")
        );
        println!("Verified against the one-pass reference.");
    }
    drop(service);
    drop(nats);
    drop(db);
    Ok(())
}
