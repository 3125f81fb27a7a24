//! The events feed: the derived events of the token's mowers, newest first, paged by `page`.

use super::TAG;
use crate::auth::Reader;
use crate::dto::notifications::{EventDto, EventKindDto, EventPage, EventParams};
use crate::error::{ApiError, Problem};
use crate::extract::ApiQuery;
use crate::page;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use swath_application::ports::EventQuery;
use swath_domain::MowerId;

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
    let query = EventQuery {
        account_id: principal.account_id,
        mowers: None,
        kind: params.kind.map(EventKindDto::domain),
        before,
        limit: page::with_sentinel(limit),
    };
    let only = params.mower_id.map(MowerId);
    let rows = state.mower_data.events(&principal, only, query).await?;
    let page = page::cut(rows, limit, |e| page::event_cursor(e.id));
    Ok(Json(page.page::<EventPage>(limit, EventDto::from)))
}
