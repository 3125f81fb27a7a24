//! The scheduler's busy check: whether a mower is on a run (or in error) and cannot start one.

use super::TAG;
use crate::auth::Reader;
use crate::error::{ApiError, Problem};
use crate::extract::ApiPath;
use crate::routes::MowerPath;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::watch::busy::{is_busy, BusyStatus};
use swath_domain::MowerId;
use utoipa::ToSchema;
use uuid::Uuid;

/// The scheduler's view of a mower: busy (on a run or in error) or free to start one.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Busy)]
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
    params(MowerPath),
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
    let status = state
        .mower_data
        .busy(&principal, MowerId(id))
        .await?
        .ok_or(ApiError::NoStateYet)?;
    Ok(Json(status.into()))
}
