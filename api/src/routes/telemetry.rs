//! A mower's telemetry: latest state, health totals, history, track (JSON and GeoJSON) and day
//! totals.
//!
//! History and track are paged by a keyset on `observed_at` (see [`crate::page`]): oldest first,
//! a page starts strictly after the last instant of the previous one, so states stored while a
//! client pages never shift or repeat the pages.

use crate::auth::Reader;
use crate::dto::reads::{
    DayItem, DayList, HistoryItem, HistoryPage, TrackFeatureCollection, TrackPage, TrackPoint,
};
use crate::dto::{MowerHealth, MowerState};
use crate::error::{ApiError, Problem};
use crate::etag::json_with_etag;
use crate::extract::{ApiPath, ApiQuery};
use crate::page::{self, List};
use crate::routes::{MowerById, MowerPath, Revalidation};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;
use swath_application::ports::TimeWindow;
use swath_domain::{MowerId, Principal};
use utoipa::IntoParams;
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "telemetry";

/// The media type of GeoJSON (RFC 7946).
pub const GEO_JSON: &str = "application/geo+json";

/// The longest range of days one request may ask for.
pub const MAX_DAYS: i64 = 366;

/// Get a mower's latest state
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/state",
    tag = TAG,
    operation_id = "get_mower_state",
    summary = "Get a mower's latest state",
    description = "The newest state the mower reported, as its gateway sent it (unknown fields \
        included), with when Swath received it and the Home Assistant `lawn_mower` activity. \
        Poll it with `If-None-Match`: the answer is `304 Not Modified` until a newer state arrives.",
    security(("bearer" = ["read"])),
    params(MowerPath, Revalidation),
    responses(
        (status = 200, description = "The mower's latest state.", body = MowerState,
            headers(
                ("ETag" = String, description = "The entity tag of this state document."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        (status = 304, description = "No newer state since the `ETag` given in `If-None-Match`.",
            headers(("ETag" = String, description = "The entity tag of the current state document."))),
        (status = 400, description = "The id is not a UUID.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "No such mower is visible to this token (type `not-found`), or it \
            has not reported a state yet (type `no-state-yet`).", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
pub async fn get_mower_state(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let row = state
        .mower_data
        .latest(&principal, MowerId(id))
        .await?
        .ok_or(ApiError::NoStateYet)?;
    json_with_etag(&headers, &MowerState::from(&row))
}

/// Get a mower's health totals
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/health",
    tag = TAG,
    description = "Running totals since the mower first reported: mowing and blade time in \
        seconds, distance in metres, error and charge counts, blade time since the last blade \
        reset and whether the blade is due. A mower that has not reported yet has zero totals and \
        `counted_until` `null`.",
    security(("bearer" = ["read"])),
    params(MowerPath, Revalidation),
    responses(
        (status = 200, description = "The mower's health totals.", body = MowerHealth,
            headers(
                ("ETag" = String, description = "The entity tag of this document."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        (status = 304, description = "The totals have not changed since the `ETag` given in `If-None-Match`.",
            headers(("ETag" = String, description = "The entity tag of the current document."))),
        MowerById,
    ),
)]
pub async fn get_mower_health(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (mower, totals) = state.mower_data.health(&principal, MowerId(id)).await?;
    json_with_etag(&headers, &MowerHealth::new(&mower, totals.as_ref()))
}

/// The window and page of a history or track request.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowParams {
    /// Only states observed at or after this instant (RFC 3339). Absent: from the oldest kept.
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: Option<DateTime<Utc>>,
    /// Only states observed before this instant (RFC 3339; exclusive). Absent: up to the newest.
    #[param(example = "2026-06-02T00:00:00Z")]
    pub to: Option<DateTime<Utc>>,
    /// The most items to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged (with the same
    /// `from` and `to`). Absent (or empty) for the first page.
    #[param(example = "aGlzdG9yeToxNzgwMzE1MjMwMDAwMDAw")]
    pub cursor: Option<String>,
}

impl WindowParams {
    /// The store's window, with one sentinel row beyond the limit.
    fn window(&self, list: List) -> Result<(TimeWindow, usize), ApiError> {
        let limit = page::limit(self.limit)?;
        if let (Some(from), Some(to)) = (self.from, self.to) {
            if from > to {
                return Err(ApiError::BadRequest("`from` is after `to`.".to_owned()));
            }
        }
        let window = TimeWindow {
            from: self.from,
            to: self.to,
            after: page::time_after(list, self.cursor.as_deref())?,
            limit: page::with_sentinel(limit),
        };
        Ok((window, limit))
    }
}

/// Read a mower's history
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/history",
    tag = TAG,
    description = "The states the mower reported in `[from, to)`, oldest first: activity, battery, \
        error code, blade. One entry per distinct `observed_at`. Page with `limit` and `cursor`: \
        each page says whether more follow (`truncated`) and where the next starts \
        (`next_cursor`). Pages are a keyset on `observed_at`, so states stored meanwhile never \
        shift them: a walk sees every state once, except states older than the page it has reached \
        when they arrive. The embedded memory store keeps the newest \
        `SWATH_MEMORY_HISTORY_PER_MOWER` states per mower (100 000 by default, more than a day at \
        one state a second); once it has dropped older ones, every page says where the kept \
        history begins (`oldest_kept`). PostgreSQL keeps every state until retention removes it \
        by age (`oldest_kept` is then always `null`).",
    security(("bearer" = ["read"])),
    params(MowerPath, WindowParams),
    responses(
        (status = 200, description = "A page of the mower's history.", body = HistoryPage),
        (status = 400, description = "The id is not a UUID, a parameter is not valid, `from` is \
            after `to`, or `cursor` is not a cursor of this list."),
        (status = 404, description = "No such mower is visible to this token."),
    ),
)]
pub async fn get_mower_history(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<WindowParams>,
) -> Result<Json<HistoryPage>, ApiError> {
    let (window, limit) = params.window(List::History)?;
    let answer = state
        .mower_data
        .history(&principal, MowerId(id), &window)
        .await?;
    let page = page::cut(answer.rows, limit, |r| {
        page::time_cursor(List::History, r.observed_at)
    });
    Ok(Json(HistoryPage {
        mower_id: id,
        next_cursor: page.next_cursor,
        items: page.rows.iter().map(HistoryItem::from).collect(),
        limit: limit as u32,
        truncated: page.truncated,
        oldest_kept: answer.oldest_kept,
    }))
}

/// How to answer a track on the JSON operation (an undocumented compatibility query: see
/// `get_mower_track`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrackFormat {
    /// `application/json`: a page of positions.
    #[default]
    Json,
    /// `application/geo+json`: a GeoJSON `FeatureCollection` with one `LineString`.
    Geojson,
}

/// The window and page of a track request.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TrackParams {
    /// Only positions observed at or after this instant (RFC 3339). Absent: from the oldest kept.
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: Option<DateTime<Utc>>,
    /// Only positions observed before this instant (RFC 3339; exclusive). Absent: up to the
    /// newest.
    #[param(example = "2026-06-02T00:00:00Z")]
    pub to: Option<DateTime<Utc>>,
    /// The most positions to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged (with the same
    /// `from` and `to`). Absent (or empty) for the first page. A cursor of the JSON track is a
    /// cursor of the GeoJSON track and back.
    #[param(example = "dHJhY2s6MTc4MDMxNTIzMDAwMDAwMA")]
    pub cursor: Option<String>,
    /// Kept for clients written before the GeoJSON track had its own operation (decision 111),
    /// and left out of the document: one operation answering two schemas by a query parameter
    /// is what generated clients could not read.
    #[param(ignore)]
    pub format: Option<TrackFormat>,
}

impl TrackParams {
    fn window(&self) -> WindowParams {
        WindowParams {
            from: self.from,
            to: self.to,
            limit: self.limit,
            cursor: self.cursor.clone(),
        }
    }
}

/// Read a mower's track
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/track",
    tag = TAG,
    description = "The positions the mower reported in `[from, to)`, oldest first, paged like the \
        history. The same page as GeoJSON is `GET /v1/mowers/{id}/track.geojson`. The embedded \
        memory store keeps the newest `SWATH_MEMORY_HISTORY_PER_MOWER` positions per mower \
        (100 000 by default); once it has dropped older ones, every page says where the kept \
        track begins (`oldest_kept`). PostgreSQL keeps every position until retention removes it \
        by age (`oldest_kept` is then always `null`).",
    security(("bearer" = ["read"])),
    params(MowerPath, TrackParams),
    responses(
        (status = 200, description = "A page of the mower's track.", body = TrackPage),
        (status = 400, description = "The id is not a UUID, a parameter is not valid, `from` is \
            after `to`, or `cursor` is not a cursor of this list."),
        (status = 404, description = "No such mower is visible to this token."),
    ),
)]
pub async fn get_mower_track(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<TrackParams>,
) -> Result<Response, ApiError> {
    let track = track_page(&principal, &state, id, &params).await?;
    Ok(match params.format.unwrap_or_default() {
        TrackFormat::Json => Json(track).into_response(),
        TrackFormat::Geojson => geo_json(track),
    })
}

/// Read a mower's track as GeoJSON
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/track.geojson",
    tag = TAG,
    description = "The page `GET /v1/mowers/{id}/track` answers, as a GeoJSON `FeatureCollection` \
        (`application/geo+json`, RFC 7946) with one `Feature`: a `LineString` through the page's \
        positions (a `Point` when the page has one, no feature when it has none), the time of each \
        coordinate in its properties, and the paging members (`next_cursor`, `truncated`, \
        `limit`, `oldest_kept`) next to `features`. Same window, limit and cursor as the JSON \
        track; the cursors of the two are interchangeable.",
    security(("bearer" = ["read"])),
    params(MowerPath, TrackParams),
    responses(
        (status = 200, description = "A page of the mower's track as a GeoJSON \
            `FeatureCollection`.", body = TrackFeatureCollection,
            content_type = "application/geo+json"),
        (status = 400, description = "The id is not a UUID, a parameter is not valid, `from` is \
            after `to`, or `cursor` is not a cursor of this list."),
        (status = 404, description = "No such mower is visible to this token."),
    ),
)]
pub async fn get_mower_track_geojson(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<TrackParams>,
) -> Result<Response, ApiError> {
    let track = track_page(&principal, &state, id, &params).await?;
    Ok(geo_json(track))
}

/// One page of a mower's track, the body of both track operations.
async fn track_page(
    principal: &Principal,
    state: &AppState,
    id: Uuid,
    params: &TrackParams,
) -> Result<TrackPage, ApiError> {
    let (window, limit) = params.window().window(List::Track)?;
    let answer = state
        .mower_data
        .track(principal, MowerId(id), &window)
        .await?;
    let page = page::cut(answer.rows, limit, |r| {
        page::time_cursor(List::Track, r.observed_at)
    });
    Ok(TrackPage {
        mower_id: id,
        next_cursor: page.next_cursor,
        items: page.rows.iter().map(TrackPoint::from).collect(),
        limit: limit as u32,
        truncated: page.truncated,
        oldest_kept: answer.oldest_kept,
    })
}

/// A track page as `application/geo+json`.
fn geo_json(track: TrackPage) -> Response {
    let mut response = Json(TrackFeatureCollection::new(track)).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(GEO_JSON));
    response
}

/// The range of a day totals request.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DayParams {
    /// The first local day (`YYYY-MM-DD`, inclusive).
    #[param(example = "2026-06-01")]
    pub from: NaiveDate,
    /// The last local day (`YYYY-MM-DD`, inclusive); at most 365 days after `from`.
    #[param(example = "2026-06-07")]
    pub to: NaiveDate,
}

/// Read a mower's day totals
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/days",
    tag = TAG,
    description = "Per local day of the mower's site (its time zone decides the day of each \
        state): mowing and blade time in seconds, distance in metres, error and charge counts and \
        how many states counted. Days `from` to `to`, both included, at most 366 days; days on \
        which nothing was counted are left out.",
    security(("bearer" = ["read"])),
    params(MowerPath, DayParams),
    responses(
        (status = 200, description = "The mower's day totals of the range.", body = DayList),
        (status = 400, description = "The id is not a UUID, a date is missing or not valid, `from` \
            is after `to`, or the range has more than 366 days."),
        (status = 404, description = "No such mower is visible to this token."),
    ),
)]
pub async fn get_mower_days(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<DayParams>,
) -> Result<Json<DayList>, ApiError> {
    if params.from > params.to {
        return Err(ApiError::BadRequest("`from` is after `to`.".to_owned()));
    }
    if (params.to - params.from).num_days() >= MAX_DAYS {
        return Err(ApiError::BadRequest(format!(
            "The range has more than {MAX_DAYS} days; ask for fewer."
        )));
    }
    let days = state
        .mower_data
        .days(&principal, MowerId(id), params.from, params.to)
        .await?;
    Ok(Json(DayList {
        mower_id: days.mower.0,
        from: params.from,
        to: params.to,
        time_zone: days.time_zone,
        items: days.days.iter().map(DayItem::from).collect(),
    }))
}
