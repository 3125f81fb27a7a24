//! What every HTTP request leaves behind: a tracing span with its method, path, status and
//! latency, and an observation in the latency histogram of its route.
//!
//! The histogram is labelled with the route's *template* (`/v1/mowers/{mower_id}`, axum's
//! `MatchedPath`), never the path itself, so its series stay as many as the routes. Requests that
//! match no route are counted under `route="unmatched"`, and a method outside HTTP's standard ones
//! (any token is a valid method, and an anonymous client chooses it) under `method="other"`: every
//! label comes from a set the code fixes, so no client can grow the registry. For the live stream
//! (SSE) the latency is the time to the response's head, not the stream's life.

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::{Method, Request, Response};
use axum::middleware::Next;
use std::time::{Duration, Instant};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{DefaultOnRequest, TraceLayer};
use tracing::Span;

/// The histogram of request latencies, per method, route and status.
pub const HTTP_DURATION: &str = "swath_http_request_duration_seconds";

/// Bucket bounds of [`HTTP_DURATION`], in seconds: from 100 µs, low enough to tell the fastest
/// reads (answered from memory) apart, to 10 s.
pub const HTTP_DURATION_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 10.0,
];

/// Records the request's latency under its route. Applied with `Router::layer`, which axum
/// applies to each route (and the fallback) after routing, so the matched path is known.
pub async fn record_latency(request: Request<Body>, next: Next) -> Response<Body> {
    let route = route(&request).to_owned();
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    metrics::histogram!(HTTP_DURATION,
        "method" => method,
        "route" => route,
        "status" => response.status().as_u16().to_string())
    .record(started.elapsed().as_secs_f64());
    response
}

/// The gauge of live streams (SSE) open now.
pub const LIVE_STREAMS: &str = "swath_http_live_streams";

/// One open live stream, counted in [`LIVE_STREAMS`] from its creation until it is dropped
/// (the client went away, or the stream ended).
pub struct OpenStream(());

impl OpenStream {
    pub fn new() -> Self {
        metrics::gauge!(LIVE_STREAMS).increment(1.0);
        Self(())
    }
}

impl Default for OpenStream {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        metrics::gauge!(LIVE_STREAMS).decrement(1.0);
    }
}

/// The `# HELP` lines of [`HTTP_DURATION`] and [`LIVE_STREAMS`]; the live-stream gauge starts
/// at zero, so that it is there before the first stream.
pub fn describe_metrics() {
    metrics::describe_histogram!(
        HTTP_DURATION,
        metrics::Unit::Seconds,
        "HTTP request latency to the response head, per method, route template and status."
    );
    metrics::describe_gauge!(LIVE_STREAMS, "Live streams (SSE) open now.");
    metrics::gauge!(LIVE_STREAMS).set(0.0);
}

type MakeSpan = fn(&Request<Body>) -> Span;
type OnResponse = fn(&Response<Body>, Duration, &Span);

/// The label of a request's method: one of HTTP's standard methods, else `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// The route template of a request, `unmatched` when none matched.
fn route(request: &Request<Body>) -> &str {
    request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
}

/// The request span: `http_request{method, route, path, status, latency_ms}` at INFO (so that every
/// event logged while handling the request carries them), and one DEBUG event when the response
/// is sent (`SWATH_LOG=info,swath_api=debug` shows one line per request). Server errors are
/// logged at ERROR by the layer's failure classifier.
pub fn trace_layer(
) -> TraceLayer<SharedClassifier<ServerErrorsAsFailures>, MakeSpan, DefaultOnRequest, OnResponse> {
    TraceLayer::new_for_http()
        .make_span_with(make_span as MakeSpan)
        .on_response(on_response as OnResponse)
}

fn make_span(request: &Request<Body>) -> Span {
    tracing::info_span!(
        "http_request",
        method = %request.method(),
        route = route(request),
        path = %request.uri().path(),
        status = tracing::field::Empty,
        latency_ms = tracing::field::Empty,
    )
}

fn on_response(response: &Response<Body>, latency: Duration, span: &Span) {
    span.record("status", response.status().as_u16());
    span.record("latency_ms", latency.as_secs_f64() * 1000.0);
    tracing::debug!(parent: span, "Answered the request.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_standard_methods_keep_their_name() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        for invented in ["M1", "get", "PROPFIND", "BREW"] {
            let method = Method::from_bytes(invented.as_bytes()).unwrap();
            assert_eq!(method_label(&method), "other", "{invented}");
        }
    }
}
