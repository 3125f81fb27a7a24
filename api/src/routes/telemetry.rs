//! A mower's telemetry: latest state, health totals, history, track (JSON and GeoJSON) and day
//! totals.
//!
//! History and track are paged by a keyset on `observed_at` (see [`crate::page`]): oldest first,
//! a page starts strictly after the last instant of the previous one, so states stored while a
//! client pages never shift or repeat the pages.

use crate::auth::Reader;
use crate::csv::{csv_answer, csv_page};
use crate::dto::answers::{ById, NotAcceptable, StateById, WindowRefused};
use crate::dto::exports::{DAYS_CSV_EXAMPLE, HISTORY_CSV_EXAMPLE, TRACK_CSV_EXAMPLE};
use crate::dto::params::{MowerPath, Revalidation};
use crate::dto::reads::{
    DayItem, DayList, DayParams, HistoryPage, TrackFeatureCollection, TrackFormat, TrackPage,
    TrackParams, TrackPoint, WindowParams,
};
use crate::dto::{MowerHealth, MowerState};
use crate::error::ApiError;
use crate::etag::json_with_etag;
use crate::extract::{ApiPath, ApiQuery};
use crate::negotiate::{JsonOrCsv, Representation};
use crate::page::{self, Ask, List};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_application::TimeWindow;
use swath_domain::{MowerId, PositionRow, Principal};
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "telemetry";

/// The media type of GeoJSON (RFC 7946).
pub const GEO_JSON: &str = "application/geo+json";

/// The longest range of days one request may ask for.
pub use swath_application::mower_reads::MAX_DAYS;

/// Get a mower's latest state
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/state",
    tag = TAG,
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
        StateById,
    ),
)]
pub async fn get_mower_state(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let row = state
        .mower_reads
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
        ById<MowerPath>,
    ),
)]
pub async fn get_mower_health(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (mower, totals) = state.mower_reads.health(&principal, MowerId(id)).await?;
    json_with_etag(&headers, &MowerHealth::new(&mower, totals.as_ref()))
}

/// The store's window of a history or track request (one sentinel row beyond the limit), and
/// the page it asks.
fn window(params: &WindowParams, list: List) -> Result<(TimeWindow, Ask), ApiError> {
    let ask = Ask::new(list, params.limit)?;
    if let (Some(from), Some(to)) = (params.from, params.to) {
        if from > to {
            return Err(ApiError::BadRequest("`from` is after `to`.".to_owned()));
        }
    }
    let window = TimeWindow {
        from: params.from,
        to: params.to,
        after: page::after(list, params.cursor.as_deref())?,
        limit: ask.fetch(),
    };
    Ok((window, ask))
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
        (status = 200, description = "A page of the mower's history: JSON, or CSV on \
            `Accept: text/csv` (the same rows, the mower's id first; the next page's cursor in \
            the `Swath-Next-Cursor` header, absent on the last page).",
            content(
                (HistoryPage = "application/json"),
                (String = "text/csv", example = json!(HISTORY_CSV_EXAMPLE)),
            ),
            headers(("Swath-Next-Cursor" = String, description = "CSV only: the `cursor` of \
                the next page; absent on the last page."))),
        WindowRefused,
        NotAcceptable,
    ),
)]
pub async fn get_mower_history(
    Reader(principal): Reader,
    JsonOrCsv(representation): JsonOrCsv,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<WindowParams>,
) -> Result<Response, ApiError> {
    let (window, ask) = window(&params, List::History)?;
    let answer = state
        .mower_reads
        .history(&principal, MowerId(id), &window)
        .await?;
    let page = ask.cut(answer.rows, |r| r.observed_at);
    if representation == Representation::Csv {
        return Ok(csv_page(&page.rows, page.next_cursor.as_deref()));
    }
    let page = HistoryPage::new(id, page, ask.limit, answer.oldest_kept);
    Ok(Json(page).into_response())
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
        (status = 200, description = "A page of the mower's track: JSON, or CSV on \
            `Accept: text/csv` (the same rows, the mower's id first; the next page's cursor in \
            the `Swath-Next-Cursor` header, absent on the last page).",
            content(
                (TrackPage = "application/json"),
                (String = "text/csv", example = json!(TRACK_CSV_EXAMPLE)),
            ),
            headers(("Swath-Next-Cursor" = String, description = "CSV only: the `cursor` of \
                the next page; absent on the last page."))),
        WindowRefused,
        NotAcceptable,
    ),
)]
pub async fn get_mower_track(
    Reader(principal): Reader,
    JsonOrCsv(representation): JsonOrCsv,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<TrackParams>,
) -> Result<Response, ApiError> {
    if representation == Representation::Csv {
        let (rows, next_cursor) = track_rows(&principal, &state, id, &params).await?;
        return Ok(csv_page(&rows, next_cursor.as_deref()));
    }
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
        WindowRefused,
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
    let (window, ask) = window(&WindowParams::from(params), List::Track)?;
    let answer = state
        .mower_reads
        .track(principal, MowerId(id), &window)
        .await?;
    let page = ask.cut(answer.rows, |r| r.observed_at);
    Ok(TrackPage {
        mower_id: id,
        next_cursor: page.next_cursor,
        items: page.rows.iter().map(TrackPoint::from).collect(),
        limit: ask.limit as u32,
        truncated: page.truncated,
        oldest_kept: answer.oldest_kept,
    })
}

/// The same page's positions and next cursor, for the CSV answer.
async fn track_rows(
    principal: &Principal,
    state: &AppState,
    id: Uuid,
    params: &TrackParams,
) -> Result<(Vec<PositionRow>, Option<String>), ApiError> {
    let (window, ask) = window(&WindowParams::from(params), List::Track)?;
    let answer = state
        .mower_reads
        .track(principal, MowerId(id), &window)
        .await?;
    let page = ask.cut(answer.rows, |r| r.observed_at);
    Ok((page.rows, page.next_cursor))
}

/// A track page as `application/geo+json`.
fn geo_json(track: TrackPage) -> Response {
    let mut response = Json(TrackFeatureCollection::new(track)).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(GEO_JSON));
    response
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
        (status = 200, description = "The mower's day totals of the range: JSON, or CSV on \
            `Accept: text/csv` (the same days, the mower's id first).",
            content(
                (DayList = "application/json"),
                (String = "text/csv", example = json!(DAYS_CSV_EXAMPLE)),
            )),
        (status = 400, description = "The id is not a UUID, a date is missing or not valid, `from` \
            is after `to`, or the range has more than 366 days."),
        (status = 404, description = "No such mower is visible to this token."),
        NotAcceptable,
    ),
)]
pub async fn get_mower_days(
    Reader(principal): Reader,
    JsonOrCsv(representation): JsonOrCsv,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<DayParams>,
) -> Result<Response, ApiError> {
    let days = state
        .mower_reads
        .days(&principal, MowerId(id), params.from, params.to)
        .await?;
    if representation == Representation::Csv {
        return Ok(csv_answer(&days.days));
    }
    Ok(Json(DayList {
        mower_id: days.mower.0,
        from: params.from,
        to: params.to,
        time_zone: days.time_zone,
        items: days.days.iter().map(DayItem::from).collect(),
    })
    .into_response())
}
