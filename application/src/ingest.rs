//! Batched state ingestion (DESIGN §3, ADR 0078): validate each report, read and lock the rows
//! of the batch's mowers once, apply the write rules in memory, write every table at once (one
//! statement on PostgreSQL), publish the derived events after the commit.
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

use crate::ports::{
    BatchHandler, Clock, EventBus, HandlerError, Message, Settle, StoreError, TelemetryStore,
    WatchError, WatchStore,
};
use crate::watcher::publish;
use async_trait::async_trait;
use chrono::SubsecRound;
use std::collections::BTreeMap;
use std::sync::Arc;
use swath_domain::watch::zones::{apply_zones, ZoneFence, ZoneSnapshot};
use swath_domain::watch::{ingest_notifications, Event};
use swath_domain::{apply_states, InvalidReport, MowerId, StateOutcome, StateReport};

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

/// The ingest use case.
pub struct Ingest {
    store: Arc<dyn TelemetryStore>,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
    zones: Option<Arc<dyn WatchStore>>,
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
        }
    }

    /// Evaluates virtual zones (W7) after each commit, with the zones of `store`.
    pub fn with_zones(mut self, store: Arc<dyn WatchStore>) -> Self {
        self.zones = Some(store);
        self
    }

    /// Parses and validates one report's JSON bytes, received now.
    pub fn parse(&self, payload: &[u8]) -> Result<StateReport, InvalidReport> {
        StateReport::parse(payload, self.clock.now())
    }

    /// Records a batch: one outcome per element, in order. Reports that failed validation are
    /// dropped alone with their reason (logged once with their mower id, counted by reason); the
    /// valid ones go through the write rules in one unit of work. A store failure stores nothing
    /// and is returned ([`IngestError::Store`]), so that the caller redelivers the batch; a
    /// failure of virtual zones after the commit is [`IngestError::ZonesPending`], with the
    /// outcomes, once the commit's events are published.
    pub async fn record_states(
        &self,
        batch: Vec<Result<StateReport, InvalidReport>>,
    ) -> Result<Vec<StateOutcome>, IngestError> {
        // Microseconds: the precision every store keeps (see docs/decisions.md).
        let received_at = self.clock.now().trunc_subsecs(6);
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

        if !valid.is_empty() {
            let mut mowers: Vec<MowerId> = valid.iter().map(|s| s.mower_id).collect();
            mowers.sort_unstable();
            mowers.dedup();
            let (mut snapshots, unit) = self.store.begin(&mowers).await?;
            let (applied, changes) = apply_states(&mut snapshots, &valid, received_at);
            // The commit stores W6's events and alerts too (the events feed); they are published
            // below, after it.
            let (mut events, _) = ingest_notifications(&changes.events);
            unit.commit(changes).await?;
            metrics::histogram!("swath_ingest_batch_size").record(valid.len() as f64);
            metrics::counter!("swath_ingest_batches_total").increment(1);
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

            for ((i, state), outcome) in valid_index.iter().zip(&valid).zip(&applied) {
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
                outcomes[*i] = Some(*outcome);
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
                        events = in_state_order(&valid, &applied, events, zone_events);
                    }
                    // W6's events are committed: publish them now, since the redelivery that
                    // completes W7 will not raise them again (decision 47).
                    Err(error) => zones_failed = Some(error),
                }
            }
            // After the commits, in order (W6, then W7). A failed publish cannot undo the stored
            // rows; it is logged (the event's id is its dedup id: a later re-publish is safe).
            publish(self.bus.as_ref(), &events).await;
            if let Some(error) = zones_failed {
                return Err(IngestError::ZonesPending {
                    outcomes: finish(outcomes),
                    error,
                });
            }
        }
        Ok(finish(outcomes))
    }

    /// A bus handler that feeds this use case (the ingest durable consumer).
    pub fn handler(self: &Arc<Self>) -> Arc<IngestHandler> {
        Arc::new(IngestHandler {
            ingest: Arc::clone(self),
        })
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

/// W6's and W7's events in the order of the states that raised them (W6 first for one state),
/// which is the order the same states ingested one at a time publish them in. A W6 event is
/// raised by the first stored state of its key, a W7 event by the first stored one with a
/// position.
fn in_state_order(
    valid: &[StateReport],
    applied: &[StateOutcome],
    blade: Vec<Event>,
    zones: Vec<Event>,
) -> Vec<Event> {
    if zones.is_empty() {
        return blade;
    }
    let mut first: BTreeMap<(MowerId, chrono::DateTime<chrono::Utc>), usize> = BTreeMap::new();
    let mut first_positioned = BTreeMap::new();
    for (i, (s, o)) in valid.iter().zip(applied).enumerate() {
        if *o != StateOutcome::Stored {
            continue;
        }
        first.entry((s.mower_id, s.observed_at)).or_insert(i);
        if s.position.is_some() {
            first_positioned
                .entry((s.mower_id, s.observed_at))
                .or_insert(i);
        }
    }
    let mut tagged: Vec<(usize, u8, Event)> = blade
        .into_iter()
        .map(|e| {
            (
                first
                    .get(&(e.mower_id, e.observed_at))
                    .copied()
                    .unwrap_or(0),
                0,
                e,
            )
        })
        .chain(zones.into_iter().map(|e| {
            let i = first_positioned.get(&(e.mower_id, e.observed_at)).copied();
            (i.unwrap_or(0), 1, e)
        }))
        .collect();
    tagged.sort_by_key(|(i, source, _)| (*i, *source));
    tagged.into_iter().map(|(_, _, e)| e).collect()
}

/// W7: the zones of all the batch's mowers read at once, the positions evaluated in order, the
/// zone watches and events committed together. Mowers without zones cost nothing beyond the read.
async fn evaluate_zones(
    store: &dyn WatchStore,
    states: &[StateReport],
) -> Result<Vec<Event>, WatchError> {
    if states.is_empty() {
        return Ok(Vec::new());
    }
    let mut mowers: Vec<MowerId> = states.iter().map(|s| s.mower_id).collect();
    mowers.sort_unstable();
    mowers.dedup();
    let (rows, unit) = store.begin_zones(&mowers).await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut snapshots: BTreeMap<MowerId, ZoneSnapshot> = rows
        .into_iter()
        .map(|(mower, (zones, watch))| {
            let zones = zones
                .into_iter()
                .map(|z| ZoneFence {
                    fence: z.polygon.fence(),
                    id: z.id,
                    name: z.name,
                })
                .collect();
            (mower, ZoneSnapshot { zones, watch })
        })
        .collect();
    let changes = apply_zones(&mut snapshots, states);
    let events = changes.events.clone();
    unit.commit(changes).await?;
    Ok(events)
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

/// Maps a state's outcome onto the bus: stored → acknowledge; dropped → drop (never redelivered,
/// it can never succeed).
pub fn settle(outcome: StateOutcome) -> Settle {
    match outcome {
        StateOutcome::Stored => Settle::Ack,
        StateOutcome::Dropped(_) => Settle::Drop,
    }
}

/// The ingest consumer's batch handler: parses each message, records the batch, and answers one
/// settlement per message. A store failure is an error: the bus redelivers the whole batch; so is
/// a batch stored with its zones pending (the redelivery completes W7 and stores nothing twice).
pub struct IngestHandler {
    ingest: Arc<Ingest>,
}

#[async_trait]
impl BatchHandler for IngestHandler {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        let redelivered = batch.iter().filter(|m| m.delivery > 1).count();
        if redelivered > 0 {
            metrics::counter!("swath_ingest_redeliveries_total").increment(redelivered as u64);
        }
        let reports = batch
            .iter()
            .map(|m| self.ingest.parse(&m.payload))
            .collect();
        match self.ingest.record_states(reports).await {
            Ok(outcomes) => Ok(outcomes.into_iter().map(settle).collect()),
            Err(e @ IngestError::Store(_)) => {
                tracing::error!(error = %e, states = batch.len(), "Could not store a batch of states; it will be redelivered.");
                Err(HandlerError(e.to_string()))
            }
            Err(e @ IngestError::ZonesPending { .. }) => {
                tracing::error!(error = %e, states = batch.len(), "Stored a batch of states but could not evaluate its virtual zones; it will be redelivered.");
                Err(HandlerError(e.to_string()))
            }
        }
    }
}
