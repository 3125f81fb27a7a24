//! Extractors that answer their rejections as problems. axum's own `Path`, `Query` and `Json`
//! reject with `text/plain`; these wrap them so that a malformed id or body is a problem like any
//! other error (see [`ApiError`]).

use crate::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts};

/// `axum::extract::Path`, rejected with a `400` problem.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query`, rejected with a `400` problem.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `axum::Json`, rejected with a problem: `415` without a JSON content type, `400` for JSON that
/// does not parse, `422` for JSON that does not fit the type, `413` beyond the body limit.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);
