//! End to end, JetStream (explicit acks) → one `swath` replica (ingest and watcher consumers)
//! → PostgreSQL: states/s sustained over a window and CPU per state of each process, for
//! several configurations side by side in one run (by default the telemetry partitions P = 1
//! and P = 8, each at the default batch maximum of 64 and at 1 000).
//!
//! For each configuration, in turn, so that the figures are ratios of one machine state:
//! 1. a private NATS server (file storage) and a fresh database on `SWATH_TEST_DATABASE_URL`;
//! 2. the service starts once (migrating the database) and stops (its consumers exist from
//!    then on), the directory of `--mowers` mowers is seeded, and a backlog of their states (the
//!    `swath-load` plan) is published while no service runs;
//! 3. PostgreSQL is checkpointed (the window does not pay for earlier writes), and the release
//!    `swath` binary starts (`SWATH_BUS=nats`, `SWATH_STORE=postgres`, no simulated fleet) with
//!    the configuration's `SWATH_TELEMETRY_PARTITIONS`, `SWATH_TELEMETRY_INGEST_BATCH_MAX` and
//!    `SWATH_NOTIFICATIONS_STATE_BATCH_MAX`;
//! 4. after `--warmup` seconds, states stored (history rows), the CPU time (`/proc/<pid>/stat`
//!    utime + stime) of the service, of NATS and of the PostgreSQL backends serving the
//!    database are read at the start and the end of a `--window`-second window;
//! 5. with `--verify` the rest of the backlog is stored and the rows compared with the
//!    one-pass reference.
//!
//! Then one table: states/s, CPU µs per state and CPU % of one core of each process, and of the
//! whole machine's 200 % over the window what ran this guest's work ("machine busy") and what
//! the hypervisor gave to other guests ("stolen", `/proc/stat`'s steal): on a shared host the
//! stolen share changes from run to run and slows every process alike, so two builds compare
//! best in runs that lost about as much.
//!
//! Run (the service binary must be built first; the bench does not build it):
//! ```text
//! cargo build --release -p swath --bin swath
//! SWATH_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo bench -p swath-tests --bench e2e_nats_postgres -- --window 60
//! ```
//! Options: `--partitions 1,8` and `--batch-max 64,1000` (the configurations: every pair),
//! `--nats single,cluster,cluster-sync` (where the stream lives: one node with R1 streams, the
//! default; a three-node cluster on loopback with R3 streams; the same with `sync_interval:
//! always`), `--states N` (the backlog of each; default 1 700 000 at a batch maximum up to 64,
//! 3 300 000 above), `--mowers M` (200), `--warmup S` (5), `--window S` (60), `--steady` (a
//! usual fleet, 10-minute activity runs, instead of states whose activity, battery and blade are
//! drawn anew every time), `--verify`, `--perf DIR` (`perf record` of each process over the
//! window, a file per process and configuration in `DIR`, and the symbols each spends most in
//! printed after the configuration; sampling costs the processes a little, so the rates of a
//! profiled run are not compared with those of another). Other `SWATH_*` settings of the service are passed
//! through from the bench's environment. `SWATH_BIN` names the binary (default: `release/swath`
//! of `CARGO_TARGET_DIR`, else of the workspace's `target`).

use std::time::{Duration, Instant};
use swath_nats::{NatsBus, NatsBusSettings, StreamSpec};
use swath_postgres::PostgresStore;
use swath_tests::cluster::{Cluster, Durability};
use swath_tests::e2e::{cpu_time, resident_bytes, NatsServer, Service, TestDatabase};
use swath_tests::load::{stored_count, Plan};

struct Args {
    states: Option<usize>,
    mowers: usize,
    warmup: u64,
    window: u64,
    partitions: Vec<u32>,
    batch_max: Vec<usize>,
    deployments: Vec<Deployment>,
    verify: bool,
    steady: bool,
    perf: Option<std::path::PathBuf>,
}

/// Where the stream lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deployment {
    /// One NATS server, R1 streams.
    Single,
    /// A three-node cluster on loopback, R3 streams, with this durability.
    Cluster(Durability),
}

impl Deployment {
    fn parse(value: &str) -> Deployment {
        match value.trim() {
            "single" => Deployment::Single,
            "cluster" => Deployment::Cluster(Durability::Default),
            "cluster-sync" => Deployment::Cluster(Durability::SyncAlways),
            other => panic!("--nats: single, cluster or cluster-sync, not {other}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Deployment::Single => "1 node, R1",
            Deployment::Cluster(Durability::Default) => "3 nodes, R3",
            Deployment::Cluster(Durability::SyncAlways) => "3 nodes, R3, sync always",
        }
    }
}

/// The NATS of one configuration.
enum Nats {
    Single(NatsServer),
    Cluster(Cluster),
}

impl Nats {
    async fn start(deployment: Deployment) -> anyhow::Result<Nats> {
        Ok(match deployment {
            Deployment::Single => Nats::Single(NatsServer::start()?),
            Deployment::Cluster(durability) => Nats::Cluster(Cluster::start(durability).await?),
        })
    }

    fn url(&self) -> String {
        match self {
            Nats::Single(server) => server.url(),
            Nats::Cluster(cluster) => cluster.seeds_from(0),
        }
    }

    fn replicas(&self) -> Option<usize> {
        matches!(self, Nats::Cluster(_)).then_some(3)
    }

    /// CPU time of every server process.
    fn pids(&self) -> Vec<u32> {
        match self {
            Nats::Single(server) => vec![server.pid()],
            Nats::Cluster(cluster) => cluster.pids(),
        }
    }

    fn cpu(&self) -> anyhow::Result<Duration> {
        match self {
            Nats::Single(server) => cpu_time(server.pid()),
            Nats::Cluster(cluster) => cluster.pids().into_iter().map(cpu_time).sum(),
        }
    }
}

fn list<T: std::str::FromStr>(value: Option<String>, what: &str) -> Vec<T> {
    value
        .unwrap_or_default()
        .split(',')
        .map(|v| v.trim().parse().ok())
        .collect::<Option<Vec<T>>>()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| panic!("{what}: a comma-separated list of numbers"))
}

fn args() -> Args {
    let mut args = Args {
        states: None,
        mowers: 200,
        warmup: 5,
        window: 60,
        partitions: vec![1, 8],
        batch_max: vec![64, 1000],
        deployments: vec![Deployment::Single],
        verify: false,
        steady: false,
        perf: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut number = || it.next().and_then(|v| v.parse::<u64>().ok());
        match a.as_str() {
            "--states" => args.states = Some(number().expect("--states N") as usize),
            "--mowers" => args.mowers = number().expect("--mowers M") as usize,
            "--warmup" => args.warmup = number().expect("--warmup S"),
            "--window" => args.window = number().expect("--window S"),
            "--partitions" => args.partitions = list(it.next(), "--partitions"),
            "--batch-max" => args.batch_max = list(it.next(), "--batch-max"),
            "--nats" => {
                args.deployments = it
                    .next()
                    .expect("--nats single,cluster,cluster-sync")
                    .split(',')
                    .map(Deployment::parse)
                    .collect()
            }
            "--verify" => args.verify = true,
            "--steady" => args.steady = true,
            "--perf" => args.perf = Some(it.next().expect("--perf DIR").into()),
            _ => {} // `--bench` and the like, from cargo
        }
    }
    args
}

/// One configuration of the service.
#[derive(Clone, Copy, Debug)]
struct Config {
    partitions: u32,
    batch_max: usize,
    deployment: Deployment,
}

/// What one configuration measured over its window.
struct Measured {
    config: Config,
    states: usize,
    window: Duration,
    ran_out: bool,
    /// CPU time over the window: the service, the PostgreSQL backends, NATS.
    service: Duration,
    postgres: Duration,
    nats: Duration,
    machine_busy: f64,
    /// Of the machine's 200 %, what the hypervisor gave to other guests (`steal`): on a shared
    /// host it changes from run to run, and every process here runs slower by as much.
    stolen: f64,
    commits: f64,
    peak_rss: u64,
}

impl Measured {
    fn per_second(&self) -> f64 {
        self.states as f64 / self.window.as_secs_f64()
    }

    fn micros_per_state(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * 1e6 / self.states.max(1) as f64
    }

    fn percent(&self, cpu: Duration) -> f64 {
        100.0 * cpu.as_secs_f64() / self.window.as_secs_f64()
    }
}

/// Jiffies of the whole machine, from `/proc/stat`'s `cpu` line.
struct MachineCpu {
    /// Running this guest's work (everything but idle, iowait and steal).
    busy: u64,
    /// Taken by the hypervisor for other guests.
    steal: u64,
    total: u64,
}

fn machine_cpu() -> MachineCpu {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is counted in
    // user already.
    let total: u64 = fields.iter().take(8).sum();
    let (idle, steal) = (field(3) + field(4), field(7));
    MachineCpu {
        busy: total - idle - steal,
        steal,
        total,
    }
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

/// A `perf record` of some processes over the window (`--perf`).
struct Profile {
    child: std::process::Child,
    name: String,
    path: std::path::PathBuf,
}

impl Profile {
    /// Samples `pids` for `seconds` (a flat profile: where the time is spent, not who called).
    fn start(
        dir: &std::path::Path,
        name: &str,
        pids: &[u32],
        seconds: u64,
    ) -> anyhow::Result<Profile> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{name}.data"));
        let pids = pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let child = std::process::Command::new("perf")
            .args(["record", "-q", "-F", "499", "-o"])
            .arg(&path)
            .args(["-p", &pids, "--", "sleep", &seconds.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("perf record did not start ({e}): is perf installed?"))?;
        Ok(Profile {
            child,
            name: name.to_owned(),
            path,
        })
    }

    /// Waits for the record to end and prints the symbols with the most samples.
    fn finish(mut self) -> anyhow::Result<()> {
        self.child.wait()?;
        let report = std::process::Command::new("perf")
            .args([
                "report",
                "--stdio",
                "-q",
                "--no-children",
                "--percent-limit",
                "1.5",
            ])
            .args(["--sort", "dso,symbol", "-i"])
            .arg(&self.path)
            .output()?;
        println!("  perf {} ({}):", self.name, self.path.display());
        for line in String::from_utf8_lossy(&report.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(15)
        {
            // `  12.3%  dso  [.] symbol  …`: Go's generic symbols run to hundreds of characters.
            let fields: Vec<&str> = line.split_whitespace().collect();
            if let [overhead, dso, _, symbol @ ..] = fields.as_slice() {
                let symbol: String = symbol.join(" ").chars().take(110).collect();
                println!("    {overhead:>6}  {dso}  {symbol}");
            }
        }
        Ok(())
    }
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
        let target = std::env::var("CARGO_TARGET_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").to_owned());
        format!("{target}/release/swath")
    });
    anyhow::ensure!(
        std::path::Path::new(&binary).exists(),
        "{binary} is missing: cargo build --release -p swath --bin swath (or set SWATH_BIN)"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut measured = Vec::new();
        for &deployment in &args.deployments {
            for &batch_max in &args.batch_max {
                for &partitions in &args.partitions {
                    let config = Config {
                        partitions,
                        batch_max,
                        deployment,
                    };
                    measured.push(measure(&args, config, &server, &binary).await?);
                }
            }
        }
        report(&args, &measured);
        anyhow::Ok(())
    })
}

async fn measure(
    args: &Args,
    config: Config,
    server: &str,
    binary: &str,
) -> anyhow::Result<Measured> {
    let states = args.states.unwrap_or(if config.batch_max <= 64 {
        // Enough for the warm-up and a 60 s window at 25 000 and 50 000 states/s: a backlog
        // that runs out cuts the window short. A larger one is slower to drain (NATS's cost per
        // message grows with the stream, BENCHMARKS.md), so it is not made larger than needed.
        1_700_000
    } else {
        3_300_000
    });
    let plan = Plan::new(0xbe7c, args.mowers, states).with_steady(args.steady);
    println!(
        "\n== {}, P = {}, batch maximum {}",
        config.deployment.name(),
        config.partitions,
        config.batch_max
    );
    let nats = Nats::start(config.deployment).await?;
    let (p, b) = (config.partitions.to_string(), config.batch_max.to_string());
    let replicas = nats.replicas().unwrap_or(1).to_string();
    let env = [
        ("SWATH_TELEMETRY_PARTITIONS", p.as_str()),
        ("SWATH_TELEMETRY_INGEST_BATCH_MAX", b.as_str()),
        ("SWATH_NOTIFICATIONS_STATE_BATCH_MAX", b.as_str()),
        ("SWATH_NATS_REPLICAS", replicas.as_str()),
        // Measured at the default merge gap, not the end-to-end scenarios' (`Service`'s).
        ("SWATH_SESSION_MERGE_GAP_SECONDS", "7200"),
    ];
    let db = TestDatabase::create(server).await?;
    // The consumers exist from the first start on; the backlog is published with none running.
    // That start also migrates the database, with the migrations of the binary measured: an
    // older build (`SWATH_BIN`) refuses a database that has migrations it does not know.
    let mut service = Service::start(binary, &db.url, &nats.url(), &env).await?;
    anyhow::ensure!(
        service.terminate(Duration::from_secs(30)),
        "swath did not stop"
    );
    let store = PostgresStore::connect(&db.url, 2).await?;
    plan.seed_directory(&store).await?;
    // The publisher provisions the stream as the service does: with the same partition count
    // (another is refused).
    let settings = NatsBusSettings {
        streams: vec![
            StreamSpec::telemetry().partitioned(config.partitions),
            StreamSpec::notifications(),
        ],
        replicas: nats.replicas(),
        ..NatsBusSettings::default()
    };
    let bus = NatsBus::connect(&nats.url(), settings).await?;
    let published = plan
        .publish(&bus, 0..plan.states, None, 1024, Duration::from_secs(60))
        .await?;
    println!(
        "Backlog: {} states of {} mowers ({}) published in {:.1} s ({:.0}/s), no consumer running.",
        plan.states,
        plan.mowers,
        if plan.steady { "steady" } else { "volatile" },
        published.elapsed.as_secs_f64(),
        published.per_second()
    );
    drop(bus);
    // The window starts from a settled PostgreSQL, so that it does not pay for checkpointing
    // the writes made before it (the directory, the previous configuration's database).
    if let Err(e) = sqlx::query("CHECKPOINT").execute(store.pool()).await {
        println!("CHECKPOINT refused ({e}): the window may pay for earlier writes.");
    }

    let mut service = Service::start(binary, &db.url, &nats.url(), &env).await?;
    let pid = service.pid();
    let mowers = plan.mower_ids();
    let sampler = tokio::spawn(async move {
        let mut peak = 0u64;
        while let Ok(rss) = resident_bytes(pid) {
            peak = peak.max(rss);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        peak
    });

    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    let (count0, cpu0, nats0, t0) = (
        stored_count(store.pool(), &mowers).await?,
        cpu_time(pid)?,
        nats.cpu()?,
        Instant::now(),
    );
    let commits0 = service.metric("swath_postgres_commits_total").await?;
    let machine0 = machine_cpu();
    let pg0 = backends_cpu(store.pool()).await;
    let profiles = match &args.perf {
        Some(dir) => {
            let label = format!(
                "{:?}-p{}-b{}-s{}",
                config.deployment, config.partitions, config.batch_max, plan.states
            );
            let processes = [
                ("swath", vec![pid]),
                ("postgres", pg0.keys().copied().collect()),
                ("nats-server", nats.pids()),
            ];
            processes
                .into_iter()
                .map(|(name, pids)| {
                    Profile::start(dir, &format!("{label}-{name}"), &pids, args.window)
                })
                .collect::<anyhow::Result<Vec<_>>>()?
        }
        None => Vec::new(),
    };
    let mut ran_out = false;
    while t0.elapsed() < Duration::from_secs(args.window) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // The service's counter, not a `count(*)`: the window's PostgreSQL CPU is the service's.
        if service.metric("swath_states_stored_total").await? >= plan.states as f64 {
            ran_out = true;
            break;
        }
    }
    let (count1, cpu1, nats1, window) = (
        stored_count(store.pool(), &mowers).await?,
        cpu_time(pid)?,
        nats.cpu()?,
        t0.elapsed(),
    );
    let commits1 = service.metric("swath_postgres_commits_total").await?;
    let machine1 = machine_cpu();
    let pg1 = backends_cpu(store.pool()).await;
    for profile in profiles {
        profile.finish()?;
    }
    // Backends alive at both ends (the bench's own pool's are idle and cost nothing).
    let postgres: Duration = pg1
        .iter()
        .filter_map(|(pid, end)| pg0.get(pid).map(|start| end.saturating_sub(*start)))
        .sum();
    let metrics = service.get("/metrics").await?.1;
    for line in metrics.lines().filter(|l| {
        [
            "swath_ingest_batch_size_sum",
            "swath_ingest_batch_size_count",
            "swath_watch_batch_size_sum",
            "swath_watch_batch_size_count",
            "swath_bus_partitions_owned",
            "swath_ingest_redeliveries_total",
            "swath_states_dropped_total",
        ]
        .iter()
        .any(|name| l.starts_with(name))
    }) {
        println!("  {line}");
    }

    if args.verify {
        swath_tests::load::wait_stored(
            store.pool(),
            &plan,
            plan.states,
            Duration::from_secs(120),
            None,
        )
        .await?;
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
    anyhow::ensure!(
        service.terminate(Duration::from_secs(30)),
        "swath did not stop"
    );
    let measured = Measured {
        config,
        states: count1 - count0,
        window,
        ran_out,
        service: cpu1 - cpu0,
        postgres,
        nats: nats1 - nats0,
        machine_busy: 200.0 * (machine1.busy - machine0.busy) as f64
            / (machine1.total - machine0.total).max(1) as f64,
        stolen: 200.0 * (machine1.steal - machine0.steal) as f64
            / (machine1.total - machine0.total).max(1) as f64,
        commits: commits1 - commits0,
        peak_rss: sampler.await?,
    };
    println!(
        "{:.0} states/s ({} in {:.1} s{}), service {:.1} µs per state.",
        measured.per_second(),
        measured.states,
        measured.window.as_secs_f64(),
        if ran_out { ", the backlog ran out" } else { "" },
        measured.micros_per_state(measured.service)
    );
    drop(service);
    drop(nats);
    drop(db);
    Ok(measured)
}

fn report(args: &Args, measured: &[Measured]) {
    println!(
        "\nOne swath replica, {} plan of {} mowers, window {} s after {} s of warm-up. CPU: µs \
         per state stored (% of one core over the window). Machine: 2 cores = 200 %.\n",
        if args.steady { "steady" } else { "volatile" },
        args.mowers,
        args.window,
        args.warmup
    );
    println!(
        "| NATS | P | batch max | states/s | swath | PostgreSQL | nats-server | machine busy | stolen | commits / state | peak VmRSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for m in measured {
        println!(
            "| {} | {} | {} | {:.0}{} | {:.1} µs ({:.0} %) | {:.1} µs ({:.0} %) | {:.1} µs ({:.0} %) | {:.0} % | {:.0} % | {:.4} | {:.1} MiB |",
            m.config.deployment.name(),
            m.config.partitions,
            m.config.batch_max,
            m.per_second(),
            if m.ran_out { " (backlog ran out)" } else { "" },
            m.micros_per_state(m.service),
            m.percent(m.service),
            m.micros_per_state(m.postgres),
            m.percent(m.postgres),
            m.micros_per_state(m.nats),
            m.percent(m.nats),
            m.machine_busy,
            m.stolen,
            m.commits / m.states.max(1) as f64,
            mib(m.peak_rss)
        );
    }
}
