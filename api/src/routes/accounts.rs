//! `/v1/me` (any token): who the token is. `/v1/accounts` (admin): the token's own account, and
//! new accounts.
//!
//! A token sees its own account only: accounts are tenants, and no tenant sees another. Creating
//! an account makes a new, separate tenant and answers the first (admin) token of it, the only way
//! into it; the creating token cannot see the new account afterwards (see docs/decisions.md).

use super::location;
use crate::auth::{Admin, Authenticated};
use crate::dto::answers::{ById, NotJson};
use crate::dto::directory::{AccountDto, AccountList, CreatedAccount, Me, NewAccount};
use crate::dto::params::AccountPath;
use crate::error::{ApiError, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_domain::AccountId;
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "accounts";

/// Who am I
#[utoipa::path(
    get,
    path = "/v1/me",
    tag = TAG,
    description = "The calling token's account, scopes and sites, for any valid token whatever \
        its scopes. The account's `id` is the `account_id` that every state report of its \
        mowers names (`POST /v1/states`).",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The token's account, scopes and sites.", body = Me),
    ),
)]
pub async fn get_me(
    Authenticated(principal): Authenticated,
    State(state): State<AppState>,
) -> Result<Json<Me>, ApiError> {
    // A token outlives no account (deleting one deletes its tokens), so this is a store anomaly.
    let account = state
        .fleet
        .own_account(&principal)
        .await?
        .ok_or(ApiError::NotFound(Resource::Account))?;
    Ok(Json(Me::new(&account, &principal)))
}

/// List the accounts
#[utoipa::path(
    get,
    path = "/v1/accounts",
    tag = TAG,
    description = "The accounts the token may see: its own, and no other (accounts are tenants). \
        A list, so that clients need not change if a token ever sees more than one.",
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "The token's account.", body = AccountList),
    ),
)]
pub async fn list_accounts(
    Admin(principal): Admin,
    State(state): State<AppState>,
) -> Result<Json<AccountList>, ApiError> {
    let own = state.fleet.own_account(&principal).await?;
    Ok(Json(AccountList {
        items: own.iter().map(AccountDto::from).collect(),
    }))
}

/// Create an account
#[utoipa::path(
    post,
    path = "/v1/accounts",
    tag = TAG,
    description = "Creates a new account (a separate tenant, with no sites or mowers) and a first \
        token of it with every scope, shown once in the answer: the only way into the new \
        account. The calling token does not see the new account. A token limited to some sites \
        cannot create accounts.",
    security(("bearer" = ["admin"])),
    request_body(content = NewAccount, description = "The account.", content_type = "application/json"),
    responses(
        (status = 201, description = "The account was created, with its first token.", body = CreatedAccount,
            headers(("Location" = String, description = "The path of the new account."))),
        NotJson,
        (status = 422, description = "The body does not fit the schema."),
        (status = 429, description = "The calling token's account created as many accounts as \
            it may per hour (`SWATH_ACCOUNTS_PER_HOUR`, 10 unless configured), or its new \
            account's first token is refused likewise. `Retry-After` says when to try again.",
            headers(("Retry-After" = u64, description = "Seconds to wait before creating an \
                account again."))),
    ),
)]
pub async fn create_account(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewAccount>,
) -> Result<Response, ApiError> {
    let (account, token) = state
        .fleet
        .create_account(&principal, body.checked()?)
        .await?;
    tracing::info!(account_id = %account.id, created_by = %principal.account_id, "Created an account with its first token.");
    Ok((
        StatusCode::CREATED,
        location(format!("/v1/accounts/{}", account.id))?,
        Json(CreatedAccount {
            account: AccountDto::from(&account),
            token: token.into(),
        }),
    )
        .into_response())
}

/// Get an account
#[utoipa::path(
    get,
    path = "/v1/accounts/{id}",
    tag = TAG,
    description = "The token's own account. Any other id answers `404`, like an unknown one.",
    security(("bearer" = ["admin"])),
    params(AccountPath),
    responses(
        (status = 200, description = "The account.", body = AccountDto),
        ById<AccountPath>,
    ),
)]
pub async fn get_account(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<AccountDto>, ApiError> {
    match state.fleet.account(&principal, AccountId(id)).await? {
        Some(account) => Ok(Json(AccountDto::from(&account))),
        None => Err(ApiError::NotFound(Resource::Account)),
    }
}
