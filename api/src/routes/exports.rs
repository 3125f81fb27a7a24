//! Fleet-wide CSV exports (issue 45): every visible mower's history or day totals over a range,
//! streamed page by page (decisions 193, 194).
//!
//! The use case ([`swath_application::Exports`]) decides which mowers the token sees and reads
//! the pages; a handler validates the range, starts the export and streams it as CSV.

use crate::auth::ReaderToken;
use crate::csv::{csv_stream, export_pages};
use crate::dto::exports::{
    DaysExportParams, HistoryExportParams, SessionsExportParams, DAYS_CSV_EXAMPLE,
    HISTORY_CSV_EXAMPLE,
};
use crate::dto::sessions::SESSIONS_CSV_EXAMPLE;
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::negotiate::CsvOnly;
use crate::state::AppState;
use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Utc};
use swath_application::{DaysExport, HistoryExport, SessionsExport};
use swath_domain::SiteId;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "exports";

/// Export the fleet's history as CSV
#[utoipa::path(
    get,
    path = "/v1/exports/history.csv",
    tag = TAG,
    description = "Every state in `[from, to)` of every mower the token sees (of `site_id` only \
        when given), as CSV (RFC 4180, UTF-8, a header row; the columns of \
        `GET /v1/mowers/{id}/history` in CSV). Mowers in id order, each mower's states oldest \
        first. The range is at most 366 days. Streamed as it is read: the service holds one page \
        of rows at a time, whatever the range. The token is checked again before every page: \
        revoked meanwhile, the answer stops before its end (the connection is cut, so a client \
        never takes a stopped export for a whole one). Text cells that a spreadsheet would read \
        as a formula start with `'`; numbers are written as numbers.",
    security(("bearer" = ["read"])),
    params(HistoryExportParams),
    responses(
        (status = 200, description = "The history as CSV, downloaded as \
            `swath-history-<from>-<to>.csv`.",
            content((String = "text/csv", example = json!(HISTORY_CSV_EXAMPLE))),
            headers(("Content-Disposition" = String, description = "`attachment` with the \
                file name `swath-history-<from>-<to>.csv` (instants as `YYYYMMDDTHHMMSSZ`)."))),
        (status = 400, description = "`from` or `to` is missing or not an RFC 3339 instant, or \
            `site_id` is not a UUID."),
        (status = 404, description = "`site_id` names no site visible to this token."),
        (status = 406, description = "The `Accept` header does not admit `text/csv`."),
        (status = 422, description = "`to` is not after `from`, or the range is longer than 366 \
            days."),
    ),
)]
pub async fn export_history(
    ReaderToken { principal, token }: ReaderToken,
    _csv: CsvOnly,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<HistoryExportParams>,
) -> Result<Response, ApiError> {
    let request = HistoryExport::new(params.site_id.map(SiteId), params.from, params.to)?;
    let filename = instant_range_filename("history", request.from, request.to);
    let export = state.exports.history(&principal, token, request).await?;
    Ok(csv_stream(&filename, export_pages(export)))
}

/// Export the fleet's day totals as CSV
#[utoipa::path(
    get,
    path = "/v1/exports/days.csv",
    tag = TAG,
    description = "The day totals of the local days `from` to `to` (both included, at most 366 \
        days) of every mower the token sees (of `site_id` only when given), as CSV (RFC 4180, \
        UTF-8, a header row; the columns of `GET /v1/mowers/{id}/days` in CSV, with the mower's \
        id first). Each mower's days are those of its site's time zone; days without a row are \
        left out. Streamed and stopped like the history export.",
    security(("bearer" = ["read"])),
    params(DaysExportParams),
    responses(
        (status = 200, description = "The day totals as CSV, downloaded as \
            `swath-days-<from>-<to>.csv`.",
            content((String = "text/csv", example = json!(DAYS_CSV_EXAMPLE))),
            headers(("Content-Disposition" = String, description = "`attachment` with the \
                file name `swath-days-<from>-<to>.csv`."))),
        (status = 400, description = "`from` or `to` is missing or not a date, or `site_id` is \
            not a UUID."),
        (status = 404, description = "`site_id` names no site visible to this token."),
        (status = 406, description = "The `Accept` header does not admit `text/csv`."),
        (status = 422, description = "`to` is before `from`, or the range has more than 366 \
            days."),
    ),
)]
pub async fn export_days(
    ReaderToken { principal, token }: ReaderToken,
    _csv: CsvOnly,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<DaysExportParams>,
) -> Result<Response, ApiError> {
    let request = DaysExport::new(params.site_id.map(SiteId), params.from, params.to)?;
    let filename = format!("swath-days-{}-{}.csv", request.from, request.to);
    let export = state.exports.days(&principal, token, request).await?;
    Ok(csv_stream(&filename, export_pages(export)))
}

/// Export the fleet's mowing sessions as CSV
#[utoipa::path(
    get,
    path = "/v1/exports/sessions.csv",
    tag = TAG,
    description = "The mowing sessions (docs/rules.md W8) that overlap `[from, to)` (started \
        before `to`, ended after `from`, open ones always) of every mower the token sees (of \
        `site_id` only when given), as CSV (RFC 4180, UTF-8, a header row; the columns of \
        `GET /v1/mowers/{id}/sessions` in CSV). Mowers in id order, each mower's sessions newest \
        first. The range is at most 366 days. Streamed and stopped like the history export.",
    security(("bearer" = ["read"])),
    params(SessionsExportParams),
    responses(
        (status = 200, description = "The sessions as CSV, downloaded as \
            `swath-sessions-<from>-<to>.csv`.",
            content((String = "text/csv", example = json!(SESSIONS_CSV_EXAMPLE))),
            headers(("Content-Disposition" = String, description = "`attachment` with the \
                file name `swath-sessions-<from>-<to>.csv` (instants as `YYYYMMDDTHHMMSSZ`)."))),
        (status = 400, description = "`from` or `to` is missing or not an RFC 3339 instant, or \
            `site_id` is not a UUID."),
        (status = 404, description = "`site_id` names no site visible to this token."),
        (status = 406, description = "The `Accept` header does not admit `text/csv`."),
        (status = 422, description = "`to` is not after `from`, or the range is longer than 366 \
            days."),
    ),
)]
pub async fn export_sessions(
    ReaderToken { principal, token }: ReaderToken,
    _csv: CsvOnly,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<SessionsExportParams>,
) -> Result<Response, ApiError> {
    let request = SessionsExport::new(params.site_id.map(SiteId), params.from, params.to)?;
    let filename = instant_range_filename("sessions", request.from, request.to);
    let export = state.exports.sessions(&principal, token, request).await?;
    Ok(csv_stream(&filename, export_pages(export)))
}

/// `swath-<what>-<from>-<to>.csv`, the instants as `YYYYMMDDTHHMMSSZ` (no `:`, which some file
/// systems refuse).
fn instant_range_filename(what: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let stamp = |at: DateTime<Utc>| at.format("%Y%m%dT%H%M%SZ").to_string();
    format!("swath-{what}-{}-{}.csv", stamp(from), stamp(to))
}
