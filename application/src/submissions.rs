//! State reports received from a principal rather than from the bus (`POST /v1/states`): the
//! tenant filter ([`Access::filter_states`]), the same `Ingest::record_states_isolating` as the
//! bus consumer (docs/rules.md §3), then the publication of every stored report on its
//! `telemetry.mower.<id>` subject, as a gateway would have.
//!
//! The publication is what lets the watcher and the live stream see a state that did not come
//! over the bus. The ingest consumer receives it too and finds it stored already (W1–W6 write
//! nothing for a known `observed_at`); the de-duplication id makes a client's retry publish
//! nothing new.

use crate::ingest::{Ingest, IngestError};
use crate::ports::{chain, EventBus, StoreError};
use crate::subjects;
use crate::visibility::{Access, AccessError, MOWER_NOT_VISIBLE};
use bytes::Bytes;
use std::sync::Arc;
use swath_domain::{DropReason, InvalidReport, Principal, StateOutcome, StateReport};

/// What became of a submitted batch.
#[derive(Debug)]
pub struct Submitted {
    /// One outcome per report, in order.
    pub outcomes: Vec<StateOutcome>,
    /// Why each dropped report was dropped, for people (validation, the tenant filter, or a
    /// mower of another account refused by W0, answered as an unknown mower); `None` for stored
    /// reports and for those the store refused.
    pub refused: Vec<Option<InvalidReport>>,
    /// The reports are stored but their virtual zones were not evaluated after the commit; the
    /// ingest consumer evaluates them when it receives the published reports (decision 47).
    pub zones_pending: bool,
}

/// Errors of [`Submissions::submit`]: nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum SubmissionError {
    /// The tenant filter could not read the directory.
    #[error(transparent)]
    Access(#[from] AccessError),
    /// The store failed; the batch may be sent again as is.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The use case of state reports received over HTTP.
#[derive(Clone)]
pub struct Submissions {
    access: Access,
    ingest: Arc<Ingest>,
    bus: Arc<dyn EventBus>,
}

impl Submissions {
    pub fn new(access: Access, ingest: Arc<Ingest>, bus: Arc<dyn EventBus>) -> Self {
        Self {
            access,
            ingest,
            bus,
        }
    }

    /// Filters, records and publishes `batch` (reports already parsed, or refused by
    /// validation) on behalf of `principal`. A report the store refuses is isolated at once (a
    /// request has no second delivery) and the others are stored.
    pub async fn submit(
        &self,
        principal: &Principal,
        mut batch: Vec<Result<StateReport, InvalidReport>>,
    ) -> Result<Submitted, SubmissionError> {
        self.access.filter_states(principal, &mut batch).await?;
        let valid: Vec<Option<StateReport>> =
            batch.iter().map(|r| r.as_ref().ok().cloned()).collect();
        let mut refused: Vec<Option<InvalidReport>> =
            batch.iter().map(|r| r.as_ref().err().cloned()).collect();
        let (mut outcomes, zones_pending) = match self
            .ingest
            .record_states_isolating(batch, &[])
            .await
        {
            Ok(outcomes) => (outcomes, false),
            Err(IngestError::ZonesPending { outcomes, error }) => {
                tracing::warn!(%error, reports = outcomes.len(), "Stored reports received over HTTP, but their virtual zones are pending; the ingest consumer evaluates them.");
                (outcomes, true)
            }
            Err(IngestError::Store(e)) => return Err(e.into()),
        };

        for ((report, outcome), refusal) in valid.iter().zip(&mut outcomes).zip(&mut refused) {
            match (report, &outcome) {
                (Some(report), StateOutcome::Stored) => self.publish(report).await,
                // Refused by W0 during ingestion: the report named the principal's account
                // (filtered above), so the mower is another account's. Answered as an unknown
                // mower, which does not tell that it exists.
                (Some(report), StateOutcome::Dropped(reason))
                    if *reason != DropReason::RejectedByStore =>
                {
                    *outcome = StateOutcome::Dropped(DropReason::UnknownMower);
                    *refusal = Some(InvalidReport {
                        reason: DropReason::UnknownMower,
                        detail: MOWER_NOT_VISIBLE.to_owned(),
                        mower_id: Some(report.mower_id),
                    });
                }
                _ => {}
            }
        }
        Ok(Submitted {
            outcomes,
            refused,
            zones_pending,
        })
    }

    /// Publishes a stored report on its mower's subject. A failure is logged: the rows are
    /// stored; only the bus consumers miss the state.
    async fn publish(&self, report: &StateReport) {
        let payload = match serde_json::to_vec(report) {
            Ok(payload) => Bytes::from(payload),
            Err(e) => {
                tracing::error!(mower_id = %report.mower_id, error = %e, "Could not encode a state report received over HTTP.");
                return;
            }
        };
        let dedup_id = format!(
            "http.{}.{}",
            report.mower_id,
            report.observed_at.timestamp_micros()
        );
        if let Err(e) = self
            .bus
            .publish(
                &subjects::telemetry(report.mower_id),
                payload,
                Some(dedup_id),
            )
            .await
        {
            tracing::warn!(mower_id = %report.mower_id, error = %chain(&e), "Could not publish a state report received over HTTP; the watcher and the live stream miss it.");
        }
    }
}
