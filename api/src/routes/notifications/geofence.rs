//! A mower's geofence: the polygon it must stay in, read, set and removed (docs/rules.md §4).

use super::{ports, TAG};
use crate::auth::{Reader, Writer};
use crate::error::{ApiError, Problem, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::routes::MowerPath;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::watch::{GeoPolygon, Geofence};
use swath_domain::MowerId;
use utoipa::ToSchema;
use uuid::Uuid;

/// A GeoJSON Polygon (RFC 7946 §3.1.6): `[lon, lat]` positions in degrees, each ring closed. It
/// must be a simple polygon: no ring crosses or touches itself, every hole lies inside the
/// exterior ring, holes neither cross each other nor lie inside each other; a `422` names what is
/// wrong.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"type": "Polygon", "coordinates": [[[13.4, 52.5], [13.401, 52.5], [13.401, 52.501], [13.4, 52.501], [13.4, 52.5]]]}))]
pub struct PolygonGeometry {
    /// Always `Polygon`.
    #[serde(rename = "type")]
    #[schema(example = "Polygon")]
    pub type_: String,
    /// The exterior ring, then any holes; each ring at least four `[lon, lat]` positions, the last
    /// equal to the first. At most 1000 positions, spanning at most one degree.
    pub coordinates: Vec<Vec<Vec<f64>>>,
}

impl PolygonGeometry {
    /// The DTO of a stored polygon (zones share it).
    pub(super) fn of(polygon: &GeoPolygon) -> Self {
        serde_json::from_value(polygon.to_geojson()).unwrap_or(PolygonGeometry {
            type_: "Polygon".into(),
            coordinates: Vec::new(),
        })
    }

    /// The domain polygon, or the `422` that says what is wrong with it, pointing at `pointer`
    /// (where the polygon is in the body).
    pub(super) fn validate(&self, pointer: &str) -> Result<GeoPolygon, ApiError> {
        let value = serde_json::to_value(self).map_err(|e| ApiError::Internal(e.to_string()))?;
        GeoPolygon::from_geojson(&value).map_err(|e| ApiError::invalid(pointer, e.to_string()))
    }
}

/// A mower's geofence: leaving it (clearly, beyond the position's accuracy) raises the theft
/// alarm `geofence_left`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Geofence)]
pub struct GeofenceDto {
    /// The mower the geofence is of.
    pub mower_id: Uuid,
    /// Changes every time the geofence is replaced.
    pub version: Uuid,
    /// The fence.
    pub polygon: PolygonGeometry,
    /// When it was last replaced.
    pub updated_at: DateTime<Utc>,
}

impl From<Geofence> for GeofenceDto {
    fn from(g: Geofence) -> Self {
        Self {
            mower_id: g.mower_id.0,
            version: g.version,
            polygon: PolygonGeometry::of(&g.polygon),
            updated_at: g.updated_at,
        }
    }
}

/// Get a mower's geofence
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/geofence",
    tag = TAG,
    operation_id = "get_geofence",
    summary = "Get a mower's geofence",
    description = "The polygon the mower must stay in. `404` (type `not-found`) when the mower has \
        no geofence.",
    security(("bearer" = ["read"])),
    params(MowerPath),
    responses(
        (status = 200, description = "The geofence.", body = GeofenceDto),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token, or it has no geofence.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_geofence(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<GeofenceDto>, ApiError> {
    let geofence = state
        .mower_data
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
    operation_id = "put_geofence",
    summary = "Set a mower's geofence",
    description = "Sets or replaces the polygon the mower must stay in (a GeoJSON Polygon). A \
        position farther outside than its accuracy raises `geofence_left` and a critical \
        `geofence` alert (the theft alarm); one clearly back inside raises `geofence_returned`. \
        Each replacement gets a new `version`.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    request_body(content = PolygonGeometry, description = "The fence.", content_type = "application/json"),
    responses(
        (status = 200, description = "The geofence as stored.", body = GeofenceDto),
        (status = 400, description = "The id is not a UUID, or the body is not valid JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/json`.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The body is not a valid GeoJSON Polygon.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn put_geofence(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<PolygonGeometry>,
) -> Result<Json<GeofenceDto>, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    let polygon = body.validate("")?;
    let geofence = Geofence {
        mower_id: mower.id,
        account_id: mower.account_id,
        version: Uuid::now_v7(),
        polygon,
        updated_at: state.clock.now().trunc_subsecs(6),
    };
    ports(&state)?
        .geofences
        .put_geofence(geofence.clone())
        .await?;
    Ok(Json(geofence.into()))
}

/// Remove a mower's geofence
#[utoipa::path(
    delete,
    path = "/v1/mowers/{id}/geofence",
    tag = TAG,
    operation_id = "delete_geofence",
    summary = "Remove a mower's geofence",
    description = "Removes the geofence; an open `geofence` alert is cleared by the mower's next \
        state. Removing a geofence that does not exist succeeds too.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    responses(
        (status = 204, description = "The mower has no geofence."),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn delete_geofence(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    ports(&state)?.geofences.delete_geofence(mower.id).await?;
    Ok(StatusCode::NO_CONTENT)
}
