//! `GET /v1/live/fleet`: the fleet dashboard, and the mower and alert documents every live view
//! shows.

use super::{card_fields, live_answer, operator_dto, LiveNotModified, OperatorOnDuty, TAG};
use crate::auth::Reader;
use crate::dto::notifications::{AlertKindDto, SeverityDto};
use crate::error::ApiError;
use crate::routes::Revalidation;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::ports::AlertCard;
use swath_application::projections::{FleetSnapshot, LiveMower, Window};
use utoipa::ToSchema;
use uuid::Uuid;

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

/// A mower in a live view: its directory entry and latest state.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = LiveMower)]
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

fn alert_list(w: Window<AlertCard>) -> LiveAlertList {
    LiveAlertList {
        truncated: w.truncated,
        limit: w.limit as u32,
        items: w
            .items
            .into_iter()
            .map(|a| LiveAlert {
                id: a.id,
                kind: AlertKindDto::of(a.kind),
                severity: SeverityDto::of(a.severity),
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

pub(super) fn mower_list(w: Window<LiveMower>) -> LiveMowerList {
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

impl FleetDashboard {
    /// The dashboard of a snapshot taken at `generated_at`.
    pub fn of(s: FleetSnapshot, generated_at: DateTime<Utc>) -> Self {
        Self {
            generated_at,
            mowers: mower_list(s.mowers),
        }
    }
}

/// The fleet dashboard
#[utoipa::path(
    get,
    path = "/v1/live/fleet",
    tag = TAG,
    description = "A bounded snapshot of your fleet: the first 64 mowers visible to the token (by \
        display order, then name, then id), each with its latest activity, its 32 most urgent \
        open alerts and its operator on duty. Every list says whether it was cut (`truncated`) \
        and where (`limit`); the complete list of mowers is `GET /v1/mowers`. The cost of this \
        call does not grow with the fleet. \
        Poll it with `If-None-Match`: the answer is `304 Not Modified` while nothing in it but \
        `generated_at` changed.",
    security(("bearer" = ["read"])),
    params(Revalidation),
    responses(
        (status = 200, description = "The fleet dashboard.", body = FleetDashboard,
            headers(
                ("ETag" = String, description = "The entity tag of this document, over all of it but \
                    `generated_at`."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        LiveNotModified,
    ),
)]
pub async fn live_fleet(
    Reader(principal): Reader,
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    live_answer::<FleetDashboard>(&state, &principal, &headers).await
}

live_document!(FleetDashboard: FleetSnapshot, read by fleet, tagged over mowers: LiveMowerList);
