//! The live stream: `GET /v1/live/stream`, Server-Sent Events with the principal's mowers' states
//! as they arrive on the bus.
//!
//! Each connection has an ack-less live subscription of its own on `telemetry.mower.*`
//! (`EventBus::subscribe`: no acknowledgements, no redelivery, from the moment of connecting).
//! Visibility is decided per connection by the access service (`Access::visible_mowers`), from
//! the directory, never from the report alone: the principal's mowers (its account's, limited to
//! its sites when the token is) are resolved at connect and again every [`MOWER_REFRESH`], and a
//! state is sent only when its mower is one of them *and* the report names the principal's
//! account. Reports that fail validation are never
//! sent, nor a report published on another mower's subject. A client that reads too slowly loses states (the live subscription's buffer is bounded);
//! it never slows ingestion. Comments (`: keep-alive`) every [`KEEP_ALIVE`] keep proxies from
//! closing an idle stream.

use crate::auth::{bearer_token, Reader};
use crate::dto::MowerState;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;
use swath_application::ports::{hash_token, LiveOptions, LiveSubscription, TokenHash};
use swath_application::subjects;
use swath_domain::{LatestRow, MowerId, Principal, StateReport};
use tokio::time::Instant;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "live";

/// How often a connection resolves the principal's mowers again (mowers added, moved or deleted
/// since it connected).
pub const MOWER_REFRESH: Duration = Duration::from_secs(30);

/// How often an idle stream sends a comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The SSE event name of a state.
pub const STATE_EVENT: &str = "state";

/// The SSE event name of the last event of a stream that Swath ends: its `data` is
/// `{"reason": "token_revoked"}` when the token was revoked (or lost the `read` scope or the
/// mowers it was given).
pub const END_EVENT: &str = "end";

/// How often a connection checks that its token is still valid (at the same time as it resolves
/// its mowers again); a revocation in the same process is noticed at once.
pub const PRINCIPAL_RECHECK: Duration = MOWER_REFRESH;

/// Stream the states of your mowers
#[utoipa::path(
    get,
    path = "/v1/live/stream",
    tag = TAG,
    operation_id = "live_stream",
    summary = "Stream the states of your mowers (Server-Sent Events)",
    description = "A `text/event-stream` of the states your mowers report, as they arrive \
        (before they are stored), from the moment you connect: one event `state` per report, \
        whose `data` is the same document as `GET /v1/mowers/{id}/state` answers (with \
        `last_seen_at` the time Swath relayed it). Only the mowers of the token's account are \
        streamed, and only those of its sites when the token is limited to some; the list is \
        read at connect and refreshed every 30 s. The stream ends when its token is revoked: at \
        once when it is revoked through this replica, within 30 s otherwise, with a last event \
        `end` whose `data` is `{\"reason\": \"token_revoked\"}`. A comment line (`: keep-alive`) is sent every \
        15 s while no state arrives. Nothing is replayed: reconnect and read the latest states \
        with `GET /v1/mowers` to catch up. A client that reads too slowly loses states rather \
        than slowing the service.",
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The stream: events `state`, each with a state document as \
            `data`; a last event `end` when the token is revoked.", body = MowerState,
            content_type = "text/event-stream"),
    ),
)]
pub async fn live_stream(
    Reader(principal): Reader,
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // Subscribed before the mowers are read: a revocation from now on is seen.
    let revocations = state.revocations.subscribe();
    let token = hash_token(bearer_token(&headers)?);
    let mowers = state.access.visible_mowers(&principal).await?;
    let subscription = state
        .bus
        .subscribe(subjects::TELEMETRY_ALL, LiveOptions::default())
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    tracing::debug!(
        account_id = %principal.account_id,
        mowers = mowers.len(),
        "A live stream connected."
    );
    let live = Live {
        state,
        principal,
        token,
        revocations,
        ended: false,
        mowers,
        subscription,
        refresh_at: Instant::now() + MOWER_REFRESH,
    };
    let stream = futures::stream::unfold(live, |mut live| async move {
        let event = live.next_event().await?;
        Some((Ok(event), live))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// One connection's state.
struct Live {
    state: AppState,
    principal: Principal,
    /// The hash of the connection's token, checked again every [`PRINCIPAL_RECHECK`].
    token: TokenHash,
    /// Changes when a token is revoked in this process.
    revocations: tokio::sync::watch::Receiver<u64>,
    /// The `end` event was sent: the stream is over.
    ended: bool,
    mowers: HashSet<MowerId>,
    subscription: LiveSubscription,
    refresh_at: Instant,
}

impl Live {
    /// The next state the principal may see; the `end` event once its token is no longer
    /// valid; `None` after that, or once the bus ended the subscription.
    async fn next_event(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        loop {
            // A refresh that is due runs before the next message is looked at.
            let message = tokio::select! {
                biased;
                Ok(()) = self.revocations.changed() => {
                    if !self.token_valid().await {
                        return Some(self.end());
                    }
                    continue;
                }
                () = tokio::time::sleep_until(self.refresh_at) => {
                    if !self.token_valid().await {
                        return Some(self.end());
                    }
                    self.refresh().await;
                    continue;
                }
                message = self.subscription.messages.recv() => message?,
            };
            let now = self.state.clock.now();
            // Invalid reports are never relayed, nor those whose subject names another mower
            // (the subject is the gateway's identity); ingestion logs and counts them.
            let Ok(report) = swath_application::parse_message(&message, now) else {
                continue;
            };
            if !self.visible(&report) {
                continue;
            }
            let row = LatestRow {
                mower_id: report.mower_id,
                account_id: report.account_id,
                observed_at: report.observed_at,
                last_seen_at: now,
                state: report,
            };
            match Event::default()
                .event(STATE_EVENT)
                .json_data(MowerState::from(&row))
            {
                Ok(event) => return Some(event),
                Err(e) => tracing::warn!(error = %e, "Could not serialise a live state."),
            }
        }
    }

    /// Whether the connection's token still gives its principal (not revoked, scopes and sites
    /// unchanged). Asked of the token store itself, never of the principal cache, so that a
    /// revocation through another replica ends the stream at this check. A store that does not
    /// answer keeps the stream going until the next check.
    async fn token_valid(&mut self) -> bool {
        match self.state.access.principal_uncached(&self.token).await {
            Ok(Some(principal)) => principal == self.principal,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "Could not check a live stream's token; checking again later.");
                true
            }
        }
    }

    /// The last event: the token is no longer valid.
    fn end(&mut self) -> Event {
        self.ended = true;
        tracing::info!(
            account_id = %self.principal.account_id,
            "Ended a live stream: its token was revoked."
        );
        Event::default()
            .event(END_EVENT)
            .data(r#"{"reason":"token_revoked"}"#)
    }

    fn visible(&self, report: &StateReport) -> bool {
        report.account_id == self.principal.account_id && self.mowers.contains(&report.mower_id)
    }

    /// Resolves the principal's mowers again; on failure keeps the previous list (and logs).
    async fn refresh(&mut self) {
        self.refresh_at = Instant::now() + MOWER_REFRESH;
        match self.state.access.visible_mowers(&self.principal).await {
            Ok(mowers) => self.mowers = mowers,
            Err(e) => tracing::warn!(
                error = %e,
                "Could not refresh a live stream's mowers; keeping the previous list."
            ),
        }
    }
}
