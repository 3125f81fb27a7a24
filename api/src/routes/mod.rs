//! The routes, one module per OpenAPI tag. Each handler carries its `#[utoipa::path]`, so the
//! document is generated from the code that serves it.
//!
//! Visibility is not decided here: every handler asks the access service
//! ([`swath_application::Access`], `AppState::access`) and only translates its answer, once, in
//! `crate::error` (an invisible resource answers exactly what an unknown id answers, so that ids
//! of other tenants cannot be probed). Lists apply the same rule inside the store's query, before
//! the page's limit.

pub mod accounts;
pub mod imports;
pub mod live;
pub mod mowers;
pub mod notifications;
pub mod operations;
pub mod projections;
pub mod sites;
pub mod states;
pub mod telemetry;
pub mod tokens;
pub mod webhooks;

use crate::error::ApiError;
use axum::http::{header, HeaderName, HeaderValue};
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

/// A `Location` header for a created resource.
pub(crate) fn location(path: String) -> Result<[(HeaderName, HeaderValue); 1], ApiError> {
    let value = HeaderValue::from_str(&path)
        .map_err(|e| ApiError::Internal(format!("invalid Location {path:?}: {e}")))?;
    Ok([(header::LOCATION, value)])
}

/// `limit` and `cursor`, the parameters of every paged list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// The most items to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged. Absent (or
    /// empty) for the first page.
    #[param(
        example = "bW93ZXJzOlswLCJBbHBoYSIsIjAxOTBhMmI0LTAwMDAtNzAwMC04MDAwLTAwMDAwMDAwMDAwMSJd"
    )]
    pub cursor: Option<String>,
}

/// The `{id}` of every route under `/v1/mowers/{id}`, as the document states it once for all of
/// them (the handlers read it with `ApiPath<Uuid>`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct MowerPath {
    /// The mower's id.
    #[param(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub id: Uuid,
}

/// `If-None-Match`, the request header of every route that answers an `ETag`, as the document
/// states it (the handlers read it from their `HeaderMap`, `crate::etag`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct Revalidation {
    /// An `ETag` from an earlier answer: when it is still current, the answer is `304 Not Modified` without a body.
    #[serde(rename = "If-None-Match")]
    pub if_none_match: Option<String>,
}

/// The `400` and `404` of a route that names one mower by its id, written once.
#[derive(utoipa::IntoResponses)]
pub(crate) enum MowerById {
    #[response(status = 400, description = "The id is not a UUID.")]
    _BadId,
    #[response(status = 404, description = "No such mower is visible to this token.")]
    _NotFound,
}

/// The `400` and `404` of a route that names one webhook endpoint by its id, written once.
#[derive(utoipa::IntoResponses)]
pub(crate) enum EndpointById {
    #[response(status = 400, description = "The id is not a UUID.")]
    _BadId,
    #[response(
        status = 404,
        description = "No such endpoint is visible to this token."
    )]
    _NotFound,
}

/// The `400` and `404` of a route that names one site by its id, written once.
#[derive(utoipa::IntoResponses)]
pub(crate) enum SiteById {
    #[response(status = 400, description = "The id is not a UUID.")]
    _BadId,
    #[response(status = 404, description = "No such site is visible to this token.")]
    _NotFound,
}
