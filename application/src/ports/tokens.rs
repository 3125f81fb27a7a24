use super::Cause;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use swath_domain::{AccountId, Principal};
use uuid::Uuid;

/// A token's id: what lists show and revocation names. Never the token, never its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TokenId(pub Uuid);

impl TokenId {
    /// A new id that sorts by creation time (UUID v7).
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for TokenId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A token to store: who it is, and what it may do.
#[derive(Clone, Debug, PartialEq)]
pub struct NewToken {
    pub id: TokenId,
    /// A label for people ("CI", "Home Assistant"); may be empty.
    pub name: String,
    pub principal: Principal,
}

/// A stored token as lists show it: never the token or its hash.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenInfo {
    pub id: TokenId,
    pub name: String,
    pub principal: Principal,
    /// When the store recorded it.
    pub created_at: DateTime<Utc>,
}

/// Which tokens of an account to list: those `within` may see ([`Principal::covers`]), in id
/// order, strictly after `after`, at most `limit`.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenQuery {
    pub within: Principal,
    pub after: Option<TokenId>,
    pub limit: usize,
}

/// The SHA-256 of a bearer token, hex encoded. Tokens are random (high entropy), so a plain
/// digest is enough; only the digest is stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TokenHash(pub String);

pub fn hash_token(token: &str) -> TokenHash {
    TokenHash(hex::encode(Sha256::digest(token.as_bytes())))
}

/// The prefix of every token Swath generates: lets people and secret scanners recognise one.
pub const TOKEN_PREFIX: &str = "swath_";

/// A new random bearer token: [`TOKEN_PREFIX`] and 32 random bytes (256 bits), hex encoded.
/// Shown once to whoever creates it; only its [`hash_token`] is stored.
pub fn generate_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
}

/// Errors of the [`TokenStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The hash (or the id) is stored already.
    #[error("token hash already stored")]
    Conflict,
    /// The token's account does not exist (a store that can check it, PostgreSQL by its foreign
    /// key, refuses such a token).
    #[error("account {0} does not exist")]
    UnknownAccount(AccountId),
    #[error("token store unavailable: {0}")]
    Unavailable(#[source] Cause),
}

/// Bearer API tokens, stored hashed.
///
/// An implementation MUST:
/// - store only the [`TokenHash`], never the token; refuse a hash or an id stored already with
///   [`TokenError::Conflict`];
/// - resolve a hash to its principal, or `None` (unknown or revoked);
/// - `tokens`: list the tokens of `query.within`'s account that it covers
///   ([`Principal::covers`]; applied before the limit), in id order, strictly after
///   `query.after`, at most `query.limit`; never another account's;
/// - `token`: answer the token with this id whatever its account (callers decide visibility);
///   once it is revoked, `None`;
/// - `token_by_hash`: answer the token whose hash this is (as `token` answers it: its id and
///   principal), or `None` when unknown or revoked;
/// - `revoke_token`: delete the token with this id: from then on its hash resolves to `None`;
///   answer whether it existed;
/// - return [`TokenError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait TokenStore: Send + Sync {
    async fn create_token(&self, hash: TokenHash, token: NewToken) -> Result<(), TokenError>;
    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError>;
    async fn tokens(&self, query: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError>;
    async fn token(&self, id: TokenId) -> Result<Option<TokenInfo>, TokenError>;
    async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenInfo>, TokenError>;
    async fn revoke_token(&self, id: TokenId) -> Result<bool, TokenError>;

    /// Stores an unnamed token with a new id (the demo token, tests).
    async fn store_token(&self, hash: TokenHash, principal: Principal) -> Result<(), TokenError> {
        self.create_token(
            hash,
            NewToken {
                id: TokenId::new(),
                name: String::new(),
                principal,
            },
        )
        .await
    }
}
