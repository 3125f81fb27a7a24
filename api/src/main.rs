//! `swath`: the one binary. It reads its settings from the environment (or flags), picks the
//! adapters, wires the use cases and serves the API.
//!
//! `swath` (or `swath serve`) serves everything on the memory adapters with a simulated demo
//! fleet; `swath openapi` prints the OpenAPI document (the command that regenerates
//! `openapi/openapi.json`).
//!
//! # Layout
//! - [`Cli`], [`ServeArgs`], [`LogArgs`]: the settings, each with its `SWATH_*` variable (and a
//!   flag of `swath serve`); clap refuses an invalid value before anything starts, naming the
//!   variable.
//! - [`serve`]: start-up in dependency order, then shutdown in reverse: HTTP first (no new
//!   requests), then the simulator (no new states), then the ingest and watcher consumers are
//!   drained and the offline sweep stopped.

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use rand::RngCore;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use swath_api::{router, AppState};
use swath_application::import::import_ndjson;
use swath_application::ports::{
    hash_token, Assignments, BatchSettings, Clock, Directory, DirectoryAdmin, EventBus,
    Partitioning, Principal, ProjectionStore, RetentionStore, Scope, StartAt, SystemClock,
    TelemetryStore, TokenError, TokenStore, WatchStore,
};
use swath_application::simulator::{seed_demo_fleet, DemoFleet, Simulator, SimulatorSettings};
use swath_application::{subjects, Ingest, Projections, Retention, SchedulerStatus, Watcher};
use swath_memory::{
    MemoryBus, MemoryBusSettings, MemoryProjections, MemoryStore, MemoryStoreSettings,
    DEFAULT_HISTORY_PER_MOWER,
};
use swath_postgres::PostgresStore;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing_subscriber::EnvFilter;

mod admin_cli;
mod maintenance_cli;

/// How long open HTTP requests may take to finish once shutdown began.
const HTTP_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Swath: telemetry of a robot lawn mower fleet.
#[derive(Debug, Parser)]
#[command(name = "swath", version)]
struct Cli {
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    log: LogArgs,
}

/// `swath` without a subcommand serves with the settings of the environment. Parsed only then, so
/// that `swath openapi` does not depend on the serve settings.
#[derive(Debug, Parser)]
#[command(name = "swath")]
struct ServeFromEnv {
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the API on the configured adapters (the default).
    Serve(Box<ServeArgs>),
    /// Print the OpenAPI document (pretty JSON) to stdout. Regenerates the committed copy:
    /// `cargo run -p swath-api -- openapi > openapi/openapi.json`.
    Openapi,
    /// Import state reports from an NDJSON file (one report per line), 200 per transaction
    /// through the ingest path, with a progress bar and a summary.
    Import(ImportArgs),
    /// Print the states the demo fleet (created in the store if missing) would have reported over
    /// the past hours, as NDJSON for `swath import`: `swath simulate --hours 1 > states.ndjson`.
    Simulate(SimulateArgs),
    /// API tokens: `swath token create --account <id> --scopes read,write,admin`.
    #[command(subcommand)]
    Token(admin_cli::TokenCommand),
    /// Accounts: `swath account create --name <name>`.
    #[command(subcommand)]
    Account(admin_cli::AccountCommand),
    /// Maintenance: `swath maintenance retention [--dry-run]`.
    #[command(subcommand)]
    Maintenance(maintenance_cli::MaintenanceCommand),
}

#[derive(Clone, Debug, Args)]
struct ImportArgs {
    /// The NDJSON file to import.
    file: std::path::PathBuf,
    /// Exit with an error when any line was refused (the other lines are stored all the same).
    #[arg(long)]
    strict: bool,
    /// Import into the memory store although it keeps nothing once this command ends (a dry
    /// run: the summary says what the file would store). Without it, the memory store is
    /// refused: set `SWATH_STORE=postgres` and `SWATH_DATABASE_URL`.
    #[arg(long)]
    into_memory: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Clone, Debug, Args)]
struct SimulateArgs {
    /// How many hours of history, ending now.
    #[arg(long, default_value = "1", value_parser = parse_hours)]
    hours: f64,
    /// How many demo mowers report.
    #[arg(long = "sim-mowers", env = "SWATH_SIM_MOWERS", value_name = "SWATH_SIM_MOWERS",
        default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    sim_mowers: u32,
    /// Makes the history the same on every run (with the same store and clock).
    #[arg(
        long = "sim-seed",
        env = "SWATH_SIM_SEED",
        value_name = "SWATH_SIM_SEED"
    )]
    sim_seed: Option<u64>,
    #[command(flatten)]
    store: StoreArgs,
}

/// Which store, and how to reach it.
#[derive(Clone, Debug, Args)]
struct StoreArgs {
    /// Where the directory, tokens and telemetry are stored.
    #[arg(long = "store", env = "SWATH_STORE", value_name = "SWATH_STORE", value_enum,
        default_value_t = StoreKind::Memory)]
    store: StoreKind,
    /// The PostgreSQL URL, for `SWATH_STORE=postgres`.
    #[arg(
        long = "database-url",
        env = "SWATH_DATABASE_URL",
        value_name = "SWATH_DATABASE_URL",
        hide_env_values = true,
        required_if_eq("store", "postgres"),
        value_parser = parse_database_url
    )]
    database_url: Option<String>,
    /// The most PostgreSQL connections of this process.
    #[arg(long = "database-max-connections", env = "SWATH_DATABASE_MAX_CONNECTIONS",
        value_name = "SWATH_DATABASE_MAX_CONNECTIONS", default_value_t = 16,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    database_max_connections: u32,
    /// History and position rows the memory store keeps per mower (the oldest go first; the
    /// history and track pages then say where the kept rows begin). The default keeps more than
    /// a day of one state a second.
    #[arg(long = "memory-history-per-mower", env = "SWATH_MEMORY_HISTORY_PER_MOWER",
        value_name = "SWATH_MEMORY_HISTORY_PER_MOWER",
        default_value_t = DEFAULT_HISTORY_PER_MOWER as u64,
        value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    memory_history_per_mower: u64,
}

/// The store, seen through each port it implements.
struct Stores {
    directory: Arc<dyn Directory>,
    /// The same directory as the API manages it.
    admin: Arc<dyn DirectoryAdmin>,
    tokens: Arc<dyn TokenStore>,
    telemetry: Arc<dyn TelemetryStore>,
    /// Geofences, zones, watch rows, events, alerts, busy statuses.
    watch: Arc<dyn WatchStore>,
    /// Retention and downsampling of history and positions.
    retention: Arc<dyn RetentionStore>,
    /// The live projections' reads and the operator assignments.
    projections: Arc<dyn ProjectionStore>,
    assignments: Arc<dyn Assignments>,
}

impl StoreArgs {
    /// Opens the configured store; PostgreSQL is migrated first (under an advisory lock, so
    /// replicas starting together do not race) and its partitions for the coming months made.
    async fn open(&self) -> anyhow::Result<Stores> {
        match self.store {
            StoreKind::Memory => {
                let history_per_mower = usize::try_from(self.memory_history_per_mower)
                    .context("SWATH_MEMORY_HISTORY_PER_MOWER is too large")?;
                let store = Arc::new(MemoryStore::new(MemoryStoreSettings { history_per_mower }));
                let projections = Arc::new(MemoryProjections::new((*store).clone()));
                Ok(Stores {
                    projections: projections.clone(),
                    assignments: projections,
                    directory: store.clone(),
                    admin: store.clone(),
                    tokens: store.clone(),
                    telemetry: store.clone(),
                    watch: store.clone(),
                    retention: store,
                })
            }
            StoreKind::Postgres => {
                let url = self
                    .database_url
                    .as_deref()
                    .context("SWATH_DATABASE_URL is required with SWATH_STORE=postgres")?;
                // At once and with the cause ("connection refused"), not after a pool's timeout.
                swath_postgres::probe(url)
                    .await
                    .context("could not connect to PostgreSQL (SWATH_DATABASE_URL)")?;
                swath_migrations::migrate(url)
                    .await
                    .context("could not migrate the database at SWATH_DATABASE_URL")?;
                let store = PostgresStore::connect(url, self.database_max_connections)
                    .await
                    .context("could not connect to SWATH_DATABASE_URL")?;
                let created = store
                    .ensure_partitions(3)
                    .await
                    .context("could not create the partitions of the coming months")?;
                tracing::info!(
                    partitions_created = created,
                    "Connected to PostgreSQL and migrated it."
                );
                let store = Arc::new(store);
                Ok(Stores {
                    projections: store.clone(),
                    assignments: store.clone(),
                    directory: store.clone(),
                    admin: store.clone(),
                    tokens: store.clone(),
                    telemetry: store.clone(),
                    watch: store.clone(),
                    retention: store,
                })
            }
        }
    }
}

/// Where the directory, the tokens and the telemetry are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    /// In process, lost on exit: the embedded default.
    Memory,
    /// PostgreSQL at `SWATH_DATABASE_URL`; migrated at start-up.
    Postgres,
}

/// Which event bus carries the states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BusKind {
    /// In process: the embedded default.
    Memory,
    /// NATS JetStream at `SWATH_NATS_URL`; streams and consumers are provisioned at start-up.
    Nats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The log filter of `swath serve` when `SWATH_LOG` is not set.
const SERVE_LOG_FILTER: &str = "info,sqlx=warn";
/// The log filter of the other subcommands when neither `SWATH_LOG` nor `-v` is given: they print
/// their answer on stdout (often captured by a script), and only warnings and errors on stderr.
const CLI_LOG_FILTER: &str = "warn";

#[derive(Debug, Args)]
struct LogArgs {
    /// Which logs to write, as a tracing filter (`info`, `swath_api=debug,info`, …). Default:
    /// `info,sqlx=warn` when serving; `warn` for the other subcommands unless `-v` is given.
    #[arg(long = "log", env = "SWATH_LOG", value_name = "SWATH_LOG",
        value_parser = parse_log_filter, global = true)]
    filter: Option<String>,
    /// Subcommands other than `serve`: also log what they do (the serve filter).
    #[arg(short = 'v', long = "verbose", global = true)]
    verbose: bool,
    /// How to write the logs.
    #[arg(long = "log-format", env = "SWATH_LOG_FORMAT", value_name = "SWATH_LOG_FORMAT",
        value_enum, default_value_t = LogFormat::Pretty, global = true)]
    format: LogFormat,
}

#[derive(Clone, Debug, Args)]
struct ServeArgs {
    /// Header-read and idle timeouts, the connection limit.
    #[command(flatten)]
    http_limits: swath_api::server::HttpLimits,
    /// The address the HTTP server listens on.
    /// A host name (`localhost:8080`) listens on every address the name resolves to.
    #[arg(
        long = "http-addr",
        env = "SWATH_HTTP_ADDR",
        value_name = "SWATH_HTTP_ADDR",
        default_value = "127.0.0.1:8080",
        value_parser = parse_http_addr
    )]
    http_addr: String,
    /// The bearer token of the demo account (scopes read, write, admin). Default: a random
    /// 32-byte hex token, printed at start-up.
    #[arg(long = "demo-token", env = "SWATH_DEMO_TOKEN", value_name = "SWATH_DEMO_TOKEN",
        hide_env_values = true, value_parser = parse_token)]
    demo_token: Option<String>,
    /// How many mowers the simulated demo fleet has.
    #[arg(long = "sim-mowers", env = "SWATH_SIM_MOWERS", value_name = "SWATH_SIM_MOWERS",
        default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    sim_mowers: u32,
    /// How often a simulated mower reports while its activity does not change, in seconds
    /// (changes are reported at once).
    #[arg(long = "sim-state-period-seconds", env = "SWATH_SIM_STATE_PERIOD_SECONDS",
        value_name = "SWATH_SIM_STATE_PERIOD_SECONDS", default_value = "1", value_parser = parse_positive_seconds)]
    sim_state_period: Duration,
    /// Makes the simulated fleet behave the same on every run. Default: a new behaviour each run.
    #[arg(
        long = "sim-seed",
        env = "SWATH_SIM_SEED",
        value_name = "SWATH_SIM_SEED"
    )]
    sim_seed: Option<u64>,
    /// The most states the ingest consumer stores in one batch.
    #[arg(long = "telemetry-ingest-batch-max", env = "SWATH_TELEMETRY_INGEST_BATCH_MAX",
        value_name = "SWATH_TELEMETRY_INGEST_BATCH_MAX", default_value_t = 64,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    ingest_batch_max: u32,
    /// How long the ingest consumer lingers for more states once one arrived, in seconds. Zero
    /// batches only what queued up while the previous batch ran.
    #[arg(long = "telemetry-ingest-batch-wait-seconds", env = "SWATH_TELEMETRY_INGEST_BATCH_WAIT_SECONDS",
        value_name = "SWATH_TELEMETRY_INGEST_BATCH_WAIT_SECONDS", default_value = "0.2",
        value_parser = parse_seconds)]
    ingest_batch_wait: Duration,
    /// The most states the watcher (notification rules) handles in one batch.
    #[arg(long = "notifications-state-batch-max", env = "SWATH_NOTIFICATIONS_STATE_BATCH_MAX",
        value_name = "SWATH_NOTIFICATIONS_STATE_BATCH_MAX", default_value_t = 64,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    notifications_batch_max: u32,
    /// How long the watcher lingers for more states once one arrived, in seconds.
    #[arg(long = "notifications-state-batch-wait-seconds", env = "SWATH_NOTIFICATIONS_STATE_BATCH_WAIT_SECONDS",
        value_name = "SWATH_NOTIFICATIONS_STATE_BATCH_WAIT_SECONDS", default_value = "0.2",
        value_parser = parse_seconds)]
    notifications_batch_wait: Duration,
    /// A mower silent for this long (seconds since Swath last received one of its states) goes
    /// offline: `went_offline` and an offline alert.
    #[arg(long = "offline-after-seconds", env = "SWATH_OFFLINE_AFTER_SECONDS",
        value_name = "SWATH_OFFLINE_AFTER_SECONDS", default_value = "600",
        value_parser = parse_positive_seconds)]
    offline_after: Duration,
    /// How often the offline sweep looks for silent mowers, in seconds.
    #[arg(long = "offline-sweep-seconds", env = "SWATH_OFFLINE_SWEEP_SECONDS",
        value_name = "SWATH_OFFLINE_SWEEP_SECONDS", default_value = "30",
        value_parser = parse_positive_seconds)]
    offline_sweep_period: Duration,
    #[command(flatten)]
    store: StoreArgs,
    /// Which event bus carries the states.
    #[arg(long = "bus", env = "SWATH_BUS", value_name = "SWATH_BUS", value_enum,
        default_value_t = BusKind::Memory)]
    bus: BusKind,
    /// The NATS URL, for `SWATH_BUS=nats`.
    #[arg(
        long = "nats-url",
        env = "SWATH_NATS_URL",
        value_name = "SWATH_NATS_URL",
        required_if_eq("bus", "nats"),
        value_parser = parse_nats_url
    )]
    nats_url: Option<String>,
    /// JetStream `ack_wait` of the durable consumers, in seconds: how long a delivery a replica
    /// took and never settled (it died) waits before it is redelivered. A dead replica's
    /// partitions move to another replica this plus 3 s after its last pull (docs/operations.md).
    #[arg(long = "nats-ack-wait-seconds", env = "SWATH_NATS_ACK_WAIT_SECONDS",
        value_name = "SWATH_NATS_ACK_WAIT_SECONDS", default_value = "4",
        value_parser = parse_positive_seconds)]
    nats_ack_wait: Duration,
    /// How many partitions the mowers' states are split into (1 to 64): each is handled by one
    /// replica at a time, in order, and a replica handles its partitions concurrently. Set once
    /// per deployment: NATS refuses to start with another count than its stream was made with.
    #[arg(long = "telemetry-partitions", env = "SWATH_TELEMETRY_PARTITIONS",
        value_name = "SWATH_TELEMETRY_PARTITIONS", default_value_t = swath_nats::DEFAULT_TELEMETRY_PARTITIONS,
        value_parser = clap::value_parser!(u32).range(1..=swath_application::ports::MAX_PARTITIONS as i64))]
    telemetry_partitions: u32,
    /// Replicas of the streams Swath creates or brings in line (3 on a three-node NATS cluster).
    /// Unset: a new stream gets one, an existing one keeps what an operator set.
    #[arg(long = "nats-replicas", env = "SWATH_NATS_REPLICAS", value_name = "SWATH_NATS_REPLICAS",
        value_parser = clap::value_parser!(u8).range(1..=5))]
    nats_replicas: Option<u8>,
    /// A NATS credentials file (`.creds`: JWT and NKey seed) to authenticate with. A user and
    /// password go in SWATH_NATS_URL (`nats://user:password@host:4222`).
    #[arg(
        long = "nats-creds",
        env = "SWATH_NATS_CREDS",
        value_name = "SWATH_NATS_CREDS",
        value_parser = parse_file
    )]
    nats_creds: Option<std::path::PathBuf>,
    /// A PEM file of the certificate authorities of the NATS servers' certificates, when they
    /// are not in the system's roots (with `tls://` URLs).
    #[arg(
        long = "nats-tls-ca",
        env = "SWATH_NATS_TLS_CA",
        value_name = "SWATH_NATS_TLS_CA",
        value_parser = parse_file
    )]
    nats_tls_ca: Option<std::path::PathBuf>,
    #[command(flatten)]
    retention: maintenance_cli::RetentionScheduleArgs,
}

impl ServeArgs {
    /// Connects the configured bus.
    async fn open_bus(&self) -> anyhow::Result<Arc<dyn EventBus>> {
        Ok(match self.bus {
            BusKind::Memory => Arc::new(MemoryBus::new(MemoryBusSettings {
                partitioning: Some(
                    Partitioning::new(subjects::TELEMETRY_ALL, self.telemetry_partitions)
                        .context("SWATH_TELEMETRY_PARTITIONS")?,
                ),
                ..MemoryBusSettings::default()
            })),
            BusKind::Nats => {
                let url = self
                    .nats_url
                    .as_deref()
                    .context("SWATH_NATS_URL is required with SWATH_BUS=nats")?;
                let settings = swath_nats::NatsBusSettings {
                    ack_wait: self.nats_ack_wait,
                    streams: vec![
                        swath_nats::StreamSpec::telemetry().partitioned(self.telemetry_partitions),
                        swath_nats::StreamSpec::notifications(),
                    ],
                    replicas: self.nats_replicas.map(usize::from),
                    credentials: self.nats_creds.clone(),
                    tls_ca: self.nats_tls_ca.clone(),
                    ..swath_nats::NatsBusSettings::default()
                };
                let bus = swath_nats::NatsBus::connect(url, settings)
                    .await
                    .context("could not connect to NATS at SWATH_NATS_URL")?;
                tracing::info!("Connected to NATS JetStream and provisioned its streams.");
                Arc::new(bus)
            }
        })
    }
}

/// Keeps `swath_bus_partitions_owned{consumer}` at how many partitions of each consumer this
/// replica holds (the balance across replicas, docs/operations.md), every second until `stop`.
async fn report_partitions_owned(
    consumers: [(&'static str, Arc<std::sync::atomic::AtomicUsize>); 2],
    mut stop: watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        for (consumer, owned) in &consumers {
            let held = owned.load(std::sync::atomic::Ordering::Relaxed);
            metrics::gauge!("swath_bus_partitions_owned", "consumer" => *consumer).set(held as f64);
        }
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    }
}

/// A duration in seconds: finite and not negative, fractions allowed.
fn parse_seconds(value: &str) -> Result<Duration, String> {
    let seconds: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("`{value}` must be a finite number of seconds >= 0"))
}

/// A duration in seconds, more than zero.
fn parse_positive_seconds(value: &str) -> Result<Duration, String> {
    match parse_seconds(value) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("`{value}` must be a finite number of seconds > 0")),
    }
}

/// A listening address: `host:port`, the host an IP address or a name that resolves (checked now,
/// so that a typo is named at start-up).
fn parse_http_addr(value: &str) -> Result<String, String> {
    use std::net::ToSocketAddrs;
    let expected = "expected host:port, for example 127.0.0.1:8080, localhost:8080 or [::1]:8080";
    match value
        .to_socket_addrs()
        .map(|mut addrs| addrs.next().is_some())
    {
        Ok(true) => Ok(value.to_owned()),
        Ok(false) => Err(format!("`{value}` resolves to no address; {expected}")),
        Err(e) => Err(format!("`{value}`: {e}; {expected}")),
    }
}

/// Hours of history: more than zero, at most a year.
fn parse_hours(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(h) if h > 0.0 && h <= 24.0 * 366.0 => Ok(h),
        _ => Err(format!(
            "`{value}` must be a number of hours > 0 and <= 8784"
        )),
    }
}

/// A PostgreSQL URL: checked for its scheme now, so that a typo is named at start-up rather than
/// as a failed connection.
fn parse_database_url(value: &str) -> Result<String, String> {
    if value.starts_with("postgres://") || value.starts_with("postgresql://") {
        Ok(value.to_owned())
    } else {
        Err("expected a URL of the form postgres://user[:password]@host[:port]/database".to_owned())
    }
}

/// A NATS server address: `nats://host:port` (or `tls://`, `ws://`, `wss://`), or `host:port`.
fn parse_nats_url(value: &str) -> Result<String, String> {
    let expected = "expected nats://host:port (or tls://, ws://, wss://), or host:port; several \
                    servers of a cluster comma-separated";
    for server in value.split(',').map(str::trim) {
        let rest = match server.split_once("://") {
            Some((scheme, rest)) if ["nats", "tls", "ws", "wss"].contains(&scheme) => rest,
            Some(_) => return Err(expected.to_owned()),
            None => server,
        };
        // Credentials may come first (user:password@host:port).
        let host = rest.rsplit('@').next().unwrap_or(rest);
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(expected.to_owned());
        }
    }
    swath_nats::servers(value).map_err(|e| format!("{e}; {expected}"))?;
    Ok(value.to_owned())
}

/// A file that exists, checked now so that a wrong path is named at start-up.
fn parse_file(value: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::PathBuf::from(value);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{value} is not a file"))
    }
}

/// A tracing filter, checked now so that a typo stops start-up instead of silencing the logs.
fn parse_log_filter(value: &str) -> Result<String, String> {
    EnvFilter::try_new(value)
        .map(|_| value.to_owned())
        .map_err(|e| format!("not a tracing filter: {e}"))
}

/// A bearer token: printable ASCII without spaces, so that it fits an `Authorization` header.
fn parse_token(value: &str) -> Result<String, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token must be non-empty printable ASCII without spaces".to_owned());
    }
    Ok(value.to_owned())
}

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
        Some(Command::Import(args)) => import(args).await,
        Some(Command::Simulate(args)) => simulate(args).await,
        Some(Command::Token(command)) => admin_cli::token(command).await,
        Some(Command::Account(command)) => admin_cli::account(command).await,
        Some(Command::Maintenance(command)) => maintenance_cli::maintenance(command).await,
        None => serve(ServeFromEnv::parse_from(["swath"]).serve).await,
    }
}

/// Parses the command line. `swath --help` also lists every setting of `swath serve` (what
/// `swath` alone runs) with its variable and default, so that one page names them all.
fn parse_cli() -> Cli {
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

/// Logs go to stderr: in colour only when it is a terminal (never escape codes in a file or a
/// pipe), at the serve filter when serving and at `warn` for the other subcommands unless asked.
fn init_tracing(log: &LogArgs, serving: bool) {
    use std::io::IsTerminal;
    let filter = match &log.filter {
        Some(filter) => filter.as_str(),
        None if serving || log.verbose => SERVE_LOG_FILTER,
        None => CLI_LOG_FILTER,
    };
    // The filter was validated by clap; the fallback is never used in practice.
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match log.format {
        LogFormat::Pretty => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Serves until Ctrl-C or SIGTERM, then shuts down in order and returns.
async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Before anything records a metric, so that `/metrics` sees every one.
    swath_api::routes::operations::metrics_handle();
    let retention_policy = args.retention.retention.policy::<Cli>();
    let Stores {
        directory,
        admin,
        tokens,
        telemetry,
        watch: watch_store,
        retention: retention_store,
        projections,
        assignments,
    } = args.store.open().await?;
    let bus = args.open_bus().await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ingest = Arc::new(
        Ingest::new(Arc::clone(&telemetry), Arc::clone(&bus), Arc::clone(&clock))
            .with_zones(Arc::clone(&watch_store)),
    );
    let offline_after = chrono::Duration::from_std(args.offline_after)
        .context("SWATH_OFFLINE_AFTER_SECONDS is too large")?;
    let watcher = Arc::new(Watcher::new(
        Arc::clone(&watch_store),
        Arc::clone(&bus),
        Arc::clone(&clock),
        offline_after,
    ));
    let scheduler = Arc::new(SchedulerStatus::new(
        Arc::clone(&watch_store),
        Arc::clone(&clock),
    ));

    // The consumer exists before the first state is published, so that none is missed.
    let ingest_subscription = bus
        .subscribe_batch(
            subjects::TELEMETRY_ALL,
            subjects::INGEST_CONSUMER,
            BatchSettings {
                max_batch: args.ingest_batch_max as usize,
                max_wait: args.ingest_batch_wait,
                // Nothing the stream holds is skipped, even what came before the first start.
                start: StartAt::Stored,
                ..BatchSettings::default()
            },
            ingest.handler(),
        )
        .await
        .context("could not subscribe the ingest consumer")?;
    // The watcher is the second consumer of every state (with the busy check on its batches).
    let watcher_subscription = bus
        .subscribe_batch(
            subjects::TELEMETRY_ALL,
            subjects::WATCHER_CONSUMER,
            BatchSettings {
                max_batch: args.notifications_batch_max as usize,
                max_wait: args.notifications_batch_wait,
                ..BatchSettings::default()
            },
            watcher.handler(Some(scheduler)),
        )
        .await
        .context("could not subscribe the watcher consumer")?;
    let (stop_sweep, sweep_stop) = watch::channel(false);
    tokio::spawn(report_partitions_owned(
        [
            (
                subjects::INGEST_CONSUMER,
                ingest_subscription.partitions_owned_counter(),
            ),
            (
                subjects::WATCHER_CONSUMER,
                watcher_subscription.partitions_owned_counter(),
            ),
        ],
        sweep_stop.clone(),
    ));
    let sweep = tokio::spawn(offline_sweep(
        Arc::clone(&watcher),
        args.offline_sweep_period,
        sweep_stop.clone(),
    ));
    // Retention on its schedule, stopped (between two steps) with the sweep.
    let retention = (!args.retention.interval.is_zero()).then(|| {
        let retention = Arc::new(Retention::new(
            retention_store,
            Arc::clone(&clock),
            retention_policy,
        ));
        tokio::spawn(swath_application::retention::run_every(
            retention,
            args.retention.interval,
            sweep_stop,
        ))
    });

    let sim_settings = SimulatorSettings {
        mowers: args.sim_mowers as usize,
        state_period: args.sim_state_period,
        seed: args.sim_seed,
    };
    let fleet = seed_demo_fleet(directory.as_ref(), &sim_settings)
        .await
        .context("could not seed the demo fleet")?;
    let (token, generated) = match args.demo_token {
        Some(token) => (token, false),
        None => (random_token(), true),
    };
    let demo_principal = Principal {
        account_id: fleet.account.id,
        scopes: vec![Scope::Read, Scope::Write, Scope::Admin],
        sites: None,
    };
    match tokens
        .store_token(hash_token(&token), demo_principal.clone())
        .await
    {
        Ok(()) => {}
        // A restart on a persistent store with the same SWATH_DEMO_TOKEN: fine if it is ours.
        Err(TokenError::Conflict)
            if tokens.principal(&hash_token(&token)).await? == Some(demo_principal) => {}
        Err(e) => return Err(e).context("could not store the demo token"),
    }
    tracing::info!(
        account_id = %fleet.account.id,
        sites = fleet.sites.len(),
        mowers = fleet.mowers.len(),
        "Seeded the demo fleet."
    );

    let (stop_simulator, simulator_stop) = watch::channel(false);
    let simulator = Simulator::spawn(
        Arc::clone(&bus),
        Arc::clone(&clock),
        &fleet,
        sim_settings,
        simulator_stop,
    );

    let state = AppState::new(admin, tokens, telemetry, bus, clock, ingest)
        .with_principal_ttl(swath_application::access::PRINCIPAL_CACHE_TTL)
        .with_watch(watch_store)
        .with_projections(Projections::new(projections), assignments);
    let listener = TcpListener::bind(args.http_addr.as_str())
        .await
        .with_context(|| format!("could not listen on {} (SWATH_HTTP_ADDR)", args.http_addr))?;
    let addr = listener
        .local_addr()
        .context("could not read the listening address")?;
    print_banner(addr, &token, generated, &fleet);
    tracing::info!(%addr, "Serving HTTP.");

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = shutdown_tx.send(true);
    });
    let server = swath_api::server::serve(
        listener,
        router(state),
        args.http_limits,
        wait_for(shutdown_rx.clone()),
    );
    let drain_deadline = async {
        wait_for(shutdown_rx).await;
        tokio::time::sleep(HTTP_DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        served = server => served.context("the HTTP server failed")?,
        () = drain_deadline => tracing::warn!(
            timeout_seconds = HTTP_DRAIN_TIMEOUT.as_secs(),
            "Open HTTP requests did not finish in time; closing them."
        ),
    }
    tracing::info!("HTTP stopped; stopping the simulator.");

    let _ = stop_simulator.send(true);
    if let Err(e) = simulator.await {
        tracing::error!(error = %e, "The simulator ended abnormally.");
    }
    tracing::info!("Simulator stopped; draining the ingest and watcher consumers.");
    tokio::join!(
        ingest_subscription.unsubscribe(),
        watcher_subscription.unsubscribe()
    );
    let _ = stop_sweep.send(true);
    if let Err(e) = sweep.await {
        tracing::error!(error = %e, "The offline sweep ended abnormally.");
    }
    if let Some(Err(e)) = match retention {
        Some(task) => Some(task.await),
        None => None,
    } {
        tracing::error!(error = %e, "The retention schedule ended abnormally.");
    }
    tracing::info!("Shut down cleanly.");
    Ok(())
}

/// Runs the offline sweep every `period` until `stop` turns `true`. A failed sweep is logged and
/// tried again at the next period (what it did not commit, it did not do).
async fn offline_sweep(watcher: Arc<Watcher>, period: Duration, mut stop: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            _ = ticks.tick() => {}
        }
        match watcher.sweep_offline().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(mowers = n, "Marked silent mowers offline."),
            Err(e) => tracing::warn!(error = %e, "The offline sweep failed; it will run again."),
        }
    }
}

/// `swath import FILE`: the file's reports through the ingest path, 200 per transaction. Fails
/// when no state of the file is stored, and with `--strict` when any line was refused.
async fn import(args: ImportArgs) -> anyhow::Result<()> {
    if args.store.store == StoreKind::Memory && !args.into_memory {
        anyhow::bail!(
            "swath import would store into the memory store, which keeps nothing once the command \
             ends: set SWATH_STORE=postgres and SWATH_DATABASE_URL (or pass --into-memory for a \
             dry run)"
        );
    }
    let stores = args.store.open().await?;
    // Derived events (blade due) go to an in-process bus: an import of history must not page
    // anyone about the past.
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new(MemoryBusSettings::default()));
    let ingest = Ingest::new(stores.telemetry, bus, Arc::new(SystemClock));
    let file = tokio::fs::File::open(&args.file)
        .await
        .with_context(|| format!("could not open {}", args.file.display()))?;
    let size = file.metadata().await.map(|m| m.len()).unwrap_or(0);
    let bar = indicatif::ProgressBar::new(size).with_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .context("progress bar template")?,
    );
    let summary = import_ndjson(&ingest, tokio::io::BufReader::new(file), |bytes| {
        bar.set_position(bytes)
    })
    .await;
    bar.finish_and_clear();
    let summary =
        summary.with_context(|| format!("the import of {} stopped", args.file.display()))?;
    let c = &summary.counts;
    let refused = summary.refused_count();
    println!(
        "Imported {}: {} reports: {} new ({} late, merged into the totals; {} late past \
         retention, not counted), {} already stored, {} refused.",
        args.file.display(),
        summary.reports,
        c.new_states(),
        c.late_merged,
        c.late_not_counted,
        c.duplicates,
        refused,
    );
    for (reason, count) in &summary.dropped {
        println!("  refused {count:>8}  {reason}");
    }
    for line in &summary.refused {
        match &line.detail {
            Some(detail) => println!("  line {}: {} ({detail})", line.line, line.reason),
            None => println!("  line {}: {}", line.line, line.reason),
        }
    }
    if refused > summary.refused.len() as u64 {
        println!(
            "  … and {} more refused lines.",
            refused - summary.refused.len() as u64
        );
    }
    if summary.stored == 0 {
        anyhow::bail!(
            "no state of {} is stored: {} reports, {} refused",
            args.file.display(),
            summary.reports,
            refused
        );
    }
    if args.strict && refused > 0 {
        anyhow::bail!(
            "--strict: {refused} refused in {}; the other {} states are stored",
            args.file.display(),
            summary.stored
        );
    }
    Ok(())
}

/// `swath simulate`: the demo fleet's history as NDJSON on stdout.
async fn simulate(args: SimulateArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let stores = args.store.open().await?;
    let settings = SimulatorSettings {
        mowers: args.sim_mowers as usize,
        seed: args.sim_seed,
        ..SimulatorSettings::default()
    };
    let fleet = seed_demo_fleet(stores.directory.as_ref(), &settings)
        .await
        .context("could not read or create the demo fleet")?;
    let to = SystemClock.now();
    let span = chrono::Duration::milliseconds((args.hours * 3_600_000.0) as i64);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = None;
    swath_application::simulator::replay(&fleet, &settings, to - span, to, |report| {
        if failed.is_none() {
            let line = serde_json::to_writer(&mut out, report)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"));
            failed = line.err();
        }
    });
    if let Some(e) = failed {
        return Err(e).context("could not write the states to stdout");
    }
    out.flush()
        .context("could not write the states to stdout")?;
    Ok(())
}

/// 32 random bytes, hex encoded.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// What a person needs to try the API. On stdout, so it shows whatever the log filter.
fn print_banner(addr: SocketAddr, token: &str, generated: bool, fleet: &DemoFleet) {
    let base = format!("http://{addr}");
    let origin = if generated {
        " (random; set SWATH_DEMO_TOKEN to choose it)"
    } else {
        ""
    };
    println!();
    match fleet.mowers.len() {
        0 => println!(
            "Swath is serving the demo account, with no simulated mowers (SWATH_SIM_MOWERS=0)."
        ),
        1 => println!("Swath is serving a simulated fleet of 1 mower."),
        n => println!("Swath is serving a simulated fleet of {n} mowers."),
    }
    println!("  Account id:   {} (also GET /v1/me)", fleet.account.id);
    println!("  API:          {base}/v1/mowers");
    println!("  Docs:         {base}/docs");
    println!("  Live view:    {base}/live/fleet?token={token}");
    println!("  OpenAPI:      {base}/openapi.json");
    println!("  Demo token:   {token}{origin}");
    println!("  Try:          curl -s -H 'Authorization: Bearer {token}' {base}/v1/mowers");
    println!();
}

/// Resolves once `flag` is `true` (or its sender is gone).
async fn wait_for(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|stop| *stop).await;
}

/// Ctrl-C, or SIGTERM on Unix (what `docker stop` and `kill` send).
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "Could not listen for Ctrl-C.");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "Could not listen for SIGTERM.");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Received Ctrl-C; shutting down."),
        () = terminate => tracing::info!("Received SIGTERM; shutting down."),
    }
}
