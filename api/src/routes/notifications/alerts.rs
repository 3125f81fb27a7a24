//! The open alerts of the token's mowers, most severe first, paged by `page`.

use super::TAG;
use crate::auth::Reader;
use crate::dto::answers::FeedRefused;
use crate::dto::notifications::{AlertDto, AlertKindDto, AlertPage, AlertParams};
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::page::{self, List};
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use swath_application::{AlertCursor, AlertQuery};
use swath_domain::MowerId;

/// List open alerts
#[utoipa::path(
    get,
    path = "/v1/alerts",
    tag = TAG,
    description = "The open alerts of the token's account (of its sites' mowers when the token is \
        limited to some sites): at most one per mower and kind, most severe first, then newest. \
        An alert closes when its condition clears (the error ends, the mower returns inside its \
        geofence, the battery is recharged to 30 %, the blade is reset, the mower reports again).",
    security(("bearer" = ["read"])),
    params(AlertParams),
    responses(
        (status = 200, description = "A page of open alerts.", body = AlertPage),
        FeedRefused,
    ),
)]
pub async fn list_alerts(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<AlertParams>,
) -> Result<Json<AlertPage>, ApiError> {
    let (ask, after) = page::ask(List::Alerts, params.limit, params.cursor.as_deref())?;
    let query = AlertQuery {
        account_id: principal.account_id,
        mowers: None,
        kind: params.kind.map(AlertKindDto::domain),
        after,
        limit: ask.fetch(),
    };
    let only = params.mower_id.map(MowerId);
    let rows = state
        .mower_reads
        .open_alerts(&principal, only, query)
        .await?;
    Ok(Json(ask.page(rows, AlertCursor::of, AlertDto::from)))
}
