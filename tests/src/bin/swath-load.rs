//! `swath-load`: publishes a seeded plan of state reports on NATS JetStream, as gateways would, and
//! verifies what the service stored in PostgreSQL against the one-pass reference.
//!
//! ```text
//! cargo run --release -p swath-tests --bin swath-load -- \
//!     --nats-url nats://127.0.0.1:4222 --database-url postgres://postgres@127.0.0.1:5432/swath \
//!     --mowers 200 --states 100000 --rate max --seed 1 --verify
//! ```
//!
//! Steps: migrate the database (as the service does at start-up) and seed the plan's account,
//! site and mowers through the PostgreSQL directory (fixed ids from the seed; existing ones are
//! kept), and with `--verify` refuse a database where those mowers hold rows of another run;
//! publish the states on `telemetry.mower.<id>` with de-duplication ids (`--rate`
//! states/s, or `max`); with `--verify`, wait until the store holds them all, export the
//! mowers' rows and compare them with the same states stored one at a time through `Ingest` on a
//! memory store (at the service's merge gap, `SWATH_SESSION_MERGE_GAP_SECONDS`): history,
//! positions, latest, health and day totals, sessions. Exit status 1 on any
//! difference (each is printed). A running `swath` (`SWATH_BUS=nats`, `SWATH_STORE=postgres`)
//! on the same NATS and database does the storing.

use anyhow::Context;
use clap::Parser;
use std::time::Duration;
use swath_application::ports::TelemetryStore;
use swath_nats::{NatsBus, NatsBusSettings};
use swath_postgres::PostgresStore;
use swath_tests::load::{compare, rows_outside, summary, wait_stored, Checked, Plan};

#[derive(Debug, Parser)]
#[command(
    name = "swath-load",
    version,
    about = "Publish seeded state reports on NATS and verify what Swath stored."
)]
struct Args {
    /// NATS server with JetStream.
    #[arg(long, env = "SWATH_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    /// The service's PostgreSQL database.
    #[arg(long, env = "SWATH_DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// How many mowers report.
    #[arg(long, default_value_t = 200)]
    mowers: usize,
    /// How many states to publish in all.
    #[arg(long, default_value_t = 100_000)]
    states: usize,
    /// States per second, or `max` (as fast as JetStream acknowledges).
    #[arg(long, default_value = "max", value_parser = parse_rate)]
    rate: Rate,
    /// Decides the ids and every state's content.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// When the first state was observed (RFC 3339). Default: two days ago at 22:55 UTC, the
    /// same all day, so that a publishing and a verifying run agree.
    #[arg(long)]
    start: Option<chrono::DateTime<chrono::Utc>>,
    /// Mowers keep their activity for 10-minute runs (a usual fleet) instead of drawing it
    /// anew at every state (the default, which gives the rules the most to do).
    #[arg(long)]
    steady: bool,
    /// Each mower falls silent for minutes after every hundredth report (alternately 6 and 20
    /// minutes, staggered between mowers), so that W8's sessions end `silent`, merge across a
    /// short silence and, at a merge gap between the two (15 minutes, as the end-to-end
    /// scenarios run), end for good at a long one. The plan then spans hours, not minutes.
    #[arg(long)]
    silences: bool,
    /// The service's W8 merge gap, which the reference folds sessions with: set the same
    /// `SWATH_SESSION_MERGE_GAP_SECONDS` for both.
    #[arg(
        long = "session-merge-gap-seconds",
        env = "SWATH_SESSION_MERGE_GAP_SECONDS",
        default_value_t = 7200
    )]
    session_merge_gap_seconds: u32,
    /// Publish only states `first..states` (to resume, or to split a run in parts).
    #[arg(long, default_value_t = 0)]
    first: usize,
    /// Publishes in flight at once (`--rate max`).
    #[arg(long, default_value_t = 1024)]
    window: usize,
    /// Do not publish (verify what an earlier run published).
    #[arg(long)]
    no_publish: bool,
    /// Wait until the store holds every state, then compare with the reference.
    #[arg(long)]
    verify: bool,
    /// With `--verify`: compare history, positions, latest and sessions only (health and day totals
    /// depend on the order a mower's states were stored in, which several replicas sharing a
    /// consumer do not keep; see docs/e2e.md).
    #[arg(long)]
    order_free: bool,
    /// With `--verify`: give up when the stored count did not grow for this many seconds.
    #[arg(long, default_value_t = 120)]
    stall_seconds: u64,
}

#[derive(Clone, Copy, Debug)]
enum Rate {
    Max,
    PerSecond(f64),
}

fn parse_rate(value: &str) -> Result<Rate, String> {
    if value == "max" {
        return Ok(Rate::Max);
    }
    match value.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(Rate::PerSecond(r)),
        _ => Err(format!(
            "`{value}` is neither `max` nor a positive number of states/s"
        )),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.mowers > 0, "--mowers must be at least 1");
    anyhow::ensure!(args.first <= args.states, "--first is beyond --states");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut plan = Plan::new(args.seed, args.mowers, args.states)
        .with_steady(args.steady)
        .with_silences(args.silences)
        .with_merge_gap(chrono::Duration::seconds(
            args.session_merge_gap_seconds.into(),
        ));
    if let Some(start) = args.start {
        plan.start = start;
    }
    // The service drops a state observed in its future (beyond a few minutes' skew).
    anyhow::ensure!(
        plan.last_observed_at() <= chrono::Utc::now(),
        "the plan's newest state would be observed at {}, in the future: fewer --states, or an \
         earlier --start",
        plan.last_observed_at().to_rfc3339()
    );
    swath_migrations::migrate(&args.database_url)
        .await
        .context("migrating the database")?;
    let store = PostgresStore::connect(&args.database_url, 4)
        .await
        .context("connecting to the database")?;
    plan.seed_directory(&store).await?;
    if args.verify {
        let foreign = rows_outside(store.pool(), &plan).await?;
        anyhow::ensure!(
            foreign == 0,
            "the plan's mowers already hold {foreign} history rows outside its states' instants \
             (an earlier run of seed {} on another day?): verification compares every row of \
             its mowers, so verify against a fresh database or with another --seed",
            plan.seed
        );
    }
    println!(
        "Plan: seed {}, account {}, {} mowers, {} states observed from {} to {}, sessions merged within {} s.",
        plan.seed,
        plan.account(),
        plan.mowers,
        plan.states,
        plan.start.to_rfc3339(),
        plan.last_observed_at().to_rfc3339(),
        plan.merge_gap.num_seconds()
    );

    if !args.no_publish {
        let bus = NatsBus::connect(&args.nats_url, NatsBusSettings::default())
            .await
            .context("connecting to NATS")?;
        let rate = match args.rate {
            Rate::Max => None,
            Rate::PerSecond(r) => Some(r),
        };
        let report = plan
            .publish(
                &bus,
                args.first..args.states,
                rate,
                args.window,
                Duration::from_secs(60),
            )
            .await?;
        println!(
            "Published {} states in {:.2} s: {:.0} states/s ({} retried publishes).",
            report.states,
            report.elapsed.as_secs_f64(),
            report.per_second(),
            report.retries
        );
    }

    if args.verify {
        let waited = wait_stored(
            store.pool(),
            &plan,
            plan.states,
            Duration::from_secs(args.stall_seconds),
            Some(Duration::from_secs(5)),
        )
        .await?;
        println!(
            "Stored: all {} states ({:.1} s after publishing).",
            plan.states,
            waited.as_secs_f64()
        );
        let stored = store.export(&plan.mower_ids()).await?;
        let reference = plan.reference().await?;
        let checked = if args.order_free {
            Checked::OrderFree
        } else {
            Checked::Everything
        };
        let differences = compare(&reference, &stored, checked);
        if differences.is_empty() {
            println!(
                "Verified: {} equal the one-pass reference ({checked:?}).",
                summary(&stored)
            );
        } else {
            println!("DIFFERENCES from the one-pass reference:");
            for line in &differences {
                println!("  {line}");
            }
            std::process::exit(1);
        }
    }
    Ok(())
}
