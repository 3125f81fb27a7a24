//! The events feed: the derived events of the token's mowers, newest first, paged by `page`.

use super::event_details::EventDetails;
use super::TAG;
use crate::auth::Reader;
use crate::error::{ApiError, Problem};
use crate::extract::ApiQuery;
use crate::page;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use swath_application::ports::EventQuery;
use swath_domain::watch::{self as rules, EventKind};
use swath_domain::MowerId;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// What an event is about. `error_*`, `geofence_*`, `battery_low`, `mowing_*` and `*_online`
/// come from the watcher; `blade_due` and `zone_*` from ingestion; `went_offline` from the
/// offline sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = EventKind)]
pub enum EventKindDto {
    ErrorRaised,
    ErrorCleared,
    GeofenceLeft,
    GeofenceReturned,
    BatteryLow,
    MowingStarted,
    MowingFinished,
    BladeDue,
    ZoneEntered,
    ZoneLeft,
    WentOffline,
    CameOnline,
}

impl EventKindDto {
    fn domain(self) -> EventKind {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        EventKind::parse(&name).unwrap_or(EventKind::ErrorRaised)
    }

    fn of(kind: EventKind) -> Self {
        serde_json::from_value(Value::String(kind.as_str().to_owned()))
            .unwrap_or(EventKindDto::ErrorRaised)
    }
}

/// A derived event, as the feed answers it and the live stream sends it. (Each is also published
/// on `notifications.mower.<id>.<kind>`, in the service's internal form, not this document.)
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Event)]
pub struct EventDto {
    /// The event's id (also the bus de-duplication id); ids sort by `observed_at`.
    pub id: Uuid,
    /// What happened.
    pub kind: EventKindDto,
    /// The mower it happened to.
    pub mower_id: Uuid,
    /// The `observed_at` of the state that raised it; for `went_offline`, the moment the mower had
    /// been silent for the offline period.
    pub observed_at: DateTime<Utc>,
    /// What the event carries: the fields of its kind, with the kind again.
    pub details: EventDetails,
}

impl From<rules::Event> for EventDto {
    fn from(e: rules::Event) -> Self {
        Self {
            id: e.id,
            kind: EventKindDto::of(e.kind()),
            mower_id: e.mower_id.0,
            observed_at: e.observed_at,
            details: EventDetails::from(&e.detail),
        }
    }
}

/// A page of the events feed, newest first.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    /// The events of this page, newest first (by id).
    pub items: Vec<EventDto>,
    /// Whether more events exist after this page.
    pub truncated: bool,
    /// The page size asked for.
    pub limit: u32,
    /// Pass as `cursor` for the next (older) page; `null` on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// Filters and paging of the events feed.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventParams {
    /// Only events of this mower.
    pub mower_id: Option<Uuid>,
    /// Only events of this kind.
    pub kind: Option<EventKindDto>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged. Absent (or
    /// empty) for the first page.
    pub cursor: Option<String>,
}

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
    Ok(Json(EventPage {
        items: page.rows.into_iter().map(EventDto::from).collect(),
        truncated: page.truncated,
        limit: limit as u32,
        next_cursor: page.next_cursor,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_round_trip() {
        for kind in EventKind::ALL {
            assert_eq!(EventKindDto::of(kind).domain(), kind);
        }
    }
}
