//! The scheduler's busy check: whether a mower is on a run (or in error) and cannot start one.

use super::TAG;
use crate::auth::Reader;
use crate::dto::answers::StateById;
use crate::dto::notifications::BusyDto;
use crate::dto::params::MowerPath;
use crate::error::ApiError;
use crate::extract::ApiPath;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use swath_domain::MowerId;
use uuid::Uuid;

/// Is the mower busy?
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/busy",
    tag = TAG,
    description = "The scheduler's busy check: whether the mower is on a run (or in error) and \
        cannot start one. The status follows activity changes at once and is refreshed at most \
        every 30 s, or after a move of 100 m, while the activity stays the same.",
    security(("bearer" = ["read"])),
    params(MowerPath),
    responses(
        (status = 200, description = "The mower's busy status.", body = BusyDto),
        StateById,
    ),
)]
pub async fn get_busy(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<BusyDto>, ApiError> {
    let status = state
        .mower_reads
        .busy(&principal, MowerId(id))
        .await?
        .ok_or(ApiError::NoStateYet)?;
    Ok(Json(status.into()))
}
