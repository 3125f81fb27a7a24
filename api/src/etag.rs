//! Entity tags and conditional GETs (RFC 9110 §8.8.3, §13.1.2).
//!
//! The tag is a digest of the exact body bytes, so it changes exactly when the body does: a new
//! state, but also a renamed mower in the list. Computing it costs one SHA-256 over a few hundred
//! bytes, far below the cost of the request itself, and needs no version column in any store.
//! An answer with a part that changes on every request without saying anything about the data
//! (a live view's `generated_at`) is tagged over the rest of the document instead
//! ([`json_with_etag_of`]).
//!
//! Tags are weak (`W/"…"`, decision 91): the same tag names the identity and the gzip encoding of
//! an answer (the compression layer of [`crate::router`] leaves the header as it is), which a
//! strong tag must not do, and a live view's tag ignores its `generated_at`. `If-None-Match` uses
//! the weak comparison anyway, so a client that kept a tag in either form gets its `304`.

use crate::error::ApiError;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Responses are per principal and change at any time: caches may keep them but must revalidate.
const CACHE_CONTROL: &str = "private, no-cache";

/// The weak entity tag of a body: 128 bits of its SHA-256, quoted, with the `W/` prefix.
pub fn entity_tag(body: &[u8]) -> String {
    tag_of_digest(Sha256::digest(body))
}

/// The weak entity tag of `value`'s JSON, hashed as it is written (no buffer).
fn entity_tag_of<V: Serialize>(value: &V) -> Result<String, ApiError> {
    let mut hasher = Sha256::new();
    serde_json::to_writer(&mut hasher, value)
        .map_err(|e| ApiError::Internal(format!("could not encode a response: {e}")))?;
    Ok(tag_of_digest(hasher.finalize()))
}

fn tag_of_digest(digest: impl AsRef<[u8]>) -> String {
    format!("W/\"{}\"", hex::encode(&digest.as_ref()[..16]))
}

/// Whether `If-None-Match` matches `etag` (weak or strong). GET uses the weak comparison: the
/// opaque tags (the quoted part) are compared and a `W/` prefix on either side is ignored. A
/// field is a comma-separated list (over one or more header lines), and `*` matches any current
/// representation. A malformed element ends the list: what came before it still counts.
pub fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    let opaque = etag.strip_prefix("W/").unwrap_or(etag);
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|field| field_matches(field, opaque))
}

/// Whether one `If-None-Match` field names `opaque` (a quoted tag without `W/`), or is `*`.
fn field_matches(field: &str, opaque: &str) -> bool {
    let mut rest = field;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return false;
        }
        if rest.starts_with('*') {
            return true;
        }
        // Parsed by quotes rather than split at commas: an opaque tag may contain a comma.
        let tag = rest.strip_prefix("W/").unwrap_or(rest);
        let Some(end) = tag.strip_prefix('"').and_then(|quoted| quoted.find('"')) else {
            return false;
        };
        let (candidate, after) = tag.split_at(end + 2);
        if candidate == opaque {
            return true;
        }
        rest = after;
    }
}

/// Serialises `value` as the JSON body, tags it, and answers `304 Not Modified` (no body, same
/// tag) when the request's `If-None-Match` already names that tag.
pub fn json_with_etag<T: Serialize>(request: &HeaderMap, value: &T) -> Result<Response, ApiError> {
    let body = encode(value)?;
    let etag = entity_tag(&body);
    respond(request, &etag, || Ok(body))
}

/// Like [`json_with_etag`], with the tag computed over `validator` (a part of `value` that holds
/// all of its data) instead of the body: for an answer with a field that changes on every request
/// but says nothing about the data, such as a snapshot's `generated_at`. On a match the body is
/// not even serialised.
pub fn json_with_etag_of<T: Serialize, V: Serialize>(
    request: &HeaderMap,
    value: &T,
    validator: &V,
) -> Result<Response, ApiError> {
    let etag = entity_tag_of(validator)?;
    respond(request, &etag, || encode(value))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(value)
        .map_err(|e| ApiError::Internal(format!("could not encode a response: {e}")))
}

/// `304` with `etag` when `If-None-Match` names it, else `200` with the body `body` makes.
fn respond(
    request: &HeaderMap,
    etag: &str,
    body: impl FnOnce() -> Result<Vec<u8>, ApiError>,
) -> Result<Response, ApiError> {
    let etag_value = HeaderValue::from_str(etag)
        .map_err(|e| ApiError::Internal(format!("invalid entity tag: {e}")))?;
    let cache_control = HeaderValue::from_static(CACHE_CONTROL);
    if if_none_match(request, etag) {
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
        body()?,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for value in values {
            h.append(header::IF_NONE_MATCH, HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn tags_are_weak_and_match_weakly_in_lists_and_star() {
        let tag = entity_tag(b"{}");
        assert!(tag.starts_with("W/\"") && tag.ends_with('"') && tag.len() == 36);
        let strong = tag.strip_prefix("W/").unwrap();
        for matching in [
            tag.clone(),
            strong.to_owned(),
            format!("\"other\", {tag}"),
            format!("\"other\",{strong}"),
            format!("W/\"a,b\" , {tag} "),
            "*".to_owned(),
        ] {
            assert!(if_none_match(&request(&[&matching]), &tag), "{matching}");
        }
        assert!(if_none_match(&request(&["\"other\"", strong]), &tag));
        for other in [
            "\"other\"",
            "W/\"other\"",
            "",
            // A tag is compared whole, quotes included.
            &strong[1..strong.len() - 1],
            // A malformed element ends the list.
            &format!("garbage, {tag}"),
        ] {
            assert!(!if_none_match(&request(&[other]), &tag), "{other}");
        }
        assert!(!if_none_match(&HeaderMap::new(), &tag));
    }

    #[test]
    fn a_tag_over_a_part_is_the_tag_of_its_json() {
        let value = serde_json::json!({"items": [1, 2], "truncated": false});
        let tag = entity_tag_of(&value).unwrap();
        assert_eq!(tag, entity_tag(&serde_json::to_vec(&value).unwrap()));
    }
}
