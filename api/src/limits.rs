//! Fair use of the service by one client (decision 140): live streams counted per token and
//! together, so that one token cannot hold every connection and streams never take the
//! connections ordinary requests need; and request bodies that must keep coming.
//!
//! - **Streams.** [`StreamSlots`] hands a live stream a [`StreamSlot`] for as long as it runs: at
//!   most `SWATH_STREAMS_PER_TOKEN` per token, at most [`HttpLimits::max_streams_per_account`]
//!   for the tokens of one account together (decision 181), and at most
//!   [`HttpLimits::max_streams`] in all (the connection limit less the share kept for ordinary
//!   requests). One more is refused with `429`
//!   and a `Retry-After` before anything else is done for it.
//! - **Bodies.** [`body_timeouts`] wraps every request body that is still to come: when no
//!   byte of it arrives for `SWATH_HTTP_BODY_IDLE_TIMEOUT_SECONDS`, reading it fails with
//!   [`BodyIdle`]; when it is not whole `SWATH_HTTP_BODY_TIMEOUT_SECONDS` after its head was read
//!   (`SWATH_IMPORT_BODY_TIMEOUT_SECONDS` for an import), with [`BodyDeadline`] (decision 181).
//!   The handler stops (an import ends `failed` and says why) and the connection, its body
//!   unread, is closed after the answer.

use crate::server::HttpLimits;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
pub use swath_application::live_streams::{StreamRefusal, StreamSlot, StreamSlots};
use tokio::time::{Instant, Sleep};

/// What a client is told to wait before it opens a refused stream again, in seconds: streams are
/// long-lived, so a slot seldom frees sooner.
pub const STREAM_RETRY_AFTER_SECONDS: u64 = 30;

/// The request-level limits of [`HttpLimits`], as the router applies them.
#[derive(Clone)]
pub struct RequestLimits {
    /// Live streams per token and in all.
    pub streams: StreamSlots,
    /// How long request bodies may take: without a byte, and whole.
    pub bodies: BodyLimits,
}

/// How long a request body may take (decisions 140, 181): at most `idle` without a byte, and at
/// most `total` whole from when its head was read; an import's body (`POST /v1/imports`,
/// streamed, up to 256 MiB) has `import_total` instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyLimits {
    pub idle: Duration,
    pub total: Duration,
    pub import_total: Duration,
}

/// The path whose `POST` bodies have the imports' own total deadline.
pub const IMPORTS_PATH: &str = "/v1/imports";

impl RequestLimits {
    pub fn new(limits: &HttpLimits) -> Self {
        Self {
            streams: StreamSlots::new(
                limits.streams_per_token as usize,
                limits.max_streams_per_account() as usize,
                limits.max_streams() as usize,
            ),
            bodies: BodyLimits {
                idle: limits.body_idle_timeout,
                total: limits.body_timeout,
                import_total: limits.import_body_timeout,
            },
        }
    }
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self::new(&HttpLimits::default())
    }
}

/// Reading a request body failed: no byte of it came for this long.
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("no byte of the body came for {} s", .0.as_secs_f64())]
pub struct BodyIdle(pub Duration);

/// Reading a request body failed: it had not come whole this long after its head.
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("the body did not come whole within {} s", .0.as_secs_f64())]
pub struct BodyDeadline(pub Duration);

/// Wraps the body of every request that has one still to come in [`IdleBody`], which fails once
/// no byte came for the idle timeout, or the body is not whole by its total deadline (the
/// imports' own for `POST /v1/imports`).
pub async fn body_timeouts(
    State(limits): State<BodyLimits>,
    request: Request,
    next: Next,
) -> Response {
    let request = if request.body().is_end_stream() {
        request
    } else {
        let total = if request.method() == axum::http::Method::POST
            && request.uri().path() == IMPORTS_PATH
        {
            limits.import_total
        } else {
            limits.total
        };
        request.map(|body| Body::new(IdleBody::new(body, limits.idle, total)))
    };
    next.run(request).await
}

/// A body that fails with [`BodyIdle`] when its next frame takes longer than `timeout`, and with
/// [`BodyDeadline`] when it is not whole `total` after it was wrapped. One timer, armed only
/// while the reader waits, for whichever comes first: a body that is all there costs none.
pub struct IdleBody {
    inner: Body,
    timeout: Duration,
    total: Duration,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
}

impl IdleBody {
    pub fn new(inner: Body, timeout: Duration, total: Duration) -> Self {
        Self {
            inner,
            timeout,
            total,
            deadline: Instant::now() + total,
            timer: None,
        }
    }

    fn past_deadline(&self) -> Option<Result<Frame<Bytes>, axum::Error>> {
        (Instant::now() >= self.deadline).then(|| Err(axum::Error::new(BodyDeadline(self.total))))
    }
}

impl HttpBody for IdleBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            // The end of the body is never late.
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(frame) => {
                // A byte came: the next wait starts afresh, unless the whole time is up (a
                // steady trickle is cut there too).
                this.timer = None;
                match this.past_deadline() {
                    Some(late) => Poll::Ready(Some(late)),
                    None => Poll::Ready(frame),
                }
            }
            Poll::Pending => {
                let (timeout, deadline) = (this.timeout, this.deadline);
                let timer = this.timer.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep_until(
                        (Instant::now() + timeout).min(deadline),
                    ))
                });
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(
                        this.past_deadline()
                            .unwrap_or_else(|| Err(axum::Error::new(BodyIdle(timeout)))),
                    )),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
