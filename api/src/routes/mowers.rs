//! `/v1/mowers`: the fleet with its latest states, and the mowers of the directory (create,
//! read, change, delete). A mower's telemetry is under [`super::telemetry`].

use super::location;
use crate::auth::{Reader, Writer};
use crate::dto::answers::{ById, ByIdWithBody, MowerInvalid, NotJson, NotModified, PageRefused};
use crate::dto::directory::{MowerPatch, NewMower};
use crate::dto::params::{MowerPath, PageParams, Revalidation};
use crate::dto::{MowerList, MowerSummary};
use crate::error::ApiError;
use crate::etag::json_with_etag;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::page::{self, List};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_application::MowerView;
use swath_domain::MowerId;
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "mowers";

/// List the mowers with their latest states
#[utoipa::path(
    get,
    path = "/v1/mowers",
    tag = TAG,
    description = "The mowers of the token's account (only those of its sites when the token is \
        limited to some sites), ordered by display order, then name, then id, each with its \
        directory fields and its latest state (`null` while it has not reported): up to 1000 \
        mowers with their states in one call. Page with `limit` and `cursor`. Answers \
        `304 Not Modified` when `If-None-Match` names the current `ETag` of the page.",
    security(("bearer" = ["read"])),
    params(PageParams, Revalidation),
    responses(
        (status = 200, description = "A page of mowers with their latest states.", body = MowerList,
            headers(
                ("ETag" = String, description = "The entity tag of this document."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        NotModified,
        PageRefused,
    ),
)]
pub async fn list_mowers(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (ask, after) = page::ask(List::Mowers, params.limit, params.cursor.as_deref())?;
    let rows = state.fleet.mowers(&principal, after, ask.fetch()).await?;
    let mut cut = ask.cut(rows, |m| m.order_key());
    let mowers = std::mem::take(&mut cut.rows);
    let views = state.mower_reads.views(&principal, mowers).await?;
    let list: MowerList = cut
        .with_rows(views)
        .page(ask.limit, |v| MowerSummary::from(&v));
    json_with_etag(&headers, &list)
}

/// Add a mower
#[utoipa::path(
    post,
    path = "/v1/mowers",
    tag = TAG,
    description = "Adds a mower to a site of the token's account. Give it the `id` its gateway \
        reports with (states of a mower that is not in the directory are dropped as \
        `unknown_mower`); without one, Swath makes one. The answer is the mower, without a state. \
        Mower ids are global, chosen by gateways: an id another account holds (or one on a site \
        this token does not see) is refused with `409`, which tells that the id is taken, never \
        by whom, while every read of it answers `404`. An id whose mower was deleted is free \
        again and starts with nothing of that mower.",
    security(("bearer" = ["write"])),
    request_body(content = NewMower, description = "The mower.", content_type = "application/json"),
    responses(
        (status = 201, description = "The mower was added.", body = MowerSummary,
            headers(("Location" = String, description = "The path of the new mower."))),
        NotJson,
        (status = 409, description = "A mower with this id exists already (in this account or \
            another)."),
        MowerInvalid,
    ),
)]
pub async fn create_mower(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewMower>,
) -> Result<Response, ApiError> {
    let created = state
        .fleet
        .create_mower(&principal, body.checked()?)
        .await?;
    let id = created.mower.id;
    tracing::info!(mower_id = %id, account_id = %principal.account_id, "Added a mower.");
    Ok((
        StatusCode::CREATED,
        location(format!("/v1/mowers/{id}"))?,
        Json(MowerSummary::from(&MowerView::unreported(
            created.mower,
            created.site_name,
        ))),
    )
        .into_response())
}

/// Get a mower with its latest state
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}",
    tag = TAG,
    description = "The mower's directory fields and its latest state (`null` while it has not \
        reported), as in the list. Answers `304 Not Modified` when `If-None-Match` names the \
        current `ETag`.",
    security(("bearer" = ["read"])),
    params(MowerPath, Revalidation),
    responses(
        (status = 200, description = "The mower with its latest state.", body = MowerSummary,
            headers(
                ("ETag" = String, description = "The entity tag of this document."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        NotModified,
        ById<MowerPath>,
    ),
)]
pub async fn get_mower(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let view = state.mower_reads.view(&principal, MowerId(id)).await?;
    json_with_etag(&headers, &MowerSummary::from(&view))
}

/// Change a mower
#[utoipa::path(
    patch,
    path = "/v1/mowers/{id}",
    tag = TAG,
    description = "Replaces the fields given (site, name, model, serial, display order, blade \
        threshold); the others stay. The mower keeps its id, its account and its telemetry. A new \
        site must be visible to the token; a new site's time zone applies to the days of states \
        counted from then on.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    request_body(content = MowerPatch, description = "The fields to change.", content_type = "application/json"),
    responses(
        (status = 200, description = "The changed mower with its latest state.", body = MowerSummary),
        ByIdWithBody<MowerPath>,
        MowerInvalid,
    ),
)]
pub async fn update_mower(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<MowerPatch>,
) -> Result<Json<MowerSummary>, ApiError> {
    let changes = patch.checked()?;
    let mower = state
        .fleet
        .update_mower(&principal, MowerId(id), changes)
        .await?;
    let mut views = state.mower_reads.views(&principal, vec![mower]).await?;
    Ok(Json(MowerSummary::from(&views.remove(0))))
}

/// Delete a mower and its telemetry
#[utoipa::path(
    delete,
    path = "/v1/mowers/{id}",
    tag = TAG,
    description = "Removes the mower from the directory together with everything stored of it: \
        latest state, history, track, health and day totals, geofence, zones, busy status, \
        events and alerts. Its states that arrive afterwards are dropped as `unknown_mower`, and \
        a mower created later with the same id starts with nothing of this one. Cannot be undone.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    responses(
        (status = 204, description = "The mower and everything stored of it are deleted."),
        ById<MowerPath>,
    ),
)]
pub async fn delete_mower(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mower = state.fleet.delete_mower(&principal, MowerId(id)).await?;
    tracing::info!(mower_id = %mower.id, account_id = %principal.account_id, "Deleted a mower and its telemetry.");
    Ok(StatusCode::NO_CONTENT)
}
