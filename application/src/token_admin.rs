//! API tokens as an admin principal manages them: which it sees (those it covers,
//! [`Principal::covers`]), issuing one (within the issuer's powers, its sites visible to it, at
//! most so many per hour in an account, [`CreationRate`]), revoking one (and telling this
//! process at once, [`Revocations`]).

use crate::creation_rate::{Creation, CreationRate, RateLimited};
use crate::ports::{
    generate_token, hash_token, NewToken, TokenError, TokenId, TokenInfo, TokenQuery, TokenStore,
};
use crate::visibility::{invisible_ids, Access, AccessError};
use std::sync::Arc;
use swath_domain::valid::Label;
use swath_domain::{AccountId, Principal, Scope, SiteId};

/// The use case of tokens over the API (see the module).
#[derive(Clone)]
pub struct TokenAdmin {
    access: Access,
    tokens: Arc<dyn TokenStore>,
    rate: CreationRate,
}

/// A token as its issuer asks for it: its name (checked), scopes and sites (`None`: every site
/// of the account).
#[derive(Clone, Debug)]
pub struct TokenRequest {
    pub name: Label,
    pub scopes: Vec<Scope>,
    pub sites: Option<Vec<SiteId>>,
}

/// A token just issued: the token itself, shown this once (only its hash is stored), its id, its
/// name and what it may do.
#[derive(Clone, Debug)]
pub struct IssuedToken {
    pub token: String,
    pub id: TokenId,
    pub name: String,
    pub principal: Principal,
}

/// The detail of a token refused because its issuer does not cover it.
pub const NOT_COVERED: &str =
    "A token can only create tokens with some of its own scopes and sites.";

/// Why a token was not issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The request names no scope, an empty site list or sites the issuer cannot see: every
    /// problem as `(JSON pointer, sentence)`.
    #[error("the token request is invalid")]
    Invalid(Vec<(String, String)>),
    /// The new token would have powers its issuer lacks ([`NOT_COVERED`]).
    #[error("the issuer does not cover the new token")]
    NotCovered,
    /// The account issued as many tokens as it may for now.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error(transparent)]
    Store(#[from] TokenError),
}

impl TokenAdmin {
    pub fn new(access: Access, tokens: Arc<dyn TokenStore>, rate: CreationRate) -> Self {
        Self {
            access,
            tokens,
            rate,
        }
    }

    /// The same over another creation rate (its limits changed).
    pub fn with_rate(mut self, rate: CreationRate) -> Self {
        self.rate = rate;
        self
    }

    /// A page of the tokens `principal` covers, in id order after `after`.
    pub async fn tokens(
        &self,
        principal: &Principal,
        after: Option<TokenId>,
        limit: usize,
    ) -> Result<Vec<TokenInfo>, TokenError> {
        self.tokens
            .tokens(&TokenQuery {
                within: principal.clone(),
                after,
                limit,
            })
            .await
    }

    /// The token `id` if `principal` covers it; `None` for every other (unknown or not covered
    /// alike).
    pub async fn visible(
        &self,
        principal: &Principal,
        id: TokenId,
    ) -> Result<Option<TokenInfo>, TokenError> {
        Ok(self
            .tokens
            .token(id)
            .await?
            .filter(|t| principal.covers(&t.principal)))
    }

    /// Issues a token of `issuer`'s account as `request` asks: at least one scope; sites, when
    /// limited, a non-empty list of sites `issuer` sees (every one it does not is named); and
    /// nothing `issuer` does not cover ([`Principal::covers`]: [`IssueError::NotCovered`]).
    /// Refused once the account issued its hour's allowance of tokens.
    pub async fn issue(
        &self,
        issuer: &Principal,
        request: TokenRequest,
    ) -> Result<IssuedToken, IssueError> {
        let mut scopes = request.scopes;
        scopes.sort();
        scopes.dedup();
        if scopes.is_empty() {
            return Err(IssueError::Invalid(vec![(
                "/scopes".to_owned(),
                "`/scopes` must name at least one scope.".to_owned(),
            )]));
        }
        let sites = match request.sites {
            None => None,
            Some(ids) if ids.is_empty() => {
                return Err(IssueError::Invalid(vec![(
                    "/sites".to_owned(),
                    "`/sites` must name at least one site, or be absent for every site.".to_owned(),
                )]))
            }
            Some(mut sites) => {
                // Every site it may not see is named (the first few, then counted).
                let bad = self.access.invisible_sites(issuer, &sites).await?;
                if !bad.is_empty() {
                    return Err(IssueError::Invalid(invisible_ids(
                        "/sites", &sites, &bad, "site",
                    )));
                }
                sites.sort();
                sites.dedup();
                Some(sites)
            }
        };
        let principal = Principal {
            account_id: issuer.account_id,
            scopes,
            sites,
        };
        if !issuer.covers(&principal) {
            return Err(IssueError::NotCovered);
        }
        self.store(request.name.into_string(), principal).await
    }

    /// The first token of a new `account`, with every scope and site: its creator
    /// ([`crate::FleetDirectory::create_account`]) does not cover it, and needs not.
    pub(crate) async fn issue_first(
        &self,
        account: AccountId,
        name: &str,
    ) -> Result<IssuedToken, IssueError> {
        let principal = Principal {
            account_id: account,
            scopes: vec![Scope::Read, Scope::Write, Scope::Admin],
            sites: None,
        };
        self.store(name.to_owned(), principal).await
    }

    /// Generates the token, stores its hash: refused once `principal`'s account issued its
    /// hour's allowance of tokens (a new account's first token is its first).
    async fn store(&self, name: String, principal: Principal) -> Result<IssuedToken, IssueError> {
        self.rate.take(principal.account_id, Creation::Token)?;
        let token = generate_token();
        let id = TokenId::new();
        let new = NewToken {
            id,
            name: name.clone(),
            principal: principal.clone(),
        };
        self.tokens.create_token(hash_token(&token), new).await?;
        Ok(IssuedToken {
            token,
            id,
            name,
            principal,
        })
    }

    /// Revokes the token `id` if `principal` covers it (`false`: no such token visible); this
    /// process's caches and open streams are told at once.
    pub async fn revoke(&self, principal: &Principal, id: TokenId) -> Result<bool, TokenError> {
        if self.visible(principal, id).await?.is_none() || !self.tokens.revoke_token(id).await? {
            return Ok(false);
        }
        self.access.revocations().notify();
        Ok(true)
    }
}
