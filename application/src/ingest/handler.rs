//! The bus side of ingestion: the ingest consumer's batch handler (a message parsed and an
//! outcome settled as `consume` does for both consumers).

use super::{Ingest, IngestError, Write, ISOLATE_AFTER_FAILED_DELIVERIES};
use crate::consume::settle;
use crate::ports::{chain, BatchHandler, HandlerError, Message, Settle};
use async_trait::async_trait;
use std::sync::Arc;

impl Ingest {
    /// A bus handler that feeds this use case (the ingest durable consumer).
    pub fn handler(self: &Arc<Self>) -> Arc<IngestHandler> {
        Arc::new(IngestHandler {
            ingest: Arc::clone(self),
        })
    }
}

/// The ingest consumer's batch handler: parses each message (its subject included), records the
/// batch, and answers one settlement per message. A store failure is an error: the bus
/// redelivers the whole batch. Once a batch's messages have failed more than
/// [`ISOLATE_AFTER_FAILED_DELIVERIES`] times, it is recorded with
/// [`Ingest::record_states_isolating`]: a state the store keeps refusing is terminated as
/// `rejected_by_store` and never blocks the ones behind it.
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
        let reports = batch.iter().map(|m| self.ingest.parse_message(m)).collect();
        let deliveries = batch.iter().map(|m| m.delivery).max().unwrap_or(1);
        let result = if deliveries > ISOLATE_AFTER_FAILED_DELIVERIES {
            let origins: Vec<&str> = batch.iter().map(|m| m.subject.as_str()).collect();
            self.ingest.record_states_isolating(reports, &origins).await
        } else {
            // Written with the batches other partitions hand over meanwhile (decision 84).
            self.ingest
                .record(reports, Write::Grouped)
                .await
                .map(|(outcomes, _)| outcomes)
        };
        match result {
            Ok(outcomes) => {
                self.ingest.progress.succeeded();
                Ok(outcomes.into_iter().map(settle).collect())
            }
            Err(e @ IngestError::ZonesPending { .. }) => {
                // Stored: ingestion made progress; the redelivery completes W7 and stores
                // nothing twice.
                self.ingest.progress.succeeded();
                tracing::error!(error = %chain(&e), states = batch.len(), "Stored a batch of states but could not evaluate its virtual zones; it will be redelivered.");
                Err(HandlerError(e.into()))
            }
            Err(e) => {
                self.ingest.progress.failed();
                tracing::error!(error = %chain(&e), states = batch.len(), deliveries, "Could not store a batch of states; it will be redelivered.");
                Err(HandlerError(e.into()))
            }
        }
    }
}
