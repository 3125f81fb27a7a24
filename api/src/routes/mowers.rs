//! `/v1/mowers`: the fleet with its latest states, one mower's latest state, its health totals.
//!
//! Visibility is decided once, in [`visible_mower`] (and the same filter in [`list_mowers`]): a
//! mower of another account, or of a site the principal may not see, answers exactly what an
//! unknown id answers, so that ids of other tenants cannot be probed.

use crate::auth::Reader;
use crate::dto::{MowerHealth, MowerList, MowerState, MowerSummary};
use crate::error::{ApiError, Problem};
use crate::etag::json_with_etag;
use crate::extract::ApiPath;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use std::collections::HashMap;
use swath_application::ports::{Mower, Principal};
use swath_domain::{LatestRow, MowerId};
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "mowers";

/// List the mowers with their latest states
#[utoipa::path(
    get,
    path = "/v1/mowers",
    tag = TAG,
    operation_id = "list_mowers",
    summary = "List the mowers with their latest states",
    description = "Every mower of the token's account (only those of its sites when the token is \
        limited to some sites), ordered by display order, then name, then id, each with its \
        directory fields and its latest state (`null` while it has not reported). One call gives \
        the whole fleet. Answers `304 Not Modified` when `If-None-Match` names the current `ETag`.",
    security(("bearer" = ["read"])),
    params(
        ("If-None-Match" = Option<String>, Header, description = "An `ETag` from an earlier answer: \
            when it is still current, the answer is `304 Not Modified` without a body."),
    ),
    responses(
        (status = 200, description = "The mowers with their latest states.", body = MowerList,
            headers(
                ("ETag" = String, description = "The entity tag of this document."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        (status = 304, description = "The document has not changed since the `ETag` given in `If-None-Match`.",
            headers(("ETag" = String, description = "The entity tag of the current document."))),
        (status = 401, description = "The bearer token is missing, unknown or revoked.", body = Problem,
            content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer`, with the reason the token failed."))),
        (status = 403, description = "The token lacks the `read` scope.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
pub async fn list_mowers(
    Reader(principal): Reader,
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mowers: Vec<Mower> = state
        .directory
        .mowers(principal.account_id)
        .await?
        .into_iter()
        .filter(|m| principal.sees_site(m.site_id))
        .collect();
    let ids: Vec<MowerId> = mowers.iter().map(|m| m.id).collect();
    // One read for the whole fleet: the store answers it with one statement.
    let latest: HashMap<MowerId, LatestRow> = state
        .telemetry
        .latest(&ids)
        .await?
        .into_iter()
        .map(|row| (row.mower_id, row))
        .collect();
    let list = MowerList {
        items: mowers
            .iter()
            .map(|m| MowerSummary::new(m, latest.get(&m.id)))
            .collect(),
    };
    json_with_etag(&headers, &list)
}

/// Get a mower's latest state
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/state",
    tag = TAG,
    operation_id = "get_mower_state",
    summary = "Get a mower's latest state",
    description = "The newest state the mower reported, as its gateway sent it (unknown fields \
        included), with when Swath received it and the Home Assistant `lawn_mower` activity. \
        Poll it with `If-None-Match`: the answer is `304 Not Modified` until a newer state arrives.",
    security(("bearer" = ["read"])),
    params(
        ("id" = Uuid, Path, description = "The mower's id.", example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60"),
        ("If-None-Match" = Option<String>, Header, description = "An `ETag` from an earlier answer: \
            when it is still current, the answer is `304 Not Modified` without a body."),
    ),
    responses(
        (status = 200, description = "The mower's latest state.", body = MowerState,
            headers(
                ("ETag" = String, description = "The entity tag of this state document."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        (status = 304, description = "No newer state since the `ETag` given in `If-None-Match`.",
            headers(("ETag" = String, description = "The entity tag of the current state document."))),
        (status = 400, description = "The id is not a UUID.", body = Problem,
            content_type = "application/problem+json"),
        (status = 401, description = "The bearer token is missing, unknown or revoked.", body = Problem,
            content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer`, with the reason the token failed."))),
        (status = 403, description = "The token lacks the `read` scope.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token (type `not-found`), or it \
            has not reported a state yet (type `no-state-yet`).", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
pub async fn get_mower_state(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mower = visible_mower(&state, &principal, id).await?;
    let latest = state.telemetry.latest(&[mower.id]).await?;
    let row = latest
        .iter()
        .find(|r| r.mower_id == mower.id)
        .ok_or(ApiError::NoStateYet)?;
    json_with_etag(&headers, &MowerState::from(row))
}

/// Get a mower's health totals
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/health",
    tag = TAG,
    operation_id = "get_mower_health",
    summary = "Get a mower's health totals",
    description = "Running totals since the mower first reported: mowing and blade time in \
        seconds, distance in metres, error and charge counts, blade time since the last blade \
        reset and whether the blade is due. A mower that has not reported yet has zero totals and \
        `counted_until` `null`.",
    security(("bearer" = ["read"])),
    params(
        ("id" = Uuid, Path, description = "The mower's id.", example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60"),
        ("If-None-Match" = Option<String>, Header, description = "An `ETag` from an earlier answer: \
            when it is still current, the answer is `304 Not Modified` without a body."),
    ),
    responses(
        (status = 200, description = "The mower's health totals.", body = MowerHealth,
            headers(
                ("ETag" = String, description = "The entity tag of this document."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        (status = 304, description = "The totals have not changed since the `ETag` given in `If-None-Match`.",
            headers(("ETag" = String, description = "The entity tag of the current document."))),
        (status = 400, description = "The id is not a UUID.", body = Problem,
            content_type = "application/problem+json"),
        (status = 401, description = "The bearer token is missing, unknown or revoked.", body = Problem,
            content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer`, with the reason the token failed."))),
        (status = 403, description = "The token lacks the `read` scope.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
pub async fn get_mower_health(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mower = visible_mower(&state, &principal, id).await?;
    let totals = state.telemetry.health(mower.id).await?;
    json_with_etag(&headers, &MowerHealth::new(&mower, totals.as_ref()))
}

/// The mower `id` if the principal may see it. Unknown, another account's and a hidden site's
/// mower are one and the same error.
async fn visible_mower(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
) -> Result<Mower, ApiError> {
    match state.directory.mower(MowerId(id)).await? {
        Some(m) if m.account_id == principal.account_id && principal.sees_site(m.site_id) => Ok(m),
        _ => Err(ApiError::MowerNotFound),
    }
}
