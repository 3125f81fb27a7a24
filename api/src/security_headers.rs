//! The headers every answer carries (decision 143): `X-Content-Type-Options: nosniff`, so that a
//! browser never runs an answer as something its media type does not say, and a
//! Content-Security-Policy of `frame-ancestors 'none'`, so that no other site frames it. The live
//! pages set a policy of their own, stricter (`live_pages::assets`), which this leaves as it is.

use axum::http::{header, HeaderValue};
use axum::response::Response;

/// The policy of every answer that sets none.
pub const DEFAULT_POLICY: &str = "frame-ancestors 'none'";

/// Adds the headers an answer lacks.
pub async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers
        .entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(DEFAULT_POLICY));
    response
}
