//! A mower's blade reset: blade time starts again from zero and the `blade_due` alert clears.

use super::TAG;
use crate::auth::Writer;
use crate::dto::answers::ById;
use crate::dto::params::MowerPath;
use crate::error::ApiError;
use crate::extract::ApiPath;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use swath_domain::MowerId;
use uuid::Uuid;

/// Reset a mower's blade
#[utoipa::path(
    post,
    path = "/v1/mowers/{id}/blade-reset",
    tag = TAG,
    description = "Records a blade change: blade time since the last reset starts again from zero, \
        the open `blade_due` alert is cleared (and the clear sent on `GET /v1/live/stream` as \
        an event `alert`), and `blade_due` will be raised again once the blade time crosses the \
        mower's threshold.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    responses(
        (status = 204, description = "The blade was reset."),
        ById<MowerPath>,
    ),
)]
pub async fn reset_blade(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    state
        .mower_settings
        .reset_blade(&principal, MowerId(id))
        .await?;
    tracing::info!(mower_id = %id, "Reset a mower's blade.");
    Ok(StatusCode::NO_CONTENT)
}
