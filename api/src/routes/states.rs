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
use crate::dto::ingest::{DropReason, IngestResult, Outcome, ReportOutcome, StateReportIn};
use crate::error::ApiError;
use crate::extract::ApiJsonElements;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde_json::Value;
use swath_application::access::MOWER_NOT_VISIBLE;
use swath_application::Submitted;
use swath_domain::{DropReason as Reason, InvalidReport, StateOutcome, StateReport};

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
        return Err(ApiError::invalid(
            "",
            format!(
                "The body has {} reports; at most {MAX_REPORTS} are accepted per request.",
                reports.len()
            ),
        ));
    }
    let received_at = state.clock.now();
    let batch: Vec<Result<StateReport, InvalidReport>> = reports
        .into_iter()
        .map(|value| StateReport::from_value(value, received_at))
        .collect();
    // Only a store failure is an error here: it stored nothing (a `503` to retry as is). Rows
    // stored with their zones pending are an answer like any other (decision 47).
    let Submitted {
        outcomes,
        refused,
        zones_pending,
    } = state.submissions.submit(&principal, batch).await?;
    // serde names the domain's private wire type in its messages; clients know it as a report.
    let details: Vec<Option<String>> = refused
        .into_iter()
        .map(|r| {
            r.map(|e| {
                e.detail
                    .replace("struct WireReport", "a state report object")
            })
        })
        .collect();

    let mut result = IngestResult {
        items: Vec::with_capacity(outcomes.len()),
        stored: 0,
        dropped: 0,
        zones_pending,
    };
    for (index, (outcome, detail)) in outcomes.into_iter().zip(details).enumerate() {
        let item = match outcome {
            StateOutcome::Stored => {
                result.stored += 1;
                ReportOutcome {
                    index: index as u32,
                    outcome: Outcome::Stored,
                    reason: None,
                    detail: None,
                }
            }
            StateOutcome::Dropped(reason) => {
                result.dropped += 1;
                // No detail: refused by the store (the use case gives W0's refusals the detail of
                // an unknown mower).
                let (reason, detail) = match (detail, reason) {
                    (Some(detail), reason) => (reason.into(), detail),
                    (None, Reason::RejectedByStore) => (
                        DropReason::RejectedByStore,
                        "The store refused this report; sending it again gives the same answer."
                            .to_owned(),
                    ),
                    (None, _) => (DropReason::UnknownMower, MOWER_NOT_VISIBLE.to_owned()),
                };
                ReportOutcome {
                    index: index as u32,
                    outcome: Outcome::Dropped,
                    reason: Some(reason),
                    detail: Some(detail),
                }
            }
        };
        result.items.push(item);
    }
    Ok(Json(result))
}
