//! `/v1/sites`: the sites of the account (create, list, read, change, delete). A token limited to
//! some sites sees and changes only those, and cannot create sites.

use super::location;
use crate::auth::{Reader, Writer};
use crate::dto::answers::{ById, ByIdWithBody, NotJson, PageRefused, SiteInvalid};
use crate::dto::directory::{NewSite, SiteDto, SitePage, SitePatch};
use crate::dto::params::{PageParams, SitePath};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::page::{self, List};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_domain::SiteId;
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "sites";

/// List the sites
#[utoipa::path(
    get,
    path = "/v1/sites",
    tag = TAG,
    description = "The sites of the token's account (only its own sites when the token is limited \
        to some), ordered by display order, then name (byte by byte), then id. Page with `limit` \
        and `cursor`.",
    security(("bearer" = ["read"])),
    params(PageParams),
    responses(
        (status = 200, description = "A page of sites.", body = SitePage),
        PageRefused,
    ),
)]
pub async fn list_sites(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Json<SitePage>, ApiError> {
    let (ask, after) = page::ask(List::Sites, params.limit, params.cursor.as_deref())?;
    let rows = state.fleet.sites(&principal, after, ask.fetch()).await?;
    Ok(Json(ask.page(
        rows,
        |s| s.order_key(),
        |s| SiteDto::from(&s),
    )))
}

/// Add a site
#[utoipa::path(
    post,
    path = "/v1/sites",
    tag = TAG,
    description = "Adds a site to the token's account. Its IANA time zone decides which local day \
        each state of its mowers counts for. A token limited to some sites cannot add sites.",
    security(("bearer" = ["write"])),
    request_body(content = NewSite, description = "The site.", content_type = "application/json"),
    responses(
        (status = 201, description = "The site was added.", body = SiteDto,
            headers(("Location" = String, description = "The path of the new site."))),
        NotJson,
        SiteInvalid,
    ),
)]
pub async fn create_site(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewSite>,
) -> Result<Response, ApiError> {
    let site = state.fleet.create_site(&principal, body.checked()?).await?;
    tracing::info!(site_id = %site.id, account_id = %principal.account_id, "Added a site.");
    Ok((
        StatusCode::CREATED,
        location(format!("/v1/sites/{}", site.id))?,
        Json(SiteDto::from(&site)),
    )
        .into_response())
}

/// Get a site
#[utoipa::path(
    get,
    path = "/v1/sites/{id}",
    tag = TAG,
    description = "The site's name, time zone and display order.",
    security(("bearer" = ["read"])),
    params(SitePath),
    responses(
        (status = 200, description = "The site.", body = SiteDto),
        ById<SitePath>,
    ),
)]
pub async fn get_site(
    Reader(principal): Reader,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<SiteDto>, ApiError> {
    let site = state.fleet.site(&principal, SiteId(id)).await?;
    Ok(Json(SiteDto::from(&site)))
}

/// Change a site
#[utoipa::path(
    patch,
    path = "/v1/sites/{id}",
    tag = TAG,
    description = "Replaces the fields given (name, time zone, display order); the others stay. \
        A new time zone applies to the days of states counted from then on; day totals counted \
        before keep their days.",
    security(("bearer" = ["write"])),
    params(SitePath),
    request_body(content = SitePatch, description = "The fields to change.", content_type = "application/json"),
    responses(
        (status = 200, description = "The changed site.", body = SiteDto),
        ByIdWithBody<SitePath>,
        SiteInvalid,
    ),
)]
pub async fn update_site(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<SitePatch>,
) -> Result<Json<SiteDto>, ApiError> {
    let changes = patch.checked()?;
    let site = state
        .fleet
        .update_site(&principal, SiteId(id), changes)
        .await?;
    Ok(Json(SiteDto::from(&site)))
}

/// Delete a site without mowers
#[utoipa::path(
    delete,
    path = "/v1/sites/{id}",
    tag = TAG,
    description = "Deletes the site. A site that still has mowers is not deleted (`409`): move \
        them to another site or delete them first.",
    security(("bearer" = ["write"])),
    params(SitePath),
    responses(
        (status = 204, description = "The site is deleted."),
        ById<SitePath>,
        (status = 409, description = "The site still has mowers."),
    ),
)]
pub async fn delete_site(
    Writer(principal): Writer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    let site = state.fleet.delete_site(&principal, SiteId(id)).await?;
    tracing::info!(site_id = %site.id, account_id = %principal.account_id, "Deleted a site.");
    Ok(StatusCode::NO_CONTENT)
}
