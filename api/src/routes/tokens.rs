//! `/v1/tokens`: the API tokens of the account (admin). A token is shown once, when it is
//! created; lists show its id, name, scopes and sites, never the token or its hash.
//!
//! A token manages only tokens within its own powers ([`Principal::covers`]): it creates, sees
//! and revokes tokens whose scopes are some of its own and whose sites are some of its own. So an
//! admin token limited to a site cannot mint an unlimited token, nor revoke one.

use super::location;
use crate::auth::Admin;
use crate::dto::answers::{ById, NotJson, PageRefused};
use crate::dto::directory::{CreatedToken, NewTokenRequest, TokenDto, TokenPage};
use crate::dto::params::{PageParams, TokenPath};
use crate::error::{ApiError, Resource};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::page::{self, List};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_application::{TokenId, TokenInfo};
use swath_domain::Principal;
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "tokens";

/// List the API tokens
#[utoipa::path(
    get,
    path = "/v1/tokens",
    tag = TAG,
    description = "The tokens of the account that the calling token could have created itself \
        (scopes and sites within its own), oldest first: id, name, scopes, sites. Never the token \
        or its hash. Page with `limit` and `cursor`.",
    security(("bearer" = ["admin"])),
    params(PageParams),
    responses(
        (status = 200, description = "A page of tokens.", body = TokenPage),
        PageRefused,
    ),
)]
pub async fn list_tokens(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Json<TokenPage>, ApiError> {
    let (ask, after) = page::ask(List::Tokens, params.limit, params.cursor.as_deref())?;
    let rows = state
        .token_admin
        .tokens(&principal, after, ask.fetch())
        .await?;
    Ok(Json(ask.page(rows, |t| t.id, |t| TokenDto::from(&t))))
}

/// Create an API token
#[utoipa::path(
    post,
    path = "/v1/tokens",
    tag = TAG,
    description = "Creates a token of the account with some of the calling token's scopes, \
        optionally limited to some sites (a calling token limited to sites must limit the new one \
        to some of its own). The answer is the only time the token is shown: Swath stores its \
        SHA-256 only.",
    security(("bearer" = ["admin"])),
    request_body(content = NewTokenRequest, description = "The token's name, scopes and sites.",
        content_type = "application/json"),
    responses(
        (status = 201, description = "The token was created; the answer shows it once.", body = CreatedToken,
            headers(("Location" = String, description = "The path of the new token."))),
        NotJson,
        (status = 422, description = "The body does not fit the schema, has no scope, an empty \
            site list, or names a site not visible to this token."),
        (status = 429, description = "The account created as many tokens as it may per hour \
            (`SWATH_TOKENS_PER_HOUR`, 60 unless configured). `Retry-After` says when to try \
            again.",
            headers(("Retry-After" = u64, description = "Seconds to wait before creating a \
                token again."))),
    ),
)]
pub async fn create_token(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewTokenRequest>,
) -> Result<Response, ApiError> {
    let created = state.token_admin.issue(&principal, body.checked()?).await?;
    tracing::info!(token_id = %created.id, account_id = %principal.account_id, "Created an API token.");
    Ok((
        StatusCode::CREATED,
        location(format!("/v1/tokens/{}", created.id))?,
        Json(CreatedToken::from(created)),
    )
        .into_response())
}

/// The token `id` if the principal covers it; otherwise the one error of every invisible token.
async fn visible_token(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
) -> Result<TokenInfo, ApiError> {
    match state.token_admin.visible(principal, TokenId(id)).await? {
        Some(t) => Ok(t),
        None => Err(ApiError::NotFound(Resource::Token)),
    }
}

/// Get an API token
#[utoipa::path(
    get,
    path = "/v1/tokens/{id}",
    tag = TAG,
    description = "The token's id, name, scopes and sites; never the token or its hash.",
    security(("bearer" = ["admin"])),
    params(TokenPath),
    responses(
        (status = 200, description = "The token.", body = TokenDto),
        ById<TokenPath>,
    ),
)]
pub async fn get_token(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<TokenDto>, ApiError> {
    let token = visible_token(&state, &principal, id).await?;
    Ok(Json(TokenDto::from(&token)))
}

/// Revoke an API token
#[utoipa::path(
    delete,
    path = "/v1/tokens/{id}",
    tag = TAG,
    description = "Deletes the token: from the next request on, it answers `401` (through \
        another replica of the service within 2 s, the time a replica keeps a token's \
        principal). A token may revoke itself.",
    security(("bearer" = ["admin"])),
    params(TokenPath),
    responses(
        (status = 204, description = "The token is revoked."),
        ById<TokenPath>,
    ),
)]
pub async fn revoke_token(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    // This process's open live streams of that token end now; other replicas' within 30 s.
    if !state.token_admin.revoke(&principal, TokenId(id)).await? {
        return Err(ApiError::NotFound(Resource::Token));
    }
    tracing::info!(token_id = %id, account_id = %principal.account_id, "Revoked an API token.");
    Ok(StatusCode::NO_CONTENT)
}
