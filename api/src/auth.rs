//! Bearer authentication: `Authorization: Bearer <token>` → [`hash_token`] →
//! [`Access::principal`](swath_application::Access::principal) (the token store, behind the
//! principal cache when `main` enables it: decision 78).
//!
//! Only the token's hash is ever looked up (tokens are stored hashed). An extractor per scope
//! keeps the rule next to the route: a handler that takes [`Reader`] cannot run without a
//! principal that has the `read` scope ([`Writer`]: `write`, [`Admin`]: `admin`). Scopes do not
//! imply each other: a `write`-only token (a gateway's) cannot read.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts, HeaderMap};
use swath_application::ports::hash_token;
use swath_domain::{Principal, Scope};

/// Tokens longer than this are refused without hashing: no real token is, and it bounds the work
/// an anonymous request can cause.
const MAX_TOKEN_CHARS: usize = 512;

/// An extractor per scope: the principal of the request's token, refused with `401` without a
/// valid token and `403` without the scope.
macro_rules! scoped_principal {
    ($(#[$doc:meta])* $name:ident, $scope:expr, $scope_name:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name(pub Principal);

        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut Parts,
                state: &AppState,
            ) -> Result<Self, Self::Rejection> {
                let principal = authenticate(&parts.headers, state).await?;
                if !principal.has_scope($scope) {
                    return Err(ApiError::MissingScope($scope_name));
                }
                Ok($name(principal))
            }
        }
    };
}

scoped_principal!(
    /// A principal with the `read` scope: every `GET` of `/v1`.
    Reader,
    Scope::Read,
    "read"
);
scoped_principal!(
    /// A principal with the `write` scope: `POST /v1/states` and the directory's writes.
    Writer,
    Scope::Write,
    "write"
);
scoped_principal!(
    /// A principal with the `admin` scope: accounts and tokens.
    Admin,
    Scope::Admin,
    "admin"
);

/// A [`Reader`] with its token's hash: for a request that runs long and checks its token again
/// while it runs (an export, decision 194).
#[derive(Clone, Debug)]
pub struct ReaderToken {
    pub principal: Principal,
    pub token: swath_application::ports::TokenHash,
}

impl FromRequestParts<AppState> for ReaderToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Reader(principal) = Reader::from_request_parts(parts, state).await?;
        let token = hash_token(bearer_token(&parts.headers)?);
        Ok(ReaderToken { principal, token })
    }
}

/// The principal of any valid token, whatever its scopes: for what every token may ask about
/// itself (`GET /v1/me`). `401` without a valid token.
#[derive(Clone, Debug)]
pub struct Authenticated(pub Principal);

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Ok(Authenticated(authenticate(&parts.headers, state).await?))
    }
}

/// Resolves the bearer token of a request to its principal.
pub async fn authenticate(headers: &HeaderMap, state: &AppState) -> Result<Principal, ApiError> {
    let token = bearer_token(headers)?;
    state
        .access
        .principal(&hash_token(token))
        .await?
        .ok_or(ApiError::InvalidToken)
}

/// The token of an `Authorization: Bearer <token>` header. The scheme is case-insensitive
/// (RFC 9110 §11.1).
pub(crate) fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(ApiError::MissingToken)?
        .to_str()
        .map_err(|_| ApiError::InvalidToken)?;
    let (scheme, token) = value.split_once(' ').ok_or(ApiError::InvalidToken)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::MissingToken);
    }
    let token = token.trim();
    if token.is_empty() || token.len() > MAX_TOKEN_CHARS {
        return Err(ApiError::InvalidToken);
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn reads_the_bearer_token() {
        assert_eq!(bearer_token(&headers("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer_token(&headers("bearer  abc ")).unwrap(), "abc");
        assert!(matches!(
            bearer_token(&HeaderMap::new()),
            Err(ApiError::MissingToken)
        ));
        assert!(matches!(
            bearer_token(&headers("Basic abc")),
            Err(ApiError::MissingToken)
        ));
        assert!(matches!(
            bearer_token(&headers("Bearer")),
            Err(ApiError::InvalidToken)
        ));
        assert!(matches!(
            bearer_token(&headers("Bearer  ")),
            Err(ApiError::InvalidToken)
        ));
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_CHARS + 1));
        assert!(matches!(
            bearer_token(&headers(&long)),
            Err(ApiError::InvalidToken)
        ));
    }
}
