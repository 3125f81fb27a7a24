use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use swath_domain::{AccountId, SiteId};

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Read,
    Write,
    Admin,
}

/// Who is asking: an account, its scopes, and optionally the only sites it may see.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    pub account_id: AccountId,
    pub scopes: Vec<Scope>,
    /// `None`: every site of the account.
    pub sites: Option<Vec<SiteId>>,
}

impl Principal {
    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    pub fn sees_site(&self, site: SiteId) -> bool {
        self.sites.as_ref().is_none_or(|s| s.contains(&site))
    }
}

/// The SHA-256 of a bearer token, hex encoded. Tokens are random (high entropy), so a plain
/// digest is enough; only the digest is stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TokenHash(pub String);

pub fn hash_token(token: &str) -> TokenHash {
    TokenHash(hex::encode(Sha256::digest(token.as_bytes())))
}

/// Errors of the [`TokenStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("token hash already stored")]
    Conflict,
    #[error("token store unavailable: {0}")]
    Unavailable(String),
}

/// Bearer API tokens, stored hashed.
///
/// An implementation MUST store only the [`TokenHash`], never the token; resolve a hash to its
/// principal or `None` (unknown or revoked); refuse a hash stored already with
/// [`TokenError::Conflict`]; return [`TokenError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait TokenStore: Send + Sync {
    async fn store_token(&self, hash: TokenHash, principal: Principal) -> Result<(), TokenError>;
    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError>;
}
