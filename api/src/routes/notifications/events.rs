//! The events feed: the derived events of the token's mowers, newest first, paged by `page`.

use super::TAG;
use crate::auth::Reader;
use crate::csv::csv_page;
use crate::dto::answers::{FeedRefused, NotAcceptable};
use crate::dto::exports::EVENTS_CSV_EXAMPLE;
use crate::dto::notifications::{EventDto, EventKindDto, EventPage, EventParams};
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::negotiate::{JsonOrCsv, Representation};
use crate::page::{self, List};
use crate::state::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_application::EventQuery;
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
        (status = 200, description = "A page of events: JSON, or CSV on `Accept: text/csv` (the \
            same events, each event's `details` as its JSON object in one cell; the next page's \
            cursor in the `Swath-Next-Cursor` header, absent on the last page).",
            content(
                (EventPage = "application/json"),
                (String = "text/csv", example = json!(EVENTS_CSV_EXAMPLE)),
            ),
            headers(("Swath-Next-Cursor" = String, description = "CSV only: the `cursor` of \
                the next page; absent on the last page."))),
        FeedRefused,
        NotAcceptable,
    ),
)]
pub async fn list_events(
    Reader(principal): Reader,
    JsonOrCsv(representation): JsonOrCsv,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<EventParams>,
) -> Result<Response, ApiError> {
    let (ask, before) = page::ask(List::Events, params.limit, params.cursor.as_deref())?;
    let query = EventQuery {
        account_id: principal.account_id,
        mowers: None,
        kind: params.kind.map(EventKindDto::domain),
        before,
        limit: ask.fetch(),
    };
    let only = params.mower_id.map(MowerId);
    let rows = state.mower_reads.events(&principal, only, query).await?;
    let page: EventPage = ask.page(rows, |e| e.id, EventDto::from);
    Ok(match representation {
        Representation::Csv => csv_page(&page.items, page.next_cursor.as_deref()),
        Representation::Json => Json(page).into_response(),
    })
}
