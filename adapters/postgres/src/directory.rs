//! The directory (accounts, sites, mowers) and API tokens, through SeaORM entities.

use crate::entities::{account, api_token, mower, site};
use crate::PostgresStore;
use async_trait::async_trait;
use chrono::Utc;
use chrono_tz::Tz;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    SqlErr, Statement, TransactionTrait,
};
use swath_application::ports::{
    Account, Directory, DirectoryError, Mower, Principal, Scope, Site, TokenError, TokenHash,
    TokenStore,
};
use swath_domain::{AccountId, MowerId, SiteId};

fn directory_error(e: DbErr, what: String) -> DirectoryError {
    match e.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => DirectoryError::Conflict(what),
        Some(SqlErr::ForeignKeyConstraintViolation(_)) => DirectoryError::NotFound(what),
        _ => DirectoryError::Unavailable(e.to_string()),
    }
}

fn unavailable(e: DbErr) -> DirectoryError {
    DirectoryError::Unavailable(e.to_string())
}

fn site_from(model: site::Model) -> Result<Site, DirectoryError> {
    let time_zone: Tz = model.time_zone.parse().map_err(|_| {
        DirectoryError::Unavailable(format!(
            "site {} has an unknown time zone {:?}",
            model.id, model.time_zone
        ))
    })?;
    Ok(Site {
        id: SiteId(model.id),
        account_id: AccountId(model.account_id),
        name: model.name,
        time_zone,
        display_order: model.display_order,
    })
}

fn mower_from(model: mower::Model) -> Mower {
    Mower {
        id: MowerId(model.id),
        account_id: AccountId(model.account_id),
        site_id: SiteId(model.site_id),
        name: model.name,
        model: model.model,
        serial: model.serial,
        display_order: model.display_order,
        blade_threshold_ms: model.blade_threshold_ms,
    }
}

#[async_trait]
impl Directory for PostgresStore {
    async fn create_account(&self, a: Account) -> Result<(), DirectoryError> {
        account::Entity::insert(account::ActiveModel {
            id: Set(a.id.0),
            name: Set(a.name),
            created_at: Set(Utc::now().into()),
        })
        .exec(&self.orm)
        .await
        .map_err(|e| directory_error(e, format!("account {}", a.id)))?;
        Ok(())
    }

    async fn create_site(&self, s: Site) -> Result<(), DirectoryError> {
        site::Entity::insert(site::ActiveModel {
            id: Set(s.id.0),
            account_id: Set(s.account_id.0),
            name: Set(s.name),
            time_zone: Set(s.time_zone.name().to_owned()),
            display_order: Set(s.display_order),
            created_at: Set(Utc::now().into()),
        })
        .exec(&self.orm)
        .await
        .map_err(|e| match e.sql_err() {
            Some(SqlErr::ForeignKeyConstraintViolation(_)) => {
                DirectoryError::NotFound(format!("account {}", s.account_id))
            }
            _ => directory_error(e, format!("site {}", s.id)),
        })?;
        Ok(())
    }

    async fn create_mower(&self, m: Mower) -> Result<(), DirectoryError> {
        let txn = self.orm.begin().await.map_err(unavailable)?;
        // The site must exist and belong to the mower's account; lock it against a concurrent move.
        let site = site::Entity::find_by_id(m.site_id.0)
            .one(&txn)
            .await
            .map_err(unavailable)?;
        if site.is_none_or(|s| s.account_id != m.account_id.0) {
            return Err(DirectoryError::NotFound(format!("site {}", m.site_id)));
        }
        mower::Entity::insert(mower::ActiveModel {
            id: Set(m.id.0),
            account_id: Set(m.account_id.0),
            site_id: Set(m.site_id.0),
            name: Set(m.name),
            model: Set(m.model),
            serial: Set(m.serial),
            display_order: Set(m.display_order),
            blade_threshold_ms: Set(m.blade_threshold_ms),
            created_at: Set(Utc::now().into()),
        })
        .exec(&txn)
        .await
        .map_err(|e| directory_error(e, format!("mower {}", m.id)))?;
        // The mower's ingest row: the row every batch locks (see the migration).
        txn.execute(Statement::from_sql_and_values(
            sea_orm::DatabaseBackend::Postgres,
            "INSERT INTO health_totals (mower_id) VALUES ($1)",
            [m.id.0.into()],
        ))
        .await
        .map_err(unavailable)?;
        txn.commit().await.map_err(unavailable)?;
        Ok(())
    }

    async fn account(&self, id: AccountId) -> Result<Option<Account>, DirectoryError> {
        Ok(account::Entity::find_by_id(id.0)
            .one(&self.orm)
            .await
            .map_err(unavailable)?
            .map(|a| Account {
                id: AccountId(a.id),
                name: a.name,
            }))
    }

    async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError> {
        Ok(mower::Entity::find_by_id(id.0)
            .one(&self.orm)
            .await
            .map_err(unavailable)?
            .map(mower_from))
    }

    async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError> {
        site::Entity::find()
            .filter(site::Column::AccountId.eq(account.0))
            .order_by_asc(site::Column::DisplayOrder)
            .order_by_asc(site::Column::Name)
            .order_by_asc(site::Column::Id)
            .all(&self.orm)
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(site_from)
            .collect()
    }

    async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError> {
        Ok(mower::Entity::find()
            .filter(mower::Column::AccountId.eq(account.0))
            .order_by_asc(mower::Column::DisplayOrder)
            .order_by_asc(mower::Column::Name)
            .order_by_asc(mower::Column::Id)
            .all(&self.orm)
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(mower_from)
            .collect())
    }
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Read => "read",
        Scope::Write => "write",
        Scope::Admin => "admin",
    }
}

fn scope_from(name: &str) -> Option<Scope> {
    [Scope::Read, Scope::Write, Scope::Admin]
        .into_iter()
        .find(|s| scope_name(*s) == name)
}

#[async_trait]
impl TokenStore for PostgresStore {
    async fn store_token(&self, hash: TokenHash, principal: Principal) -> Result<(), TokenError> {
        let model = api_token::ActiveModel {
            token_hash: Set(hash.0),
            account_id: Set(principal.account_id.0),
            scopes: Set(principal
                .scopes
                .iter()
                .map(|s| scope_name(*s).to_owned())
                .collect()),
            sites: Set(principal
                .sites
                .map(|s| s.into_iter().map(|id| id.0).collect())),
            created_at: Set(Utc::now().into()),
        };
        let inserted = api_token::Entity::insert(model)
            .on_conflict(
                OnConflict::column(api_token::Column::TokenHash)
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&self.orm)
            .await
            .map_err(|e| TokenError::Unavailable(e.to_string()))?;
        if inserted == 0 {
            return Err(TokenError::Conflict);
        }
        Ok(())
    }

    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError> {
        let Some(token) = api_token::Entity::find_by_id(hash.0.clone())
            .one(&self.orm)
            .await
            .map_err(|e| TokenError::Unavailable(e.to_string()))?
        else {
            return Ok(None);
        };
        Ok(Some(Principal {
            account_id: AccountId(token.account_id),
            scopes: token.scopes.iter().filter_map(|s| scope_from(s)).collect(),
            sites: token.sites.map(|s| s.into_iter().map(SiteId).collect()),
        }))
    }
}
