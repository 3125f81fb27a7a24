//! The live stream: `GET /v1/live/stream`, Server-Sent Events with the principal's mowers' states
//! and events as they arrive on the bus, numbered so that a client can resume.
//!
//! The states and events come from the replica's [`LiveFeed`] (one live subscription per process,
//! started by the first stream): every event has an `id:`, and a client that reconnects with
//! `Last-Event-ID` gets what it missed while it is in the feed's window, or an event `reset`
//! telling it to reload through REST (decisions 101 and 102). Who may open a stream, how many
//! each token and account holds, which items a connection is sent (its visible mowers, resolved
//! again every [`MOWER_REFRESH`], and the client's filters), the token's re-checks and when a
//! stream ends are the application's
//! ([`swath_application::live_streams::LiveStreams`]); this route parses the filters and frames
//! what a [`LiveSession`] answers as Server-Sent Events. Comments (`: keep-alive`) every
//! [`KEEP_ALIVE`] keep proxies from closing an idle stream.

use crate::auth::{bearer_token, Reader};
use crate::dto::live_stream::{
    AlertChangeKind, StreamAlert, StreamAlertCleared, StreamEvent, StreamParams,
};
use crate::dto::notifications::{AlertKindDto, EventDto};
use crate::dto::MowerState;
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::limits::STREAM_RETRY_AFTER_SECONDS;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;
use swath_application::hash_token;
use swath_application::live_feed::filter::{StreamFilter, StreamKind};
use swath_application::live_feed::{FeedBody, FeedItem};
use swath_application::live_streams::{
    LiveSession, LiveStreamError, Next, StreamRefusal, StreamRequest,
};
pub use swath_application::live_streams::{MOWER_REFRESH, PRINCIPAL_RECHECK};
use swath_domain::live::{alert_change, AlertChange};
use swath_domain::Principal;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "live";

/// How often an idle stream sends a comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The SSE event name of a state.
pub const STATE_EVENT: &str = "state";

/// The SSE event name of a derived event (`went_offline`, `error_raised`, …).
pub const EVENT_EVENT: &str = "event";

/// The SSE event name of an alert cleared without an event of its own (the battery re-armed, a
/// geofence removed, a blade reset): its `data` is a [`StreamAlertCleared`].
pub const ALERT_EVENT: &str = "alert";

/// The SSE event name that tells a client it may have missed items: its `data` is
/// `{"reason": "unknown_id" | "window_exceeded"}`; reload through REST, then keep reading.
pub const RESET_EVENT: &str = "reset";

/// The SSE event name of the last event of a stream that Swath ends: its `data` is
/// `{"reason": "token_revoked"}` when the token was revoked (or lost the `read` scope or the
/// mowers it was given), `{"reason": "shutdown"}` when the process is shutting down (reconnect
/// at once, with `Last-Event-ID`: another replica, or the restarted process, answers).
pub const END_EVENT: &str = "end";

/// Stream the states and events of your mowers
#[utoipa::path(
    get,
    path = "/v1/live/stream",
    tag = TAG,
    operation_id = "live_stream",
    summary = "Stream the states and events of your mowers (Server-Sent Events)",
    description = "A `text/event-stream` of the states your mowers report, as they arrive \
        (before they are stored), and of the events the watcher derives, from the moment you \
        connect. An event `state` per report, whose `data` is the same document as \
        `GET /v1/mowers/{id}/state` answers (with `last_seen_at` the time Swath relayed it); an \
        event `event` per derived event (`went_offline`, `came_online`, `error_raised`, …), whose \
        `data` is the event as `GET /v1/events` lists it plus `alert`, the alert it raised or \
        cleared (`null` for none); an event `alert` per alert cleared without an event (the \
        battery back at 30 %, a geofence removed, a blade reset), whose `data` is a \
        `StreamAlertCleared`. Every instant is UTC RFC 3339 to the microsecond, as in every \
        REST answer. Every event but `end` has an opaque `id:`. Reconnect with `Last-Event-ID` (browsers' \
        `EventSource` does) and the stream first sends what you missed, in order: the replica \
        that gave the id keeps its last 10 000 items (states and events of every tenant; minutes \
        at a typical load). When it cannot (the id is older than that window, or was given by \
        another replica or before a restart), the first event is `reset`, `data` \
        `{\"reason\": \"window_exceeded\"}` or `{\"reason\": \"unknown_id\"}`: reload the mowers \
        and events through REST, then keep reading: nothing is skipped silently. Filters: \
        `mowers`, `sites`, `kinds`, and `changes_only`. Only the mowers of the token's account \
        are streamed, and only those of its sites when the token is limited to some; the list \
        is read at connect and refreshed every 30 s. The stream ends when its token is revoked: \
        at once when it is revoked through this replica, within 30 s otherwise, with a last \
        event `end` whose `data` is `{\"reason\": \"token_revoked\"}`; do not reconnect with \
        that token. It also ends when the process begins to shut down, at once and before open \
        requests are cut, with a last event `end` whose `data` is \
        `{\"reason\": \"shutdown\"}`: reconnect at once with `Last-Event-ID` (another replica, \
        or the restarted process, answers; expect `reset` from a replica that did not give the \
        id). A comment line \
        (`: keep-alive`) is sent every 15 s while nothing else is. A client that reads too \
        slowly catches up from the window, or gets `reset`; it never slows the service. \
        A token keeps at most 16 streams open at once (`SWATH_STREAMS_PER_TOKEN`), the tokens of \
        one account a quarter of the streams the service keeps (`SWATH_STREAMS_PER_ACCOUNT`); one \
        more is answered `429`.",
    security(("bearer" = ["read"])),
    params(
        StreamParams,
        ("Last-Event-ID" = Option<String>, Header, description = "The `id` of the last event \
            received: the stream resumes after it (or starts with `reset`, see above)."),
    ),
    responses(
        (status = 200, description = "The stream: events `state` (a state document as `data`), \
            `event` (a `StreamEvent` as `data`), `alert` (a `StreamAlertCleared` as `data`), \
            `reset`, and a last event `end` when the token is revoked (`token_revoked`) or the \
            process shuts down (`shutdown`).", body = MowerState, content_type = "text/event-stream"),
        (status = 400, description = "A filter is not valid: an id that is not a UUID, or an \
            unknown kind."),
        (status = 429, description = "The token has as many streams open as one token may \
            (`SWATH_STREAMS_PER_TOKEN`, 16 unless configured), its account's tokens as many as \
            one account may (`SWATH_STREAMS_PER_ACCOUNT`, a quarter of the streams kept unless \
            configured), or the service as many as it keeps for streams (three quarters of its \
            connections). `Retry-After` says when to try again.",
            headers(("Retry-After" = u64, description = "Seconds to wait before opening the \
                stream again."))),
    ),
)]
pub async fn live_stream(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<StreamParams>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let request = StreamRequest {
        token: hash_token(bearer_token(&headers)?),
        filter: stream_filter(&params)?,
        last_event_id: headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    let session = match state.live_streams.open(&principal, request).await {
        Ok(session) => session,
        Err(LiveStreamError::Refused(refusal)) => return Err(stream_refused(&principal, refusal)),
        Err(e) => return Err(e.into()),
    };
    let live = Live {
        session,
        _open: crate::http_metrics::OpenStream::new(),
    };
    let stream = futures::stream::unfold(live, |mut live| async move {
        let event = live.next_event().await?;
        Some((Ok(event), live))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// The filters of the query, checked: a malformed id or an unknown kind is a `400`.
fn stream_filter(params: &StreamParams) -> Result<StreamFilter, ApiError> {
    fn list<T>(
        name: &str,
        value: Option<&str>,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<HashSet<T>>, ApiError>
    where
        T: Eq + std::hash::Hash,
    {
        let Some(value) = value else {
            return Ok(None);
        };
        value
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|v| {
                parse(v).ok_or_else(|| {
                    ApiError::BadRequest(format!("`{name}` holds `{v}`, which is not valid."))
                })
            })
            .collect::<Result<HashSet<T>, ApiError>>()
            .map(Some)
    }
    Ok(StreamFilter {
        mowers: list("mowers", params.mowers.as_deref(), |v| {
            v.parse().ok().map(swath_domain::MowerId)
        })?,
        sites: list("sites", params.sites.as_deref(), |v| {
            v.parse().ok().map(swath_domain::SiteId)
        })?,
        kinds: list("kinds", params.kinds.as_deref(), StreamKind::parse)?,
        changes_only: params.changes_only.unwrap_or(false),
    })
}

/// The `429` of a stream refused for want of a slot.
fn stream_refused(principal: &Principal, refusal: StreamRefusal) -> ApiError {
    let (reason, detail) = match refusal {
        StreamRefusal::PerToken(held) => (
            "per_token",
            format!(
                "This token has {held} live streams open already, as many as one token may; \
                 close one, or try again later."
            ),
        ),
        StreamRefusal::PerAccount(held) => (
            "per_account",
            format!(
                "The tokens of this account have {held} live streams open already, as many as \
                 one account may; close one, or try again later."
            ),
        ),
        StreamRefusal::Total(held) => (
            "total",
            format!(
                "The service has {held} live streams open, as many as it keeps for streams; try \
                 again later."
            ),
        ),
    };
    metrics::counter!("swath_live_streams_refused_total", "reason" => reason).increment(1);
    tracing::info!(account_id = %principal.account_id, reason, "Refused a live stream: no slot left.");
    ApiError::TooManyRequests {
        detail,
        retry_after: STREAM_RETRY_AFTER_SECONDS,
    }
}

/// One connection: the application's session, framed.
struct Live {
    session: LiveSession,
    /// Counts the stream in `swath_http_live_streams` while it lives.
    _open: crate::http_metrics::OpenStream,
}

impl Live {
    /// The next SSE event of the session; `None` once it is over.
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            return Some(match self.session.next().await? {
                Next::Reset { reason, id } => Event::default()
                    .event(RESET_EVENT)
                    .id(id)
                    .data(format!(r#"{{"reason":"{reason}"}}"#)),
                Next::End(reason) => Event::default()
                    .event(END_EVENT)
                    .data(format!(r#"{{"reason":"{}"}}"#, reason.as_str())),
                Next::Item { item, id } => match encode(&item) {
                    Ok(event) => event.id(id),
                    Err(e) => {
                        tracing::warn!(error = %e, "Could not serialise a live item.");
                        continue;
                    }
                },
            });
        }
    }
}

fn encode(item: &FeedItem) -> Result<Event, axum::Error> {
    match &item.body {
        FeedBody::State(row) => Event::default()
            .event(STATE_EVENT)
            .json_data(MowerState::from(row.as_ref())),
        FeedBody::Event(event) => Event::default().event(EVENT_EVENT).json_data(StreamEvent {
            alert: alert_change(event.kind()).map(|change| {
                let (kind, change) = match change {
                    AlertChange::Raised(k) => (k, AlertChangeKind::Raised),
                    AlertChange::Cleared(k) => (k, AlertChangeKind::Cleared),
                };
                StreamAlert {
                    kind: AlertKindDto::of(kind),
                    change,
                }
            }),
            event: EventDto::from(event.clone()),
        }),
        FeedBody::Cleared(clear) => Event::default()
            .event(ALERT_EVENT)
            .json_data(StreamAlertCleared::from(clear)),
    }
}
