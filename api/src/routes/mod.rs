//! The routes, one module per OpenAPI tag. Each handler carries its `#[utoipa::path]`, so the
//! document is generated from the code that serves it.
//!
//! Visibility is decided here, once per kind of resource ([`visible_mower`], [`visible_site`]):
//! a resource of another account, or of a site the principal may not see, answers exactly what an
//! unknown id answers, so that ids of other tenants cannot be probed. Lists apply the same rule
//! inside the store's query, before the page's limit.

pub mod accounts;
pub mod live;
pub mod mowers;
pub mod notifications;
pub mod operations;
pub mod projections;
pub mod sites;
pub mod states;
pub mod telemetry;
pub mod tokens;

use crate::error::{ApiError, Resource};
use crate::state::AppState;
use axum::http::{header, HeaderName, HeaderValue};
use serde::Deserialize;
use swath_application::ports::{Mower, Principal, Site};
use swath_domain::{MowerId, SiteId};
use utoipa::IntoParams;
use uuid::Uuid;

/// The mower `id` if the principal may see it. Unknown, another account's and a hidden site's
/// mower are one and the same error.
pub(crate) async fn visible_mower(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
) -> Result<Mower, ApiError> {
    match state.directory.mower(MowerId(id)).await? {
        Some(m) if m.account_id == principal.account_id && principal.sees_site(m.site_id) => Ok(m),
        _ => Err(ApiError::NotFound(Resource::Mower)),
    }
}

/// The site `id` if the principal may see it; otherwise the one error of every invisible site.
pub(crate) async fn visible_site(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
) -> Result<Site, ApiError> {
    match state.directory.site(SiteId(id)).await? {
        Some(s) if s.account_id == principal.account_id && principal.sees_site(s.id) => Ok(s),
        _ => Err(ApiError::NotFound(Resource::Site)),
    }
}

/// A site named in a request body (a mower's `site_id`): a site the principal cannot see is a
/// `422`, the same for an unknown site and another account's.
pub(crate) async fn referenced_site(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
) -> Result<Site, ApiError> {
    visible_site(state, principal, id)
        .await
        .map_err(|e| match e {
            ApiError::NotFound(_) => {
                ApiError::Validation("`site_id` names no site visible to this token.".to_owned())
            }
            other => other,
        })
}

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
