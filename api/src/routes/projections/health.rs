//! `GET /v1/live/health`: the health wall.

use super::{
    card_fields, live_answer, live_site, operator_dto, LiveNotModified, LiveSite, OperatorOnDuty,
    TAG,
};
use crate::auth::Reader;
use crate::error::ApiError;
use crate::routes::Revalidation;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::projections::{HealthSnapshot, HealthStatus};
use utoipa::ToSchema;
use uuid::Uuid;

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
#[schema(as = HealthStatus)]
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
#[schema(as = HealthMower)]
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
#[schema(as = HealthSite)]
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

impl HealthWall {
    /// The health wall of a snapshot taken at `generated_at`.
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

/// The health wall
#[utoipa::path(
    get,
    path = "/v1/live/health",
    tag = TAG,
    description = "A bounded snapshot of your mowers' health: the first 16 sites visible to the \
        token, each with its first 32 mowers, each with a status computed over all of its open \
        alerts (never a window of them), its blade wear and its operator on duty. Every list \
        carries `truncated` and `limit`. \
        Poll it with `If-None-Match`: the answer is `304 Not Modified` while nothing in it but \
        `generated_at` changed.",
    security(("bearer" = ["read"])),
    params(Revalidation),
    responses(
        (status = 200, description = "The health wall.", body = HealthWall,
            headers(
                ("ETag" = String, description = "The entity tag of this document, over all of it but \
                    `generated_at`."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        LiveNotModified,
    ),
)]
pub async fn live_health(
    Reader(principal): Reader,
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    live_answer::<HealthWall>(&state, &principal, &headers).await
}

live_document!(HealthWall: HealthSnapshot, read by health, tagged over sites: HealthSiteList);
