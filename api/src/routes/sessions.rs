//! W8's mowing sessions (docs/rules.md §3, W8; decision 200): a mower's, the fleet's, and a
//! mower's open session. The use case ([`swath_application::Sessions`]) decides visibility; a
//! handler validates the request, calls it and shows its rows (JSON, or CSV on `Accept:
//! text/csv`). Pages are newest first, keyed by `(started_at, mower id)`.

use crate::auth::Reader;
use crate::csv::csv_page;
use crate::dto::answers::{ById, NotAcceptable, PageRefused};
use crate::dto::params::MowerPath;
use crate::dto::sessions::{
    FleetSessionParams, OpenSession, SessionItem, SessionPage, SessionParams, SESSIONS_CSV_EXAMPLE,
};
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};
use crate::negotiate::{JsonOrCsv, Representation};
use crate::page::{self, Ask, List};
use crate::state::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use swath_application::{FleetSessions, SessionRange, Sessions};
use swath_domain::sessions::SessionRow;
use swath_domain::{MowerId, SiteId};
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "sessions";

/// The sessions use case, or `503` when the service was started without a sessions store.
fn sessions(state: &AppState) -> Result<&Sessions, ApiError> {
    state
        .mowing_sessions
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no sessions store is configured".into()))
}

/// The page a request asks, and its range for the use case (one sentinel row beyond the limit).
fn range(
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> Result<(Ask, SessionRange), ApiError> {
    let (ask, before) = page::ask::<(DateTime<Utc>, MowerId)>(List::Sessions, limit, cursor)?;
    Ok((ask, SessionRange::new(from, to, before, ask.fetch())?))
}

/// The page of `rows` as the request's representation shows it.
fn answer(ask: Ask, rows: Vec<SessionRow>, representation: Representation) -> Response {
    let cut = ask.cut(rows, |r| (r.session.started_at, r.session.mower_id));
    if representation == Representation::Csv {
        return csv_page(&cut.rows, cut.next_cursor.as_deref());
    }
    let page: SessionPage = cut.page(ask.limit, |r| SessionItem::from(&r));
    Json(page).into_response()
}

/// List a mower's mowing sessions
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/sessions",
    tag = TAG,
    description = "The mower's mowing sessions (docs/rules.md W8) that overlap `[from, to)`: \
        started before `to` and ended after `from` (an open session reaches to now), newest \
        first. A session is a run of working states (`leaving`, `mowing`, `returning`, `paused`) \
        with the runs that resumed within `SWATH_SESSION_MERGE_GAP_SECONDS` of its end (a charge \
        or a rain stop is not a new session). Sessions are kept exact whatever the order in which \
        states arrive: a late state recomputes the sessions around it. Page with `limit` and \
        `cursor`.",
    security(("bearer" = ["read"])),
    params(MowerPath, SessionParams),
    responses(
        (status = 200, description = "A page of the mower's sessions: JSON, or CSV on \
            `Accept: text/csv` (the same rows; the next page's cursor in the \
            `Swath-Next-Cursor` header, absent on the last page).",
            content(
                (SessionPage = "application/json"),
                (String = "text/csv", example = json!(SESSIONS_CSV_EXAMPLE)),
            ),
            headers(("Swath-Next-Cursor" = String, description = "CSV only: the `cursor` of \
                the next page; absent on the last page."))),
        ById<MowerPath>,
        (status = 422, description = "`to` is not after `from`."),
        NotAcceptable,
    ),
)]
pub async fn list_mower_sessions(
    Reader(principal): Reader,
    JsonOrCsv(representation): JsonOrCsv,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<SessionParams>,
) -> Result<Response, ApiError> {
    let (ask, range) = range(
        params.from,
        params.to,
        params.limit,
        params.cursor.as_deref(),
    )?;
    let rows = sessions(&state)?
        .of_mower(&principal, MowerId(id), &range)
        .await?;
    Ok(answer(ask, rows, representation))
}

/// List the fleet's mowing sessions
#[utoipa::path(
    get,
    path = "/v1/sessions",
    tag = TAG,
    description = "The mowing sessions of every mower the token sees (of `site_id` and \
        `mower_id` when given) that overlap `[from, to)`, newest first, paged like a mower's \
        sessions.",
    security(("bearer" = ["read"])),
    params(FleetSessionParams),
    responses(
        (status = 200, description = "A page of sessions: JSON, or CSV on `Accept: text/csv`.",
            content(
                (SessionPage = "application/json"),
                (String = "text/csv", example = json!(SESSIONS_CSV_EXAMPLE)),
            ),
            headers(("Swath-Next-Cursor" = String, description = "CSV only: the `cursor` of \
                the next page; absent on the last page."))),
        PageRefused,
        (status = 404, description = "`site_id` or `mower_id` names nothing visible to this \
            token."),
        (status = 422, description = "`to` is not after `from`."),
        NotAcceptable,
    ),
)]
pub async fn list_sessions(
    Reader(principal): Reader,
    JsonOrCsv(representation): JsonOrCsv,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<FleetSessionParams>,
) -> Result<Response, ApiError> {
    let (ask, range) = range(
        params.from,
        params.to,
        params.limit,
        params.cursor.as_deref(),
    )?;
    let (site, mower) = (params.site_id.map(SiteId), params.mower_id.map(MowerId));
    let request = FleetSessions { site, mower, range };
    let rows = sessions(&state)?.of_fleet(&principal, &request).await?;
    Ok(answer(ask, rows, representation))
}

/// Get a mower's open mowing session
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/sessions/open",
    tag = TAG,
    description = "The mower's open session beside its latest state (`GET \
        /v1/mowers/{id}/state`): the session its newest state belongs to, while it has not \
        ended; `session` is `null` when the newest session has ended or the mower never mowed.",
    security(("bearer" = ["read"])),
    params(MowerPath),
    responses(
        (status = 200, description = "The mower's open session, or `null`.", body = OpenSession),
        ById<MowerPath>,
    ),
)]
pub async fn get_open_session(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<OpenSession>, ApiError> {
    let open = sessions(&state)?.open(&principal, MowerId(id)).await?;
    Ok(Json(OpenSession {
        mower_id: id,
        session: open.as_ref().map(SessionItem::from),
    }))
}
