//! `swath maintenance …`: operator commands that keep the store in shape (their retention
//! settings, shared with `swath serve`, are [`RetentionArgs`]).

use crate::config::{RetentionArgs, StoreArgs};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::sync::Arc;
use swath_application::ports::SystemClock;
use swath_application::retention::RunOptions;
use swath_application::{Retention, RetentionOutcome, RetentionSummary};

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

/// Runs `command`; `C` is the command line whose usage a refused setting is reported with.
pub async fn maintenance<C: clap::CommandFactory>(
    command: MaintenanceCommand,
) -> anyhow::Result<()> {
    match command {
        MaintenanceCommand::Retention(args) => retention::<C>(args).await,
    }
}

async fn retention<C: clap::CommandFactory>(args: RetentionCommandArgs) -> anyhow::Result<()> {
    let policy = args.retention.policy::<C>();
    let stores = args.store.open().await?;
    let retention = Retention::new(stores.retention, Arc::new(SystemClock), policy)
        .with_webhooks(stores.webhooks);
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
    println!(
        "  webhooks  {verb} {:>12} (settled deliveries past the limit)",
        s.deliveries_expired
    );
    println!(
        "  sessions  {verb} {:>12} (ended before the limit)",
        s.sessions_expired
    );
    if let Some(until) = s.downsampled_until {
        println!("  positions downsampled up to {until}");
    }
}
