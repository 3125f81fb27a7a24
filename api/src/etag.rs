//! Entity tags and conditional GETs (RFC 9110 §8.8.3, §13.1.2).
//!
//! The tag is a digest of the exact body bytes, so it changes exactly when the body does: a new
//! state, but also a renamed mower in the list. Computing it costs one SHA-256 over a few hundred
//! bytes, far below the cost of the request itself, and needs no version column in any store.

use crate::error::ApiError;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Responses are per principal and change at any time: caches may keep them but must revalidate.
const CACHE_CONTROL: &str = "private, no-cache";

/// The strong entity tag of a body: 128 bits of its SHA-256, quoted.
pub fn entity_tag(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    format!("\"{}\"", hex::encode(&digest[..16]))
}

/// Whether `If-None-Match` matches `etag`. GET uses the weak comparison (a `W/` prefix is
/// ignored), and `*` matches any current representation.
pub fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|candidate| {
            candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == etag
        })
}

/// Serialises `value` as the JSON body, tags it, and answers `304 Not Modified` (no body, same
/// tag) when the request's `If-None-Match` already names that tag.
pub fn json_with_etag<T: Serialize>(request: &HeaderMap, value: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(value)
        .map_err(|e| ApiError::Internal(format!("could not encode a response: {e}")))?;
    let etag = entity_tag(&body);
    let etag_value = HeaderValue::from_str(&etag)
        .map_err(|e| ApiError::Internal(format!("invalid entity tag: {e}")))?;
    let cache_control = HeaderValue::from_static(CACHE_CONTROL);
    if if_none_match(request, &etag) {
        return Ok((
            StatusCode::NOT_MODIFIED,
            [
                (header::ETAG, etag_value),
                (header::CACHE_CONTROL, cache_control),
            ],
        )
            .into_response());
    }
    Ok((
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::ETAG, etag_value),
            (header::CACHE_CONTROL, cache_control),
        ],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn matches_weakly_in_lists_and_star() {
        let tag = entity_tag(b"{}");
        assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 34);
        assert!(if_none_match(&request(&tag), &tag));
        assert!(if_none_match(&request(&format!("W/{tag}")), &tag));
        assert!(if_none_match(&request(&format!("\"other\", {tag}")), &tag));
        assert!(if_none_match(&request("*"), &tag));
        assert!(!if_none_match(&request("\"other\""), &tag));
        assert!(!if_none_match(&HeaderMap::new(), &tag));
    }
}
