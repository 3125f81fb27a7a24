//! The HTTP server loop: connections accepted up to a limit, each served by hyper with the
//! router, and cut off when a client is too slow to send a request head or keeps an idle
//! connection open (decision 43).
//!
//! # Limits
//!
//! - **Connections**: at most [`HttpLimits::max_connections`] at once. When they are all taken the
//!   server stops accepting (new connections wait in the kernel's backlog) until one closes.
//! - **Request head**: from the moment a connection is ready for a request (accepted, or done
//!   with the previous response) until its head (request line and headers) is complete, at most
//!   [`HttpLimits::header_read_timeout`] may pass once its first byte came; a connection that
//!   sends nothing at all gets the same time. Past it the connection is closed: a silent,
//!   trickling (Slowloris) or half-sent head holds a connection for seconds, not forever.
//! - **Idle keep-alive**: a kept-alive connection that has answered its requests and receives
//!   nothing for [`HttpLimits::idle_timeout`] is closed.
//! - **Streams and bodies** (the router's, [`crate::limits`]): live streams per token and in
//!   all, a quarter of the connections kept for ordinary requests; a request body that sends no
//!   byte for [`HttpLimits::body_idle_timeout`], or is not whole after
//!   [`HttpLimits::body_timeout`] ([`HttpLimits::import_body_timeout`] for an import), is cut.
//!
//! A request being answered is never cut: a long response (the live stream) keeps its
//! connection for as long as it runs. Each connection has a watchdog task of its own that looks
//! at two timestamps a wrapper of the socket and of the service keep: no work per request
//! beyond two atomic updates.
//!
//! hyper's own header-read timer is off: in hyper it also bounds the wait for the next request
//! on a kept-alive connection, which is what the idle timeout is for.
//!
//! # Errors hyper answers itself
//!
//! A head hyper cannot parse, or larger than its buffer, is answered by hyper with an empty body.
//! The limits a client meets first are ours, below hyper's, and answered as problems by
//! [`head_limits`]: a URI longer than [`MAX_URI_BYTES`] (`414`), a head larger than
//! [`MAX_HEAD_BYTES`] or with more than [`MAX_HEADERS`] fields (`431`).

use crate::error::ApiError;
use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt;

/// The longest request URI answered with a problem rather than refused, in bytes.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// The largest request head (names and values of the header fields) answered, in bytes.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// The most header fields a request may have.
pub const MAX_HEADERS: usize = 100;

/// The HTTP server's limits, and whether clients reach it over HTTPS: plain values the wiring
/// builds from `swath serve`'s settings (`swath::config::HttpArgs`, where each has its variable,
/// default and description).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a client has to send a request's head, from when the connection is ready for a
    /// request; a connection that sends nothing is closed after the same time.
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may stay idle between requests.
    pub idle_timeout: Duration,
    /// The most connections served at once; more wait to be accepted.
    pub max_connections: u32,
    /// The most live streams one token keeps open at once.
    pub streams_per_token: u32,
    /// The most live streams of one account's tokens together; `None`:
    /// [`HttpLimits::max_streams_per_account`]'s share.
    pub streams_per_account: Option<u32>,
    /// How long a request body may go without a byte.
    pub body_idle_timeout: Duration,
    /// How long a request body may take whole, from when its head was read (not an import's).
    pub body_timeout: Duration,
    /// How long an import's body may take whole, from when its head was read.
    pub import_body_timeout: Duration,
    /// Clients reach the service over HTTPS through a proxy that terminates TLS.
    pub behind_tls: bool,
}

/// `swath serve`'s defaults (a test of `swath::config` checks that they are its settings'),
/// for a router or server built without settings.
impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            streams_per_token: 16,
            streams_per_account: None,
            body_idle_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
            import_body_timeout: Duration::from_secs(3600),
            behind_tls: false,
        }
    }
}

impl HttpLimits {
    /// Connections kept for ordinary requests, which live streams never take: a quarter of the
    /// limit, at least one.
    pub fn reserved_connections(&self) -> u32 {
        (self.max_connections / 4).max(1)
    }

    /// The most live streams open at once, every token together.
    pub fn max_streams(&self) -> u32 {
        self.max_connections - self.reserved_connections()
    }

    /// The most live streams of one account's tokens together: `SWATH_STREAMS_PER_ACCOUNT`, or a
    /// quarter of [`HttpLimits::max_streams`] (at least one), so that one tenant's many tokens
    /// never take every stream (decision 181).
    pub fn max_streams_per_account(&self) -> u32 {
        self.streams_per_account
            .unwrap_or_else(|| (self.max_streams() / 4).max(1))
    }
}

/// A request extension [`serve`] adds to every request when `SWATH_BEHIND_TLS` is set: the
/// client reached the service over HTTPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BehindTls;

/// Serves `router` on `listener` with `limits` until `shutdown` resolves; then stops accepting,
/// lets every open connection finish its response (idle ones close at once), and returns once
/// all have closed (the caller bounds how long it waits).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections as usize));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "Could not accept an HTTP connection.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            serve_connection(stream, router, limits, stop).await;
            tracing::trace!(%peer, "An HTTP connection closed.");
            drop(permit);
        });
    }
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it is closed.
    let _ = permits.acquire_many(limits.max_connections).await;
    Ok(())
}

/// What a connection's watchdog looks at: updated by the socket wrapper and the service.
struct Activity {
    started: Instant,
    /// Requests whose response is not finished (body included).
    open: AtomicUsize,
    /// When the connection last became ready for a request, as microseconds since `started`.
    ready_at: AtomicU64,
    /// When the first byte of the next head came, as microseconds since `started` plus one; 0
    /// while none came.
    head_at: AtomicU64,
    /// Whether the connection has answered a request (then waiting is idling, not a head).
    answered: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            open: AtomicUsize::new(0),
            ready_at: AtomicU64::new(0),
            head_at: AtomicU64::new(0),
            answered: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    fn read_some(&self) {
        if self.open.load(Ordering::Acquire) == 0 && self.head_at.load(Ordering::Acquire) == 0 {
            self.head_at.store(self.now() + 1, Ordering::Release);
        }
    }

    fn request_started(&self) {
        self.open.fetch_add(1, Ordering::AcqRel);
        self.head_at.store(0, Ordering::Release);
    }

    fn response_finished(&self) {
        self.ready_at.store(self.now(), Ordering::Release);
        self.answered.store(true, Ordering::Release);
        self.open.fetch_sub(1, Ordering::AcqRel);
    }

    /// Why the connection should be closed now, if it should.
    fn expired(&self, limits: &HttpLimits) -> Option<&'static str> {
        if self.open.load(Ordering::Acquire) > 0 {
            return None;
        }
        let now = self.now();
        let since = |at: u64| Duration::from_micros(now.saturating_sub(at));
        match self.head_at.load(Ordering::Acquire) {
            0 if self.answered.load(Ordering::Acquire) => {
                (since(self.ready_at.load(Ordering::Acquire)) >= limits.idle_timeout)
                    .then_some("idle")
            }
            0 => (since(0) >= limits.header_read_timeout).then_some("silent"),
            head => (since(head - 1) >= limits.header_read_timeout).then_some("slow_head"),
        }
    }
}

/// A socket that tells its [`Activity`] when bytes come in.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read_some();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Marks a response finished when hyper is done with its body (sent, or dropped with the
/// connection).
struct Finished(Arc<Activity>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.response_finished();
    }
}

async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        stream,
        activity: Arc::clone(&activity),
    });
    let service = {
        let activity = Arc::clone(&activity);
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            activity.request_started();
            let finished = Finished(Arc::clone(&activity));
            let router = router.clone();
            let mut request = request.map(Body::new);
            if limits.behind_tls {
                request.extensions_mut().insert(BehindTls);
            }
            async move {
                let response = router
                    .oneshot(request)
                    .await
                    .unwrap_or_else(|never| match never {});
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
                        // Moved in: dropped with the body.
                        let _ = &finished;
                        frame
                    }))
                }))
            }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .header_read_timeout(None)
        .max_headers(MAX_HEADERS * 2);
    let connection = builder.serve_connection_with_upgrades(io, service);
    let mut connection = pin!(connection);
    let tick = (limits.header_read_timeout.min(limits.idle_timeout) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "An HTTP connection ended with an error.");
                }
                return;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = ticks.tick() => {
                if let Some(why) = activity.expired(&limits) {
                    metrics::counter!("swath_http_connections_closed_total", "reason" => why)
                        .increment(1);
                    tracing::debug!(reason = why, "Closed an HTTP connection that sent no request in time.");
                    return;
                }
            }
        }
    }
}

/// The length of `value` as displayed, counted without writing it anywhere (a URI's, on every
/// request).
fn displayed_len(value: &impl std::fmt::Display) -> usize {
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = std::fmt::write(&mut count, format_args!("{value}"));
    count.0
}

/// Answers as problems the head limits a client meets before hyper's: a URI longer than
/// [`MAX_URI_BYTES`] (`414`), more than [`MAX_HEADERS`] header fields or a head larger than
/// [`MAX_HEAD_BYTES`] (`431`).
pub async fn head_limits(request: Request, next: Next) -> Response {
    let uri = displayed_len(request.uri());
    if uri > MAX_URI_BYTES {
        return ApiError::UriTooLong(format!(
            "The request URI has {uri} bytes; at most {MAX_URI_BYTES} are accepted."
        ))
        .into_response();
    }
    let headers = request.headers();
    let size: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if headers.len() > MAX_HEADERS || size > MAX_HEAD_BYTES {
        return ApiError::HeadersTooLarge(format!(
            "The request has {} header fields in {size} bytes; at most {MAX_HEADERS} fields in \
             {MAX_HEAD_BYTES} bytes are accepted.",
            headers.len()
        ))
        .into_response();
    }
    next.run(request).await
}
