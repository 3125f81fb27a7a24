//! API tokens as an admin principal manages them: which it sees (those it covers,
//! [`Principal::covers`]), issuing one (at most so many per hour in an account,
//! [`CreationRate`]), revoking one (and telling this process at once, [`Revocations`]).

use crate::access::Revocations;
use crate::creation_rate::{Creation, CreationRate, RateLimited};
use crate::ports::{
    generate_token, hash_token, NewToken, TokenError, TokenId, TokenInfo, TokenQuery, TokenStore,
};
use std::sync::Arc;
use swath_domain::Principal;

/// The use case of tokens over the API (see the module).
#[derive(Clone)]
pub struct TokenAdmin {
    tokens: Arc<dyn TokenStore>,
    revocations: Revocations,
    rate: CreationRate,
}

/// Why a token was not issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The account issued as many tokens as it may for now.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error(transparent)]
    Store(#[from] TokenError),
}

impl TokenAdmin {
    pub fn new(tokens: Arc<dyn TokenStore>, revocations: Revocations, rate: CreationRate) -> Self {
        Self {
            tokens,
            revocations,
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

    /// Issues a new token named `name` for `principal` (the caller checked that its principal
    /// covers it): answers the token, shown this once (only its hash is stored), and its id.
    /// Refused once `principal`'s account issued its hour's allowance of tokens (a new account's
    /// first token is its first).
    pub async fn issue(
        &self,
        name: String,
        principal: Principal,
    ) -> Result<(String, TokenId), IssueError> {
        self.rate.take(principal.account_id, Creation::Token)?;
        let token = generate_token();
        let id = TokenId::new();
        let new = NewToken {
            id,
            name,
            principal,
        };
        self.tokens.create_token(hash_token(&token), new).await?;
        Ok((token, id))
    }

    /// Revokes the token `id` if `principal` covers it (`false`: no such token visible); this
    /// process's caches and open streams are told at once.
    pub async fn revoke(&self, principal: &Principal, id: TokenId) -> Result<bool, TokenError> {
        if self.visible(principal, id).await?.is_none() || !self.tokens.revoke_token(id).await? {
            return Ok(false);
        }
        self.revocations.notify();
        Ok(true)
    }
}
