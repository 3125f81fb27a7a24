//! The routes, one module per resource (its OpenAPI tag in its `TAG`; the operator assignments
//! share the live projections' tag, `projections::TAG`). Each handler carries its `#[utoipa::path]`, so the
//! document is generated from the code that serves it; what the attribute names (documents,
//! parameters, the answers many operations share) is declared in `crate::dto` (decision 158).
//! Every paged list asks, fetches and cuts its page through `crate::page::ask`.
//!
//! Visibility is not decided here: every handler calls a use case with the request's principal,
//! which decides it (decision 197), and only translates its answer, once, in `crate::error`
//! (an invisible resource answers exactly what an unknown id answers, so that ids
//! of other tenants cannot be probed). Lists apply the same rule inside the store's query, before
//! the page's limit.

pub mod accounts;
pub mod assignments;
pub mod exports;
pub mod imports;
pub mod live;
pub mod mowers;
pub mod notifications;
pub mod operations;
pub mod projections;
pub mod sessions;
pub mod sites;
pub mod states;
pub mod telemetry;
pub mod tokens;
pub mod webhooks;

use crate::error::ApiError;
use axum::http::{header, HeaderName, HeaderValue};

/// A `Location` header for a created resource.
pub(crate) fn location(path: String) -> Result<[(HeaderName, HeaderValue); 1], ApiError> {
    let value = HeaderValue::from_str(&path)
        .map_err(|e| ApiError::Internal(format!("invalid Location {path:?}: {e}")))?;
    Ok([(header::LOCATION, value)])
}
