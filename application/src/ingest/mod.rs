//! Batched state ingestion (docs/rules.md §3): validate each report, read and lock the rows
//! of the batch's mowers once (and, for a batch with late states, their stored neighbours in one
//! more read), apply the write rules in memory, write every table at once (one statement on
//! PostgreSQL), publish the derived events after the commit.
//!
//! Events of W6 (`blade_due`) are stored, with their alert, by the telemetry commit itself. Virtual
//! zones (W7) are evaluated after that commit, in a unit of work of their own over the zones of
//! all the batch's mowers (read at once); their zone watch skips positions evaluated before, so a
//! redelivered batch (after a failure between the two commits) completes W7 without repeating it.
//!
//! The events a commit stored are published whatever happens after it: when W7 fails, W6's
//! events are published before the error is returned ([`IngestError::ZonesPending`]), because
//! the redelivered batch finds them raised already and would never raise them again
//! (docs/decisions.md, decision 47).
//!
//! Layout: this file holds the use case and its unit of work; `isolate` the splitting of a batch
//! the store refuses; `zones` W7's evaluation and the order of the events published; `handler`
//! the consumer's handler (a message parsed and settled by `crate::consume`).

mod handler;
mod isolate;
mod sessions;
mod zones;

pub use handler::IngestHandler;

use zones::{evaluate_zones, in_state_order};

use crate::consume::parse_message;
use crate::group_commit::GroupCommit;
use crate::ports::{Clock, EventBus, Message, StoreError, TelemetryStore, WatchError, ZoneStore};
use crate::publish::publish;
use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use swath_domain::watch::ingest_notifications;
use swath_domain::{
    apply_states, late_states, InvalidReport, MowerId, StateCounts, StateOutcome, StateReport,
};

/// How many failed deliveries of a batch's messages make the consumer isolate what fails: a
/// batch with a message delivered more often than this is stored with
/// [`Ingest::record_states_isolating`] (the store's refusal is then split down to the state that
/// causes it, which is dropped as `rejected_by_store`; the others are stored).
pub const ISOLATE_AFTER_FAILED_DELIVERIES: u32 = 2;

/// How long the ingest consumer may fail every batch before `/readyz` says it stopped making
/// progress ([`Ingest::stalled_for`]).
pub const STALLED_AFTER: Duration = Duration::from_secs(60);

/// How long one unit of work of a batch may take, begin to commit, unless
/// [`Ingest::with_unit_deadline`] says otherwise: a batch takes milliseconds, so this only ever
/// cuts a store that stopped answering.
pub const DEFAULT_UNIT_DEADLINE: Duration = Duration::from_secs(10);

/// Units of work the ingest consumer's handler runs at once, each holding the batches of the
/// partitions that were queued when it started (decision 84): two keep a unit of work being
/// prepared while another waits on the store, and leave the pool's other connections to the
/// watcher and the API.
pub const GROUP_WRITERS: usize = 2;

/// The most states one grouped unit of work holds (a batch larger than this is written alone,
/// never split): enough for the batches of every partition at the default batch maximum, and
/// a few at the largest.
pub const GROUP_MAX_STATES: usize = 4096;

/// Errors of [`Ingest::record_states`].
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Nothing of the batch is stored; redeliver it.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The batch is stored (`outcomes` say what became of each report, as `Ok` would have) and
    /// the events its commit stored (W6) are published, but virtual zones (W7) could not be
    /// evaluated. Redeliver the batch to complete W7: the rows are not stored twice, W6 raises
    /// nothing again, and W7 picks up where it stopped.
    #[error("the states are stored, but their virtual zones could not be evaluated: {error}")]
    ZonesPending {
        outcomes: Vec<StateOutcome>,
        #[source]
        error: WatchError,
    },
}

impl IngestError {
    /// Whether the store refused the data itself (the same states would fail again), as opposed
    /// to a store that could not be reached.
    pub fn is_rejection(&self) -> bool {
        matches!(self, IngestError::Store(e) if e.is_rejection())
    }
}

/// The ingest use case.
pub struct Ingest {
    store: Arc<dyn TelemetryStore>,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
    zones: Option<Arc<dyn ZoneStore>>,
    progress: Progress,
    /// The longest one unit of work (begin to commit) may take before the batch fails
    /// ([`Ingest::with_unit_deadline`]).
    unit_deadline: Duration,
    /// The consumer's batches, written together when they arrive together.
    group: GroupCommit<StateReport, StateOutcome, IngestError>,
    /// W8's merge gap (`SWATH_SESSION_MERGE_GAP_SECONDS`).
    session_merge_gap: chrono::Duration,
}

/// How [`Ingest::record`] writes a batch's valid states.
#[derive(Clone, Copy)]
enum Write<'a> {
    /// In a unit of work of their own.
    Alone,
    /// With the other batches queued at the same moment (the consumer's handler).
    Grouped,
    /// Alone, splitting what the store refuses; the bus subject of each element.
    Isolating(&'a [&'a str]),
}

/// Whether the ingest consumer makes progress: batches failed in a row, and since when.
#[derive(Default)]
struct Progress {
    failed_in_a_row: AtomicU64,
    failing_since: Mutex<Option<Instant>>,
}

impl Progress {
    fn succeeded(&self) {
        self.failed_in_a_row.store(0, Ordering::Relaxed);
        *self.failing_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
        metrics::gauge!("swath_ingest_failed_batches_in_a_row").set(0.0);
    }

    fn failed(&self) {
        let n = self.failed_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        self.failing_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(Instant::now);
        metrics::gauge!("swath_ingest_failed_batches_in_a_row").set(n as f64);
    }

    fn failing_for(&self) -> Option<Duration> {
        self.failing_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|since| since.elapsed())
    }
}

impl Ingest {
    pub fn new(
        store: Arc<dyn TelemetryStore>,
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            bus,
            clock,
            zones: None,
            progress: Progress::default(),
            unit_deadline: DEFAULT_UNIT_DEADLINE,
            group: GroupCommit::new("ingest", GROUP_WRITERS, GROUP_MAX_STATES),
            session_merge_gap: swath_domain::sessions::DEFAULT_SESSION_MERGE_GAP,
        }
    }

    /// W8's merge gap: a stretch that starts at most this long after the previous session
    /// ended joins it (`SWATH_SESSION_MERGE_GAP_SECONDS`).
    pub fn with_session_merge_gap(mut self, gap: chrono::Duration) -> Self {
        self.session_merge_gap = gap;
        self
    }

    /// How long this process's ingest consumer has failed every batch it tried, once that is
    /// longer than [`STALLED_AFTER`]: it stopped making progress (`/readyz` says so). `None`
    /// while batches are stored (or none came).
    pub fn stalled_for(&self) -> Option<Duration> {
        self.progress
            .failing_for()
            .filter(|failing| *failing >= STALLED_AFTER)
    }

    /// Fails a batch whose unit of work (begin to commit) has not finished within `deadline`:
    /// nothing of it is acknowledged and the consumer goes on (`SWATH_DATABASE_BATCH_TIMEOUT_SECONDS`).
    pub fn with_unit_deadline(mut self, deadline: Duration) -> Self {
        self.unit_deadline = deadline;
        self
    }

    /// Evaluates virtual zones (W7) after each commit, with the zones of `store`.
    pub fn with_zones(mut self, store: Arc<dyn ZoneStore>) -> Self {
        self.zones = Some(store);
        self
    }

    /// Parses and validates one report's JSON bytes, received now.
    pub fn parse(&self, payload: &[u8]) -> Result<StateReport, InvalidReport> {
        StateReport::parse(payload, self.clock.now())
    }

    /// Parses and validates one bus message, received now: its report, and its subject as the
    /// gateway's identity ([`parse_message`]).
    pub fn parse_message(&self, message: &Message) -> Result<StateReport, InvalidReport> {
        parse_message(message, self.clock.now())
    }

    /// Records a batch: one outcome per element, in order. Reports that failed validation are
    /// dropped alone with their reason (logged once with their mower id, counted by reason); the
    /// valid ones go through the write rules in one unit of work. A store failure stores nothing
    /// and is returned, so that the caller redelivers the batch.
    pub async fn record_states(
        &self,
        batch: Vec<Result<StateReport, InvalidReport>>,
    ) -> Result<Vec<StateOutcome>, IngestError> {
        Ok(self.record(batch, Write::Alone).await?.0)
    }

    /// [`Self::record_states`], also answering how the stored states counted in the totals (new
    /// in order, late and merged, late and not counted, duplicates).
    pub async fn record_counted(
        &self,
        batch: Vec<Result<StateReport, InvalidReport>>,
    ) -> Result<(Vec<StateOutcome>, StateCounts), IngestError> {
        self.record(batch, Write::Alone).await
    }

    /// [`Ingest::record_states`], except that when the store *refuses* the batch
    /// ([`StoreError::Rejected`]: the same data fails the same way every time) the batch is split
    /// in halves, and halves of the halves, in order, until what fails is single states: those
    /// are dropped as `rejected_by_store` (logged once with their mower id, `origins[i]` — the
    /// bus subject of element `i`, when given — and the store's error; counted), everything
    /// else is stored. A failure that is not a refusal (the store is down) still stores nothing
    /// more and is returned, to be redelivered.
    ///
    /// When every state of a batch of several is refused alone, the fault is not in the states
    /// (a broken schema, a trigger refusing everything): nothing is dropped and the first error
    /// is returned, so that a systemic fault never discards a stream.
    pub async fn record_states_isolating(
        &self,
        batch: Vec<Result<StateReport, InvalidReport>>,
        origins: &[&str],
    ) -> Result<Vec<StateOutcome>, IngestError> {
        Ok(self.record(batch, Write::Isolating(origins)).await?.0)
    }

    /// `counts` are those of the batch, except when it was written grouped: then they are zero
    /// (the consumer's handler does not use them; `swath import` writes alone).
    async fn record(
        &self,
        batch: Vec<Result<StateReport, InvalidReport>>,
        write: Write<'_>,
    ) -> Result<(Vec<StateOutcome>, StateCounts), IngestError> {
        // Microseconds: the precision every store keeps (see docs/decisions.md).
        let received_at = self.clock.now_micros();
        let mut outcomes: Vec<Option<StateOutcome>> = vec![None; batch.len()];
        let mut valid = Vec::with_capacity(batch.len());
        let mut valid_index = Vec::with_capacity(batch.len());
        for (i, report) in batch.into_iter().enumerate() {
            match report {
                Ok(state) => {
                    valid_index.push(i);
                    valid.push(state);
                }
                Err(invalid) => {
                    log_invalid(&invalid);
                    outcomes[i] = Some(StateOutcome::Dropped(invalid.reason));
                }
            }
        }
        metrics::counter!("swath_states_received_total").increment(outcomes.len() as u64);

        let mut counts = StateCounts::default();
        if !valid.is_empty() {
            let result = match write {
                Write::Alone => self.store(&valid, received_at).await,
                Write::Grouped => self
                    .group
                    .submit(valid, |states| async move {
                        Ok(self.store(&states, received_at).await?.0)
                    })
                    .await
                    .map(|outcomes| (outcomes, StateCounts::default())),
                Write::Isolating(origins) => {
                    let origins: Vec<&str> = valid_index
                        .iter()
                        .map(|&i| origins.get(i).copied().unwrap_or("http"))
                        .collect();
                    self.isolate(&valid, &origins, received_at).await
                }
            };
            let (applied, stored_counts) = match result {
                Ok(stored) => stored,
                // The outcomes of the valid states, in the batch's order (a part of the batch
                // when the isolating path failed on a part: the rest counts as stored, which the
                // redelivery makes true).
                Err(IngestError::ZonesPending {
                    outcomes: applied,
                    error,
                }) => {
                    for (i, outcome) in valid_index.iter().zip(applied) {
                        outcomes[*i] = Some(outcome);
                    }
                    return Err(IngestError::ZonesPending {
                        outcomes: finish(outcomes),
                        error,
                    });
                }
                Err(e) => return Err(e),
            };
            counts = stored_counts;
            for (i, outcome) in valid_index.iter().zip(applied) {
                outcomes[*i] = Some(outcome);
            }
        }
        Ok((finish(outcomes), counts))
    }

    /// Valid states through the write rules in one unit of work: the outcome of each (stored, or
    /// dropped by the directory check W0, logged and counted here) and how they counted in the
    /// totals; events published after the commit.
    async fn store(
        &self,
        valid: &[StateReport],
        received_at: DateTime<Utc>,
    ) -> Result<(Vec<StateOutcome>, StateCounts), IngestError> {
        let mut mowers: Vec<MowerId> = valid.iter().map(|s| s.mower_id).collect();
        mowers.sort_unstable();
        mowers.dedup();
        let started = Instant::now();
        let unit_of_work = async {
            let (mut snapshots, mut unit) = self.store.begin(&mowers).await?;
            // Late states are merged between their stored neighbours: one more read, only for a
            // batch that has any.
            let late = late_states(&snapshots, valid);
            let mut windows = Vec::new();
            if !late.is_empty() {
                unit.neighbours(&late, &mut snapshots).await?;
                // W8: the sessions around the late states are folded again (decision 200).
                windows = unit.session_windows(&sessions::late_spans(&late)).await?;
            }
            let found = sessions::before(&mut snapshots);
            let (applied, mut changes) = apply_states(&mut snapshots, valid, received_at);
            changes.sessions =
                sessions::session_changes(&found, windows, valid, &applied, self.session_merge_gap);
            sessions::cover_with_health(&mut changes, &snapshots);
            let counts = changes.counts;
            // W6's events and alerts, derived here once: the commit stores them (the events
            // feed), and the events are published below, after it.
            let notifications = ingest_notifications(&changes.events);
            let events = notifications.events.clone();
            unit.commit(changes, notifications).await?;
            Ok::<_, StoreError>((applied, counts, events))
        };
        // A store that stopped answering (a primary gone with its connections half-open) fails
        // the batch here, unacknowledged and redelivered, instead of holding the consumer until
        // TCP gives up; dropping the unit of work rolls it back (issue 44).
        let Ok(done) = tokio::time::timeout(self.unit_deadline, unit_of_work).await else {
            let seconds = self.unit_deadline.as_secs_f64();
            let cause = format!(
                "no answer from the store within {seconds} s (SWATH_DATABASE_BATCH_TIMEOUT_SECONDS)"
            );
            return Err(IngestError::Store(StoreError::Unavailable(cause.into())));
        };
        let (applied, counts, mut events) = done?;
        // The unit of work from its first statement to its commit: what the store costs a batch.
        metrics::histogram!("swath_ingest_commit_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        metrics::gauge!("swath_ingest_last_commit_timestamp_seconds")
            .set(self.clock.now().timestamp_micros() as f64 / 1e6);
        metrics::histogram!("swath_ingest_batch_size").record(valid.len() as f64);
        metrics::counter!("swath_ingest_batches_total").increment(1);
        if counts.late_merged > 0 {
            metrics::counter!("swath_states_late_merged_total").increment(counts.late_merged);
        }
        if counts.late_not_counted > 0 {
            metrics::counter!("swath_states_late_not_counted_total")
                .increment(counts.late_not_counted);
        }
        // Ingest lag: now minus the newest state this batch stored.
        let newest = valid
            .iter()
            .zip(&applied)
            .filter(|(_, o)| **o == StateOutcome::Stored)
            .map(|(s, _)| s.observed_at)
            .max();
        if let Some(newest) = newest {
            let lag = (self.clock.now() - newest)
                .num_microseconds()
                .unwrap_or(i64::MAX);
            metrics::gauge!("swath_ingest_lag_seconds").set(lag as f64 / 1e6);
        }

        let mut zones_failed = None;
        if let Some(zones) = &self.zones {
            let stored: Vec<StateReport> = valid
                .iter()
                .zip(&applied)
                .filter(|(s, o)| **o == StateOutcome::Stored && s.position.is_some())
                .map(|(s, _)| s.clone())
                .collect();
            match evaluate_zones(zones.as_ref(), &stored).await {
                Ok(zone_events) => {
                    events = in_state_order(valid, &applied, events, zone_events);
                }
                // W6's events are committed: publish them below all the same, since the
                // redelivery that completes W7 will not raise them again (decision 47).
                Err(error) => zones_failed = Some(error),
            }
        }
        for (state, outcome) in valid.iter().zip(&applied) {
            if let StateOutcome::Dropped(reason) = outcome {
                tracing::warn!(
                    mower_id = %state.mower_id,
                    account_id = %state.account_id,
                    reason = reason.as_str(),
                    "Dropped a state report refused by the directory check."
                );
                metrics::counter!("swath_states_dropped_total", "reason" => reason.as_str())
                    .increment(1);
            }
        }
        // After the commits, in order (W6, then W7). A failed publish cannot undo the stored
        // rows; it is logged (the event's id is its dedup id: a later re-publish is safe).
        publish(self.bus.as_ref(), &events).await;
        if let Some(error) = zones_failed {
            return Err(IngestError::ZonesPending {
                outcomes: applied,
                error,
            });
        }
        Ok((applied, counts))
    }
}

/// The batch's outcomes (every element has one by now), with the stored ones counted.
fn finish(outcomes: Vec<Option<StateOutcome>>) -> Vec<StateOutcome> {
    let stored = outcomes
        .iter()
        .filter(|o| **o == Some(StateOutcome::Stored))
        .count();
    metrics::counter!("swath_states_stored_total").increment(stored as u64);
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or(StateOutcome::Stored))
        .collect()
}

fn log_invalid(invalid: &InvalidReport) {
    match invalid.mower_id {
        Some(mower_id) => tracing::warn!(
            %mower_id,
            reason = invalid.reason.as_str(),
            detail = %invalid.detail,
            "Dropped an invalid state report."
        ),
        None => tracing::warn!(
            reason = invalid.reason.as_str(),
            detail = %invalid.detail,
            "Dropped an invalid state report of an unknown mower."
        ),
    }
    metrics::counter!("swath_states_dropped_total", "reason" => invalid.reason.as_str())
        .increment(1);
}
