//! The memory store's tokens: the `TokenStore` impl.

use crate::store::{read, write, MemoryStore};
use async_trait::async_trait;
use chrono::Utc;
use std::ops::Bound;
use swath_application::ports::{
    NewToken, TokenError, TokenHash, TokenId, TokenInfo, TokenQuery, TokenStore,
};
use swath_domain::Principal;

#[async_trait]
impl TokenStore for MemoryStore {
    async fn create_token(&self, hash: TokenHash, token: NewToken) -> Result<(), TokenError> {
        let mut tokens = write(&self.tokens);
        if tokens.by_hash.contains_key(&hash) || tokens.by_id.contains_key(&token.id) {
            return Err(TokenError::Conflict);
        }
        tokens.by_hash.insert(hash, token.id);
        tokens.by_id.insert(
            token.id,
            TokenInfo {
                id: token.id,
                name: token.name,
                principal: token.principal,
                created_at: Utc::now(),
            },
        );
        Ok(())
    }

    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError> {
        let tokens = read(&self.tokens);
        Ok(tokens
            .by_hash
            .get(hash)
            .and_then(|id| tokens.by_id.get(id))
            .map(|t| t.principal.clone()))
    }

    async fn tokens(&self, query: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
        let tokens = read(&self.tokens);
        let start = match query.after {
            Some(after) => Bound::Excluded(after),
            None => Bound::Unbounded,
        };
        Ok(tokens
            .by_id
            .range((start, Bound::Unbounded))
            .map(|(_, t)| t)
            .filter(|t| query.within.covers(&t.principal))
            .take(query.limit)
            .cloned()
            .collect())
    }

    async fn token(&self, id: TokenId) -> Result<Option<TokenInfo>, TokenError> {
        Ok(read(&self.tokens).by_id.get(&id).cloned())
    }

    async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenInfo>, TokenError> {
        let tokens = read(&self.tokens);
        Ok(tokens
            .by_hash
            .get(hash)
            .and_then(|id| tokens.by_id.get(id))
            .cloned())
    }

    async fn revoke_token(&self, id: TokenId) -> Result<bool, TokenError> {
        let mut tokens = write(&self.tokens);
        if tokens.by_id.remove(&id).is_none() {
            return Ok(false);
        }
        tokens.by_hash.retain(|_, token| *token != id);
        Ok(true)
    }
}
