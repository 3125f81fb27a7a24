//! Retention and downsampling of the tables that grow: history and positions (issue 8).
//!
//! The policy, with `now` from the injected [`Clock`]:
//! - positions with `observed_at >= now - track_full` are kept at full resolution;
//! - older positions, down to `now - track_keep`, are downsampled to the first position of each
//!   mower and UTC minute (the first among those not about to expire);
//! - positions with `observed_at < now - track_keep` are deleted;
//! - history rows with `observed_at < now - history_keep` are deleted;
//! - W8's sessions that ended before `now - sessions_keep` are deleted, except each mower's
//!   newest (the one an in-order batch extends, decision 201); `sessions_keep` is at least
//!   `history_keep`, so a session outlives the states it was folded from;
//! - settled webhook deliveries enqueued before `now - webhook_deliveries_keep` are deleted
//!   (pending ones are kept whatever their age), when the use case has the webhook store;
//! - latest rows, health totals and day totals are kept forever.
//!
//! A row exactly at a limit is kept. Days are 24-hour periods, not calendar days: the limits
//! move continuously, the same in every time zone.
//!
//! How a run works ([`Retention::run`]): it takes the store's retention lock without waiting (on
//! PostgreSQL a session advisory lock, so of several replicas one runs and the others skip), then
//! works in bounded steps, each committed on its own: whole partitions dropped, then rows deleted
//! for at most [`MOWERS_PER_CHUNK`] mowers and [`ROWS_PER_CHUNK`] rows per statement. Deletion is
//! idempotent by construction: whether a row goes depends only on the limits and on rows that are
//! never deleted by the same run (the first position of a minute is never a victim), so a run
//! stopped anywhere and started again deletes exactly the rest, nothing twice and nothing more.
//! Downsampling proceeds in day slices behind a watermark kept by the store
//! (`downsampled_until`), so that a run only looks at the positions that aged past
//! `track_full` since the previous one.

use crate::ports::{
    chain, Clock, DownsampleWindow, Partition, RetainedTable, RetentionError, RetentionRun,
    RetentionStore, WebhookStore,
};
use crate::ticks::Ticks;
use chrono::{DateTime, Duration, SubsecRound, Utc};
use std::sync::Arc;
use swath_domain::MowerId;
use tokio::sync::watch;

/// Mowers per deleting statement: their rows are found through the primary key
/// `(mower_id, observed_at)`, one index range per mower.
pub const MOWERS_PER_CHUNK: usize = 256;

/// Rows deleted per statement at most: a statement holds its row locks and writes its WAL in
/// pieces no larger than this.
pub const ROWS_PER_CHUNK: u64 = 10_000;

/// The window of positions one downsampling slice covers; the watermark advances after each.
pub fn slice_length() -> Duration {
    Duration::days(1)
}

/// An invalid retention policy.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("{0} must be at least 1 day")]
    TooShort(&'static str),
    #[error("SWATH_TRACK_FULL_DAYS ({full}) must not exceed SWATH_TRACK_KEEP_DAYS ({keep})")]
    FullExceedsKeep { full: u32, keep: u32 },
    #[error(
        "SWATH_SESSIONS_KEEP_DAYS ({sessions}) must not be shorter than SWATH_HISTORY_KEEP_DAYS \
         ({history})"
    )]
    SessionsShorterThanHistory { sessions: u32, history: u32 },
}

/// How long each kind of row is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Positions at full resolution (`SWATH_TRACK_FULL_DAYS`, 30).
    pub track_full_days: u32,
    /// Positions at all, one per minute past `track_full_days` (`SWATH_TRACK_KEEP_DAYS`, 365).
    pub track_keep_days: u32,
    /// History rows (`SWATH_HISTORY_KEEP_DAYS`, 365).
    pub history_keep_days: u32,
    /// Settled webhook deliveries, counted from their enqueueing
    /// (`SWATH_WEBHOOK_DELIVERIES_KEEP_DAYS`, 30).
    pub webhook_deliveries_keep_days: u32,
    /// W8's sessions, counted from their end (`SWATH_SESSIONS_KEEP_DAYS`, 3 650): at least
    /// `history_keep_days`.
    pub sessions_keep_days: u32,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self {
            track_full_days: 30,
            track_keep_days: 365,
            history_keep_days: 365,
            webhook_deliveries_keep_days: 30,
            sessions_keep_days: 3650,
        }
    }
}

impl RetentionPolicy {
    /// Checks the policy: every limit at least a day, full resolution not longer than the track.
    pub fn validate(self) -> Result<Self, PolicyError> {
        if self.track_full_days == 0 {
            return Err(PolicyError::TooShort("SWATH_TRACK_FULL_DAYS"));
        }
        if self.track_keep_days == 0 {
            return Err(PolicyError::TooShort("SWATH_TRACK_KEEP_DAYS"));
        }
        if self.history_keep_days == 0 {
            return Err(PolicyError::TooShort("SWATH_HISTORY_KEEP_DAYS"));
        }
        if self.webhook_deliveries_keep_days == 0 {
            return Err(PolicyError::TooShort("SWATH_WEBHOOK_DELIVERIES_KEEP_DAYS"));
        }
        if self.sessions_keep_days < self.history_keep_days {
            return Err(PolicyError::SessionsShorterThanHistory {
                sessions: self.sessions_keep_days,
                history: self.history_keep_days,
            });
        }
        if self.track_full_days > self.track_keep_days {
            return Err(PolicyError::FullExceedsKeep {
                full: self.track_full_days,
                keep: self.track_keep_days,
            });
        }
        Ok(self)
    }

    /// The limits of a run at `now`.
    pub fn cutoffs(&self, now: DateTime<Utc>) -> Cutoffs {
        // Stored instants are microseconds (decision 1): limits on the same grid compare the
        // same in every store (PostgreSQL would truncate finer digits when they are sent).
        let now = now.trunc_subsecs(6);
        let days = |d: u32| Duration::days(i64::from(d));
        Cutoffs {
            now,
            downsample_before: now - days(self.track_full_days),
            positions_before: now - days(self.track_keep_days),
            history_before: now - days(self.history_keep_days),
            deliveries_before: now - days(self.webhook_deliveries_keep_days),
            sessions_before: now - days(self.sessions_keep_days),
        }
    }
}

/// The limits of one run: rows strictly older than a limit are affected; a row at it is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cutoffs {
    pub now: DateTime<Utc>,
    /// Positions older than this are downsampled.
    pub downsample_before: DateTime<Utc>,
    /// Positions older than this are deleted.
    pub positions_before: DateTime<Utc>,
    /// History rows older than this are deleted.
    pub history_before: DateTime<Utc>,
    /// Settled webhook deliveries enqueued before this are deleted.
    pub deliveries_before: DateTime<Utc>,
    /// Sessions that ended before this are deleted (each mower's newest excepted).
    pub sessions_before: DateTime<Utc>,
}

impl Cutoffs {
    fn expire_before(&self, table: RetainedTable) -> DateTime<Utc> {
        match table {
            RetainedTable::History => self.history_before,
            RetainedTable::Positions => self.positions_before,
        }
    }
}

/// What a run did (or, dry, would do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetentionSummary {
    pub cutoffs: Cutoffs,
    pub dry_run: bool,
    /// Partitions dropped whole, with their rows (PostgreSQL's estimate).
    pub partitions_dropped: Vec<(Partition, u64)>,
    /// Partitions that could not be dropped now (a lock not granted in time); their rows were
    /// deleted in chunks instead.
    pub partitions_busy: usize,
    /// History rows deleted in chunks (not counting dropped partitions).
    pub history_expired: u64,
    /// Positions deleted in chunks because they passed `track_keep`.
    pub positions_expired: u64,
    /// Positions deleted because an earlier one of the same minute stays.
    pub positions_downsampled: u64,
    /// Settled webhook deliveries deleted.
    pub deliveries_expired: u64,
    /// W8's sessions deleted.
    pub sessions_expired: u64,
    /// The downsampling watermark after the run.
    pub downsampled_until: Option<DateTime<Utc>>,
    /// Steps done, out of `steps_planned`.
    pub steps_done: u64,
    pub steps_planned: u64,
}

impl RetentionSummary {
    fn new(cutoffs: Cutoffs, dry_run: bool) -> Self {
        Self {
            cutoffs,
            dry_run,
            partitions_dropped: Vec::new(),
            partitions_busy: 0,
            history_expired: 0,
            positions_expired: 0,
            positions_downsampled: 0,
            deliveries_expired: 0,
            sessions_expired: 0,
            downsampled_until: None,
            steps_done: 0,
            steps_planned: 0,
        }
    }

    /// Rows deleted in chunks (dropped partitions not included).
    pub fn rows_deleted(&self) -> u64 {
        self.history_expired
            + self.positions_expired
            + self.positions_downsampled
            + self.deliveries_expired
            + self.sessions_expired
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetentionOutcome {
    /// Another run (another replica) held the lock; this one did nothing.
    Skipped,
    /// Everything due was done.
    Completed(RetentionSummary),
    /// Stopped on request between two steps; the next run does the rest.
    Interrupted(RetentionSummary),
}

/// Options of one run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Count what would go; change nothing.
    pub dry_run: bool,
    /// Stops the run between two steps once it turns `true` (shutdown).
    pub stop: Option<watch::Receiver<bool>>,
}

/// The retention use case.
pub struct Retention {
    store: Arc<dyn RetentionStore>,
    clock: Arc<dyn Clock>,
    policy: RetentionPolicy,
    webhooks: Option<Arc<dyn WebhookStore>>,
}

/// One planned unit of work.
enum Step {
    Drop(Partition),
    Expire(RetainedTable, usize),
    Downsample(DownsampleWindow, usize),
    Mark(DateTime<Utc>),
    /// Settled webhook deliveries, in chunks.
    Deliveries,
    /// W8's sessions of a chunk of mowers.
    Sessions(usize),
}

impl Retention {
    pub fn new(
        store: Arc<dyn RetentionStore>,
        clock: Arc<dyn Clock>,
        policy: RetentionPolicy,
    ) -> Self {
        Self {
            store,
            clock,
            policy,
            webhooks: None,
        }
    }

    /// Also deletes the settled webhook deliveries past the policy's limit.
    pub fn with_webhooks(mut self, webhooks: Arc<dyn WebhookStore>) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    pub fn policy(&self) -> RetentionPolicy {
        self.policy
    }

    /// One run: lock, plan, steps, release. `progress` is called after every step with the
    /// summary so far (`steps_done` of `steps_planned`).
    pub async fn run(
        &self,
        options: RunOptions,
        progress: &mut (dyn FnMut(&RetentionSummary) + Send),
    ) -> Result<RetentionOutcome, RetentionError> {
        let Some(mut run) = self.store.try_lock().await? else {
            tracing::info!("Another run of retention holds the lock; skipping this one.");
            metrics::counter!("swath_retention_runs_total", "outcome" => "skipped").increment(1);
            return Ok(RetentionOutcome::Skipped);
        };
        let result = self.run_locked(run.as_mut(), options, progress).await;
        let released = run.release().await;
        let outcome = result?;
        released?;
        let label = match &outcome {
            RetentionOutcome::Completed(_) => "completed",
            RetentionOutcome::Interrupted(_) => "interrupted",
            RetentionOutcome::Skipped => "skipped",
        };
        metrics::counter!("swath_retention_runs_total", "outcome" => label).increment(1);
        Ok(outcome)
    }

    async fn run_locked(
        &self,
        run: &mut dyn RetentionRun,
        options: RunOptions,
        progress: &mut (dyn FnMut(&RetentionSummary) + Send),
    ) -> Result<RetentionOutcome, RetentionError> {
        let cutoffs = self.policy.cutoffs(self.clock.now());
        let dry_run = options.dry_run;
        let mut summary = RetentionSummary::new(cutoffs, dry_run);

        // The plan, made once: its length is the progress bar's.
        let mowers = run.mowers().await?;
        let chunks: Vec<&[MowerId]> = mowers.chunks(MOWERS_PER_CHUNK).collect();
        let mut steps = Vec::new();
        for partition in run.partitions().await? {
            if partition.end <= cutoffs.expire_before(partition.table) {
                steps.push(Step::Drop(partition));
            }
        }
        for table in [RetainedTable::History, RetainedTable::Positions] {
            steps.extend((0..chunks.len()).map(|c| Step::Expire(table, c)));
        }
        steps.extend((0..chunks.len()).map(Step::Sessions));
        let watermark = run.downsampled_until().await?;
        summary.downsampled_until = watermark;
        // Older positions expire rather than being downsampled; the watermark never moves back.
        let mut from = watermark.map_or(cutoffs.positions_before, |w| {
            w.max(cutoffs.positions_before)
        });
        while from < cutoffs.downsample_before {
            let to = (from + slice_length()).min(cutoffs.downsample_before);
            let window = DownsampleWindow {
                from,
                to,
                keep_from: cutoffs.positions_before,
            };
            steps.extend((0..chunks.len()).map(|c| Step::Downsample(window, c)));
            steps.push(Step::Mark(to));
            from = to;
        }
        if self.webhooks.is_some() {
            steps.push(Step::Deliveries);
        }
        // Before anything goes: ingestion must know that rows older than these may be gone.
        if !dry_run {
            run.raise_floors(
                cutoffs.history_before,
                cutoffs.downsample_before.max(cutoffs.positions_before),
            )
            .await?;
        }
        summary.steps_planned = steps.len() as u64;
        tracing::info!(
            dry_run,
            steps = steps.len(),
            mowers = mowers.len(),
            downsample_before = %cutoffs.downsample_before,
            positions_before = %cutoffs.positions_before,
            history_before = %cutoffs.history_before,
            "Retention run started."
        );
        progress(&summary);

        for step in steps {
            if options.stop.as_ref().is_some_and(|stop| *stop.borrow()) {
                tracing::info!(
                    steps_done = summary.steps_done,
                    steps_planned = summary.steps_planned,
                    "Retention run stopped on request; the next run does the rest."
                );
                return Ok(RetentionOutcome::Interrupted(summary));
            }
            self.step(run, &step, &chunks, &mut summary).await?;
            summary.steps_done += 1;
            if summary.steps_planned > 0 {
                metrics::gauge!("swath_retention_progress_ratio")
                    .set(summary.steps_done as f64 / summary.steps_planned as f64);
            }
            progress(&summary);
        }
        if !dry_run {
            metrics::gauge!("swath_retention_last_completed_timestamp_seconds")
                .set(cutoffs.now.timestamp() as f64);
        }
        tracing::info!(
            dry_run,
            partitions_dropped = summary.partitions_dropped.len(),
            history_expired = summary.history_expired,
            positions_expired = summary.positions_expired,
            positions_downsampled = summary.positions_downsampled,
            deliveries_expired = summary.deliveries_expired,
            sessions_expired = summary.sessions_expired,
            "Retention run completed."
        );
        Ok(RetentionOutcome::Completed(summary))
    }

    async fn step(
        &self,
        run: &mut dyn RetentionRun,
        step: &Step,
        chunks: &[&[MowerId]],
        summary: &mut RetentionSummary,
    ) -> Result<(), RetentionError> {
        let dry_run = summary.dry_run;
        match step {
            Step::Drop(partition) => match run.drop_partition(partition, dry_run).await? {
                Some(rows) => {
                    if !dry_run {
                        tracing::info!(
                            partition = %partition.name,
                            rows,
                            "Dropped a partition past the retention limit."
                        );
                        metrics::counter!("swath_retention_partitions_dropped_total",
                            "table" => partition.table.name())
                        .increment(1);
                    }
                    summary.partitions_dropped.push((partition.clone(), rows));
                }
                None => {
                    tracing::warn!(
                        partition = %partition.name,
                        "Could not drop a partition now (busy); deleting its rows in chunks instead."
                    );
                    summary.partitions_busy += 1;
                }
            },
            Step::Expire(table, chunk) => {
                let before = summary.cutoffs.expire_before(*table);
                // Until a chunk deletes fewer than the limit (once when dry: it counts all).
                let mut deleted = 0;
                loop {
                    let n = run
                        .expire(*table, chunks[*chunk], before, ROWS_PER_CHUNK, dry_run)
                        .await?;
                    deleted += n;
                    if dry_run || n < ROWS_PER_CHUNK {
                        break;
                    }
                }
                match table {
                    RetainedTable::History => summary.history_expired += deleted,
                    RetainedTable::Positions => summary.positions_expired += deleted,
                }
                if !dry_run && deleted > 0 {
                    metrics::counter!("swath_retention_rows_deleted_total",
                        "table" => table.name(), "reason" => "expired")
                    .increment(deleted);
                }
            }
            Step::Downsample(window, chunk) => {
                let mut deleted = 0;
                loop {
                    let n = run
                        .downsample(chunks[*chunk], *window, ROWS_PER_CHUNK, dry_run)
                        .await?;
                    deleted += n;
                    if dry_run || n < ROWS_PER_CHUNK {
                        break;
                    }
                }
                summary.positions_downsampled += deleted;
                if !dry_run && deleted > 0 {
                    metrics::counter!("swath_retention_rows_deleted_total",
                        "table" => "positions", "reason" => "downsampled")
                    .increment(deleted);
                }
            }
            Step::Mark(until) => {
                if !dry_run {
                    run.set_downsampled_until(*until).await?;
                    summary.downsampled_until = Some(*until);
                    metrics::gauge!("swath_retention_downsampled_until_timestamp_seconds")
                        .set(until.timestamp() as f64);
                }
            }
            Step::Sessions(chunk) => {
                let before = summary.cutoffs.sessions_before;
                let mut deleted = 0;
                loop {
                    let n = run
                        .expire_sessions(chunks[*chunk], before, ROWS_PER_CHUNK, dry_run)
                        .await?;
                    deleted += n;
                    if dry_run || n < ROWS_PER_CHUNK {
                        break;
                    }
                }
                summary.sessions_expired += deleted;
                if !dry_run && deleted > 0 {
                    metrics::counter!("swath_retention_rows_deleted_total",
                        "table" => "sessions", "reason" => "expired")
                    .increment(deleted);
                }
            }
            Step::Deliveries => {
                let Some(webhooks) = &self.webhooks else {
                    return Ok(());
                };
                let before = summary.cutoffs.deliveries_before;
                let mut deleted = 0;
                loop {
                    let n = webhooks
                        .expire_deliveries(before, ROWS_PER_CHUNK, dry_run)
                        .await
                        .map_err(|e| RetentionError::Unavailable(Box::new(e)))?;
                    deleted += n;
                    if dry_run || n < ROWS_PER_CHUNK {
                        break;
                    }
                }
                summary.deliveries_expired += deleted;
                if !dry_run && deleted > 0 {
                    metrics::counter!("swath_retention_rows_deleted_total",
                        "table" => "webhook_deliveries", "reason" => "expired")
                    .increment(deleted);
                }
            }
        }
        Ok(())
    }
}

/// Runs retention every `interval` until `stop` turns `true`; the first run right away. A failed
/// run is logged and tried again at the next interval (what it did not commit, it did not do).
pub async fn run_every(
    retention: Arc<Retention>,
    interval: std::time::Duration,
    stop: watch::Receiver<bool>,
) {
    let mut ticks = Ticks::new(interval, stop);
    while ticks.next().await {
        let options = RunOptions {
            dry_run: false,
            stop: Some(ticks.stop().clone()),
        };
        if let Err(e) = retention.run(options, &mut |_| {}).await {
            metrics::counter!("swath_retention_runs_total", "outcome" => "failed").increment(1);
            tracing::warn!(error = %chain(&e), "Retention run failed; it will run again.");
        }
    }
}

/// The `# HELP` lines of retention's metrics (the Prometheus recorder's installer calls it).
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_counter!(
        "swath_retention_runs_total",
        "Retention runs, by outcome: completed, interrupted, skipped (another replica held the \
         lock), failed."
    );
    describe_counter!(
        "swath_retention_rows_deleted_total",
        "Rows retention deleted in chunks, by table and reason (expired, downsampled)."
    );
    describe_counter!(
        "swath_retention_partitions_dropped_total",
        "Monthly partitions retention dropped whole, by table."
    );
    describe_gauge!(
        "swath_retention_progress_ratio",
        Unit::Count,
        "Steps done of the current (or last) retention run, from 0 to 1."
    );
    describe_gauge!(
        "swath_retention_last_completed_timestamp_seconds",
        Unit::Seconds,
        "When the last retention run of this replica completed (Unix time)."
    );
    describe_gauge!(
        "swath_retention_downsampled_until_timestamp_seconds",
        Unit::Seconds,
        "Positions older than this were downsampled (Unix time)."
    );
    // The failure alert watches an increase: the series exists before the first failure.
    metrics::counter!("swath_retention_runs_total", "outcome" => "failed").absolute(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_policy_is_checked() {
        assert!(RetentionPolicy::default().validate().is_ok());
        let p = RetentionPolicy {
            track_full_days: 40,
            track_keep_days: 30,
            history_keep_days: 1,
            webhook_deliveries_keep_days: 1,
            sessions_keep_days: 1,
        };
        assert_eq!(
            p.validate(),
            Err(PolicyError::FullExceedsKeep { full: 40, keep: 30 })
        );
        let p = RetentionPolicy {
            history_keep_days: 0,
            ..RetentionPolicy::default()
        };
        assert_eq!(
            p.validate(),
            Err(PolicyError::TooShort("SWATH_HISTORY_KEEP_DAYS"))
        );
        let p = RetentionPolicy {
            sessions_keep_days: 364,
            ..RetentionPolicy::default()
        };
        assert_eq!(
            p.validate(),
            Err(PolicyError::SessionsShorterThanHistory {
                sessions: 364,
                history: 365
            })
        );
    }

    #[test]
    fn cutoffs_are_whole_days_before_now() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
        let c = RetentionPolicy::default().cutoffs(now);
        assert_eq!(
            c.downsample_before,
            Utc.with_ymd_and_hms(2026, 10, 31, 12, 0, 0).unwrap()
        );
        assert_eq!(
            c.positions_before,
            Utc.with_ymd_and_hms(2025, 11, 30, 12, 0, 0).unwrap()
        );
        assert_eq!(c.history_before, c.positions_before);
    }
}
