//! `/v1/mowers/{id}/assignments`: the operator assignments the live views rank (their
//! create, read, update and delete; the ranking is the live views', `super::projections`). Listed
//! under the projections' OpenAPI tag, where the document has always shown them.

use super::projections::TAG;
use crate::auth::{Reader, Writer};
use crate::dto::answers::ById;
use crate::dto::assignments::{AssignmentBody, AssignmentDto, AssignmentList};
use crate::dto::params::{AssignmentPath, MowerPath};
use crate::error::{ApiError, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_application::MAX_ASSIGNMENTS_PER_MOWER;
use swath_domain::MowerId;
use uuid::Uuid;

/// List a mower's operator assignments
#[utoipa::path(
    get,
    path = "/v1/mowers/{id}/assignments",
    tag = TAG,
    description = "Every operator assignment of the mower: active ones first, in the order that \
        decides who is on duty (priority critical → low, then the most recently updated, then \
        the highest id).",
    security(("bearer" = ["read"])),
    params(MowerPath),
    responses(
        (status = 200, description = "The assignments.", body = AssignmentList),
        ById<MowerPath>,
    ),
)]
pub async fn list_assignments(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<AssignmentList>, ApiError> {
    let items = state
        .mower_settings
        .assignments(&principal, MowerId(id))
        .await?;
    Ok(Json(AssignmentList {
        items: items.into_iter().map(AssignmentDto::from).collect(),
        truncated: false,
        limit: MAX_ASSIGNMENTS_PER_MOWER as u32,
    }))
}

/// Assign an operator to a mower
#[utoipa::path(
    post,
    path = "/v1/mowers/{id}/assignments",
    tag = TAG,
    description = "Adds an operator assignment. A mower may have several active assignments; the \
        live views show the one on duty. At most 64 per mower.",
    security(("bearer" = ["write"])),
    params(MowerPath),
    request_body = AssignmentBody,
    responses(
        (status = 201, description = "The assignment was added.", body = AssignmentDto),
        (status = 404, description = "No such mower is visible to this token."),
        (status = 409, description = "The mower has 64 assignments already."),
        (status = 422, description = "The body is not a valid assignment."),
    ),
)]
pub async fn create_assignment(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<AssignmentBody>,
) -> Result<Response, ApiError> {
    let spec = body.checked()?;
    let assignment = state
        .mower_settings
        .create_assignment(&principal, MowerId(id), spec)
        .await?;
    let location = format!(
        "/v1/mowers/{}/assignments/{}",
        assignment.mower_id, assignment.id
    );
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(AssignmentDto::from(assignment)),
    )
        .into_response())
}

/// Change an operator assignment
#[utoipa::path(
    put,
    path = "/v1/mowers/{id}/assignments/{assignment_id}",
    tag = TAG,
    description = "Replaces the operator, priority and active flag of an assignment; its \
        `updated_at` becomes now.",
    security(("bearer" = ["write"])),
    params(MowerPath, AssignmentPath),
    request_body = AssignmentBody,
    responses(
        (status = 200, description = "The assignment as stored.", body = AssignmentDto),
        (status = 404, description = "No such mower or assignment is visible to this token."),
        (status = 422, description = "The body is not a valid assignment."),
    ),
)]
pub async fn update_assignment(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath((id, assignment_id)): ApiPath<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<AssignmentBody>,
) -> Result<Json<AssignmentDto>, ApiError> {
    let spec = body.checked()?;
    state
        .mower_settings
        .update_assignment(&principal, MowerId(id), assignment_id, spec)
        .await?
        .map(|a| Json(a.into()))
        .ok_or(ApiError::NotFound(Resource::Assignment))
}

/// Remove an operator assignment
#[utoipa::path(
    delete,
    path = "/v1/mowers/{id}/assignments/{assignment_id}",
    tag = TAG,
    description = "Deletes an operator assignment; if it was on duty, the next one in the ranking \
        takes over.",
    security(("bearer" = ["write"])),
    params(MowerPath, AssignmentPath),
    responses(
        (status = 204, description = "The assignment was removed."),
        (status = 404, description = "No such mower or assignment is visible to this token."),
    ),
)]
pub async fn delete_assignment(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath((id, assignment_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    if !state
        .mower_settings
        .delete_assignment(&principal, MowerId(id), assignment_id)
        .await?
    {
        return Err(ApiError::NotFound(Resource::Assignment));
    }
    Ok(StatusCode::NO_CONTENT)
}
