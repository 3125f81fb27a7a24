//! `POST /v1/states`: state reports over HTTP, through the same validation and the same
//! `Ingest::record_states` as the bus consumer (docs/rules.md §3), answered per report.
//!
//! The handler only parses and translates: the use case (`swath_application::Submissions`)
//! applies the tenant rules first (a report of another account than the token's is dropped as
//! `account_mismatch`, and a mower the token cannot see answers `unknown_mower`, whether it is
//! unknown, another account's or on a hidden site: the write rule W0 would say
//! `account_mismatch` for another account's mower, which would tell that it exists), records the
//! batch, and publishes every stored report on its `telemetry.mower.<id>` subject, as a gateway
//! would have, so that the watcher and the live stream see it too.

use crate::auth::Writer;
use crate::dto::answers::NotJson;
use crate::dto::ingest::{IngestResult, StateReportIn};
use crate::error::ApiError;
use crate::extract::ApiJsonElements;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde_json::Value;
use swath_domain::{InvalidReport, StateReport};

/// The OpenAPI tag of these routes.
pub const TAG: &str = "ingest";

/// The most reports in one request.
pub const MAX_REPORTS: usize = 1000;

/// Record a batch of state reports
#[utoipa::path(
    post,
    path = "/v1/states",
    tag = TAG,
    description = "Up to 1000 state reports, each exactly as a gateway would publish it, stored \
        through the same validation and write rules as the bus (one unit of work for the batch). \
        Each report is validated alone: the answer says per report, in order, whether it was \
        stored or dropped and why; the others are stored all the same. A report of another \
        account than the token's is dropped as `account_mismatch`; a mower the token cannot see \
        as `unknown_mower`. Sending a stored report again changes nothing (it answers `stored`). \
        Stored reports are then published on the bus like a gateway's, so notifications and the \
        live stream see them too. The body may have at most 2 MiB.\n\n\
        A `503` means that nothing was stored: send the request again as is. Once the reports \
        are stored the answer is `200`, also when their virtual zones could not be evaluated \
        right after the commit: then `zones_pending` is `true`, the `blade_due` events of the \
        batch are published all the same, and the zones (`zone_entered`, `zone_left`) are \
        evaluated when the ingest consumer receives the published reports, each event once. \
        Sending the same reports again also completes them, and stores nothing twice.",
    security(("bearer" = ["write"])),
    request_body(content = Vec<StateReportIn>, description = "The reports, at most 1000.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "What became of each report.", body = IngestResult),
        NotJson,
        (status = 413, description = "The body is larger than 2 MiB."),
        (status = 422, description = "The body is not an array, or has more than 1000 reports."),
        (status = 503, description = "The store is unavailable: nothing was stored. Send the same \
            request again as is. (Reports stored with their zones pending answer `200` with \
            `zones_pending: true`, never `503`.)"),
    ),
)]
pub async fn record_states(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiJsonElements(reports): ApiJsonElements<Vec<Value>>,
) -> Result<Json<IngestResult>, ApiError> {
    if reports.len() > MAX_REPORTS {
        return Err(ApiError::invalid("", too_many(reports.len())));
    }
    let received_at = state.clock.now();
    let batch: Vec<Result<StateReport, InvalidReport>> = reports
        .into_iter()
        .map(|value| StateReport::from_value(value, received_at))
        .collect();
    // Only a store failure is an error here: it stored nothing (a `503` to retry as is). Rows
    // stored with their zones pending are an answer like any other (decision 47).
    let submitted = state.submissions.submit(&principal, batch).await?;
    Ok(Json(IngestResult::from(submitted)))
}

/// The refusal of a body with too many reports.
fn too_many(reports: usize) -> String {
    format!("The body has {reports} reports; at most {MAX_REPORTS} are accepted per request.")
}
