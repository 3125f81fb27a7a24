//! API tokens (`TokenStore`), through the SeaORM entity `api_token`; a page of them is one
//! constant statement read into the entity, like the directory's lists (see `directory`).

use crate::directory::limit_value;
use crate::entities::api_token;
use crate::PostgresStore;
use async_trait::async_trait;
use chrono::Utc;
use sea_orm::{ActiveValue::Set, ColumnTrait, DbErr, EntityTrait, QueryFilter, SqlErr, Value};
use swath_application::ports::{
    NewToken, TokenError, TokenHash, TokenId, TokenInfo, TokenQuery, TokenStore,
};
use swath_domain::{AccountId, Principal, Scope, SiteId};
use uuid::Uuid;

/// A page of the tokens a principal covers: `$1` account, `$2` id after which the page starts,
/// `$3` the principal's scopes, `$4` its sites (NULL: unlimited), `$5` the limit.
const LIST_TOKENS: &str = "SELECT token_hash, id, name, account_id, scopes, sites, created_at \
    FROM api_tokens WHERE account_id = $1 AND id > $2 AND scopes <@ $3::text[] \
    AND ($4::uuid[] IS NULL OR (sites IS NOT NULL AND sites <@ $4::uuid[])) \
    ORDER BY id LIMIT $5";

fn token_error(e: DbErr, account: AccountId) -> TokenError {
    match e.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => TokenError::Conflict,
        Some(SqlErr::ForeignKeyConstraintViolation(_)) => TokenError::UnknownAccount(account),
        _ => TokenError::Unavailable(e.into()),
    }
}

fn token_unavailable(e: DbErr) -> TokenError {
    TokenError::Unavailable(e.into())
}

fn principal_from(token: &api_token::Model) -> Principal {
    Principal {
        account_id: AccountId(token.account_id),
        // An unknown name (written by a newer version) grants nothing.
        scopes: token
            .scopes
            .iter()
            .filter_map(|s| Scope::parse(s))
            .collect(),
        sites: token
            .sites
            .as_ref()
            .map(|s| s.iter().copied().map(SiteId).collect()),
    }
}

fn token_from(token: api_token::Model) -> TokenInfo {
    TokenInfo {
        id: TokenId(token.id),
        principal: principal_from(&token),
        name: token.name,
        created_at: token.created_at.into(),
    }
}

#[async_trait]
impl TokenStore for PostgresStore {
    async fn create_token(&self, hash: TokenHash, token: NewToken) -> Result<(), TokenError> {
        let account = token.principal.account_id;
        let model = api_token::ActiveModel {
            token_hash: Set(hash.0),
            id: Set(token.id.0),
            name: Set(token.name),
            account_id: Set(account.0),
            scopes: Set(token
                .principal
                .scopes
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect()),
            sites: Set(token
                .principal
                .sites
                .map(|s| s.into_iter().map(|id| id.0).collect())),
            created_at: Set(Utc::now().into()),
        };
        api_token::Entity::insert(model)
            .exec_without_returning(&self.orm)
            .await
            .map_err(|e| token_error(e, account))?;
        Ok(())
    }

    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError> {
        Ok(api_token::Entity::find_by_id(hash.0.clone())
            .one(&self.orm)
            .await
            .map_err(token_unavailable)?
            .as_ref()
            .map(principal_from))
    }

    async fn tokens(&self, query: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
        let within = &query.within;
        let values: Vec<Value> = vec![
            within.account_id.0.into(),
            query.after.map_or(Uuid::nil(), |id| id.0).into(),
            within
                .scopes
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect::<Vec<String>>()
                .into(),
            within
                .sites
                .as_ref()
                .map(|s| s.iter().map(|id| id.0).collect::<Vec<Uuid>>())
                .into(),
            limit_value(query.limit),
        ];
        let tokens = self.listed(LIST_TOKENS, values, token_from);
        tokens.await.map_err(token_unavailable)
    }

    async fn token(&self, id: TokenId) -> Result<Option<TokenInfo>, TokenError> {
        Ok(api_token::Entity::find()
            .filter(api_token::Column::Id.eq(id.0))
            .one(&self.orm)
            .await
            .map_err(token_unavailable)?
            .map(token_from))
    }

    async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenInfo>, TokenError> {
        Ok(api_token::Entity::find_by_id(hash.0.clone())
            .one(&self.orm)
            .await
            .map_err(token_unavailable)?
            .map(token_from))
    }

    async fn revoke_token(&self, id: TokenId) -> Result<bool, TokenError> {
        let deleted = api_token::Entity::delete_many()
            .filter(api_token::Column::Id.eq(id.0))
            .exec(&self.orm)
            .await
            .map_err(token_unavailable)?;
        Ok(deleted.rows_affected > 0)
    }
}
