//! The bounded live projections as JSON (`GET /v1/live/fleet`, `/v1/live/wall`,
//! `/v1/live/health`).
//!
//! A live view is a monitoring window, not an inventory: every list it shows is cut at a limit
//! and says so (`truncated`, found with one sentinel row, never by counting); the complete lists
//! are the paginated `/v1/mowers` and `/v1/sites`.
//!
//! [`live_views`] holds the three views' routes, their documents are in `crate::dto::live_views`
//! (decision 158). This module keeps the use case and the OpenAPI tag, which the operator
//! assignments the views rank share (their routes are `super::assignments`, decision 206).

pub mod live_views;

use crate::error::ApiError;
use crate::state::AppState;
use swath_application::Projections;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "projections";

/// The live views, or `503` when the service was started without them.
pub(crate) fn views(state: &AppState) -> Result<&Projections, ApiError> {
    state
        .live_views
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no live projections are configured".into()))
}
