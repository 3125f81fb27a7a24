//! The bounded live projections as JSON (`GET /v1/live/fleet`, `/v1/live/wall`,
//! `/v1/live/health`) and the operator assignments they rank (`/v1/mowers/{id}/assignments`).
//!
//! The answers are snapshot documents built from the use case's typed snapshots (never store
//! rows). Every list, at every level, is `{items, truncated, limit}`: `truncated` says that at
//! least one more visible item exists beyond `limit` (found with one sentinel row, never by
//! counting). A live view is a monitoring window, not an inventory: the complete lists are the
//! paginated `/v1/mowers` and `/v1/sites`.
//!
//! One module per route with its documents: [`fleet`], [`wall`], [`health`] and
//! [`assignments`]; this one keeps what they share (the operator on duty, a site card, the
//! errors of the projection and assignment ports).

/// Declares a live view's [`LiveDocument`]: `$doc` of the use case's `$snapshot`, read by
/// `Projections::$read`, its entity tag over `$field` (all of it but `generated_at`).
macro_rules! live_document {
    ($doc:ty: $snapshot:ty, read by $read:ident, tagged over $field:ident: $validator:ty) => {
        impl super::LiveDocument for $doc {
            type Snapshot = $snapshot;
            type Validator = $validator;

            async fn read(
                views: &swath_application::Projections,
                principal: &swath_domain::Principal,
            ) -> Result<$snapshot, swath_application::ports::ProjectionError> {
                views.$read(principal).await
            }

            fn document(snapshot: $snapshot, now: chrono::DateTime<chrono::Utc>) -> Self {
                Self::of(snapshot, now)
            }

            fn validator(&self) -> &$validator {
                &self.$field
            }
        }
    };
}

pub mod assignments;
pub mod fleet;
pub mod health;
pub mod wall;

pub use assignments::{AssignmentBody, AssignmentDto, AssignmentList, AssignmentPath};
pub use fleet::{FleetDashboard, LiveAlert, LiveAlertList, LiveMowerDto, LiveMowerList};
pub use health::{
    HealthMowerDto, HealthMowerList, HealthSiteDto, HealthSiteList, HealthStatusDto, HealthWall,
    SeverityCounts,
};
pub use wall::{SiteWall, WallSiteDto, WallSiteList};

use crate::error::{ApiError, Resource};
use crate::etag::json_with_etag_of;
use crate::state::AppState;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::ports::{chain, AssignmentError, MowerCard, ProjectionError, SiteCard};
use swath_application::Projections;
use swath_domain::{Assignment, Principal, Priority};
use utoipa::ToSchema;
use uuid::Uuid;

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

/// A live view's document (fleet dashboard, site wall, health wall): how it is read and built,
/// and what its entity tag covers.
pub(crate) trait LiveDocument: Serialize + Sized {
    type Snapshot;
    type Validator: Serialize;
    /// The principal's snapshot of this view.
    async fn read(
        views: &Projections,
        principal: &Principal,
    ) -> Result<Self::Snapshot, ProjectionError>;
    /// The document of `snapshot`, generated at `now`.
    fn document(snapshot: Self::Snapshot, now: DateTime<Utc>) -> Self;
    /// All of the document but `generated_at`: what its entity tag is computed over.
    fn validator(&self) -> &Self::Validator;
}

/// The answer of every live view: the principal's document, tagged over all but `generated_at`,
/// which is new on every request, so that a poller gets its `304` while the data is the same.
pub(crate) async fn live_answer<D: LiveDocument>(
    state: &AppState,
    principal: &Principal,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let snapshot = D::read(views(state)?, principal).await?;
    let document = D::document(snapshot, state.clock.now());
    json_with_etag_of(headers, &document, document.validator())
}

/// The `304` of a live view, as the document states it for the three.
pub(crate) struct LiveNotModified;

impl utoipa::IntoResponses for LiveNotModified {
    fn responses(
    ) -> std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::Response>> {
        crate::etag::not_modified(
            "Nothing but `generated_at` has changed since the `ETag` given in `If-None-Match`.",
            "The entity tag of the current document.",
        )
    }
}

/// The operator on duty of a mower: its winning active assignment (priority critical → low, then
/// the most recently updated, then the highest id).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct OperatorOnDuty {
    /// The assignment's id.
    pub assignment_id: Uuid,
    /// The operator's name.
    #[schema(example = "Robin")]
    pub operator: String,
    /// The assignment's priority.
    pub priority: PriorityDto,
    /// When the assignment was last changed.
    pub updated_at: DateTime<Utc>,
}

/// How an assignment ranks: the active assignment of the highest priority is on duty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = Priority)]
pub enum PriorityDto {
    Critical,
    High,
    Normal,
    Low,
}

impl PriorityDto {
    pub(crate) fn of(p: Priority) -> Self {
        match p {
            Priority::Critical => PriorityDto::Critical,
            Priority::High => PriorityDto::High,
            Priority::Normal => PriorityDto::Normal,
            Priority::Low => PriorityDto::Low,
        }
    }

    pub(crate) fn domain(self) -> Priority {
        match self {
            PriorityDto::Critical => Priority::Critical,
            PriorityDto::High => Priority::High,
            PriorityDto::Normal => Priority::Normal,
            PriorityDto::Low => Priority::Low,
        }
    }
}

pub(crate) fn operator_dto(a: &Option<Assignment>) -> Option<OperatorOnDuty> {
    a.as_ref().map(|a| OperatorOnDuty {
        assignment_id: a.id,
        operator: a.operator.clone(),
        priority: PriorityDto::of(a.priority),
        updated_at: a.updated_at,
    })
}

pub(crate) fn card_fields(m: &MowerCard) -> (Option<String>, Option<u8>) {
    (m.activity.map(|a| a.as_str().to_owned()), m.battery_percent)
}

/// A site of a wall.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveSite {
    /// The site's id.
    pub id: Uuid,
    /// Its name.
    #[schema(example = "Riverside park")]
    pub name: String,
    /// Its IANA time zone.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: String,
    /// Where it sorts (ascending, then name, then id).
    pub display_order: i32,
}

pub(crate) fn live_site(s: SiteCard) -> LiveSite {
    LiveSite {
        id: s.id.0,
        name: s.name,
        time_zone: s.time_zone,
        display_order: s.display_order,
    }
}
