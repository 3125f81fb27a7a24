//! The events feed: the derived events of the token's mowers, newest first, paged by `page`.

use super::TAG;
use crate::auth::Reader;
use crate::dto::answers::FeedRefused;
use crate::dto::notifications::{EventDto, EventKindDto, EventPage, EventParams};
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::page::{self, List};
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
    description = "The events feed of the token's account (of its sites' mowers when the token is \
        limited to some sites), newest first. Filter by `mower_id` and `kind`; page with `limit` \
        and `cursor`. A `mower_id` that is not visible gives an empty page.",
    security(("bearer" = ["read"])),
    params(EventParams),
    responses(
        (status = 200, description = "A page of events.", body = EventPage),
        FeedRefused,
    ),
)]
pub async fn list_events(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<EventParams>,
) -> Result<Json<EventPage>, ApiError> {
    let (ask, before) = page::ask(List::Events, params.limit, params.cursor.as_deref())?;
    let query = EventQuery {
        account_id: principal.account_id,
        mowers: None,
        kind: params.kind.map(EventKindDto::domain),
        before,
        limit: ask.fetch(),
    };
    let only = params.mower_id.map(MowerId);
    let rows = state.mower_data.events(&principal, only, query).await?;
    Ok(Json(ask.page(rows, |e| e.id, EventDto::from)))
}
