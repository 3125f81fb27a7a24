//! History import: NDJSON state reports, one per line, stored 200 per transaction through the
//! same batch path as live ingestion (docs/rules.md §3), so an import gives the rows live ingestion
//! would have given. A backfill of states older than a mower's live ones counts: they are merged
//! into the health and day totals (W4, W5), and the summary says how many were.

use crate::ingest::{Ingest, IngestError};
use crate::ports::{chain, TokenHash};
use crate::visibility::{Access, AccessError, MOWER_NOT_VISIBLE};
use std::collections::BTreeMap;
use swath_domain::Principal;
use swath_domain::{DropReason, InvalidReport, StateCounts, StateOutcome, StateReport};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// States per transaction.
pub const IMPORT_BATCH: usize = 200;

/// The most refused lines an [`ImportSummary`] names one by one (all are counted in `dropped`).
pub const NAMED_REFUSALS: usize = 100;

/// The longest line an import reads (64 KiB). A state report has at most 16 KiB
/// (docs/rules.md §2), so a longer line is refused as `too_large` all the same; past this bound
/// the rest of the line is skipped as it is read, never held, so that an input without newlines
/// cannot fill the memory.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Lines read, empty ones included: the number of the last line read.
    pub lines: u64,
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
    /// The tenant filter could not read the directory (an import for a principal).
    #[error("could not read the directory (after {stored} stored states): {source}")]
    Directory {
        stored: u64,
        #[source]
        source: AccessError,
    },
    /// The principal's token was revoked (or no longer gives the same principal) while the
    /// import ran: nothing more is stored.
    #[error("the token was revoked (after {stored} stored states)")]
    Revoked { stored: u64 },
}

/// On whose behalf an import stores its lines.
#[derive(Clone, Copy)]
pub enum Importer<'a> {
    /// An operator of the deployment (`swath import`): any account's mowers; the write rules
    /// (W0) refuse the unknown ones, naming `unknown_mower` or `account_mismatch`.
    Operator,
    /// A token's principal (`POST /v1/imports`): the tenant filter of
    /// [`Access::filter_states`] first (a report of another account is `account_mismatch`, a
    /// mower the principal cannot see `unknown_mower`), then W0, whose refusals are answered as
    /// an unknown mower (as `POST /v1/states` answers them), which does not tell that another
    /// account's mower exists. The principal's `token` is checked before each unit of work, and
    /// whenever a token is revoked in this process while a line is awaited: once it no longer
    /// gives `principal`, the import stops with [`ImportError::Revoked`].
    Principal {
        access: &'a Access,
        principal: &'a Principal,
        token: &'a TokenHash,
    },
}

/// Imports NDJSON reports from `input` as an operator. `progress` is called after each batch
/// with the number of bytes read so far.
pub async fn import_ndjson<R: AsyncBufRead + Unpin>(
    ingest: &Ingest,
    input: R,
    mut progress: impl FnMut(u64),
) -> Result<ImportSummary, ImportError> {
    import_lines(ingest, Importer::Operator, input, |_, bytes| {
        progress(bytes)
    })
    .await
}

/// Imports NDJSON reports from `input` on behalf of `importer`, [`IMPORT_BATCH`] per unit of
/// work, reading one line at a time (a line longer than [`MAX_LINE_BYTES`] is refused as
/// `too_large` without being held whole). `progress` is called after each batch with the
/// summary so far and the number of bytes read.
pub async fn import_lines<R: AsyncBufRead + Unpin>(
    ingest: &Ingest,
    importer: Importer<'_>,
    mut input: R,
    mut progress: impl FnMut(&ImportSummary, u64),
) -> Result<ImportSummary, ImportError> {
    let mut summary = ImportSummary::default();
    let mut bytes_read = 0u64;
    let mut line = Vec::new();
    let mut batch = Vec::with_capacity(IMPORT_BATCH);
    // The line number of each report of `batch`, and why a report that failed validation did
    // (the outcome says only the reason).
    let mut lines: Vec<(u64, Option<String>)> = Vec::with_capacity(IMPORT_BATCH);
    let mut check = TokenCheck::of(importer);
    loop {
        // On a failure to read, the lines read whole before it are stored all the same (their
        // batch is written below), never the line it interrupted; then the import stops.
        let read = match check.as_mut() {
            Some(check) => check.read_line(&mut input, &mut line).await,
            None => Some(read_line(&mut input, &mut line).await),
        };
        let Some(read) = read else {
            return Err(ImportError::Revoked {
                stored: summary.stored,
            });
        };
        let (read, failed) = match read {
            Ok(read) => (read, None),
            Err(e) => (
                LineRead {
                    bytes: 0,
                    cut: false,
                },
                Some(e),
            ),
        };
        bytes_read += read.bytes;
        if read.bytes > 0 {
            summary.lines += 1;
        }
        if failed.is_none() && read.cut {
            let invalid = InvalidReport::new(
                DropReason::TooLarge,
                format!("the line is longer than the {MAX_LINE_BYTES} bytes an import reads"),
            );
            lines.push((summary.lines, Some(invalid.detail.clone())));
            batch.push(Err(invalid));
        } else if failed.is_none() {
            let text = line.trim_ascii();
            if !text.is_empty() {
                let report = ingest.parse(text);
                lines.push((
                    summary.lines,
                    report.as_ref().err().map(|e| within_line(&e.detail)),
                ));
                batch.push(report);
            }
        }
        let end = read.bytes == 0;
        if batch.len() == IMPORT_BATCH || (end && !batch.is_empty()) {
            // Between units of work: a revoked token stores nothing more.
            if let Some(check) = &check {
                if !check.valid().await {
                    return Err(ImportError::Revoked {
                        stored: summary.stored,
                    });
                }
            }
            summary.reports += batch.len() as u64;
            let batch = std::mem::take(&mut batch);
            let (outcomes, counts) =
                store(ingest, importer, batch, &mut lines, summary.stored).await?;
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
            progress(&summary, bytes_read);
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
        if end {
            return Ok(summary);
        }
    }
}

/// Records one batch for `importer`. For a principal, the tenant filter's refusals get their
/// detail in `lines`, and W0's refusals become `unknown_mower` (see [`Importer::Principal`]).
async fn store(
    ingest: &Ingest,
    importer: Importer<'_>,
    mut batch: Vec<Result<StateReport, InvalidReport>>,
    lines: &mut [(u64, Option<String>)],
    stored: u64,
) -> Result<(Vec<StateOutcome>, StateCounts), ImportError> {
    let filtered = match importer {
        Importer::Operator => None,
        Importer::Principal {
            access, principal, ..
        } => {
            let valid_before: Vec<bool> = batch.iter().map(Result::is_ok).collect();
            access
                .filter_states(principal, &mut batch)
                .await
                .map_err(|source| ImportError::Directory { stored, source })?;
            for ((report, was_valid), (_, detail)) in
                batch.iter().zip(&valid_before).zip(lines.iter_mut())
            {
                if let (Err(refusal), true) = (report, was_valid) {
                    *detail = Some(refusal.detail.clone());
                }
            }
            Some(batch.iter().map(Result::is_ok).collect::<Vec<bool>>())
        }
    };
    let (mut outcomes, counts) = ingest
        .record_counted(batch)
        .await
        .map_err(|source| ImportError::Store { stored, source })?;
    if let Some(valid) = filtered {
        for ((outcome, valid), (_, detail)) in outcomes.iter_mut().zip(valid).zip(lines) {
            if let (StateOutcome::Dropped(reason), true) = (*outcome, valid) {
                if reason != DropReason::RejectedByStore {
                    *outcome = StateOutcome::Dropped(DropReason::UnknownMower);
                    *detail = Some(MOWER_NOT_VISIBLE.to_owned());
                }
            }
        }
    }
    Ok((outcomes, counts))
}

/// The token of an import for a principal, and the revocations of this process.
struct TokenCheck<'a> {
    access: &'a Access,
    principal: &'a Principal,
    token: &'a TokenHash,
    revocations: tokio::sync::watch::Receiver<u64>,
}

impl<'a> TokenCheck<'a> {
    fn of(importer: Importer<'a>) -> Option<Self> {
        match importer {
            Importer::Operator => None,
            Importer::Principal {
                access,
                principal,
                token,
            } => Some(Self {
                access,
                principal,
                token,
                revocations: access.revocations().subscribe(),
            }),
        }
    }

    /// Whether the token still gives the import's principal (through the principal cache, which
    /// forgets a token revoked in this process at once: decision 78). A store that does not
    /// answer is no revocation: the import goes on, and its next unit of work says whether the
    /// store is back.
    async fn valid(&self) -> bool {
        match self.access.principal(self.token).await {
            Ok(found) => found.as_ref() == Some(self.principal),
            Err(e) => {
                tracing::warn!(error = %chain(&e), "Could not check an import's token; going on.");
                true
            }
        }
    }

    /// [`read_line`], checking the token whenever one is revoked in this process meanwhile (a
    /// client that trickles its body is stopped at once, not at its next batch); `None` once the
    /// token is no longer valid.
    async fn read_line<R: AsyncBufRead + Unpin>(
        &mut self,
        input: &mut R,
        line: &mut Vec<u8>,
    ) -> Option<std::io::Result<LineRead>> {
        let read = read_line(input, line);
        tokio::pin!(read);
        loop {
            tokio::select! {
                read = &mut read => return Some(read),
                Ok(()) = self.revocations.changed() => {
                    if !self.valid().await {
                        return None;
                    }
                }
            }
        }
    }
}

/// What [`read_line`] read.
struct LineRead {
    /// Bytes consumed from the input, the newline included; 0 at the end of the input.
    bytes: u64,
    /// The line was longer than [`MAX_LINE_BYTES`]: `line` holds only its beginning.
    cut: bool,
}

/// Reads the next line into `line` (without keeping more than [`MAX_LINE_BYTES`] of it), so
/// that an input without newlines is never held whole.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    line.clear();
    let mut read = LineRead {
        bytes: 0,
        cut: false,
    };
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(read);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        if chunk.len() > room {
            read.cut = true;
        }
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let n = chunk.len();
        input.consume(n);
        read.bytes += n as u64;
        if done {
            return Ok(read);
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

    /// Lines split across the reader's buffer, a line past the bound cut (and the rest of it
    /// skipped, not read as lines), and a last line without its newline.
    #[tokio::test]
    async fn lines_are_read_one_at_a_time_and_cut_past_the_bound() {
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        let input = format!("ab\n{long}\n\ncd");
        let mut reader = tokio::io::BufReader::with_capacity(3, input.as_bytes());
        let mut line = Vec::new();
        let mut seen = Vec::new();
        loop {
            let read = read_line(&mut reader, &mut line).await.unwrap();
            if read.bytes == 0 {
                break;
            }
            seen.push((read.bytes, read.cut, line.len()));
        }
        assert_eq!(
            seen,
            [
                (3, false, 3),
                (long.len() as u64 + 1, true, MAX_LINE_BYTES),
                (1, false, 1),
                (2, false, 2),
            ]
        );
    }

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
