//! A mower's virtual zones: listed with the mower's occupancy, added, changed and removed.

use super::TAG;
use crate::auth::{Reader, Writer};
use crate::dto::answers::{ById, ByIdWithBody, ZoneInvalid};
use crate::dto::notifications::{ZoneBody, ZoneDto, ZoneList};
use crate::dto::params::{MowerPath, ZonePath};
use crate::error::{ApiError, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_application::MowerZones;
use swath_domain::{MowerId, Principal};
use uuid::Uuid;

/// The zone DTOs of a mower, with its occupancy.
async fn zone_dtos(
    state: &AppState,
    principal: &Principal,
    mower: MowerId,
) -> Result<Vec<ZoneDto>, ApiError> {
    let MowerZones { zones, watch, .. } = state.mower_reads.zones(principal, mower).await?;
    let occupancy = watch.map(|w| w.occupancy).unwrap_or_default();
    Ok(zones
        .into_iter()
        .map(|z| {
            let since = occupancy
                .iter()
                .find(|o| o.zone_id == z.id)
                .map(|o| o.since);
            ZoneDto::new(z, since)
        })
        .collect())
}

/// List a mower's zones
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/zones",
    tag = TAG,
    description = "The mower's virtual zones, by name, each with whether the mower is in it now.",
    security(("bearer" = ["read"])),
    params(MowerPath),
    responses(
        (status = 200, description = "The zones.", body = ZoneList),
        ById<MowerPath>,
    ),
)]
pub async fn list_zones(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<ZoneList>, ApiError> {
    Ok(Json(ZoneList {
        items: zone_dtos(&state, &principal, MowerId(id)).await?,
    }))
}

/// Add a zone to a mower
#[utoipa::path(
    post,
    path = "/v1/mowers/{id}/zones",
    tag = TAG,
    description = "Adds a named virtual zone (a GeoJSON Polygon). From the mower's next positions \
        on, entering it raises `zone_entered` and leaving it `zone_left`. At most 64 zones per \
        mower.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    request_body(content = ZoneBody, description = "The zone.", content_type = "application/json"),
    responses(
        (status = 201, description = "The zone was added.", body = ZoneDto,
            headers(("Location" = String, description = "The path of the mower's zones."))),
        ByIdWithBody<MowerPath>,
        (status = 409, description = "The mower has 64 zones already."),
        ZoneInvalid,
    ),
)]
pub async fn create_zone(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<ZoneBody>,
) -> Result<Response, ApiError> {
    let (name, polygon) = body.checked()?;
    let zone = state
        .mower_settings
        .create_zone(&principal, MowerId(id), name, polygon)
        .await?;
    let location = format!("/v1/mowers/{}/zones", zone.mower_id);
    let dto = ZoneDto::new(zone, None);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(dto),
    )
        .into_response())
}

/// Change a zone
#[utoipa::path(
    put,
    path = "/v1/mowers/{id}/zones/{zone_id}",
    tag = TAG,
    description = "Replaces a zone's name and polygon. The mower's occupancy is re-evaluated \
        against the new polygon from its next position on.",
    security(("bearer" = ["write"])),
    params(MowerPath, ZonePath),
    request_body(content = ZoneBody, description = "The zone's new name and area.", content_type = "application/json"),
    responses(
        (status = 200, description = "The zone as stored.", body = ZoneDto),
        ByIdWithBody<ZonePath>,
        ZoneInvalid,
    ),
)]
pub async fn update_zone(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath((id, zone_id)): ApiPath<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<ZoneBody>,
) -> Result<Json<ZoneDto>, ApiError> {
    let (name, polygon) = body.checked()?;
    let mower = MowerId(id);
    let settings = &state.mower_settings;
    if !settings
        .update_zone(&principal, mower, zone_id, name, polygon)
        .await?
    {
        return Err(ApiError::NotFound(Resource::Zone));
    }
    zone_dtos(&state, &principal, mower)
        .await?
        .into_iter()
        .find(|z| z.id == zone_id)
        .map(Json)
        .ok_or(ApiError::NotFound(Resource::Zone))
}

/// Remove a zone
#[utoipa::path(
    delete,
    path = "/v1/mowers/{id}/zones/{zone_id}",
    tag = TAG,
    description = "Removes a zone. It is dropped from the mower's occupancy at its next position, \
        without a `zone_left` event.",
    security(("bearer" = ["write"])),
    params(MowerPath, ZonePath),
    responses(
        (status = 204, description = "The zone was removed."),
        ById<ZonePath>,
    ),
)]
pub async fn delete_zone(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath((id, zone_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    let settings = &state.mower_settings;
    if !settings
        .delete_zone(&principal, MowerId(id), zone_id)
        .await?
    {
        return Err(ApiError::NotFound(Resource::Zone));
    }
    Ok(StatusCode::NO_CONTENT)
}
