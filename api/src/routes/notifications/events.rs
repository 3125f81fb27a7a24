//! The events feed: the derived events of the token's mowers, newest first, paged by `page`.

use super::{ports, TAG};
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
use swath_domain::watch::{self as rules, EventDetail, EventKind};
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

/// What an event carries; the fields that do not apply to its kind are `null`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct EventDetails {
    /// `error_*`: the mower's error code.
    #[schema(required = true)]
    pub error_code: Option<String>,
    /// `geofence_*`: the reported latitude, degrees.
    #[schema(required = true)]
    pub lat: Option<f64>,
    /// `geofence_*`: the reported longitude, degrees.
    #[schema(required = true)]
    pub lon: Option<f64>,
    /// `geofence_left`: the position's accuracy, metres.
    #[schema(required = true)]
    pub accuracy_m: Option<f64>,
    /// `geofence_left`: how far outside the fence, metres.
    #[schema(required = true)]
    pub distance_m: Option<f64>,
    /// `geofence_*`: the geofence version judged against.
    #[schema(required = true)]
    pub geofence_version: Option<Uuid>,
    /// `battery_low`: the charge, percent.
    #[schema(required = true)]
    pub battery_percent: Option<u8>,
    /// `blade_due`: blade time since the last blade reset, seconds.
    #[schema(required = true)]
    pub blade_since_reset_s: Option<f64>,
    /// `blade_due`: the mower's blade threshold, seconds.
    #[schema(required = true)]
    pub blade_threshold_s: Option<f64>,
    /// `zone_*`: the zone.
    #[schema(required = true)]
    pub zone_id: Option<Uuid>,
    /// `zone_*`: the zone's name when the event was raised.
    #[schema(required = true)]
    pub zone_name: Option<String>,
    /// `went_offline`: when Swath last received a state; `came_online`: the same, before this one.
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
}

/// A derived event, as stored in the feed and published on `notifications.mower.<id>.<kind>`.
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
    /// What the event carries.
    pub details: EventDetails,
}

impl From<rules::Event> for EventDto {
    fn from(e: rules::Event) -> Self {
        let mut d = EventDetails::default();
        match &e.detail {
            EventDetail::ErrorRaised { error_code } | EventDetail::ErrorCleared { error_code } => {
                d.error_code = error_code.clone();
            }
            EventDetail::GeofenceLeft {
                lat,
                lon,
                accuracy_m,
                distance_m,
                geofence_version,
            } => {
                (d.lat, d.lon, d.accuracy_m) = (Some(*lat), Some(*lon), *accuracy_m);
                d.distance_m = Some(*distance_m);
                d.geofence_version = Some(*geofence_version);
            }
            EventDetail::GeofenceReturned {
                lat,
                lon,
                geofence_version,
            } => {
                (d.lat, d.lon) = (Some(*lat), Some(*lon));
                d.geofence_version = Some(*geofence_version);
            }
            EventDetail::BatteryLow { battery_percent } => {
                d.battery_percent = Some(*battery_percent)
            }
            EventDetail::MowingStarted {} | EventDetail::MowingFinished {} => {}
            EventDetail::BladeDue {
                blade_since_reset_ms,
                threshold_ms,
            } => {
                d.blade_since_reset_s = Some(*blade_since_reset_ms as f64 / 1000.0);
                d.blade_threshold_s = Some(*threshold_ms as f64 / 1000.0);
            }
            EventDetail::ZoneEntered { zone_id, zone_name }
            | EventDetail::ZoneLeft { zone_id, zone_name } => {
                (d.zone_id, d.zone_name) = (Some(*zone_id), Some(zone_name.clone()));
            }
            EventDetail::WentOffline { last_seen_at } => d.last_seen_at = Some(*last_seen_at),
            EventDetail::CameOnline { silent_since } => d.last_seen_at = Some(*silent_since),
        }
        Self {
            id: e.id,
            kind: EventKindDto::of(e.kind()),
            mower_id: e.mower_id.0,
            observed_at: e.observed_at,
            details: d,
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
    /// The `next_cursor` of the previous page.
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
    let mowers = state
        .access
        .feed_mowers(&principal, params.mower_id.map(MowerId))
        .await?;
    let rows = if mowers.as_ref().is_some_and(Vec::is_empty) {
        Vec::new()
    } else {
        ports(&state)?
            .feed
            .events(&EventQuery {
                account_id: principal.account_id,
                mowers,
                kind: params.kind.map(EventKindDto::domain),
                before,
                limit: page::with_sentinel(limit),
            })
            .await?
    };
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
