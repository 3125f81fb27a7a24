//! Extractors that answer their rejections as problems. axum's own `Path`, `Query` and `Json`
//! reject with `text/plain`; these wrap them so that a malformed id or body is a problem like any
//! other error (see [`ApiError`]).

use crate::error::ApiError;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use bytes::Bytes;
use serde::de::DeserializeOwned;

/// `axum::extract::Path`, rejected with a `400` problem.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query`, rejected with a `400` problem; also when the query string holds a NUL
/// character (`%00`), which no store can keep or compare.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if parts.uri.query().is_some_and(|q| q.contains("%00")) {
            return Err(ApiError::BadRequest(
                "The query string holds a NUL character (`%00`); no parameter may contain one."
                    .to_owned(),
            ));
        }
        let axum::extract::Query(value) =
            axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

/// `axum::Json`, rejected with a problem: `415` without a JSON content type, `400` for JSON that
/// does not parse, `422` for JSON that does not fit the type, `413` beyond the body limit, and
/// `422` for a NUL character (`\u0000`) in any string of the body, key or value, at any depth:
/// no store can keep one, and every store must answer alike (`swath_domain::text`).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = request.into_parts();
        // The bytes once (within the body limit), then axum's own checks over them.
        let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), state)
            .await
            .map_err(bytes_rejection)?;
        let request = Request::from_parts(parts, axum::body::Body::from(bytes.clone()));
        let axum::Json(value) = axum::Json::<T>::from_request(request, state).await?;
        if swath_domain::text::json_has_nul(&bytes) {
            // Rare: parse again, to name where it is.
            let at = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| swath_domain::text::nul_in_value(&v))
                .map(|path| format!(" at `{}`", if path.is_empty() { "/" } else { &path }))
                .unwrap_or_default();
            return Err(ApiError::Validation(format!(
                "The body holds a NUL character (\\u0000){at}; no text may contain one."
            )));
        }
        Ok(ApiJson(value))
    }
}

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(format!(
            "The body is larger than the {} bytes this service accepts.",
            crate::BODY_LIMIT_BYTES
        ))
    } else {
        ApiError::BadRequest(format!(
            "The body could not be read: {}.",
            rejection.body_text()
        ))
    }
}

/// `axum::Json` as [`ApiJson`] rejects it, but without the NUL check: for bodies whose every
/// element the domain validates alone (state reports, where a NUL drops that report as
/// `invalid_text` and the others are stored).
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJsonElements<T>(pub T);
