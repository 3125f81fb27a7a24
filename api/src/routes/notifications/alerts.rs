//! The open alerts of the token's mowers, most severe first, paged by `page`.

use super::TAG;
use crate::auth::Reader;
use crate::error::{ApiError, Problem};
use crate::extract::ApiQuery;
use crate::page;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::ports::{AlertCursor, AlertQuery};
use swath_domain::watch::{self as rules, AlertKind};
use swath_domain::MowerId;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// What an alert is about. One alert of a kind may be open per mower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = AlertKind)]
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

    /// The document's kind of a domain alert kind (every view of alerts names them so).
    pub(crate) fn of(kind: AlertKind) -> Self {
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
#[schema(as = Severity)]
pub enum SeverityDto {
    Critical,
    High,
    Normal,
    Low,
}

impl SeverityDto {
    /// The document's severity of a domain severity.
    pub(crate) fn of(severity: rules::Severity) -> Self {
        match severity {
            rules::Severity::Critical => SeverityDto::Critical,
            rules::Severity::High => SeverityDto::High,
            rules::Severity::Normal => SeverityDto::Normal,
            rules::Severity::Low => SeverityDto::Low,
        }
    }
}

/// An open alert: raised by an event, open until the condition clears.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Alert)]
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
            severity: SeverityDto::of(a.severity),
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
    /// Where the page starts: the `next_cursor` of the previous page, unchanged. Absent (or
    /// empty) for the first page.
    pub cursor: Option<String>,
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
    let query = AlertQuery {
        account_id: principal.account_id,
        mowers: None,
        kind: params.kind.map(AlertKindDto::domain),
        after,
        limit: page::with_sentinel(limit),
    };
    let only = params.mower_id.map(MowerId);
    let rows = state
        .mower_data
        .open_alerts(&principal, only, query)
        .await?;
    let page = page::cut(rows, limit, |a| page::alert_cursor(&AlertCursor::of(a)));
    Ok(Json(AlertPage {
        items: page.rows.into_iter().map(AlertDto::from).collect(),
        truncated: page.truncated,
        limit: limit as u32,
        next_cursor: page.next_cursor,
    }))
}
