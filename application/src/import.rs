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

/// The most refused lines an [`ImportSummary`] names one by one (all are counted in `dropped`).
pub const NAMED_REFUSALS: usize = 100;

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
    /// The first [`NAMED_REFUSALS`] refused lines, with their line number in the input.
    pub refused: Vec<RefusedLine>,
}

/// A line of the input that was not stored, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedLine {
    /// The line's number in the input, from 1 (empty lines count).
    pub line: u64,
    pub reason: DropReason,
    /// What was wrong, for people, when validation said more than the reason (a parse error's
    /// column is within this line); `None` for a refusal by the write rules (an unknown mower,
    /// another account), which the reason says whole.
    pub detail: Option<String>,
}

impl ImportSummary {
    /// Lines refused, whatever the reason.
    pub fn refused_count(&self) -> u64 {
        self.dropped.values().sum()
    }
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
    let mut line_no = 0u64;
    let mut batch = Vec::with_capacity(IMPORT_BATCH);
    // The line number of each report of `batch`, and why a report that failed validation did
    // (the outcome says only the reason).
    let mut lines: Vec<(u64, Option<String>)> = Vec::with_capacity(IMPORT_BATCH);
    loop {
        line.clear();
        let n = input.read_until(b'\n', &mut line).await?;
        bytes_read += n as u64;
        if n > 0 {
            line_no += 1;
        }
        let text = line.trim_ascii();
        if !text.is_empty() {
            let report = ingest.parse(text);
            lines.push((
                line_no,
                report.as_ref().err().map(|e| within_line(&e.detail)),
            ));
            batch.push(report);
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
            for (outcome, (line, detail)) in outcomes.into_iter().zip(lines.drain(..)) {
                match outcome {
                    StateOutcome::Stored => summary.stored += 1,
                    StateOutcome::Dropped(reason) => {
                        *summary.dropped.entry(reason).or_default() += 1;
                        if summary.refused.len() < NAMED_REFUSALS {
                            summary.refused.push(RefusedLine {
                                line,
                                reason,
                                detail,
                            });
                        }
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

/// A parse error's position said within the line: each line is parsed alone, so the parser's
/// "line 1" would mislead next to the file line the summary names.
fn within_line(detail: &str) -> String {
    match detail.rsplit_once(" at line 1 column ") {
        Some((what, column)) => format!("{what} at column {column}"),
        None => detail.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parse_error_is_placed_within_its_line() {
        assert_eq!(
            within_line("expected value at line 1 column 40"),
            "expected value at column 40"
        );
        assert_eq!(
            within_line("battery_percent 140 is outside 0..=100"),
            "battery_percent 140 is outside 0..=100"
        );
    }
}
