//! `POST /v1/imports` and `GET /v1/imports/{id}`: an import of NDJSON state reports, its counts
//! and its refused lines.

use super::ingest::DropReason;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::import_lines::RefusedLine;
use swath_application::visibility::MOWER_NOT_VISIBLE;
use swath_application::{ImportFailure, ImportRecord, ImportStatus};
use swath_domain::DropReason as DomainReason;
use utoipa::ToSchema;
use uuid::Uuid;

/// Where an import is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "done")]
pub enum ImportState {
    /// Lines are being read and stored; the counts grow after each batch of 200 reports.
    Running,
    /// Every line was read; the counts are final.
    Done,
    /// The import stopped (`error` says why). What it stored before stays stored, and importing
    /// the same lines again is safe: a stored state counts as a duplicate and changes nothing.
    Failed,
}

/// Why an import failed, for programs (`error` says it for people).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "token_revoked")]
pub enum ImportFailureReason {
    /// The body could not be read to its end: the client stopped sending it, sent more than an
    /// import accepts, or sent no byte for the body idle timeout.
    Input,
    /// The store failed.
    Store,
    /// The importer's token was revoked while the import ran.
    TokenRevoked,
}

/// How the reports of an import counted. Every non-empty line is one report, counted once: as
/// new, as a duplicate or as dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportCounts {
    /// Reports stored for the first time, the late ones included.
    #[schema(example = 7182)]
    pub new: u64,
    /// Of the new reports, those older than their mower's newest state (a backfill), merged
    /// between their neighbours into the health and day totals.
    #[schema(example = 0)]
    pub late_merged: u64,
    /// Of the new reports, late ones whose neighbours retention may have removed: stored in the
    /// history, not counted in the totals.
    #[schema(example = 0)]
    pub late_not_counted: u64,
    /// Reports whose mower and `observed_at` were stored already (or came earlier in the
    /// import): they change nothing.
    #[schema(example = 0)]
    pub duplicate: u64,
    /// Reports refused, whatever the reason (`dropped_by_reason` splits them).
    #[schema(example = 1)]
    pub dropped: u64,
}

/// The reports refused for one reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DroppedCount {
    /// Why these reports were refused.
    pub reason: DropReason,
    /// Reports refused for it.
    #[schema(example = 1)]
    pub count: u64,
}

/// A line of the body that was refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BadLine {
    /// The line's number in the body, from 1 (empty lines count).
    #[schema(example = 5)]
    pub line: u64,
    /// Why the line was refused.
    pub reason: DropReason,
    /// What was wrong, for people (a parse error's column is within the line).
    #[schema(
        example = "observed_at 2026-06-01T13:00:00+00:00 is more than 5 minutes after its receipt at 2026-06-01T12:00:00+00:00"
    )]
    pub detail: String,
}

/// An import: where it is, how its reports counted so far, and its first refused lines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportDocument {
    /// The import's id; `GET /v1/imports/{id}` answers this document.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f61")]
    pub id: Uuid,
    /// Where the import is.
    pub status: ImportState,
    /// When the import started.
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub started_at: DateTime<Utc>,
    /// When it ended (done or failed); `null` while it runs.
    #[schema(required = true, example = "2026-06-01T12:00:04Z")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Lines of the body stored or refused so far, empty ones included.
    #[schema(example = 7184)]
    pub lines: u64,
    /// Non-empty lines stored or refused so far: one report each.
    #[schema(example = 7183)]
    pub reports: u64,
    /// Reports stored, or stored already: `new + duplicate`.
    #[schema(example = 7182)]
    pub stored: u64,
    /// How the reports counted so far: new, duplicate, dropped.
    pub counts: ImportCounts,
    /// The refused reports per reason, in the order of `DropReason`'s values; reasons without a
    /// refusal are left out.
    pub dropped_by_reason: Vec<DroppedCount>,
    /// The first 100 refused lines, in the body's order, each with its line number.
    pub bad_lines: Vec<BadLine>,
    /// More lines were refused than `bad_lines` names (`counts.dropped` has them all).
    #[schema(example = false)]
    pub bad_lines_truncated: bool,
    /// Why the import failed; `null` unless `status` is `failed`.
    #[schema(required = true, example = json!(null))]
    pub error: Option<String>,
    /// Why the import failed, as a word; `null` unless `status` is `failed`.
    #[schema(required = true, example = json!(null))]
    pub failure_reason: Option<ImportFailureReason>,
}

impl From<ImportRecord> for ImportDocument {
    fn from(record: ImportRecord) -> Self {
        let summary = record.summary;
        let c = &summary.counts;
        let dropped = summary.refused_count();
        let failure_reason = record.failure.as_ref().map(|failure| match failure {
            ImportFailure::Input(_) => ImportFailureReason::Input,
            ImportFailure::Store => ImportFailureReason::Store,
            ImportFailure::TokenRevoked => ImportFailureReason::TokenRevoked,
        });
        let error = record.failure.map(|failure| match failure {
            ImportFailure::Input(cause) => input_failure(summary.lines, &cause),
            ImportFailure::Store => format!(
                "The store failed after {} reports were stored; those stay stored, and \
                 importing the same lines again is safe.",
                summary.stored
            ),
            ImportFailure::TokenRevoked => format!(
                "The token was revoked while the import ran, after {} reports were stored; \
                 those stay stored, nothing after them is, and importing the same lines again \
                 is safe.",
                summary.stored
            ),
        });
        ImportDocument {
            id: record.id,
            status: match record.status {
                ImportStatus::Running => ImportState::Running,
                ImportStatus::Done => ImportState::Done,
                ImportStatus::Failed => ImportState::Failed,
            },
            started_at: record.started_at,
            finished_at: record.finished_at,
            lines: summary.lines,
            reports: summary.reports,
            stored: summary.stored,
            counts: ImportCounts {
                new: c.new_states(),
                late_merged: c.late_merged,
                late_not_counted: c.late_not_counted,
                duplicate: c.duplicates,
                dropped,
            },
            dropped_by_reason: summary
                .dropped
                .iter()
                .map(|(reason, count)| DroppedCount {
                    reason: (*reason).into(),
                    count: *count,
                })
                .collect(),
            bad_lines_truncated: dropped > summary.refused.len() as u64,
            bad_lines: summary.refused.into_iter().map(bad_line).collect(),
            error,
            failure_reason,
        }
    }
}

/// Why an import whose body could not be read failed, for people.
pub(crate) fn input_failure(lines: u64, cause: &str) -> String {
    format!(
        "The body could not be read to its end after line {lines} ({cause}); the lines counted \
         here are stored, and importing the same lines again is safe."
    )
}

fn bad_line(refused: RefusedLine) -> BadLine {
    let detail = match (refused.detail, refused.reason) {
        // serde names the domain's private wire type in its messages; clients know it as a
        // report.
        (Some(detail), _) => detail.replace("struct WireReport", "a state report object"),
        (None, DomainReason::RejectedByStore) => {
            "The store refused this report; importing it again gives the same answer.".to_owned()
        }
        // Refused by W0 without a detail: the import's use case gives those of a principal the
        // detail of an unknown mower.
        (None, _) => MOWER_NOT_VISIBLE.to_owned(),
    };
    BadLine {
        line: refused.line,
        reason: refused.reason.into(),
        detail,
    }
}

list_page! {
    /// A page of this replica's imports.
    #[derive(Eq)]
    ImportPage: ImportDocument,
    /// The imports, newest first; running ones with their counts so far.
    items,
    /// Whether more imports follow this page.
    truncated
}
