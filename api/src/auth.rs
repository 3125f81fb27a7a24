//! Bearer authentication: `Authorization: Bearer <token>` → [`hash_token`] →
//! [`TokenStore::principal`](swath_application::ports::TokenStore::principal).
//!
//! Only the token's hash is ever looked up (tokens are stored hashed). An extractor per scope
//! keeps the rule next to the route: a handler that takes [`Reader`] cannot run without a
//! principal that has the `read` scope.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts, HeaderMap};
use swath_application::ports::{hash_token, Principal, Scope};

/// Tokens longer than this are refused without hashing: no real token is, and it bounds the work
/// an anonymous request can cause.
const MAX_TOKEN_CHARS: usize = 512;

/// A principal with the `read` scope.
#[derive(Clone, Debug)]
pub struct Reader(pub Principal);

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let principal = authenticate(&parts.headers, state).await?;
        if !principal.has_scope(Scope::Read) {
            return Err(ApiError::MissingScope("read"));
        }
        Ok(Reader(principal))
    }
}

/// Resolves the bearer token of a request to its principal.
pub async fn authenticate(headers: &HeaderMap, state: &AppState) -> Result<Principal, ApiError> {
    let token = bearer_token(headers)?;
    state
        .tokens
        .principal(&hash_token(token))
        .await?
        .ok_or(ApiError::InvalidToken)
}

/// The token of an `Authorization: Bearer <token>` header. The scheme is case-insensitive
/// (RFC 9110 §11.1).
fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
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
