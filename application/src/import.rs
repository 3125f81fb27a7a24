//! History import: NDJSON state reports, one per line, stored 200 per transaction through the
//! same batch path as live ingestion (docs/rules.md §3), so an import gives the rows live ingestion
//! would have given. A backfill of states older than a mower's live ones counts: they are merged
//! into the health and day totals (W4, W5), and the summary says how many were.

use crate::ingest::{Ingest, IngestError};
use std::collections::BTreeMap;
use swath_domain::{DropReason, StateCounts, StateOutcome};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// States per transaction.
pub const IMPORT_BATCH: usize = 200;

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Non-empty lines read.
    pub reports: u64,
    /// Reports stored or already stored (`counts.new_states() + counts.duplicates`).
    pub stored: u64,
    /// How the stored reports counted: new ones (newer than their mower's newest, or late and
    /// merged into the totals, or late and not counted) and duplicates of stored states.
    pub counts: StateCounts,
    pub dropped: BTreeMap<DropReason, u64>,
}

/// Errors of an import. What was committed before the error stays stored; importing the same
/// file again is safe (a stored state changes nothing).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("could not read the input: {0}")]
    Read(#[from] std::io::Error),
    #[error("could not store a batch (after {stored} stored states): {source}")]
    Store {
        stored: u64,
        #[source]
        source: IngestError,
    },
}

/// Imports NDJSON reports from `input`. `progress` is called after each batch with the number of
/// bytes read so far.
pub async fn import_ndjson<R: AsyncBufRead + Unpin>(
    ingest: &Ingest,
    mut input: R,
    mut progress: impl FnMut(u64),
) -> Result<ImportSummary, ImportError> {
    let mut summary = ImportSummary::default();
    let mut bytes_read = 0u64;
    let mut line = Vec::new();
    let mut batch = Vec::with_capacity(IMPORT_BATCH);
    loop {
        line.clear();
        let n = input.read_until(b'\n', &mut line).await?;
        bytes_read += n as u64;
        let text = line.trim_ascii();
        if !text.is_empty() {
            batch.push(ingest.parse(text));
        }
        if batch.len() == IMPORT_BATCH || (n == 0 && !batch.is_empty()) {
            summary.reports += batch.len() as u64;
            let (outcomes, counts) = ingest
                .record_counted(std::mem::take(&mut batch))
                .await
                .map_err(|source| ImportError::Store {
                    stored: summary.stored,
                    source,
                })?;
            summary.counts.add(&counts);
            for outcome in outcomes {
                match outcome {
                    StateOutcome::Stored => summary.stored += 1,
                    StateOutcome::Dropped(reason) => {
                        *summary.dropped.entry(reason).or_default() += 1
                    }
                }
            }
            progress(bytes_read);
        }
        if n == 0 {
            return Ok(summary);
        }
    }
}
