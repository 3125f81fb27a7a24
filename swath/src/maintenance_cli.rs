//! `swath maintenance …`: operator commands that keep the store in shape, and the retention
//! settings `swath serve` shares with them.

use crate::config::StoreArgs;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::SystemClock;
use swath_application::retention::RunOptions;
use swath_application::{Retention, RetentionOutcome, RetentionPolicy, RetentionSummary};

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
}

impl RetentionArgs {
    /// The policy; an inconsistent one stops start-up with a clap error (exit status 2) naming
    /// both variables, like any other invalid setting.
    pub fn policy<C: clap::CommandFactory>(&self) -> RetentionPolicy {
        RetentionPolicy {
            track_full_days: self.track_full_days,
            track_keep_days: self.track_keep_days,
            history_keep_days: self.history_keep_days,
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
        value_parser = crate::config::parse_seconds)]
    pub interval: Duration,
    #[command(flatten)]
    pub retention: RetentionArgs,
}

#[derive(Debug, Subcommand)]
pub enum MaintenanceCommand {
    /// Retention and downsampling now, with a progress bar and a summary: positions older than
    /// SWATH_TRACK_FULL_DAYS downsampled to one per minute, positions older than
    /// SWATH_TRACK_KEEP_DAYS and history older than SWATH_HISTORY_KEEP_DAYS deleted. Safe beside
    /// running replicas (one run at a time) and safe to interrupt.
    Retention(RetentionCommandArgs),
}

#[derive(Clone, Debug, Args)]
pub struct RetentionCommandArgs {
    /// Count what would be deleted; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub retention: RetentionArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub async fn maintenance(command: MaintenanceCommand) -> anyhow::Result<()> {
    match command {
        MaintenanceCommand::Retention(args) => retention(args).await,
    }
}

async fn retention(args: RetentionCommandArgs) -> anyhow::Result<()> {
    let policy = args.retention.policy::<crate::config::Cli>();
    let stores = args.store.open().await?;
    let retention = Retention::new(stores.retention, Arc::new(SystemClock), policy);
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} steps ({eta}) {msg}",
        )
        .context("progress bar template")?,
    );
    // Ctrl-C stops the run between two steps; the next run does the rest.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    let outcome = retention
        .run(
            RunOptions {
                dry_run: args.dry_run,
                stop: Some(stop_rx),
            },
            &mut |progress| {
                bar.set_length(progress.steps_planned);
                bar.set_position(progress.steps_done);
                bar.set_message(format!("{} rows", progress.rows_deleted()));
            },
        )
        .await;
    bar.finish_and_clear();
    match outcome.context("retention failed; what it committed stays, run it again")? {
        RetentionOutcome::Skipped => {
            println!("Another replica is running retention now; nothing done.");
        }
        RetentionOutcome::Completed(summary) => print_summary("Retention done", &summary),
        RetentionOutcome::Interrupted(summary) => {
            print_summary("Retention stopped; run it again for the rest", &summary)
        }
    }
    Ok(())
}

fn print_summary(title: &str, s: &RetentionSummary) {
    let verb = if s.dry_run { "would delete" } else { "deleted" };
    println!(
        "{title}{}: {} of {} steps.",
        if s.dry_run { " (dry run)" } else { "" },
        s.steps_done,
        s.steps_planned
    );
    println!(
        "  limits: positions at full resolution from {}, kept from {}; history kept from {}",
        s.cutoffs.downsample_before, s.cutoffs.positions_before, s.cutoffs.history_before
    );
    for (partition, rows) in &s.partitions_dropped {
        println!(
            "  partition {:<24} {} (about {rows} rows)",
            partition.name,
            if s.dry_run {
                "would be dropped"
            } else {
                "dropped"
            }
        );
    }
    if s.partitions_busy > 0 {
        println!(
            "  {} partitions were busy; their rows were deleted in chunks",
            s.partitions_busy
        );
    }
    println!(
        "  history   {verb} {:>12} (past the limit)",
        s.history_expired
    );
    println!(
        "  positions {verb} {:>12} (past the limit)",
        s.positions_expired
    );
    println!(
        "  positions {verb} {:>12} (downsampled to one per minute)",
        s.positions_downsampled
    );
    if let Some(until) = s.downsampled_until {
        println!("  positions downsampled up to {until}");
    }
}
