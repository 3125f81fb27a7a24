//! Notifications: a mower's geofence and virtual zones, blade resets, the events feed, open
//! alerts and the scheduler's busy check (docs/rules.md §3 W6/W7, §4).
//!
//! Every route that names a mower checks its visibility first ([`visible_mower`]), so a mower of
//! another account answers the `404` of an unknown id before any notification data is read. The
//! feeds filter by the principal's visible mowers inside the store's query, before the limit,
//! and page like every other list, through `crate::page`.

use crate::auth::{Reader, Writer};
use crate::error::{ApiError, Problem, Resource};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::page;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use swath_application::ports::{
    AlertCursor, AlertQuery, EventQuery, Geofence, WatchError, WatchStore,
};
use swath_domain::watch::busy::{is_busy, BusyStatus};
use swath_domain::watch::zones::{Zone, MAX_ZONE_NAME_CHARS};
use swath_domain::watch::{self as rules, AlertKind, EventDetail, EventKind, GeoPolygon};
use swath_domain::MowerId;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "notifications";

impl From<WatchError> for ApiError {
    fn from(e: WatchError) -> Self {
        match e {
            WatchError::Unavailable(_) => ApiError::Unavailable(e.to_string()),
            WatchError::Corrupt(_) => ApiError::Internal(e.to_string()),
            WatchError::Limit(detail) => ApiError::Conflict(detail),
        }
    }
}

/// The notification store, or `503` when the service was started without one.
fn store(state: &AppState) -> Result<&Arc<dyn WatchStore>, ApiError> {
    state
        .watch
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no notification store is configured".into()))
}

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
    fn of(polygon: &GeoPolygon) -> Self {
        serde_json::from_value(polygon.to_geojson()).unwrap_or(PolygonGeometry {
            type_: "Polygon".into(),
            coordinates: Vec::new(),
        })
    }

    fn validate(&self) -> Result<GeoPolygon, ApiError> {
        let value = serde_json::to_value(self).map_err(|e| ApiError::Internal(e.to_string()))?;
        GeoPolygon::from_geojson(&value).map_err(|e| ApiError::Validation(e.to_string()))
    }
}

/// A mower's geofence: leaving it (clearly, beyond the position's accuracy) raises the theft
/// alarm `geofence_left`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
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

/// A virtual zone: entering and leaving it raise `zone_entered` and `zone_left`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ZoneDto {
    /// The zone's id.
    pub id: Uuid,
    /// The mower the zone is of.
    pub mower_id: Uuid,
    /// Its name, shown in events.
    #[schema(example = "Roses")]
    pub name: String,
    /// Its area.
    pub polygon: PolygonGeometry,
    /// Whether the mower is in the zone now.
    pub occupied: bool,
    /// Since when the mower is in the zone (`null` when it is not).
    #[schema(required = true)]
    pub occupied_since: Option<DateTime<Utc>>,
    /// When the zone was added.
    pub created_at: DateTime<Utc>,
    /// When the zone was last changed.
    pub updated_at: DateTime<Utc>,
}

/// The zones of a mower, by name.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ZoneList {
    /// Every zone of the mower (at most 64), ordered by name, then id.
    pub items: Vec<ZoneDto>,
}

/// A zone to add, or the new name and area of a zone.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ZoneBody {
    /// 1 to 100 characters.
    #[schema(example = "Roses")]
    pub name: String,
    /// The zone's area.
    pub polygon: PolygonGeometry,
}

/// What an event is about. `error_*`, `geofence_*`, `battery_low`, `mowing_*` and `*_online`
/// come from the watcher; `blade_due` and `zone_*` from ingestion; `went_offline` from the
/// offline sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKindDto {
    ErrorRaised,
    ErrorCleared,
    GeofenceLeft,
    GeofenceReturned,
    BatteryLow,
    MowingStarted,
    MowingFinished,
    BladeDue,
    ZoneEntered,
    ZoneLeft,
    WentOffline,
    CameOnline,
}

impl EventKindDto {
    fn domain(self) -> EventKind {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        EventKind::parse(&name).unwrap_or(EventKind::ErrorRaised)
    }

    fn of(kind: EventKind) -> Self {
        serde_json::from_value(Value::String(kind.as_str().to_owned()))
            .unwrap_or(EventKindDto::ErrorRaised)
    }
}

/// What an event carries; the fields that do not apply to its kind are `null`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct EventDetails {
    /// `error_*`: the mower's error code.
    #[schema(required = true)]
    pub error_code: Option<String>,
    /// `geofence_*`: the reported latitude, degrees.
    #[schema(required = true)]
    pub lat: Option<f64>,
    /// `geofence_*`: the reported longitude, degrees.
    #[schema(required = true)]
    pub lon: Option<f64>,
    /// `geofence_left`: the position's accuracy, metres.
    #[schema(required = true)]
    pub accuracy_m: Option<f64>,
    /// `geofence_left`: how far outside the fence, metres.
    #[schema(required = true)]
    pub distance_m: Option<f64>,
    /// `geofence_*`: the geofence version judged against.
    #[schema(required = true)]
    pub geofence_version: Option<Uuid>,
    /// `battery_low`: the charge, percent.
    #[schema(required = true)]
    pub battery_percent: Option<u8>,
    /// `blade_due`: blade time since the last blade reset, seconds.
    #[schema(required = true)]
    pub blade_since_reset_s: Option<f64>,
    /// `blade_due`: the mower's blade threshold, seconds.
    #[schema(required = true)]
    pub blade_threshold_s: Option<f64>,
    /// `zone_*`: the zone.
    #[schema(required = true)]
    pub zone_id: Option<Uuid>,
    /// `zone_*`: the zone's name when the event was raised.
    #[schema(required = true)]
    pub zone_name: Option<String>,
    /// `went_offline`: when Swath last received a state; `came_online`: the same, before this one.
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
}

/// A derived event, as stored in the feed and published on `notifications.mower.<id>.<kind>`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct EventDto {
    /// The event's id (also the bus de-duplication id); ids sort by `observed_at`.
    pub id: Uuid,
    /// What happened.
    pub kind: EventKindDto,
    /// The mower it happened to.
    pub mower_id: Uuid,
    /// The `observed_at` of the state that raised it; for `went_offline`, the moment the mower had
    /// been silent for the offline period.
    pub observed_at: DateTime<Utc>,
    /// What the event carries.
    pub details: EventDetails,
}

impl From<rules::Event> for EventDto {
    fn from(e: rules::Event) -> Self {
        let mut d = EventDetails::default();
        match &e.detail {
            EventDetail::ErrorRaised { error_code } | EventDetail::ErrorCleared { error_code } => {
                d.error_code = error_code.clone();
            }
            EventDetail::GeofenceLeft {
                lat,
                lon,
                accuracy_m,
                distance_m,
                geofence_version,
            } => {
                (d.lat, d.lon, d.accuracy_m) = (Some(*lat), Some(*lon), *accuracy_m);
                d.distance_m = Some(*distance_m);
                d.geofence_version = Some(*geofence_version);
            }
            EventDetail::GeofenceReturned {
                lat,
                lon,
                geofence_version,
            } => {
                (d.lat, d.lon) = (Some(*lat), Some(*lon));
                d.geofence_version = Some(*geofence_version);
            }
            EventDetail::BatteryLow { battery_percent } => {
                d.battery_percent = Some(*battery_percent)
            }
            EventDetail::MowingStarted {} | EventDetail::MowingFinished {} => {}
            EventDetail::BladeDue {
                blade_since_reset_ms,
                threshold_ms,
            } => {
                d.blade_since_reset_s = Some(*blade_since_reset_ms as f64 / 1000.0);
                d.blade_threshold_s = Some(*threshold_ms as f64 / 1000.0);
            }
            EventDetail::ZoneEntered { zone_id, zone_name }
            | EventDetail::ZoneLeft { zone_id, zone_name } => {
                (d.zone_id, d.zone_name) = (Some(*zone_id), Some(zone_name.clone()));
            }
            EventDetail::WentOffline { last_seen_at } => d.last_seen_at = Some(*last_seen_at),
            EventDetail::CameOnline { silent_since } => d.last_seen_at = Some(*silent_since),
        }
        Self {
            id: e.id,
            kind: EventKindDto::of(e.kind()),
            mower_id: e.mower_id.0,
            observed_at: e.observed_at,
            details: d,
        }
    }
}

/// A page of the events feed, newest first.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    /// The events of this page, newest first (by id).
    pub items: Vec<EventDto>,
    /// Whether more events exist after this page.
    pub truncated: bool,
    /// The page size asked for.
    pub limit: u32,
    /// Pass as `cursor` for the next (older) page; `null` on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// What an alert is about. One alert of a kind may be open per mower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertKindDto {
    Error,
    Geofence,
    BatteryLow,
    BladeDue,
    Offline,
}

impl AlertKindDto {
    fn domain(self) -> AlertKind {
        match self {
            AlertKindDto::Error => AlertKind::Error,
            AlertKindDto::Geofence => AlertKind::Geofence,
            AlertKindDto::BatteryLow => AlertKind::BatteryLow,
            AlertKindDto::BladeDue => AlertKind::BladeDue,
            AlertKindDto::Offline => AlertKind::Offline,
        }
    }

    fn of(kind: AlertKind) -> Self {
        match kind {
            AlertKind::Error => AlertKindDto::Error,
            AlertKind::Geofence => AlertKindDto::Geofence,
            AlertKind::BatteryLow => AlertKindDto::BatteryLow,
            AlertKind::BladeDue => AlertKindDto::BladeDue,
            AlertKind::Offline => AlertKindDto::Offline,
        }
    }
}

/// How urgent an alert is: `critical` (outside the geofence: theft), `high` (error, offline),
/// `normal` (battery low), `low` (blade due).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SeverityDto {
    Critical,
    High,
    Normal,
    Low,
}

/// An open alert: raised by an event, open until the condition clears.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AlertDto {
    /// The id of the event that raised it.
    pub id: Uuid,
    /// What it is about.
    pub kind: AlertKindDto,
    /// How urgent it is.
    pub severity: SeverityDto,
    /// The mower.
    pub mower_id: Uuid,
    /// When it was raised (the raising event's `observed_at`).
    pub raised_at: DateTime<Utc>,
    /// The error code of an `error` alert.
    #[schema(required = true)]
    pub code: Option<String>,
}

impl From<rules::Alert> for AlertDto {
    fn from(a: rules::Alert) -> Self {
        Self {
            id: a.id,
            kind: AlertKindDto::of(a.kind),
            severity: match a.severity {
                rules::Severity::Critical => SeverityDto::Critical,
                rules::Severity::High => SeverityDto::High,
                rules::Severity::Normal => SeverityDto::Normal,
                rules::Severity::Low => SeverityDto::Low,
            },
            mower_id: a.mower_id.0,
            raised_at: a.raised_at,
            code: a.code,
        }
    }
}

/// A page of open alerts: most severe first, then newest.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AlertPage {
    /// The open alerts of this page, ordered by severity (critical first), then `raised_at` and
    /// id, newest first.
    pub items: Vec<AlertDto>,
    /// Whether more open alerts exist after this page.
    pub truncated: bool,
    /// The page size asked for.
    pub limit: u32,
    /// Pass as `cursor` for the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// The scheduler's view of a mower: busy (on a run or in error) or free to start one.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct BusyDto {
    /// The mower.
    pub mower_id: Uuid,
    /// `true` while mowing, leaving, returning, paused or in error; `false` when docked,
    /// charging or idle.
    pub busy: bool,
    /// The reported activity (`mowing`, `docked`, …).
    #[schema(example = "mowing")]
    pub activity: String,
    /// The `observed_at` of the report the status is from. Refreshed when the activity changes,
    /// at most every 30 s otherwise, or after a move of 100 m.
    pub observed_at: DateTime<Utc>,
    /// The position of that report, if it had one.
    #[schema(required = true)]
    pub lat: Option<f64>,
    /// The position of that report, if it had one.
    #[schema(required = true)]
    pub lon: Option<f64>,
    /// When the status was written.
    pub written_at: DateTime<Utc>,
}

impl From<BusyStatus> for BusyDto {
    fn from(s: BusyStatus) -> Self {
        Self {
            mower_id: s.mower_id.0,
            busy: is_busy(s.activity),
            activity: s.activity.as_str().to_owned(),
            observed_at: s.observed_at,
            lat: s.lat,
            lon: s.lon,
            written_at: s.written_at,
        }
    }
}

/// Filters and paging of the events feed.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventParams {
    /// Only events of this mower.
    pub mower_id: Option<Uuid>,
    /// Only events of this kind.
    pub kind: Option<EventKindDto>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// Filters and paging of the open alerts.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AlertParams {
    /// Only alerts of this mower.
    pub mower_id: Option<Uuid>,
    /// Only alerts of this kind.
    pub kind: Option<AlertKindDto>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

const MOWER_PARAM: &str = "The mower's id.";

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
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
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
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    let geofence = store(&state)?
        .geofence(mower.id)
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
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
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
    let polygon = body.validate()?;
    let geofence = Geofence {
        mower_id: mower.id,
        account_id: mower.account_id,
        version: Uuid::now_v7(),
        polygon,
        updated_at: state.clock.now().trunc_subsecs(6),
    };
    store(&state)?.put_geofence(geofence.clone()).await?;
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
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
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
    store(&state)?.delete_geofence(mower.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The zone DTOs of a mower, with its occupancy.
async fn zone_dtos(state: &AppState, mower: MowerId) -> Result<Vec<ZoneDto>, ApiError> {
    let store = store(state)?;
    let zones = store.zones(mower).await?;
    let occupancy = store
        .zone_watch(mower)
        .await?
        .map(|w| w.occupancy)
        .unwrap_or_default();
    Ok(zones
        .into_iter()
        .map(|z| {
            let since = occupancy
                .iter()
                .find(|o| o.zone_id == z.id)
                .map(|o| o.since);
            ZoneDto {
                id: z.id,
                mower_id: z.mower_id.0,
                name: z.name,
                polygon: PolygonGeometry::of(&z.polygon),
                occupied: since.is_some(),
                occupied_since: since,
                created_at: z.created_at,
                updated_at: z.updated_at,
            }
        })
        .collect())
}

/// List a mower's zones
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/zones",
    tag = TAG,
    operation_id = "list_zones",
    summary = "List a mower's zones",
    description = "The mower's virtual zones, by name, each with whether the mower is in it now.",
    security(("bearer" = ["read"])),
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
    responses(
        (status = 200, description = "The zones.", body = ZoneList),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_zones(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<ZoneList>, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    Ok(Json(ZoneList {
        items: zone_dtos(&state, mower.id).await?,
    }))
}

fn check_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_ZONE_NAME_CHARS {
        return Err(ApiError::Validation(format!(
            "`name` must have 1 to {MAX_ZONE_NAME_CHARS} characters."
        )));
    }
    Ok(name.to_owned())
}

/// Add a zone to a mower
#[utoipa::path(
    post,
    path = "/v1/mowers/{id}/zones",
    tag = TAG,
    operation_id = "create_zone",
    summary = "Add a zone to a mower",
    description = "Adds a named virtual zone (a GeoJSON Polygon). From the mower's next positions \
        on, entering it raises `zone_entered` and leaving it `zone_left`. At most 64 zones per \
        mower.",
    security(("bearer" = ["write"])),
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
    request_body(content = ZoneBody, description = "The zone.", content_type = "application/json"),
    responses(
        (status = 201, description = "The zone was added.", body = ZoneDto,
            headers(("Location" = String, description = "The path of the mower's zones."))),
        (status = 400, description = "The id is not a UUID, or the body is not valid JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The mower has 64 zones already.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/json`.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The name or the polygon is not valid.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn create_zone(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<ZoneBody>,
) -> Result<Response, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    // Microseconds: what every store keeps.
    let now = state.clock.now().trunc_subsecs(6);
    let zone = Zone {
        id: Uuid::now_v7(),
        mower_id: mower.id,
        account_id: mower.account_id,
        name: check_name(&body.name)?,
        polygon: body.polygon.validate()?,
        created_at: now,
        updated_at: now,
    };
    store(&state)?.create_zone(zone.clone()).await?;
    let dto = ZoneDto {
        id: zone.id,
        mower_id: mower.id.0,
        name: zone.name,
        polygon: PolygonGeometry::of(&zone.polygon),
        occupied: false,
        occupied_since: None,
        created_at: now,
        updated_at: now,
    };
    let location = format!("/v1/mowers/{}/zones", mower.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(dto),
    )
        .into_response())
}

/// The path of one zone.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct ZonePath {
    id: Uuid,
    zone_id: Uuid,
}

/// Change a zone
#[utoipa::path(
    put,
    path = "/v1/mowers/{id}/zones/{zone_id}",
    tag = TAG,
    operation_id = "update_zone",
    summary = "Change a zone",
    description = "Replaces a zone's name and polygon. The mower's occupancy is re-evaluated \
        against the new polygon from its next position on.",
    security(("bearer" = ["write"])),
    params(
        ("id" = Uuid, Path, description = MOWER_PARAM),
        ("zone_id" = Uuid, Path, description = "The zone's id."),
    ),
    request_body(content = ZoneBody, description = "The zone's new name and area.", content_type = "application/json"),
    responses(
        (status = 200, description = "The zone as stored.", body = ZoneDto),
        (status = 400, description = "An id is not a UUID, or the body is not valid JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token, or it has no such zone.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/json`.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The name or the polygon is not valid.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn update_zone(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(path): ApiPath<ZonePath>,
    ApiJson(body): ApiJson<ZoneBody>,
) -> Result<Json<ZoneDto>, ApiError> {
    let mower = state
        .access
        .visible_mower(&principal, MowerId(path.id))
        .await?;
    let zone = Zone {
        id: path.zone_id,
        mower_id: mower.id,
        account_id: mower.account_id,
        name: check_name(&body.name)?,
        polygon: body.polygon.validate()?,
        created_at: state.clock.now().trunc_subsecs(6),
        updated_at: state.clock.now().trunc_subsecs(6),
    };
    if !store(&state)?.update_zone(zone).await? {
        return Err(ApiError::NotFound(Resource::Zone));
    }
    zone_dtos(&state, mower.id)
        .await?
        .into_iter()
        .find(|z| z.id == path.zone_id)
        .map(Json)
        .ok_or(ApiError::NotFound(Resource::Zone))
}

/// Remove a zone
#[utoipa::path(
    delete,
    path = "/v1/mowers/{id}/zones/{zone_id}",
    tag = TAG,
    operation_id = "delete_zone",
    summary = "Remove a zone",
    description = "Removes a zone. It is dropped from the mower's occupancy at its next position, \
        without a `zone_left` event.",
    security(("bearer" = ["write"])),
    params(
        ("id" = Uuid, Path, description = MOWER_PARAM),
        ("zone_id" = Uuid, Path, description = "The zone's id."),
    ),
    responses(
        (status = 204, description = "The zone was removed."),
        (status = 400, description = "An id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token, or it has no such zone.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn delete_zone(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(path): ApiPath<ZonePath>,
) -> Result<StatusCode, ApiError> {
    let mower = state
        .access
        .visible_mower(&principal, MowerId(path.id))
        .await?;
    if !store(&state)?.delete_zone(mower.id, path.zone_id).await? {
        return Err(ApiError::NotFound(Resource::Zone));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Reset a mower's blade
#[utoipa::path(
    post,
    path = "/v1/mowers/{id}/blade-reset",
    tag = TAG,
    operation_id = "reset_blade",
    summary = "Reset a mower's blade",
    description = "Records a blade change: blade time since the last reset starts again from zero, \
        the open `blade_due` alert is cleared, and `blade_due` will be raised again once the \
        blade time crosses the mower's threshold.",
    security(("bearer" = ["write"])),
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
    responses(
        (status = 204, description = "The blade was reset."),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn reset_blade(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    store(&state)?
        .reset_blade(mower.id, state.clock.now())
        .await?;
    tracing::info!(mower_id = %mower.id, "Reset a mower's blade.");
    Ok(StatusCode::NO_CONTENT)
}

/// List events
#[utoipa::path(
    get,
    path = "/v1/events",
    tag = TAG,
    operation_id = "list_events",
    summary = "List events",
    description = "The events feed of the token's account (of its sites' mowers when the token is \
        limited to some sites), newest first. Filter by `mower_id` and `kind`; page with `limit` \
        and `cursor`. A `mower_id` that is not visible gives an empty page.",
    security(("bearer" = ["read"])),
    params(EventParams),
    responses(
        (status = 200, description = "A page of events.", body = EventPage),
        (status = 400, description = "A parameter or the cursor is not valid.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_events(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<EventParams>,
) -> Result<Json<EventPage>, ApiError> {
    let limit = page::limit(params.limit)?;
    let before = page::event_before(params.cursor.as_deref())?;
    let mowers = state
        .access
        .feed_mowers(&principal, params.mower_id.map(MowerId))
        .await?;
    let rows = if mowers.as_ref().is_some_and(Vec::is_empty) {
        Vec::new()
    } else {
        store(&state)?
            .events(&EventQuery {
                account_id: principal.account_id,
                mowers,
                kind: params.kind.map(EventKindDto::domain),
                before,
                limit: page::with_sentinel(limit),
            })
            .await?
    };
    let page = page::cut(rows, limit, |e| page::event_cursor(e.id));
    Ok(Json(EventPage {
        items: page.rows.into_iter().map(EventDto::from).collect(),
        truncated: page.truncated,
        limit: limit as u32,
        next_cursor: page.next_cursor,
    }))
}

/// List open alerts
#[utoipa::path(
    get,
    path = "/v1/alerts",
    tag = TAG,
    operation_id = "list_alerts",
    summary = "List open alerts",
    description = "The open alerts of the token's account (of its sites' mowers when the token is \
        limited to some sites): at most one per mower and kind, most severe first, then newest. \
        An alert closes when its condition clears (the error ends, the mower returns inside its \
        geofence, the battery is recharged to 30 %, the blade is reset, the mower reports again).",
    security(("bearer" = ["read"])),
    params(AlertParams),
    responses(
        (status = 200, description = "A page of open alerts.", body = AlertPage),
        (status = 400, description = "A parameter or the cursor is not valid.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_alerts(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<AlertParams>,
) -> Result<Json<AlertPage>, ApiError> {
    let limit = page::limit(params.limit)?;
    let after = page::alert_after(params.cursor.as_deref())?;
    let mowers = state
        .access
        .feed_mowers(&principal, params.mower_id.map(MowerId))
        .await?;
    let rows = if mowers.as_ref().is_some_and(Vec::is_empty) {
        Vec::new()
    } else {
        store(&state)?
            .open_alerts(&AlertQuery {
                account_id: principal.account_id,
                mowers,
                kind: params.kind.map(AlertKindDto::domain),
                after,
                limit: page::with_sentinel(limit),
            })
            .await?
    };
    let page = page::cut(rows, limit, |a| page::alert_cursor(&AlertCursor::of(a)));
    Ok(Json(AlertPage {
        items: page.rows.into_iter().map(AlertDto::from).collect(),
        truncated: page.truncated,
        limit: limit as u32,
        next_cursor: page.next_cursor,
    }))
}

/// Is the mower busy?
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/busy",
    tag = TAG,
    operation_id = "get_busy",
    summary = "Is the mower busy?",
    description = "The scheduler's busy check: whether the mower is on a run (or in error) and \
        cannot start one. The status follows activity changes at once and is refreshed at most \
        every 30 s, or after a move of 100 m, while the activity stays the same.",
    security(("bearer" = ["read"])),
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
    responses(
        (status = 200, description = "The mower's busy status.", body = BusyDto),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token (type `not-found`), or it \
            has not reported a state yet (type `no-state-yet`).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_busy(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<BusyDto>, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    let status = store(&state)?
        .busy(&[mower.id])
        .await?
        .into_iter()
        .next()
        .ok_or(ApiError::NoStateYet)?;
    Ok(Json(status.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_round_trip() {
        for kind in EventKind::ALL {
            assert_eq!(EventKindDto::of(kind).domain(), kind);
        }
    }
}
