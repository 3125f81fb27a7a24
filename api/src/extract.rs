//! Extractors that answer their rejections as problems. axum's own `Path` and `Query` reject
//! with `text/plain`; these wrap them so that a malformed id is a `400` problem like any other
//! error (see [`ApiError`]).

use crate::error::ApiError;
use axum::extract::FromRequestParts;

/// `axum::extract::Path`, rejected with a `400` problem.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query`, rejected with a `400` problem.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);
