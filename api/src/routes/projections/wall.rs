//! `GET /v1/live/wall`: the site wall.

use super::fleet::{mower_list, LiveMowerList};
use super::{live_answer, live_site, LiveNotModified, LiveSite, TAG};
use crate::auth::Reader;
use crate::error::ApiError;
use crate::routes::Revalidation;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::projections::WallSnapshot;
use utoipa::ToSchema;

/// A site on the site wall, with its mowers in the field.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = WallSite)]
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

impl SiteWall {
    /// The wall of a snapshot taken at `generated_at`.
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

/// The site wall
#[utoipa::path(
    get,
    path = "/v1/live/wall",
    tag = TAG,
    description = "A bounded snapshot for a display wall: the first 16 sites visible to the token, \
        each with its first 32 mowers in the field (reported, and neither docked, charging nor \
        offline; filtered before the cut), each with its 32 most urgent open alerts and its \
        operator on duty. Every list carries `truncated` and `limit`. \
        Poll it with `If-None-Match`: the answer is `304 Not Modified` while nothing in it but \
        `generated_at` changed.",
    security(("bearer" = ["read"])),
    params(Revalidation),
    responses(
        (status = 200, description = "The site wall.", body = SiteWall,
            headers(
                ("ETag" = String, description = "The entity tag of this document, over all of it but \
                    `generated_at`."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            ), example = json!({
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
        LiveNotModified,
    ),
)]
pub async fn live_wall(
    Reader(principal): Reader,
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    live_answer::<SiteWall>(&state, &principal, &headers).await
}

live_document!(SiteWall: WallSnapshot, read by wall, tagged over sites: WallSiteList);
