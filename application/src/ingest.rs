//! Batched state ingestion (DESIGN §3, ADR 0078): validate each report, read and lock the rows
//! of the batch's mowers once, apply the write rules in memory, write one statement per table,
//! publish the derived events after the commit.

use crate::ports::{
    BatchHandler, Clock, EventBus, HandlerError, Message, Settle, StoreError, TelemetryStore,
};
use crate::subjects;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::SubsecRound;
use std::sync::Arc;
use swath_domain::{apply_states, InvalidReport, MowerId, StateOutcome, StateReport};

/// Errors of [`Ingest::record_states`]: the batch as a whole could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Nothing of the batch is stored; redeliver it.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The ingest use case.
pub struct Ingest {
    store: Arc<dyn TelemetryStore>,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
}

impl Ingest {
    pub fn new(
        store: Arc<dyn TelemetryStore>,
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { store, bus, clock }
    }

    /// Parses and validates one report's JSON bytes, received now.
    pub fn parse(&self, payload: &[u8]) -> Result<StateReport, InvalidReport> {
        StateReport::parse(payload, self.clock.now())
    }

    /// Records a batch: one outcome per element, in order. Reports that failed validation are
    /// dropped alone with their reason (logged once with their mower id, counted by reason); the
    /// valid ones go through the write rules in one unit of work. A store failure stores nothing
    /// and is returned, so that the caller redelivers the batch.
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
            let (applied, mut changes) = apply_states(&mut snapshots, &valid, received_at);
            let events = std::mem::take(&mut changes.events);
            unit.commit(changes).await?;
            metrics::histogram!("swath_ingest_batch_size").record(valid.len() as f64);

            for ((i, state), outcome) in valid_index.iter().zip(&valid).zip(applied) {
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
                outcomes[*i] = Some(outcome);
            }
            // After the commit, in order. A failed publish cannot undo the stored rows; it is
            // logged (the event's dedup id makes a later re-publish safe).
            for event in &events {
                let subject = subjects::notification(event.mower_id(), event.kind());
                let payload = match serde_json::to_vec(event) {
                    Ok(p) => Bytes::from(p),
                    Err(e) => {
                        tracing::error!(mower_id = %event.mower_id(), error = %e, "Could not encode an event.");
                        continue;
                    }
                };
                if let Err(e) = self
                    .bus
                    .publish(&subject, payload, Some(event.dedup_id()))
                    .await
                {
                    tracing::error!(mower_id = %event.mower_id(), kind = event.kind(), error = %e, "Could not publish an event after its commit.");
                }
            }
        }
        let stored = outcomes
            .iter()
            .filter(|o| **o == Some(StateOutcome::Stored))
            .count();
        metrics::counter!("swath_states_stored_total").increment(stored as u64);
        Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or(StateOutcome::Stored))
            .collect())
    }

    /// A bus handler that feeds this use case (the ingest durable consumer).
    pub fn handler(self: &Arc<Self>) -> Arc<IngestHandler> {
        Arc::new(IngestHandler {
            ingest: Arc::clone(self),
        })
    }
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
/// settlement per message. A store failure is an error: the bus redelivers the whole batch.
pub struct IngestHandler {
    ingest: Arc<Ingest>,
}

#[async_trait]
impl BatchHandler for IngestHandler {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        let reports = batch
            .iter()
            .map(|m| self.ingest.parse(&m.payload))
            .collect();
        match self.ingest.record_states(reports).await {
            Ok(outcomes) => Ok(outcomes.into_iter().map(settle).collect()),
            Err(e) => {
                tracing::error!(error = %e, states = batch.len(), "Could not store a batch of states; it will be redelivered.");
                Err(HandlerError(e.to_string()))
            }
        }
    }
}
