//! A mower's geofence: the polygon it must stay in, read, set and removed (docs/rules.md §4).

use super::TAG;
use crate::auth::{Reader, Writer};
use crate::dto::answers::{ById, ByIdWithBody};
use crate::dto::notifications::{GeofenceDto, PolygonGeometry};
use crate::dto::params::MowerPath;
use crate::error::{ApiError, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use swath_domain::MowerId;
use uuid::Uuid;

/// Get a mower's geofence
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/geofence",
    tag = TAG,
    description = "The polygon the mower must stay in. `404` (type `not-found`) when the mower has \
        no geofence.",
    security(("bearer" = ["read"])),
    params(MowerPath),
    responses(
        (status = 200, description = "The geofence.", body = GeofenceDto),
        (status = 400, description = "The id is not a UUID."),
        (status = 404, description = "No such mower is visible to this token, or it has no geofence."),
    ),
)]
pub async fn get_geofence(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<GeofenceDto>, ApiError> {
    let geofence = state
        .mower_reads
        .geofence(&principal, MowerId(id))
        .await?
        .ok_or(ApiError::NotFound(Resource::Geofence))?;
    Ok(Json(geofence.into()))
}

/// Set a mower's geofence
#[utoipa::path(
    put,
    path = "/v1/mowers/{id}/geofence",
    tag = TAG,
    description = "Sets or replaces the polygon the mower must stay in (a GeoJSON Polygon). A \
        position farther outside than its accuracy raises `geofence_left` and a critical \
        `geofence` alert (the theft alarm); one clearly back inside raises `geofence_returned`. \
        Each replacement gets a new `version`.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    request_body(content = PolygonGeometry, description = "The fence.", content_type = "application/json"),
    responses(
        (status = 200, description = "The geofence as stored.", body = GeofenceDto),
        ByIdWithBody<MowerPath>,
        (status = 422, description = "The body is not a valid GeoJSON Polygon."),
    ),
)]
pub async fn put_geofence(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<PolygonGeometry>,
) -> Result<Json<GeofenceDto>, ApiError> {
    let polygon = body.validate("")?;
    let geofence = state
        .mower_settings
        .put_geofence(&principal, MowerId(id), polygon)
        .await?;
    Ok(Json(geofence.into()))
}

/// Remove a mower's geofence
#[utoipa::path(
    delete,
    path = "/v1/mowers/{id}/geofence",
    tag = TAG,
    description = "Removes the geofence; an open `geofence` alert is cleared by the mower's next \
        state. Removing a geofence that does not exist succeeds too.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    responses(
        (status = 204, description = "The mower has no geofence."),
        ById<MowerPath>,
    ),
)]
pub async fn delete_geofence(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    state
        .mower_settings
        .delete_geofence(&principal, MowerId(id))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
