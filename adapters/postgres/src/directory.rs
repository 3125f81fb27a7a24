//! The directory (accounts, sites, mowers), through SeaORM entities (the API tokens: `tokens`).
//!
//! Lists are constant SQL read into the entities (`from_raw_sql`): a keyset page needs a row
//! comparison, `(display_order, name COLLATE "C", id) > (…)`, that matches the index of the
//! second migration, which the query builder cannot express. Names order byte by byte, as in the
//! memory store. A missing cursor is the smallest key, `(-2^31, '', nil uuid)`, so that there is
//! one statement text per list (no id is the nil uuid: the API refuses it and Swath makes v7 ids).

use crate::entities::{account, mower, site};
use crate::PostgresStore;
use async_trait::async_trait;
use chrono::Utc;
use chrono_tz::Tz;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseBackend, DatabaseTransaction, DbErr,
    EntityTrait, FromQueryResult, QueryFilter, QueryOrder, SqlErr, Statement, TransactionTrait,
    Value,
};
use swath_application::ports::{Directory, DirectoryAdmin, DirectoryError, ListQuery};
use swath_domain::{Account, AccountId, Mower, MowerId, OrderKey, Site, SiteId};
use uuid::Uuid;

/// A page of sites: `$1` account, `$2` only these sites (NULL: all), `$3..$5` the key after which
/// the page starts, `$6` the limit.
const LIST_SITES: &str = "SELECT id, account_id, name, time_zone, display_order, created_at \
    FROM sites WHERE account_id = $1 AND ($2::uuid[] IS NULL OR id = ANY($2)) \
    AND (display_order, name COLLATE \"C\", id) > ($3, $4 COLLATE \"C\", $5) \
    ORDER BY display_order, name COLLATE \"C\", id LIMIT $6";

/// A page of mowers: the parameters of [`LIST_SITES`], `$2` filtering the mowers' sites.
const LIST_MOWERS: &str = "SELECT id, account_id, site_id, name, model, serial, display_order, \
    blade_threshold_ms, created_at FROM mowers \
    WHERE account_id = $1 AND ($2::uuid[] IS NULL OR site_id = ANY($2)) \
    AND (display_order, name COLLATE \"C\", id) > ($3, $4 COLLATE \"C\", $5) \
    ORDER BY display_order, name COLLATE \"C\", id LIMIT $6";

fn directory_error(e: DbErr, what: String) -> DirectoryError {
    match e.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => DirectoryError::Conflict(what),
        Some(SqlErr::ForeignKeyConstraintViolation(_)) => DirectoryError::NotFound(what),
        _ => DirectoryError::Unavailable(e.into()),
    }
}

fn unavailable(e: DbErr) -> DirectoryError {
    DirectoryError::Unavailable(e.into())
}

fn site_from(model: site::Model) -> Result<Site, DirectoryError> {
    let time_zone: Tz = model.time_zone.parse().map_err(|_| {
        DirectoryError::Unavailable(
            format!(
                "site {} has an unknown time zone {:?}",
                model.id, model.time_zone
            )
            .into(),
        )
    })?;
    Ok(Site {
        id: SiteId(model.id),
        account_id: AccountId(model.account_id),
        name: model.name,
        time_zone,
        display_order: model.display_order,
    })
}

/// The parameters of [`LIST_SITES`] and [`LIST_MOWERS`].
fn list_values(query: &ListQuery) -> Vec<Value> {
    let after = query.after.clone().unwrap_or(OrderKey {
        display_order: i32::MIN,
        name: String::new(),
        id: Uuid::nil(),
    });
    vec![
        query.account.0.into(),
        query
            .sites
            .as_ref()
            .map(|s| s.iter().map(|id| id.0).collect::<Vec<Uuid>>())
            .into(),
        after.display_order.into(),
        after.name.into(),
        after.id.into(),
        limit_value(query.limit),
    ]
}

/// A `LIMIT` for PostgreSQL (a bigint).
pub(crate) fn limit_value(limit: usize) -> Value {
    i64::try_from(limit).unwrap_or(i64::MAX).into()
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
        self.list_sites(&all_of(account)).await
    }

    async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError> {
        self.list_mowers(&all_of(account)).await
    }
}

fn statement(sql: &str, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(DatabaseBackend::Postgres, sql, values)
}

/// `NotFound(what)` unless `sql` (`$1` the id, `$2` the account) finds the row `id` of `account`.
async fn owned(
    txn: &DatabaseTransaction,
    sql: &str,
    id: Uuid,
    account: AccountId,
    what: String,
) -> Result<(), DirectoryError> {
    let row = txn
        .query_one(statement(sql, vec![id.into(), account.0.into()]))
        .await
        .map_err(unavailable)?;
    match row {
        Some(_) => Ok(()),
        None => Err(DirectoryError::NotFound(what)),
    }
}

impl PostgresStore {
    /// The rows of one of the constant lists, read into their entity's model, each made a `T` by
    /// `from`.
    pub(crate) async fn listed<M: FromQueryResult + Send, T>(
        &self,
        sql: &str,
        values: Vec<Value>,
        from: impl FnMut(M) -> T + Send,
    ) -> Result<Vec<T>, DbErr> {
        let rows = M::find_by_statement(statement(sql, values))
            .all(&self.orm)
            .await?;
        Ok(rows.into_iter().map(from).collect())
    }
}

/// Every site or mower of `account`, in list order.
fn all_of(account: AccountId) -> ListQuery {
    ListQuery {
        account,
        sites: None,
        after: None,
        limit: usize::MAX,
    }
}

#[async_trait]
impl DirectoryAdmin for PostgresStore {
    async fn site(&self, id: SiteId) -> Result<Option<Site>, DirectoryError> {
        site::Entity::find_by_id(id.0)
            .one(&self.orm)
            .await
            .map_err(unavailable)?
            .map(site_from)
            .transpose()
    }

    async fn mowers_by_id(&self, ids: &[MowerId]) -> Result<Vec<Mower>, DirectoryError> {
        Ok(mower::Entity::find()
            .filter(mower::Column::Id.is_in(ids.iter().map(|m| m.0)))
            .order_by_asc(mower::Column::Id)
            .all(&self.orm)
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(mower_from)
            .collect())
    }

    async fn list_sites(&self, query: &ListQuery) -> Result<Vec<Site>, DirectoryError> {
        let sites = self.listed(LIST_SITES, list_values(query), site_from);
        sites.await.map_err(unavailable)?.into_iter().collect()
    }

    async fn list_mowers(&self, query: &ListQuery) -> Result<Vec<Mower>, DirectoryError> {
        let mowers = self.listed(LIST_MOWERS, list_values(query), mower_from);
        mowers.await.map_err(unavailable)
    }

    async fn update_site(&self, s: Site) -> Result<(), DirectoryError> {
        let updated = site::Entity::update_many()
            .col_expr(site::Column::Name, s.name.into())
            .col_expr(site::Column::TimeZone, s.time_zone.name().into())
            .col_expr(site::Column::DisplayOrder, s.display_order.into())
            .filter(site::Column::Id.eq(s.id.0))
            .filter(site::Column::AccountId.eq(s.account_id.0))
            .exec(&self.orm)
            .await
            .map_err(unavailable)?;
        if updated.rows_affected == 0 {
            return Err(DirectoryError::NotFound(format!("site {}", s.id)));
        }
        Ok(())
    }

    async fn delete_site(&self, account: AccountId, id: SiteId) -> Result<(), DirectoryError> {
        let txn = self.orm.begin().await.map_err(unavailable)?;
        // FOR UPDATE conflicts with the KEY SHARE lock a mower insert (or move) takes on its site
        // through the foreign key: a mower added concurrently either commits first (and is seen by
        // the check below, a new snapshot in READ COMMITTED) or fails its foreign key after us.
        let locked = "SELECT id FROM sites WHERE id = $1 AND account_id = $2 FOR UPDATE";
        owned(&txn, locked, id.0, account, format!("site {id}")).await?;
        let in_use = txn
            .query_one(statement(
                "SELECT 1 AS one FROM mowers WHERE site_id = $1 LIMIT 1",
                vec![id.0.into()],
            ))
            .await
            .map_err(unavailable)?;
        if in_use.is_some() {
            return Err(DirectoryError::InUse(format!("site {id}")));
        }
        txn.execute(statement(
            "DELETE FROM sites WHERE id = $1",
            vec![id.0.into()],
        ))
        .await
        .map_err(|e| directory_error(e, format!("site {id}")))?;
        txn.commit().await.map_err(unavailable)?;
        Ok(())
    }

    async fn update_mower(&self, m: Mower) -> Result<(), DirectoryError> {
        // One statement: the site check and the update see the same snapshot, and the foreign key
        // catches a site deleted concurrently.
        let updated = self
            .orm
            .execute(statement(
                "UPDATE mowers SET site_id = $3, name = $4, model = $5, serial = $6, \
                 display_order = $7, blade_threshold_ms = $8 \
                 WHERE id = $1 AND account_id = $2 \
                 AND EXISTS (SELECT 1 FROM sites s WHERE s.id = $3 AND s.account_id = $2)",
                vec![
                    m.id.0.into(),
                    m.account_id.0.into(),
                    m.site_id.0.into(),
                    m.name.into(),
                    m.model.into(),
                    m.serial.into(),
                    m.display_order.into(),
                    m.blade_threshold_ms.into(),
                ],
            ))
            .await
            .map_err(|e| directory_error(e, format!("site {}", m.site_id)))?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NotFound(format!(
                "mower {} or site {}",
                m.id, m.site_id
            )));
        }
        Ok(())
    }

    async fn delete_mower(&self, account: AccountId, id: MowerId) -> Result<(), DirectoryError> {
        let txn = self.orm.begin().await.map_err(unavailable)?;
        // The health row is the row every ingest batch of this mower locks (see telemetry/mod.rs):
        // taking it first waits for a running batch and makes later ones wait for this delete;
        // they then find the row gone and drop their states as `unknown_mower`.
        txn.execute(statement(
            "SELECT mower_id FROM health_totals WHERE mower_id = $1 FOR UPDATE",
            vec![id.0.into()],
        ))
        .await
        .map_err(unavailable)?;
        let sql = "SELECT id FROM mowers WHERE id = $1 AND account_id = $2";
        owned(&txn, sql, id.0, account, format!("mower {id}")).await?;
        for sql in [
            "DELETE FROM positions WHERE mower_id = $1",
            "DELETE FROM state_history WHERE mower_id = $1",
            "DELETE FROM day_totals WHERE mower_id = $1",
            "DELETE FROM latest_states WHERE mower_id = $1",
            "DELETE FROM health_totals WHERE mower_id = $1",
            "DELETE FROM mowers WHERE id = $1",
        ] {
            txn.execute(statement(sql, vec![id.0.into()]))
                .await
                .map_err(unavailable)?;
        }
        txn.commit().await.map_err(unavailable)?;
        Ok(())
    }
}
