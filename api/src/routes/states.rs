//! `POST /v1/states`: state reports over HTTP, through the same validation and the same
//! `Ingest::record_states` as the bus consumer (docs/rules.md §3), answered per report.
//!
//! Tenant rules come first: a report of another account than the token's is dropped as
//! `account_mismatch` before it reaches ingestion, and a mower the token cannot see answers
//! `unknown_mower`, whether it is unknown, another account's or on a hidden site (the write rule
//! W0 would say `account_mismatch` for another account's mower, which would tell that it exists).
//!
//! After the commit, every stored report is also published on its `telemetry.mower.<id>` subject,
//! as a gateway would have: the watcher and the live stream consume that subject, and would
//! otherwise never see a state that came over HTTP. The ingest consumer receives it too and finds
//! it stored already (W1–W6 write nothing for a known `observed_at`); the de-duplication id makes
//! a client's retry publish nothing new.

use crate::auth::Writer;
use crate::dto::ingest::{DropReason, IngestResult, Outcome, ReportOutcome, StateReportIn};
use crate::error::{ApiError, Problem};
use crate::extract::ApiJsonElements;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use bytes::Bytes;
use serde_json::Value;
use std::collections::HashSet;
use swath_application::{subjects, IngestError};
use swath_domain::{DropReason as Reason, InvalidReport, MowerId, StateOutcome, StateReport};

/// The OpenAPI tag of these routes.
pub const TAG: &str = "ingest";

/// The most reports in one request.
pub const MAX_REPORTS: usize = 1000;

const NOT_VISIBLE: &str = "No mower with this id is visible to this token.";

/// Record a batch of state reports
#[utoipa::path(
    post,
    path = "/v1/states",
    tag = TAG,
    operation_id = "record_states",
    summary = "Record a batch of state reports",
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
        (status = 400, description = "The body is not valid JSON.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than 2 MiB.", body = Problem,
            content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/json`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "The body is not an array, or has more than 1000 reports.",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable: nothing was stored. Send the same \
            request again as is. (Reports stored with their zones pending answer `200` with \
            `zones_pending: true`, never `503`.)", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
pub async fn record_states(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiJsonElements(reports): ApiJsonElements<Vec<Value>>,
) -> Result<Json<IngestResult>, ApiError> {
    if reports.len() > MAX_REPORTS {
        return Err(ApiError::Validation(format!(
            "The body has {} reports; at most {MAX_REPORTS} are accepted per request.",
            reports.len()
        )));
    }
    let received_at = state.clock.now();
    let mut batch: Vec<Result<StateReport, InvalidReport>> = reports
        .into_iter()
        .map(|value| StateReport::from_value(value, received_at))
        .map(|report| match report {
            Ok(r) if r.account_id != principal.account_id => Err(InvalidReport {
                reason: Reason::AccountMismatch,
                detail: "`account_id` is not the account of this token.".to_owned(),
                mower_id: Some(r.mower_id),
            }),
            other => other,
        })
        .collect();

    // A token limited to some sites may only write its sites' mowers. (An unlimited token's
    // mowers are checked by W0 during ingestion.)
    if let Some(sites) = &principal.sites {
        let mut ids: Vec<MowerId> = batch
            .iter()
            .filter_map(|r| r.as_ref().ok().map(|s| s.mower_id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let visible: HashSet<MowerId> = state
            .directory
            .mowers_by_id(&ids)
            .await?
            .into_iter()
            .filter(|m| m.account_id == principal.account_id && sites.contains(&m.site_id))
            .map(|m| m.id)
            .collect();
        for report in &mut batch {
            if let Ok(s) = report {
                if !visible.contains(&s.mower_id) {
                    *report = Err(InvalidReport {
                        reason: Reason::UnknownMower,
                        detail: NOT_VISIBLE.to_owned(),
                        mower_id: Some(s.mower_id),
                    });
                }
            }
        }
    }

    let valid: Vec<Option<StateReport>> = batch.iter().map(|r| r.as_ref().ok().cloned()).collect();
    // serde names the domain's private wire type in its messages; clients know it as a report.
    let details: Vec<Option<String>> = batch
        .iter()
        .map(|r| {
            r.as_ref().err().map(|e| {
                e.detail
                    .replace("struct WireReport", "a state report object")
            })
        })
        .collect();
    // A report the store refuses is isolated at once (a request has no second delivery): it
    // answers `rejected_by_store` and the others are stored. Only a store failure is an error
    // here: it stored nothing (a `503` to retry as is). Rows stored with their zones pending are
    // an answer like any other (decision 47).
    let (outcomes, zones_pending) = match state.ingest.record_states_isolating(batch, &[]).await {
        Ok(outcomes) => (outcomes, false),
        Err(IngestError::ZonesPending { outcomes, error }) => {
            tracing::warn!(%error, reports = outcomes.len(), "Stored reports received over HTTP, but their virtual zones are pending; the ingest consumer evaluates them.");
            (outcomes, true)
        }
        Err(IngestError::Store(e)) => return Err(ApiError::from(e)),
    };

    for (report, outcome) in valid.iter().zip(&outcomes) {
        if let (Some(report), StateOutcome::Stored) = (report, outcome) {
            publish(&state, report).await;
        }
    }

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
                // No detail: refused by W0 during ingestion, or by the store. The report named the
                // token's account (checked above), so a W0 mismatch means the mower is another
                // account's: answer what an unknown mower answers.
                let (reason, detail) = match (detail, reason) {
                    (Some(detail), reason) => (reason.into(), detail),
                    (None, Reason::RejectedByStore) => (
                        DropReason::RejectedByStore,
                        "The store refused this report; sending it again gives the same answer."
                            .to_owned(),
                    ),
                    (None, _) => (DropReason::UnknownMower, NOT_VISIBLE.to_owned()),
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

/// Publishes a stored report on its mower's subject (see the module). A failure is logged: the
/// rows are stored; only the bus consumers miss the state.
async fn publish(state: &AppState, report: &StateReport) {
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
    if let Err(e) = state
        .bus
        .publish(
            &subjects::telemetry(report.mower_id),
            payload,
            Some(dedup_id),
        )
        .await
    {
        tracing::warn!(mower_id = %report.mower_id, error = %e, "Could not publish a state report received over HTTP; the watcher and the live stream miss it.");
    }
}
