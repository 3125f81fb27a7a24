//! The live stream's policy (`GET /v1/live/stream`): who may open one, how many each token and
//! account may hold ([`StreamSlots`]), which items a connection is sent, when its token is
//! checked again and when its mowers are resolved again, and when it ends. The route only frames
//! what [`LiveSession::next`] answers as Server-Sent Events.
//!
//! - A stream takes a slot before any other work for it, and holds it until it is dropped.
//! - Visibility is decided per connection by [`Access::visible_mower_sites`], from the directory,
//!   never from the item alone: the principal's mowers are resolved at open and again every
//!   [`MOWER_REFRESH`], and an item is admitted only when its mower is one of them *and* it names
//!   the principal's account ([`StreamView`], with the client's filters and "changes only").
//! - The token is checked again, of the token store itself (never of the principal cache), at
//!   every refresh and at once on a revocation in this process; a token that no longer gives the
//!   same principal ends the stream ([`EndReason::TokenRevoked`]). A store that does not answer
//!   keeps the stream going until the next check.
//! - The process's shutdown ends every stream at once ([`EndReason::Shutdown`]).

mod slots;

pub use slots::{StreamRefusal, StreamSlot, StreamSlots};

use crate::live_feed::filter::{StreamFilter, StreamView};
use crate::live_feed::{Cursor, Delivery, FeedItem, LiveFeed, SharedFeed, RESUME_WINDOW};
use crate::ports::{chain, BusError, TokenHash};
use crate::visibility::{Access, AccessError};
use std::sync::Arc;
use std::time::Duration;
use swath_domain::Principal;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often a connection resolves the principal's mowers again (mowers added, moved or deleted
/// since it connected).
pub const MOWER_REFRESH: Duration = Duration::from_secs(30);

/// How often a connection checks that its token is still valid (at the same time as it resolves
/// its mowers again); a revocation in the same process is noticed at once.
pub const PRINCIPAL_RECHECK: Duration = MOWER_REFRESH;

/// The use case of live streams (see the module).
#[derive(Clone)]
pub struct LiveStreams {
    access: Access,
    feed: SharedFeed,
    slots: StreamSlots,
    shutdown: watch::Receiver<bool>,
}

/// A stream as its client asks for it: the hash of its bearer token (checked again while the
/// stream runs), its filters, and where it resumes (`Last-Event-ID`).
#[derive(Clone, Debug)]
pub struct StreamRequest {
    pub token: TokenHash,
    pub filter: StreamFilter,
    pub last_event_id: Option<String>,
}

/// Why a stream was not opened.
#[derive(Debug, thiserror::Error)]
pub enum LiveStreamError {
    /// No slot left for this token, its account or the service.
    #[error("no live stream slot is left")]
    Refused(StreamRefusal),
    /// The process's feed could not be started.
    #[error(transparent)]
    Feed(#[from] BusError),
    #[error(transparent)]
    Access(#[from] AccessError),
}

/// Why Swath ended a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The token was revoked, or lost the `read` scope or the mowers it was given.
    TokenRevoked,
    /// The process began to shut down.
    Shutdown,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::TokenRevoked => "token_revoked",
            EndReason::Shutdown => "shutdown",
        }
    }
}

/// What a stream sends next.
#[derive(Debug)]
pub enum Next {
    /// An item the principal may see, with the stream id of it.
    Item { item: Arc<FeedItem>, id: String },
    /// Items may have been missed: the client reloads through REST (decision 102).
    Reset { reason: &'static str, id: String },
    /// The last event: the stream is over.
    End(EndReason),
}

impl LiveStreams {
    /// Streams over `feed`, as many as `slots` gives places.
    pub fn new(access: Access, feed: SharedFeed, slots: StreamSlots) -> Self {
        Self {
            access,
            feed,
            slots,
            // Its sender dropped at once: streams never end for a shutdown without one.
            shutdown: watch::channel(false).1,
        }
    }

    /// Other places for the streams (`SWATH_STREAMS_PER_TOKEN`, the account's and the service's
    /// share).
    pub fn with_slots(mut self, slots: StreamSlots) -> Self {
        self.slots = slots;
        self
    }

    /// Ends every stream when `shutdown` becomes `true`.
    pub fn with_shutdown(mut self, shutdown: watch::Receiver<bool>) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// The streams open now, every token together.
    pub fn open_streams(&self) -> usize {
        self.slots.open()
    }

    /// Opens a stream for `principal` as `request` asks: a slot first, then the feed and the
    /// principal's visible mowers.
    pub async fn open(
        &self,
        principal: &Principal,
        request: StreamRequest,
    ) -> Result<LiveSession, LiveStreamError> {
        // Subscribed before the mowers are read: a revocation from now on is seen.
        let revocations = self.access.revocations().subscribe();
        let slot = self
            .slots
            .acquire(&request.token, principal.account_id)
            .map_err(LiveStreamError::Refused)?;
        let feed = self.feed.get(RESUME_WINDOW).await?;
        let visible = self.access.visible_mower_sites(principal).await?;
        tracing::debug!(
            account_id = %principal.account_id,
            mowers = visible.len(),
            resuming = request.last_event_id.is_some(),
            "A live stream connected."
        );
        let cursor = feed.cursor(request.last_event_id.as_deref());
        Ok(LiveSession {
            _slot: slot,
            view: StreamView::new(principal.account_id, visible, request.filter),
            access: self.access.clone(),
            shutdown: self.shutdown.clone(),
            principal: principal.clone(),
            token: request.token,
            revocations,
            ended: false,
            feed,
            cursor,
            refresh_at: Instant::now() + MOWER_REFRESH,
        })
    }
}

/// One open stream (see the module).
pub struct LiveSession {
    /// Its place among the streams, given back when the session is dropped.
    _slot: StreamSlot,
    access: Access,
    principal: Principal,
    token: TokenHash,
    revocations: watch::Receiver<u64>,
    shutdown: watch::Receiver<bool>,
    ended: bool,
    feed: LiveFeed,
    cursor: Cursor,
    view: StreamView,
    refresh_at: Instant,
}

/// Resolves once `shutdown` is `true`; an error when its sender is gone without it.
async fn shutdown_began(
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), watch::error::RecvError> {
    shutdown.wait_for(|stop| *stop).await.map(drop)
}

impl LiveSession {
    /// The principal the stream was opened for.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The next item the principal may see (or a `reset`); the end once its token is no longer
    /// valid or the process shuts down; `None` after that, or once the feed ended.
    pub async fn next(&mut self) -> Option<Next> {
        if self.ended {
            return None;
        }
        loop {
            // A refresh that is due runs before the next item is looked at.
            let delivery = tokio::select! {
                biased;
                // First: nothing more is sent once shutdown began. A use case that never shuts
                // down has dropped its sender, which disables this branch.
                Ok(()) = shutdown_began(&mut self.shutdown) => {
                    return Some(self.end(EndReason::Shutdown));
                }
                Ok(()) = self.revocations.changed() => {
                    if !self.token_valid().await {
                        return Some(self.end(EndReason::TokenRevoked));
                    }
                    continue;
                }
                () = tokio::time::sleep_until(self.refresh_at) => {
                    if !self.token_valid().await {
                        return Some(self.end(EndReason::TokenRevoked));
                    }
                    self.refresh().await;
                    continue;
                }
                delivery = self.cursor.next() => delivery?,
            };
            match delivery {
                Delivery::Reset { reason, head } => {
                    tracing::debug!(
                        account_id = %self.principal.account_id,
                        reason = reason.as_str(),
                        "A live stream could not resume; the client is told to reload."
                    );
                    return Some(Next::Reset {
                        reason: reason.as_str(),
                        id: self.feed.event_id(head),
                    });
                }
                Delivery::Item(item) if self.view.admits(&item) => {
                    let id = self.feed.event_id(item.seq);
                    return Some(Next::Item { item, id });
                }
                Delivery::Item(_) => {}
            }
        }
    }

    /// Whether the connection's token still gives its principal (not revoked, scopes and sites
    /// unchanged), asked of the token store itself.
    async fn token_valid(&mut self) -> bool {
        match self.access.principal_uncached(&self.token).await {
            Ok(Some(principal)) => principal == self.principal,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %chain(&e), "Could not check a live stream's token; checking again later.");
                true
            }
        }
    }

    fn end(&mut self, reason: EndReason) -> Next {
        self.ended = true;
        match reason {
            EndReason::TokenRevoked => tracing::info!(
                account_id = %self.principal.account_id,
                "Ended a live stream: its token was revoked."
            ),
            EndReason::Shutdown => tracing::debug!(
                account_id = %self.principal.account_id,
                "Ended a live stream: the process is shutting down."
            ),
        }
        Next::End(reason)
    }

    /// Resolves the principal's mowers again; on failure keeps the previous list (and logs).
    async fn refresh(&mut self) {
        self.refresh_at = Instant::now() + MOWER_REFRESH;
        match self.access.visible_mower_sites(&self.principal).await {
            Ok(mowers) => self.view.set_visible(mowers),
            Err(e) => tracing::warn!(
                error = %chain(&e),
                "Could not refresh a live stream's mowers; keeping the previous list."
            ),
        }
    }
}
