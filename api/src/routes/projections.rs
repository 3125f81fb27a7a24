//! The bounded live projections as JSON (`GET /v1/live/fleet`, `/v1/live/wall`,
//! `/v1/live/health`) and the operator assignments they rank (`/v1/mowers/{id}/assignments`).
//!
//! The answers are snapshot documents built from the use case's typed snapshots (never store
//! rows). Every list, at every level, is `{items, truncated, limit}`: `truncated` says that at
//! least one more visible item exists beyond `limit` (found with one sentinel row, never by
//! counting). A live view is a monitoring window, not an inventory: the complete lists are the
//! paginated `/v1/mowers` and `/v1/sites`.

use crate::auth::{Reader, Writer};
use crate::error::{ApiError, Problem, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::routes::notifications::{AlertKindDto, SeverityDto};
use crate::state::{AppState, LiveViews};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use swath_application::ports::{
    AlertCard, Assignment, AssignmentError, MowerCard, Priority, ProjectionError, SiteCard,
    MAX_ASSIGNMENTS_PER_MOWER, MAX_OPERATOR_CHARS,
};
use swath_application::projections::{
    FleetSnapshot, HealthSnapshot, HealthStatus, LiveMower, WallSnapshot, Window,
};
use swath_domain::watch::{AlertKind, Severity};
use swath_domain::MowerId;
use utoipa::ToSchema;
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "projections";

impl From<ProjectionError> for ApiError {
    fn from(e: ProjectionError) -> Self {
        match e {
            ProjectionError::Unavailable(_) => ApiError::Unavailable(e.to_string()),
            ProjectionError::Corrupt(_) => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<AssignmentError> for ApiError {
    fn from(e: AssignmentError) -> Self {
        match e {
            AssignmentError::Unavailable(_) => ApiError::Unavailable(e.to_string()),
            AssignmentError::Limit(detail) => ApiError::Conflict(detail),
            AssignmentError::Conflict(_) => ApiError::Conflict(
                "An assignment with this id exists already; try again.".to_owned(),
            ),
            // The mower was deleted between the visibility check and the insert.
            AssignmentError::NotFound(_) => ApiError::NotFound(Resource::Mower),
        }
    }
}

/// The live views, or `503` when the service was started without them.
pub(crate) fn views(state: &AppState) -> Result<&LiveViews, ApiError> {
    state
        .projections
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no live projections are configured".into()))
}

fn kind_dto(kind: AlertKind) -> AlertKindDto {
    match kind {
        AlertKind::Error => AlertKindDto::Error,
        AlertKind::Geofence => AlertKindDto::Geofence,
        AlertKind::BatteryLow => AlertKindDto::BatteryLow,
        AlertKind::BladeDue => AlertKindDto::BladeDue,
        AlertKind::Offline => AlertKindDto::Offline,
    }
}

fn severity_dto(severity: Severity) -> SeverityDto {
    match severity {
        Severity::Critical => SeverityDto::Critical,
        Severity::High => SeverityDto::High,
        Severity::Normal => SeverityDto::Normal,
        Severity::Low => SeverityDto::Low,
    }
}

/// An open alert of a mower in a live view.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveAlert {
    /// The alert's id (the id of the event that raised it).
    pub id: Uuid,
    /// What it is about.
    pub kind: AlertKindDto,
    /// How urgent it is.
    pub severity: SeverityDto,
    /// When it was raised.
    pub raised_at: DateTime<Utc>,
    /// The error code of an `error` alert.
    #[schema(required = true)]
    pub code: Option<String>,
}

/// A mower's most urgent open alerts: at most `limit`, by severity (critical first), then
/// `raised_at` and id, newest first.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveAlertList {
    /// The alerts inside the window.
    pub items: Vec<LiveAlert>,
    /// Whether the mower has more open alerts than shown.
    pub truncated: bool,
    /// The most alerts shown per mower (32).
    #[schema(example = 32)]
    pub limit: u32,
}

/// The operator on duty of a mower: its winning active assignment (priority critical → low, then
/// the most recently updated, then the highest id).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct OperatorOnDuty {
    /// The assignment's id.
    pub assignment_id: Uuid,
    /// The operator's name.
    #[schema(example = "Robin")]
    pub operator: String,
    /// The assignment's priority.
    pub priority: PriorityDto,
    /// When the assignment was last changed.
    pub updated_at: DateTime<Utc>,
}

/// How an assignment ranks: the active assignment of the highest priority is on duty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PriorityDto {
    Critical,
    High,
    Normal,
    Low,
}

impl PriorityDto {
    fn of(p: Priority) -> Self {
        match p {
            Priority::Critical => PriorityDto::Critical,
            Priority::High => PriorityDto::High,
            Priority::Normal => PriorityDto::Normal,
            Priority::Low => PriorityDto::Low,
        }
    }

    fn domain(self) -> Priority {
        match self {
            PriorityDto::Critical => Priority::Critical,
            PriorityDto::High => Priority::High,
            PriorityDto::Normal => Priority::Normal,
            PriorityDto::Low => Priority::Low,
        }
    }
}

fn operator_dto(a: &Option<Assignment>) -> Option<OperatorOnDuty> {
    a.as_ref().map(|a| OperatorOnDuty {
        assignment_id: a.id,
        operator: a.operator.clone(),
        priority: PriorityDto::of(a.priority),
        updated_at: a.updated_at,
    })
}

/// A mower in a live view: its directory entry and latest state.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveMowerDto {
    /// The mower's id.
    pub id: Uuid,
    /// Its site.
    pub site_id: Uuid,
    /// Its name.
    #[schema(example = "Lawn 1")]
    pub name: String,
    /// Its model.
    #[schema(example = "M1")]
    pub model: String,
    /// Where it sorts (ascending, then name, then id).
    pub display_order: i32,
    /// The latest reported activity (`mowing`, `docked`, …); `null` before the first state.
    #[schema(required = true, example = "mowing")]
    pub activity: Option<String>,
    /// The latest reported charge, 0 to 100.
    #[schema(required = true)]
    pub battery_percent: Option<u8>,
    /// When the latest state was observed.
    #[schema(required = true)]
    pub observed_at: Option<DateTime<Utc>>,
    /// When Swath received the latest state.
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Whether the mower is offline (silent for the offline period).
    pub offline: bool,
    /// The operator on duty; `null` when no active assignment exists.
    #[schema(required = true)]
    pub operator: Option<OperatorOnDuty>,
    /// Its most urgent open alerts.
    pub alerts: LiveAlertList,
}

fn card_fields(m: &MowerCard) -> (Option<String>, Option<u8>) {
    (m.activity.map(|a| a.as_str().to_owned()), m.battery_percent)
}

fn alert_list(w: Window<AlertCard>) -> LiveAlertList {
    LiveAlertList {
        truncated: w.truncated,
        limit: w.limit as u32,
        items: w
            .items
            .into_iter()
            .map(|a| LiveAlert {
                id: a.id,
                kind: kind_dto(a.kind),
                severity: severity_dto(a.severity),
                raised_at: a.raised_at,
                code: a.code,
            })
            .collect(),
    }
}

fn live_mower(m: LiveMower) -> LiveMowerDto {
    let (activity, battery_percent) = card_fields(&m.mower);
    LiveMowerDto {
        id: m.mower.id.0,
        site_id: m.mower.site_id.0,
        name: m.mower.name,
        model: m.mower.model,
        display_order: m.mower.display_order,
        activity,
        battery_percent,
        observed_at: m.mower.observed_at,
        last_seen_at: m.mower.last_seen_at,
        offline: m.mower.offline,
        operator: operator_dto(&m.operator),
        alerts: alert_list(m.alerts),
    }
}

/// Mowers of a live view: at most `limit`, by display order, then name, then id.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveMowerList {
    /// The mowers inside the window.
    pub items: Vec<LiveMowerDto>,
    /// Whether more visible mowers exist than shown.
    pub truncated: bool,
    /// The most mowers shown (64 on the fleet dashboard, 32 per site on the site wall).
    #[schema(example = 64)]
    pub limit: u32,
}

fn mower_list(w: Window<LiveMower>) -> LiveMowerList {
    LiveMowerList {
        truncated: w.truncated,
        limit: w.limit as u32,
        items: w.items.into_iter().map(live_mower).collect(),
    }
}

/// The fleet dashboard: your first mowers, each with its most urgent open alerts and its operator
/// on duty.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct FleetDashboard {
    /// When the snapshot was taken.
    pub generated_at: DateTime<Utc>,
    /// The mowers.
    pub mowers: LiveMowerList,
}

/// A site of a wall.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveSite {
    /// The site's id.
    pub id: Uuid,
    /// Its name.
    #[schema(example = "Riverside park")]
    pub name: String,
    /// Its IANA time zone.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: String,
    /// Where it sorts (ascending, then name, then id).
    pub display_order: i32,
}

fn live_site(s: SiteCard) -> LiveSite {
    LiveSite {
        id: s.id.0,
        name: s.name,
        time_zone: s.time_zone,
        display_order: s.display_order,
    }
}

/// A site on the site wall, with its mowers in the field.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct WallSiteDto {
    /// The site.
    pub site: LiveSite,
    /// Its mowers in the field (reported, and neither docked, charging nor offline), filtered
    /// before the window is cut.
    pub mowers: LiveMowerList,
}

/// Sites of a wall: at most `limit`, by display order, then name, then id.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct WallSiteList {
    /// The sites inside the window.
    pub items: Vec<WallSiteDto>,
    /// Whether more visible sites exist than shown.
    pub truncated: bool,
    /// The most sites shown (16).
    #[schema(example = 16)]
    pub limit: u32,
}

/// The site wall: your first sites, each with its mowers in the field.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SiteWall {
    /// When the snapshot was taken.
    pub generated_at: DateTime<Utc>,
    /// The sites.
    pub sites: WallSiteList,
}

/// Open alerts of a mower by severity: all of them, not a window.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SeverityCounts {
    /// Open critical alerts.
    pub critical: u32,
    /// Open high alerts.
    pub high: u32,
    /// Open normal alerts.
    pub normal: u32,
    /// Open low alerts.
    pub low: u32,
}

/// How a mower is: the severity of the most severe of all its open alerts, or `ok`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatusDto {
    Ok,
    Low,
    Normal,
    High,
    Critical,
}

impl HealthStatusDto {
    fn of(s: HealthStatus) -> Self {
        match s {
            HealthStatus::Ok => HealthStatusDto::Ok,
            HealthStatus::Low => HealthStatusDto::Low,
            HealthStatus::Normal => HealthStatusDto::Normal,
            HealthStatus::High => HealthStatusDto::High,
            HealthStatus::Critical => HealthStatusDto::Critical,
        }
    }
}

/// A mower on the health wall.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthMowerDto {
    /// The mower's id.
    pub id: Uuid,
    /// Its name.
    #[schema(example = "Lawn 1")]
    pub name: String,
    /// Its model.
    #[schema(example = "M1")]
    pub model: String,
    /// Where it sorts (ascending, then name, then id).
    pub display_order: i32,
    /// The latest reported activity; `null` before the first state.
    #[schema(required = true, example = "docked")]
    pub activity: Option<String>,
    /// The latest reported charge, 0 to 100.
    #[schema(required = true)]
    pub battery_percent: Option<u8>,
    /// When Swath received the latest state.
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Whether the mower is offline.
    pub offline: bool,
    /// The most severe of all its open alerts, or `ok`.
    pub status: HealthStatusDto,
    /// All its open alerts, counted by severity.
    pub open_alerts: SeverityCounts,
    /// Blade time since the last blade reset, in seconds.
    pub blade_since_reset_seconds: f64,
    /// Blade time after which the blade is due, in seconds.
    pub blade_threshold_seconds: f64,
    /// Errors since the mower first reported.
    pub error_count: i64,
    /// The operator on duty; `null` when no active assignment exists.
    #[schema(required = true)]
    pub operator: Option<OperatorOnDuty>,
}

/// Mowers of a site on the health wall: at most `limit`, by display order, then name, then id.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthMowerList {
    /// The mowers inside the window.
    pub items: Vec<HealthMowerDto>,
    /// Whether the site has more visible mowers than shown.
    pub truncated: bool,
    /// The most mowers shown per site (32).
    #[schema(example = 32)]
    pub limit: u32,
}

/// A site on the health wall.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthSiteDto {
    /// The site.
    pub site: LiveSite,
    /// Its mowers, each with a health summary.
    pub mowers: HealthMowerList,
}

/// Sites of the health wall: at most `limit`, by display order, then name, then id.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthSiteList {
    /// The sites inside the window.
    pub items: Vec<HealthSiteDto>,
    /// Whether more visible sites exist than shown.
    pub truncated: bool,
    /// The most sites shown (16).
    #[schema(example = 16)]
    pub limit: u32,
}

/// The health wall: your first sites, each with its mowers' health.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthWall {
    /// When the snapshot was taken.
    pub generated_at: DateTime<Utc>,
    /// The sites.
    pub sites: HealthSiteList,
}

impl FleetDashboard {
    pub fn of(s: FleetSnapshot, generated_at: DateTime<Utc>) -> Self {
        Self {
            generated_at,
            mowers: mower_list(s.mowers),
        }
    }
}

impl SiteWall {
    pub fn of(s: WallSnapshot, generated_at: DateTime<Utc>) -> Self {
        Self {
            generated_at,
            sites: WallSiteList {
                truncated: s.sites.truncated,
                limit: s.sites.limit as u32,
                items: s
                    .sites
                    .items
                    .into_iter()
                    .map(|w| WallSiteDto {
                        site: live_site(w.site),
                        mowers: mower_list(w.mowers),
                    })
                    .collect(),
            },
        }
    }
}

impl HealthWall {
    pub fn of(s: HealthSnapshot, generated_at: DateTime<Utc>) -> Self {
        Self {
            generated_at,
            sites: HealthSiteList {
                truncated: s.sites.truncated,
                limit: s.sites.limit as u32,
                items: s
                    .sites
                    .items
                    .into_iter()
                    .map(|w| HealthSiteDto {
                        site: live_site(w.site),
                        mowers: HealthMowerList {
                            truncated: w.mowers.truncated,
                            limit: w.mowers.limit as u32,
                            items: w
                                .mowers
                                .items
                                .into_iter()
                                .map(|m| {
                                    let (activity, battery_percent) = card_fields(&m.mower);
                                    HealthMowerDto {
                                        id: m.mower.id.0,
                                        name: m.mower.name,
                                        model: m.mower.model,
                                        display_order: m.mower.display_order,
                                        activity,
                                        battery_percent,
                                        last_seen_at: m.mower.last_seen_at,
                                        offline: m.mower.offline,
                                        status: HealthStatusDto::of(m.status),
                                        open_alerts: SeverityCounts {
                                            critical: m.health.critical,
                                            high: m.health.high,
                                            normal: m.health.normal,
                                            low: m.health.low,
                                        },
                                        blade_since_reset_seconds: m.health.blade_since_reset_ms
                                            as f64
                                            / 1000.0,
                                        blade_threshold_seconds: m.health.blade_threshold_ms as f64
                                            / 1000.0,
                                        error_count: m.health.error_count,
                                        operator: operator_dto(&m.operator),
                                    }
                                })
                                .collect(),
                        },
                    })
                    .collect(),
            },
        }
    }
}

/// The fleet dashboard
#[utoipa::path(
    get,
    path = "/v1/live/fleet",
    tag = TAG,
    operation_id = "live_fleet",
    summary = "The fleet dashboard",
    description = "A bounded snapshot of your fleet: the first 64 mowers visible to the token (by \
        display order, then name, then id), each with its latest activity, its 32 most urgent \
        open alerts and its operator on duty. Every list says whether it was cut (`truncated`) \
        and where (`limit`); the complete list of mowers is `GET /v1/mowers`. The cost of this \
        call does not grow with the fleet.",
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The fleet dashboard.", body = FleetDashboard),
    ),
)]
pub async fn live_fleet(
    Reader(principal): Reader,
    State(state): State<AppState>,
) -> Result<Json<FleetDashboard>, ApiError> {
    let snapshot = views(&state)?.projections.fleet(&principal).await?;
    Ok(Json(FleetDashboard::of(snapshot, state.clock.now())))
}

/// The site wall
#[utoipa::path(
    get,
    path = "/v1/live/wall",
    tag = TAG,
    operation_id = "live_wall",
    summary = "The site wall",
    description = "A bounded snapshot for a display wall: the first 16 sites visible to the token, \
        each with its first 32 mowers in the field (reported, and neither docked, charging nor \
        offline; filtered before the cut), each with its 32 most urgent open alerts and its \
        operator on duty. Every list carries `truncated` and `limit`.",
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The site wall.", body = SiteWall, example = json!({
            "generated_at": "2026-06-01T12:00:05Z",
            "sites": {"items": [{
                "site": {"id": "0190a2b4-0000-7000-8000-000000000001", "name": "Riverside park",
                    "time_zone": "Europe/Berlin", "display_order": 0},
                "mowers": {"items": [{
                    "id": "0190a2b4-0000-7000-8000-000000000002",
                    "site_id": "0190a2b4-0000-7000-8000-000000000001", "name": "Lawn 1",
                    "model": "M1", "display_order": 0, "activity": "mowing", "battery_percent": 81,
                    "observed_at": "2026-06-01T12:00:00Z", "last_seen_at": "2026-06-01T12:00:01Z",
                    "offline": false,
                    "operator": {"assignment_id": "0190a2b4-0000-7000-8000-000000000003",
                        "operator": "Robin", "priority": "high",
                        "updated_at": "2026-06-01T08:00:00Z"},
                    "alerts": {"items": [{"id": "0190a2b4-0000-7000-8000-000000000004",
                        "kind": "battery_low", "severity": "normal",
                        "raised_at": "2026-06-01T11:58:00Z", "code": null}],
                        "truncated": false, "limit": 32}}],
                    "truncated": true, "limit": 32}}],
                "truncated": false, "limit": 16}})),
    ),
)]
pub async fn live_wall(
    Reader(principal): Reader,
    State(state): State<AppState>,
) -> Result<Json<SiteWall>, ApiError> {
    let snapshot = views(&state)?.projections.wall(&principal).await?;
    Ok(Json(SiteWall::of(snapshot, state.clock.now())))
}

/// The health wall
#[utoipa::path(
    get,
    path = "/v1/live/health",
    tag = TAG,
    operation_id = "live_health",
    summary = "The health wall",
    description = "A bounded snapshot of your mowers' health: the first 16 sites visible to the \
        token, each with its first 32 mowers, each with a status computed over all of its open \
        alerts (never a window of them), its blade wear and its operator on duty. Every list \
        carries `truncated` and `limit`.",
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The health wall.", body = HealthWall),
    ),
)]
pub async fn live_health(
    Reader(principal): Reader,
    State(state): State<AppState>,
) -> Result<Json<HealthWall>, ApiError> {
    let snapshot = views(&state)?.projections.health(&principal).await?;
    Ok(Json(HealthWall::of(snapshot, state.clock.now())))
}

/// An operator assignment of a mower.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AssignmentDto {
    /// The assignment's id.
    pub id: Uuid,
    /// The mower.
    pub mower_id: Uuid,
    /// The operator's name.
    #[schema(example = "Robin")]
    pub operator: String,
    /// Its priority: the active assignment of the highest priority is on duty.
    pub priority: PriorityDto,
    /// Whether it can be on duty.
    pub active: bool,
    /// When it was last changed (ties of priority go to the most recent).
    pub updated_at: DateTime<Utc>,
}

impl From<Assignment> for AssignmentDto {
    fn from(a: Assignment) -> Self {
        Self {
            id: a.id,
            mower_id: a.mower_id.0,
            operator: a.operator,
            priority: PriorityDto::of(a.priority),
            active: a.active,
            updated_at: a.updated_at,
        }
    }
}

/// The assignments of a mower: active first, then in ranking order (the first is on duty).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AssignmentList {
    /// Every assignment of the mower (at most 64).
    pub items: Vec<AssignmentDto>,
    /// Always `false`: a mower has at most `limit` assignments.
    pub truncated: bool,
    /// The most assignments a mower may have (64).
    #[schema(example = 64)]
    pub limit: u32,
}

/// An assignment to add, or the new values of one.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AssignmentBody {
    /// The operator's name, 1 to 128 characters.
    #[schema(example = "Robin")]
    pub operator: String,
    /// `critical`, `high`, `normal` or `low`.
    pub priority: PriorityDto,
    /// Whether it can be on duty (default `true`).
    #[serde(default = "active_default")]
    #[schema(default = true)]
    pub active: bool,
}

fn active_default() -> bool {
    true
}

fn check_operator(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_OPERATOR_CHARS {
        return Err(ApiError::Validation(format!(
            "`operator` must be 1 to {MAX_OPERATOR_CHARS} characters."
        )));
    }
    Ok(name.to_owned())
}

const MOWER_PARAM: &str = "The mower's id.";

/// List a mower's assignments
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/assignments",
    tag = TAG,
    operation_id = "list_assignments",
    summary = "List a mower's operator assignments",
    description = "Every operator assignment of the mower: active ones first, in the order that \
        decides who is on duty (priority critical → low, then the most recently updated, then \
        the highest id).",
    security(("bearer" = ["read"])),
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
    responses(
        (status = 200, description = "The assignments.", body = AssignmentList),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_assignments(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<AssignmentList>, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    let items = views(&state)?
        .assignments
        .assignments(mower.account_id, mower.id)
        .await?;
    Ok(Json(AssignmentList {
        items: items.into_iter().map(AssignmentDto::from).collect(),
        truncated: false,
        limit: MAX_ASSIGNMENTS_PER_MOWER as u32,
    }))
}

/// Assign an operator to a mower
#[utoipa::path(
    post,
    path = "/v1/mowers/{id}/assignments",
    tag = TAG,
    operation_id = "create_assignment",
    summary = "Assign an operator to a mower",
    description = "Adds an operator assignment. A mower may have several active assignments; the \
        live views show the one on duty. At most 64 per mower.",
    security(("bearer" = ["write"])),
    params(("id" = Uuid, Path, description = MOWER_PARAM)),
    request_body = AssignmentBody,
    responses(
        (status = 201, description = "The assignment was added.", body = AssignmentDto),
        (status = 404, description = "No such mower is visible to this token.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The mower has 64 assignments already.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The body is not a valid assignment.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn create_assignment(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<AssignmentBody>,
) -> Result<Response, ApiError> {
    let mower = state.access.visible_mower(&principal, MowerId(id)).await?;
    let assignment = Assignment {
        id: Uuid::now_v7(),
        mower_id: mower.id,
        account_id: mower.account_id,
        operator: check_operator(&body.operator)?,
        priority: body.priority.domain(),
        active: body.active,
        // Microseconds: what every store keeps, so that rankings agree.
        updated_at: state.clock.now().trunc_subsecs(6),
    };
    views(&state)?
        .assignments
        .create_assignment(assignment.clone())
        .await?;
    let location = format!("/v1/mowers/{}/assignments/{}", mower.id, assignment.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(AssignmentDto::from(assignment)),
    )
        .into_response())
}

/// The path of one assignment.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct AssignmentPath {
    id: Uuid,
    assignment_id: Uuid,
}

/// Change an assignment
#[utoipa::path(
    put,
    path = "/v1/mowers/{id}/assignments/{assignment_id}",
    tag = TAG,
    operation_id = "update_assignment",
    summary = "Change an operator assignment",
    description = "Replaces the operator, priority and active flag of an assignment; its \
        `updated_at` becomes now.",
    security(("bearer" = ["write"])),
    params(
        ("id" = Uuid, Path, description = MOWER_PARAM),
        ("assignment_id" = Uuid, Path, description = "The assignment's id."),
    ),
    request_body = AssignmentBody,
    responses(
        (status = 200, description = "The assignment as stored.", body = AssignmentDto),
        (status = 404, description = "No such mower or assignment is visible to this token.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The body is not a valid assignment.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn update_assignment(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(path): ApiPath<AssignmentPath>,
    ApiJson(body): ApiJson<AssignmentBody>,
) -> Result<Json<AssignmentDto>, ApiError> {
    let mower = state
        .access
        .visible_mower(&principal, MowerId(path.id))
        .await?;
    let assignment = Assignment {
        id: path.assignment_id,
        mower_id: mower.id,
        account_id: mower.account_id,
        operator: check_operator(&body.operator)?,
        priority: body.priority.domain(),
        active: body.active,
        updated_at: state.clock.now().trunc_subsecs(6),
    };
    if !views(&state)?
        .assignments
        .update_assignment(assignment.clone())
        .await?
    {
        return Err(ApiError::NotFound(Resource::Assignment));
    }
    Ok(Json(assignment.into()))
}

/// Remove an assignment
#[utoipa::path(
    delete,
    path = "/v1/mowers/{id}/assignments/{assignment_id}",
    tag = TAG,
    operation_id = "delete_assignment",
    summary = "Remove an operator assignment",
    description = "Deletes an operator assignment; if it was on duty, the next one in the ranking \
        takes over.",
    security(("bearer" = ["write"])),
    params(
        ("id" = Uuid, Path, description = MOWER_PARAM),
        ("assignment_id" = Uuid, Path, description = "The assignment's id."),
    ),
    responses(
        (status = 204, description = "The assignment was removed."),
        (status = 404, description = "No such mower or assignment is visible to this token.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn delete_assignment(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(path): ApiPath<AssignmentPath>,
) -> Result<StatusCode, ApiError> {
    let mower = state
        .access
        .visible_mower(&principal, MowerId(path.id))
        .await?;
    if !views(&state)?
        .assignments
        .delete_assignment(mower.account_id, mower.id, path.assignment_id)
        .await?
    {
        return Err(ApiError::NotFound(Resource::Assignment));
    }
    Ok(StatusCode::NO_CONTENT)
}
