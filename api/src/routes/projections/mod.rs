//! The bounded live projections as JSON (`GET /v1/live/fleet`, `/v1/live/wall`,
//! `/v1/live/health`) and the operator assignments they rank (`/v1/mowers/{id}/assignments`).
//!
//! A live view is a monitoring window, not an inventory: every list it shows is cut at a limit
//! and says so (`truncated`, found with one sentinel row, never by counting); the complete lists
//! are the paginated `/v1/mowers` and `/v1/sites`.
//!
//! [`live_views`] holds the three views' routes, [`assignments`] the assignments'; their
//! documents are in `crate::dto::live_views` and `crate::dto::assignments` (decision 158). This
//! module keeps what they share: the use case (their errors are mapped in `crate::error`).

pub mod assignments;
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
