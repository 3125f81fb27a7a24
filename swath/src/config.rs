//! The settings of `swath` and its subcommands: each has its `SWATH_*` variable (and a flag); clap
//! refuses an invalid value before anything starts, naming the variable. Nothing here opens or
//! starts anything ([`crate::wiring`] does).
//!
//! # Layout
//! - [`ServeArgs`] with [`HttpArgs`] (the HTTP server's settings, handed to the API crate as the
//!   plain [`HttpLimits`] by [`HttpArgs::limits`]), [`StoreArgs`], [`LogArgs`], [`RetentionArgs`],
//!   and the arguments of the other subcommands; the command tree that holds them is
//!   [`crate::cli`]; [`init_tracing`].
//! - `parse.rs`: the value parsers, which check a value when it is read.

mod parse;

pub use parse::{
    parse_database_url, parse_file, parse_hours, parse_http_addr, parse_http_seconds,
    parse_log_filter, parse_nats_url, parse_positive_seconds, parse_seconds, parse_session_secret,
    parse_tile_url, parse_token,
};

use clap::{Args, ValueEnum};
use std::time::Duration;
use swath_api::server::HttpLimits;
use swath_application::RetentionPolicy;
use swath_memory::DEFAULT_HISTORY_PER_MOWER;
use tracing_subscriber::EnvFilter;

#[derive(Clone, Debug, Args)]
pub struct ImportArgs {
    /// The NDJSON file to import.
    pub file: std::path::PathBuf,
    /// Exit with an error when any line was refused (the other lines are stored all the same).
    #[arg(long)]
    pub strict: bool,
    /// Import into the memory store although it keeps nothing once this command ends (a dry
    /// run: the summary says what the file would store). Without it, the memory store is
    /// refused: set `SWATH_STORE=postgres` and `SWATH_DATABASE_URL`.
    #[arg(long)]
    pub into_memory: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Clone, Debug, Args)]
pub struct SimulateArgs {
    /// How many hours of history, ending now.
    #[arg(long, default_value = "1", value_parser = parse_hours)]
    pub hours: f64,
    /// How many demo mowers report.
    #[arg(long = "sim-mowers", env = "SWATH_SIM_MOWERS", value_name = "SWATH_SIM_MOWERS",
        default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub sim_mowers: u32,
    /// Makes the history the same on every run (with the same store and clock).
    #[arg(
        long = "sim-seed",
        env = "SWATH_SIM_SEED",
        value_name = "SWATH_SIM_SEED"
    )]
    pub sim_seed: Option<u64>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Which store, and how to reach it.
#[derive(Clone, Debug, Args)]
pub struct StoreArgs {
    /// Where the directory, tokens and telemetry are stored.
    #[arg(long = "store", env = "SWATH_STORE", value_name = "SWATH_STORE", value_enum,
        default_value_t = StoreKind::Memory)]
    pub store: StoreKind,
    /// The PostgreSQL URL, for `SWATH_STORE=postgres`.
    #[arg(
        long = "database-url",
        env = "SWATH_DATABASE_URL",
        value_name = "SWATH_DATABASE_URL",
        hide_env_values = true,
        required_if_eq("store", "postgres"),
        value_parser = parse_database_url
    )]
    pub database_url: Option<String>,
    /// The most PostgreSQL connections of this process's pool (the latest-state reads open up to
    /// 4 more, decision 124).
    #[arg(long = "database-max-connections", env = "SWATH_DATABASE_MAX_CONNECTIONS",
        value_name = "SWATH_DATABASE_MAX_CONNECTIONS", default_value_t = 16,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub database_max_connections: u32,
    /// A second PostgreSQL URL for the read-only API (latest state, history, track, days, the
    /// live projections): a standby, through the router's replica port. When it does not
    /// answer, those reads go to SWATH_DATABASE_URL. Its answers may be as stale as its replay
    /// lag (`swath_store_replica_lag_seconds`). Unset: every read goes to SWATH_DATABASE_URL.
    #[arg(
        long = "database-read-url",
        env = "SWATH_DATABASE_READ_URL",
        value_name = "SWATH_DATABASE_READ_URL",
        hide_env_values = true,
        value_parser = parse_database_url
    )]
    pub database_read_url: Option<String>,
    /// How long taking a PostgreSQL connection may wait, opening a new one included, in seconds:
    /// a primary that is gone (a failover under way) fails a request or batch this fast.
    #[arg(long = "database-connect-timeout-seconds", env = "SWATH_DATABASE_CONNECT_TIMEOUT_SECONDS",
        value_name = "SWATH_DATABASE_CONNECT_TIMEOUT_SECONDS", default_value = "5",
        value_parser = parse_positive_seconds)]
    pub database_connect_timeout: Duration,
    /// PostgreSQL cancels a statement of Swath's that runs longer, in seconds
    /// (`statement_timeout`). 0: never.
    #[arg(long = "database-statement-timeout-seconds", env = "SWATH_DATABASE_STATEMENT_TIMEOUT_SECONDS",
        value_name = "SWATH_DATABASE_STATEMENT_TIMEOUT_SECONDS", default_value = "60",
        value_parser = parse_seconds)]
    pub database_statement_timeout: Duration,
    /// PostgreSQL ends a session of Swath's left idle inside a transaction this long, in seconds
    /// (`idle_in_transaction_session_timeout`), releasing its row locks. 0: never.
    #[arg(long = "database-idle-in-transaction-timeout-seconds",
        env = "SWATH_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS",
        value_name = "SWATH_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", default_value = "15",
        value_parser = parse_seconds)]
    pub database_idle_in_transaction_timeout: Duration,
    /// PostgreSQL's TCP keepalive on Swath's sessions, in seconds (`tcp_keepalives_idle`, a
    /// third of it between probes, three probes, and `tcp_user_timeout`): a Swath host that
    /// vanished is noticed and its locks released. 0: the server's defaults.
    #[arg(long = "database-tcp-keepalive-seconds", env = "SWATH_DATABASE_TCP_KEEPALIVE_SECONDS",
        value_name = "SWATH_DATABASE_TCP_KEEPALIVE_SECONDS", default_value = "10",
        value_parser = parse_seconds)]
    pub database_tcp_keepalive: Duration,
    /// The longest one ingest batch's unit of work (first statement to commit) may take, in
    /// seconds, measured by Swath: a store that stopped answering (a primary gone with its
    /// connections half-open) fails the batch in this time, unacknowledged, and it is
    /// redelivered.
    #[arg(long = "database-batch-timeout-seconds", env = "SWATH_DATABASE_BATCH_TIMEOUT_SECONDS",
        value_name = "SWATH_DATABASE_BATCH_TIMEOUT_SECONDS", default_value = "10",
        value_parser = parse_positive_seconds)]
    pub database_batch_timeout: Duration,
    /// W8's merge gap, in seconds: a mowing stretch that starts at most this long after the
    /// previous session ended joins it (a charge or a rain stop is not a new session); 0: every
    /// stretch is a session. Every writer (each replica, `swath import`) must use the same value:
    /// stored sessions are those of the gap they were folded with (decision 200).
    #[arg(long = "session-merge-gap-seconds", env = "SWATH_SESSION_MERGE_GAP_SECONDS",
        value_name = "SWATH_SESSION_MERGE_GAP_SECONDS", default_value = "7200",
        value_parser = parse_seconds)]
    pub session_merge_gap: Duration,
    /// History and position rows the memory store keeps per mower (the oldest go first; the
    /// history and track pages then say where the kept rows begin). The default keeps more than
    /// a day of one state a second.
    #[arg(long = "memory-history-per-mower", env = "SWATH_MEMORY_HISTORY_PER_MOWER",
        value_name = "SWATH_MEMORY_HISTORY_PER_MOWER",
        default_value_t = DEFAULT_HISTORY_PER_MOWER as u64,
        value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub memory_history_per_mower: u64,
}

/// Where the directory, the tokens and the telemetry are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// In process, lost on exit: the embedded default.
    Memory,
    /// PostgreSQL at `SWATH_DATABASE_URL`; migrated at start-up.
    Postgres,
}

/// Which event bus carries the states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BusKind {
    /// In process: the embedded default.
    Memory,
    /// NATS JetStream at `SWATH_NATS_URL`; streams and consumers are provisioned at start-up.
    Nats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The log filter of `swath serve` when `SWATH_LOG` is not set.
pub const SERVE_LOG_FILTER: &str = "info,sqlx=warn";
/// The log filter of the other subcommands when neither `SWATH_LOG` nor `-v` is given: they print
/// their answer on stdout (often captured by a script), and only warnings and errors on stderr.
pub const CLI_LOG_FILTER: &str = "warn";

/// How webhooks are delivered (issue 31).
#[derive(Clone, Debug, Args)]
pub struct WebhookArgs {
    /// Lets webhook endpoints be plain `http` URLs and reach private, loopback and link-local
    /// addresses: for an on-premise deployment whose receivers are inside its network. Off: only
    /// `https`, and a host resolving to any such address is refused at every delivery.
    #[arg(long = "webhook-allow-private", env = "SWATH_WEBHOOK_ALLOW_PRIVATE",
        value_name = "SWATH_WEBHOOK_ALLOW_PRIVATE", default_value_t = false,
        action = clap::ArgAction::Set)]
    pub allow_private: bool,
    /// How long a failing delivery is retried, in seconds since it was enqueued; past it, its
    /// endpoint is disabled and says why.
    #[arg(long = "webhook-retry-horizon-seconds", env = "SWATH_WEBHOOK_RETRY_HORIZON_SECONDS",
        value_name = "SWATH_WEBHOOK_RETRY_HORIZON_SECONDS", default_value = "86400",
        value_parser = parse_positive_seconds)]
    pub retry_horizon: Duration,
    /// The delay before a failed delivery's first retry, in seconds; each next retry waits
    /// twice as long (up to an hour), each drawn between half and all of it.
    #[arg(long = "webhook-first-retry-seconds", env = "SWATH_WEBHOOK_FIRST_RETRY_SECONDS",
        value_name = "SWATH_WEBHOOK_FIRST_RETRY_SECONDS", default_value = "5",
        value_parser = parse_positive_seconds)]
    pub first_retry: Duration,
    /// How long one delivery attempt may take, in seconds, the connection (at most 5 s of it)
    /// and the answer included.
    #[arg(long = "webhook-timeout-seconds", env = "SWATH_WEBHOOK_TIMEOUT_SECONDS",
        value_name = "SWATH_WEBHOOK_TIMEOUT_SECONDS", default_value = "10",
        value_parser = parse_positive_seconds)]
    pub timeout: Duration,
    /// Delivery attempts in flight at once on this replica, all endpoints together (each
    /// endpoint has one at a time).
    #[arg(long = "webhook-concurrency", env = "SWATH_WEBHOOK_CONCURRENCY",
        value_name = "SWATH_WEBHOOK_CONCURRENCY", default_value_t = 16,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrency: u32,
    /// Whether this replica makes delivery attempts. `false`: endpoints are managed and
    /// deliveries enqueued as usual, but this replica sends nothing (they wait for a replica that
    /// delivers); for a replica without a way out, and for test runs that must never reach
    /// beyond this machine.
    #[arg(long = "webhook-dispatch", env = "SWATH_WEBHOOK_DISPATCH",
        value_name = "SWATH_WEBHOOK_DISPATCH", default_value_t = true,
        action = clap::ArgAction::Set)]
    pub dispatch: bool,
    /// The most webhook endpoints an account may have; creating one more answers `409`.
    #[arg(long = "webhooks-per-account", env = "SWATH_WEBHOOKS_PER_ACCOUNT",
        value_name = "SWATH_WEBHOOKS_PER_ACCOUNT", default_value_t = 50,
        value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub per_account: u32,
    /// The most test messages (`POST /v1/webhooks/{id}/test`) an endpoint is sent per minute by
    /// one replica; one more answers `429` with `Retry-After`.
    #[arg(long = "webhook-tests-per-minute", env = "SWATH_WEBHOOK_TESTS_PER_MINUTE",
        value_name = "SWATH_WEBHOOK_TESTS_PER_MINUTE", default_value_t = 5,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub tests_per_minute: u32,
    /// Delivery attempts in flight at once on this replica for the endpoints of one account (at
    /// most SWATH_WEBHOOK_CONCURRENCY): one tenant's slow endpoints leave the other slots free.
    #[arg(long = "webhook-account-concurrency", env = "SWATH_WEBHOOK_ACCOUNT_CONCURRENCY",
        value_name = "SWATH_WEBHOOK_ACCOUNT_CONCURRENCY", default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub account_concurrency: u32,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Which logs to write, as a tracing filter (`info`, `swath_api=debug,info`, …). Default:
    /// `info,sqlx=warn` when serving; `warn` for the other subcommands unless `-v` is given.
    #[arg(long = "log", env = "SWATH_LOG", value_name = "SWATH_LOG",
        value_parser = parse_log_filter, global = true)]
    pub filter: Option<String>,
    /// Subcommands other than `serve`: also log what they do (the serve filter).
    #[arg(short = 'v', long = "verbose", global = true)]
    pub verbose: bool,
    /// How to write the logs.
    #[arg(long = "log-format", env = "SWATH_LOG_FORMAT", value_name = "SWATH_LOG_FORMAT",
        value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub format: LogFormat,
}

/// The HTTP server's settings (decisions 43, 140, 181): its timeouts, connections and live
/// streams, and whether clients reach it over HTTPS. The API crate takes them as the plain
/// [`HttpLimits`] ([`HttpArgs::limits`]), whose `Default` gives the same values as these
/// defaults (`the_http_defaults_are_the_api_crates`).
#[derive(Args, Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpArgs {
    /// Seconds a client has to send a request's head (request line and headers), counted from
    /// when the connection is ready for a request; a connection that sends nothing is closed
    /// after the same time.
    #[arg(
        long = "http-header-read-timeout-seconds",
        env = "SWATH_HTTP_HEADER_READ_TIMEOUT_SECONDS",
        value_name = "SWATH_HTTP_HEADER_READ_TIMEOUT_SECONDS",
        default_value = "10",
        value_parser = parse_http_seconds
    )]
    pub header_read_timeout: Duration,
    /// Seconds a kept-alive connection may stay idle between requests before it is closed.
    #[arg(
        long = "http-idle-timeout-seconds",
        env = "SWATH_HTTP_IDLE_TIMEOUT_SECONDS",
        value_name = "SWATH_HTTP_IDLE_TIMEOUT_SECONDS",
        default_value = "60",
        value_parser = parse_http_seconds
    )]
    pub idle_timeout: Duration,
    /// The most HTTP connections served at once; more wait to be accepted.
    #[arg(
        long = "http-max-connections",
        env = "SWATH_HTTP_MAX_CONNECTIONS",
        value_name = "SWATH_HTTP_MAX_CONNECTIONS",
        default_value = "4096",
        value_parser = clap::value_parser!(u32).range(1..=1_000_000)
    )]
    pub max_connections: u32,
    /// The most live streams (`GET /v1/live/stream`) one token keeps open at once; one more is
    /// refused with `429`. Streams of every token together never take more than three quarters
    /// of `SWATH_HTTP_MAX_CONNECTIONS`: the rest is kept for ordinary requests.
    #[arg(
        long = "streams-per-token",
        env = "SWATH_STREAMS_PER_TOKEN",
        value_name = "SWATH_STREAMS_PER_TOKEN",
        default_value = "16",
        value_parser = clap::value_parser!(u32).range(1..=1_000_000)
    )]
    pub streams_per_token: u32,
    /// The most live streams the tokens of one account keep open at once, together; one more is
    /// refused with `429`. Unset: a quarter of the streams the service keeps (at least one).
    #[arg(
        long = "streams-per-account",
        env = "SWATH_STREAMS_PER_ACCOUNT",
        value_name = "SWATH_STREAMS_PER_ACCOUNT",
        value_parser = clap::value_parser!(u32).range(1..=1_000_000)
    )]
    pub streams_per_account: Option<u32>,
    /// Seconds a request body may go without a byte before the request is cut (an import then
    /// ends `failed`, saying so).
    #[arg(
        long = "http-body-idle-timeout-seconds",
        env = "SWATH_HTTP_BODY_IDLE_TIMEOUT_SECONDS",
        value_name = "SWATH_HTTP_BODY_IDLE_TIMEOUT_SECONDS",
        default_value = "30",
        value_parser = parse_http_seconds
    )]
    pub body_idle_timeout: Duration,
    /// Seconds a request body may take whole, counted from when its head was read, however
    /// steadily it comes; past them the request is cut as an idle one is. Imports have
    /// `SWATH_IMPORT_BODY_TIMEOUT_SECONDS` instead.
    #[arg(
        long = "http-body-timeout-seconds",
        env = "SWATH_HTTP_BODY_TIMEOUT_SECONDS",
        value_name = "SWATH_HTTP_BODY_TIMEOUT_SECONDS",
        default_value = "60",
        value_parser = parse_http_seconds
    )]
    pub body_timeout: Duration,
    /// Seconds an import's body (`POST /v1/imports`, streamed) may take whole, counted from when
    /// its head was read; past them the import ends `failed`, saying so.
    #[arg(
        long = "import-body-timeout-seconds",
        env = "SWATH_IMPORT_BODY_TIMEOUT_SECONDS",
        value_name = "SWATH_IMPORT_BODY_TIMEOUT_SECONDS",
        default_value = "3600",
        value_parser = parse_http_seconds
    )]
    pub import_body_timeout: Duration,
    /// Clients reach the service over HTTPS through a proxy that terminates TLS: the live pages'
    /// cookie gets `Secure` (it gets it anyway for requests whose `X-Forwarded-Proto` or
    /// `Forwarded` header says `https`).
    #[arg(
        long = "behind-tls",
        env = "SWATH_BEHIND_TLS",
        value_name = "SWATH_BEHIND_TLS",
        default_value = "false",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub behind_tls: bool,
}

impl HttpArgs {
    /// The settings as the API crate takes them.
    pub fn limits(&self) -> HttpLimits {
        HttpLimits {
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections,
            streams_per_token: self.streams_per_token,
            streams_per_account: self.streams_per_account,
            body_idle_timeout: self.body_idle_timeout,
            body_timeout: self.body_timeout,
            import_body_timeout: self.import_body_timeout,
            behind_tls: self.behind_tls,
        }
    }
}

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Header-read and idle timeouts, the connection limit.
    #[command(flatten)]
    pub http: HttpArgs,
    /// How many accounts one account may create per hour (`POST /v1/accounts`); more are
    /// answered `429` with `Retry-After`.
    #[arg(long = "accounts-per-hour", env = "SWATH_ACCOUNTS_PER_HOUR",
        value_name = "SWATH_ACCOUNTS_PER_HOUR", default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub accounts_per_hour: u32,
    /// How many tokens may be created in one account per hour (`POST /v1/tokens`, and a new
    /// account's first token); more are answered `429` with `Retry-After`.
    #[arg(long = "tokens-per-hour", env = "SWATH_TOKENS_PER_HOUR",
        value_name = "SWATH_TOKENS_PER_HOUR", default_value_t = 60,
        value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tokens_per_hour: u32,
    /// The address the HTTP server listens on.
    /// A host name (`localhost:8080`) listens on every address the name resolves to.
    #[arg(
        long = "http-addr",
        env = "SWATH_HTTP_ADDR",
        value_name = "SWATH_HTTP_ADDR",
        default_value = "127.0.0.1:8080",
        value_parser = parse_http_addr
    )]
    pub http_addr: String,
    /// The bearer token of the demo account (scopes read, write, admin); setting it makes the
    /// demo account even without simulated mowers. Default: a random 32-byte hex token, printed
    /// at start-up, when the simulator runs; no demo account otherwise. A new demo token revokes
    /// the previous ones; with `SWATH_STORE=postgres` it must have at least 32 characters.
    #[arg(long = "demo-token", env = "SWATH_DEMO_TOKEN", value_name = "SWATH_DEMO_TOKEN",
        hide_env_values = true, value_parser = parse_token)]
    pub demo_token: Option<String>,
    /// The key the live pages' sessions are signed with (at least 32 bytes): the same on every
    /// replica, so that a browser signed in through one is signed in on all, and across restarts.
    /// Unset: a random key of this process (said in the logs).
    #[arg(long = "session-secret", env = "SWATH_SESSION_SECRET",
        value_name = "SWATH_SESSION_SECRET", hide_env_values = true,
        value_parser = parse_session_secret)]
    pub session_secret: Option<String>,
    /// How many mowers the simulated demo fleet has.
    #[arg(long = "sim-mowers", env = "SWATH_SIM_MOWERS", value_name = "SWATH_SIM_MOWERS",
        default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub sim_mowers: u32,
    /// How often a simulated mower reports while its activity does not change, in seconds
    /// (changes are reported at once).
    #[arg(long = "sim-state-period-seconds", env = "SWATH_SIM_STATE_PERIOD_SECONDS",
        value_name = "SWATH_SIM_STATE_PERIOD_SECONDS", default_value = "1", value_parser = parse_positive_seconds)]
    pub sim_state_period: Duration,
    /// Makes the simulated fleet behave the same on every run. Default: a new behaviour each run.
    #[arg(
        long = "sim-seed",
        env = "SWATH_SIM_SEED",
        value_name = "SWATH_SIM_SEED"
    )]
    pub sim_seed: Option<u64>,
    /// The most states the ingest consumer stores in one batch.
    #[arg(long = "telemetry-ingest-batch-max", env = "SWATH_TELEMETRY_INGEST_BATCH_MAX",
        value_name = "SWATH_TELEMETRY_INGEST_BATCH_MAX", default_value_t = 64,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub ingest_batch_max: u32,
    /// How long the ingest consumer lingers for more states once one arrived, in seconds. Zero
    /// batches only what queued up while the previous batch ran.
    #[arg(long = "telemetry-ingest-batch-wait-seconds", env = "SWATH_TELEMETRY_INGEST_BATCH_WAIT_SECONDS",
        value_name = "SWATH_TELEMETRY_INGEST_BATCH_WAIT_SECONDS", default_value = "0.2",
        value_parser = parse_seconds)]
    pub ingest_batch_wait: Duration,
    /// The most states the watcher (notification rules) handles in one batch.
    #[arg(long = "notifications-state-batch-max", env = "SWATH_NOTIFICATIONS_STATE_BATCH_MAX",
        value_name = "SWATH_NOTIFICATIONS_STATE_BATCH_MAX", default_value_t = 64,
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub notifications_batch_max: u32,
    /// How long the watcher lingers for more states once one arrived, in seconds.
    #[arg(long = "notifications-state-batch-wait-seconds", env = "SWATH_NOTIFICATIONS_STATE_BATCH_WAIT_SECONDS",
        value_name = "SWATH_NOTIFICATIONS_STATE_BATCH_WAIT_SECONDS", default_value = "0.2",
        value_parser = parse_seconds)]
    pub notifications_batch_wait: Duration,
    /// A mower silent for this long (seconds since Swath last received one of its states) goes
    /// offline: `went_offline` and an offline alert.
    #[arg(long = "offline-after-seconds", env = "SWATH_OFFLINE_AFTER_SECONDS",
        value_name = "SWATH_OFFLINE_AFTER_SECONDS", default_value = "600",
        value_parser = parse_positive_seconds)]
    pub offline_after: Duration,
    /// How often the offline sweep looks for silent mowers, in seconds.
    #[arg(long = "offline-sweep-seconds", env = "SWATH_OFFLINE_SWEEP_SECONDS",
        value_name = "SWATH_OFFLINE_SWEEP_SECONDS", default_value = "30",
        value_parser = parse_positive_seconds)]
    pub offline_sweep_period: Duration,
    /// How long a mower's latest state (`GET /v1/mowers/{id}/state`) is answered from memory, in
    /// seconds: a state stored through another replica may stay unseen that long; this replica's
    /// own writes are seen at once. Zero: every read asks the store (decision 134).
    #[arg(long = "latest-cache-seconds", env = "SWATH_LATEST_CACHE_SECONDS",
        value_name = "SWATH_LATEST_CACHE_SECONDS", default_value = "1",
        value_parser = parse_seconds)]
    pub latest_cache: Duration,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Which event bus carries the states.
    #[arg(long = "bus", env = "SWATH_BUS", value_name = "SWATH_BUS", value_enum,
        default_value_t = BusKind::Memory)]
    pub bus: BusKind,
    /// The NATS URL, for `SWATH_BUS=nats`.
    #[arg(
        long = "nats-url",
        env = "SWATH_NATS_URL",
        value_name = "SWATH_NATS_URL",
        required_if_eq("bus", "nats"),
        value_parser = parse_nats_url
    )]
    pub nats_url: Option<String>,
    /// The map tiles of `/live/map`: a URL template with `{z}`, `{x}` and `{y}` (`{s}` becomes
    /// `a`), fetched by the browser, never by Swath. Empty: no tiles; the map draws its markers
    /// and tracks on a plain background (as it does when the tiles cannot be reached).
    #[arg(
        long = "map-tile-url",
        env = "SWATH_MAP_TILE_URL",
        value_name = "SWATH_MAP_TILE_URL",
        default_value = swath_api::state::DEFAULT_MAP_TILE_URL,
        value_parser = parse_tile_url
    )]
    pub map_tile_url: String,
    /// JetStream `ack_wait` of the durable consumers, in seconds: how long a delivery a replica
    /// took and never settled (it died) waits before it is redelivered. A dead replica's
    /// partitions move to another replica this plus 3 s after its last pull (docs/operations.md).
    #[arg(long = "nats-ack-wait-seconds", env = "SWATH_NATS_ACK_WAIT_SECONDS",
        value_name = "SWATH_NATS_ACK_WAIT_SECONDS", default_value = "4",
        value_parser = parse_positive_seconds)]
    pub nats_ack_wait: Duration,
    /// How many partitions the mowers' states are split into (1 to 64): each is handled by one
    /// replica at a time, in order, and a replica handles its partitions concurrently. Set once
    /// per deployment: NATS refuses to start with another count than its stream was made with.
    #[arg(long = "telemetry-partitions", env = "SWATH_TELEMETRY_PARTITIONS",
        value_name = "SWATH_TELEMETRY_PARTITIONS", default_value_t = swath_nats::DEFAULT_TELEMETRY_PARTITIONS,
        value_parser = clap::value_parser!(u32).range(1..=swath_application::ports::MAX_PARTITIONS as i64))]
    pub telemetry_partitions: u32,
    /// Replicas of the streams Swath creates or brings in line (3 on a three-node NATS cluster).
    /// Unset: a new stream gets one, an existing one keeps what an operator set.
    #[arg(long = "nats-replicas", env = "SWATH_NATS_REPLICAS", value_name = "SWATH_NATS_REPLICAS",
        value_parser = clap::value_parser!(u8).range(1..=5))]
    pub nats_replicas: Option<u8>,
    /// A NATS credentials file (`.creds`: JWT and NKey seed) to authenticate with. A user and
    /// password go in SWATH_NATS_URL (`nats://user:password@host:4222`).
    #[arg(
        long = "nats-creds",
        env = "SWATH_NATS_CREDS",
        value_name = "SWATH_NATS_CREDS",
        value_parser = parse_file
    )]
    pub nats_creds: Option<std::path::PathBuf>,
    /// A PEM file of the certificate authorities of the NATS servers' certificates, when they
    /// are not in the system's roots (with `tls://` URLs).
    #[arg(
        long = "nats-tls-ca",
        env = "SWATH_NATS_TLS_CA",
        value_name = "SWATH_NATS_TLS_CA",
        value_parser = parse_file
    )]
    pub nats_tls_ca: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub retention: RetentionScheduleArgs,
}

/// How long history and positions are kept (issue 8; see docs/operations.md).
#[derive(Clone, Debug, Args)]
pub struct RetentionArgs {
    /// Days positions are kept at full resolution; older ones are downsampled to the first
    /// position of each mower and minute.
    #[arg(long = "track-full-days", env = "SWATH_TRACK_FULL_DAYS",
        value_name = "SWATH_TRACK_FULL_DAYS", default_value_t = 30,
        value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub track_full_days: u32,
    /// Days positions are kept at all; older ones are deleted. At least SWATH_TRACK_FULL_DAYS.
    #[arg(long = "track-keep-days", env = "SWATH_TRACK_KEEP_DAYS",
        value_name = "SWATH_TRACK_KEEP_DAYS", default_value_t = 365,
        value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub track_keep_days: u32,
    /// Days history rows are kept; older ones are deleted. Latest states, health and day totals
    /// are kept forever.
    #[arg(long = "history-keep-days", env = "SWATH_HISTORY_KEEP_DAYS",
        value_name = "SWATH_HISTORY_KEEP_DAYS", default_value_t = 365,
        value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub history_keep_days: u32,
    /// Days settled webhook deliveries (delivered or failed) are kept, from their enqueueing;
    /// older ones are deleted. Pending deliveries are kept whatever their age.
    #[arg(long = "webhook-deliveries-keep-days", env = "SWATH_WEBHOOK_DELIVERIES_KEEP_DAYS",
        value_name = "SWATH_WEBHOOK_DELIVERIES_KEEP_DAYS", default_value_t = 30,
        value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub webhook_deliveries_keep_days: u32,
    /// Days W8's mowing sessions are kept after their end; older ones are deleted, except each
    /// mower's newest. At least SWATH_HISTORY_KEEP_DAYS: sessions outlive the states they were
    /// folded from, and thinning or deleting those states never changes them.
    #[arg(long = "sessions-keep-days", env = "SWATH_SESSIONS_KEEP_DAYS",
        value_name = "SWATH_SESSIONS_KEEP_DAYS", default_value_t = 3650,
        value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub sessions_keep_days: u32,
}

impl RetentionArgs {
    /// The policy; an inconsistent one stops start-up with a clap error (exit status 2) naming
    /// both variables, like any other invalid setting.
    pub fn policy<C: clap::CommandFactory>(&self) -> RetentionPolicy {
        RetentionPolicy {
            track_full_days: self.track_full_days,
            track_keep_days: self.track_keep_days,
            history_keep_days: self.history_keep_days,
            webhook_deliveries_keep_days: self.webhook_deliveries_keep_days,
            sessions_keep_days: self.sessions_keep_days,
        }
        .validate()
        .unwrap_or_else(|e| {
            C::command()
                .error(clap::error::ErrorKind::ArgumentConflict, e.to_string())
                .exit()
        })
    }
}

/// How often `swath serve` runs retention.
#[derive(Clone, Debug, Args)]
pub struct RetentionScheduleArgs {
    /// How often this replica runs retention, in seconds (the first run at start-up). Of several
    /// replicas, one runs at a time; the others skip. 0: never (run `swath maintenance retention`
    /// from cron instead).
    #[arg(long = "retention-interval-seconds", env = "SWATH_RETENTION_INTERVAL_SECONDS",
        value_name = "SWATH_RETENTION_INTERVAL_SECONDS", default_value = "3600",
        value_parser = parse_seconds)]
    pub interval: Duration,
    #[command(flatten)]
    pub retention: RetentionArgs,
}

/// Logs go to stderr: in colour only when it is a terminal (never escape codes in a file or a
/// pipe), at the serve filter when serving and at `warn` for the other subcommands unless asked.
pub fn init_tracing(log: &LogArgs, serving: bool) {
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
