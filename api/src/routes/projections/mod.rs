//! The bounded live projections as JSON (`GET /v1/live/fleet`, `/v1/live/wall`,
//! `/v1/live/health`) and the operator assignments they rank (`/v1/mowers/{id}/assignments`).
//!
//! A live view is a monitoring window, not an inventory: every list it shows is cut at a limit
//! and says so (`truncated`, found with one sentinel row, never by counting); the complete lists
//! are the paginated `/v1/mowers` and `/v1/sites`.
//!
//! [`live_views`] holds the three views' routes, [`assignments`] the assignments'; their
//! documents are in `crate::dto::live_views` and `crate::dto::assignments` (decision 158). This
//! module keeps what they share: the errors of the projection and assignment ports, and the use
//! case.

pub mod assignments;
pub mod live_views;

use crate::error::{ApiError, Resource};
use crate::state::AppState;
use swath_application::ports::{chain, AssignmentError, ProjectionError};
use swath_application::Projections;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "projections";

impl From<ProjectionError> for ApiError {
    fn from(e: ProjectionError) -> Self {
        match e {
            ProjectionError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            ProjectionError::Corrupt(_) => ApiError::Internal(chain(&e).to_string()),
        }
    }
}

impl From<AssignmentError> for ApiError {
    fn from(e: AssignmentError) -> Self {
        match e {
            AssignmentError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            AssignmentError::Limit(detail) => ApiError::Conflict(detail),
            AssignmentError::Conflict(_) => ApiError::Conflict(
                "An assignment with this id exists already; try again.".to_owned(),
            ),
            // The mower was deleted between the visibility check and the insert.
            AssignmentError::NotFound(_) => ApiError::NotFound(Resource::Mower),
        }
    }
}

/// The live views, or `503` when the service was started without them.
pub(crate) fn views(state: &AppState) -> Result<&Projections, ApiError> {
    state
        .live_views
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no live projections are configured".into()))
}
