//! `WebhookStore` on PostgreSQL (`webhook_endpoints`, `webhook_deliveries`, migration 8).
//! An endpoint's claim is a column of its row, taken by one statement that locks the candidate
//! endpoints with `SKIP LOCKED`, so that two replicas never claim the same endpoint.

use crate::PostgresStore;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::postgres::PgRow;
use sqlx::Row;
use swath_application::ports::{
    Attempt, ClaimLimit, Claimed, Delivery, DeliveryOutcome, NewDelivery, WebhookError,
    WebhookStore,
};
use swath_domain::webhook::{Endpoint, Secret, WebhookId, WebhookKind};
use swath_domain::{AccountId, MowerId, SiteId};
use uuid::Uuid;

fn unavailable(e: sqlx::Error) -> WebhookError {
    WebhookError::Unavailable(Box::new(e))
}

fn corrupt(what: &str) -> WebhookError {
    WebhookError::Unavailable(format!("a stored webhook row is not valid: {what}").into())
}

const ENDPOINT_COLUMNS: &str = "id, account_id, url, kinds, mowers, sites, enabled, \
    disabled_reason, secrets, created_at, updated_at";

const DELIVERY_COLUMNS: &str = "id, endpoint_id, seq, event_type, body, created_at, attempts, \
    last_status, last_latency_ms, next_attempt_at, outcome";

fn secrets_json(secrets: &[Secret]) -> Value {
    Value::Array(
        secrets
            .iter()
            .map(|s| json!({ "value": s.value, "expires_at": s.expires_at }))
            .collect(),
    )
}

/// A column that does not decode: the row is not one Swath wrote.
fn bad_column(e: sqlx::Error) -> WebhookError {
    corrupt(&format!("column: {e}"))
}

fn endpoint_from(row: &PgRow) -> Result<Endpoint, WebhookError> {
    let kinds: Vec<String> = row.try_get("kinds").map_err(bad_column)?;
    let mowers: Option<Vec<Uuid>> = row.try_get("mowers").map_err(bad_column)?;
    let sites: Option<Vec<Uuid>> = row.try_get("sites").map_err(bad_column)?;
    let secrets: Value = row.try_get("secrets").map_err(bad_column)?;
    let secrets = secrets
        .as_array()
        .ok_or_else(|| corrupt("secrets"))?
        .iter()
        .map(|s| {
            Ok(Secret {
                value: s["value"]
                    .as_str()
                    .ok_or_else(|| corrupt("secret"))?
                    .to_owned(),
                expires_at: serde_json::from_value(s["expires_at"].clone())
                    .map_err(|_| corrupt("secret expiry"))?,
            })
        })
        .collect::<Result<Vec<_>, WebhookError>>()?;
    let id: Uuid = row.try_get("id").map_err(bad_column)?;
    let account: Uuid = row.try_get("account_id").map_err(bad_column)?;
    Ok(from_row!(row, bad_column, Endpoint {
        url, enabled, disabled_reason, created_at, updated_at;
        id: WebhookId(id),
        account_id: AccountId(account),
        kinds: kinds
            .iter()
            .map(|k| WebhookKind::parse(k).ok_or_else(|| corrupt("kind")))
            .collect::<Result<Vec<_>, _>>()?,
        mowers: mowers.map(|m| m.into_iter().map(MowerId).collect()),
        sites: sites.map(|s| s.into_iter().map(SiteId).collect()),
        secrets: secrets,
    }))
}

fn delivery_from(row: &PgRow) -> Result<Delivery, WebhookError> {
    delivery_at(row, "")
}

/// The delivery in the columns named `<prefix><column>` (a claim answers it beside its endpoint,
/// whose columns have the same names).
fn delivery_at(row: &PgRow, prefix: &str) -> Result<Delivery, WebhookError> {
    let get = |column: &str| format!("{prefix}{column}");
    let endpoint: Uuid = row.try_get(&*get("endpoint_id")).map_err(bad_column)?;
    let outcome: String = row.try_get(&*get("outcome")).map_err(bad_column)?;
    let attempts: i32 = row.try_get(&*get("attempts")).map_err(bad_column)?;
    let status: Option<i32> = row.try_get(&*get("last_status")).map_err(bad_column)?;
    let latency: Option<i32> = row.try_get(&*get("last_latency_ms")).map_err(bad_column)?;
    Ok(Delivery {
        id: row.try_get(&*get("id")).map_err(bad_column)?,
        seq: row.try_get(&*get("seq")).map_err(bad_column)?,
        event_type: row.try_get(&*get("event_type")).map_err(bad_column)?,
        body: row.try_get(&*get("body")).map_err(bad_column)?,
        created_at: row.try_get(&*get("created_at")).map_err(bad_column)?,
        next_attempt_at: row.try_get(&*get("next_attempt_at")).map_err(bad_column)?,
        endpoint_id: WebhookId(endpoint),
        attempts: u32::try_from(attempts).map_err(|_| corrupt("attempts"))?,
        last_status: status
            .map(|s| u16::try_from(s).map_err(|_| corrupt("status")))
            .transpose()?,
        last_latency_ms: latency
            .map(|l| u32::try_from(l).map_err(|_| corrupt("latency")))
            .transpose()?,
        outcome: DeliveryOutcome::parse(&outcome).ok_or_else(|| corrupt("outcome"))?,
    })
}

fn ids<T>(list: &Option<Vec<T>>, id: impl Fn(&T) -> Uuid) -> Option<Vec<Uuid>> {
    list.as_ref().map(|l| l.iter().map(id).collect())
}

fn kinds(endpoint: &Endpoint) -> Vec<String> {
    endpoint
        .kinds
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect()
}

#[async_trait]
impl WebhookStore for PostgresStore {
    async fn create_endpoint(&self, e: Endpoint, at_most: usize) -> Result<(), WebhookError> {
        // The account's row locked first, so that concurrent creations for one account count
        // one after the other (each count a statement of its own, after the lock: a snapshot
        // that sees the creations committed before). `NO KEY`: the foreign keys that reference
        // the account still take their shared locks meanwhile.
        let mut tx = self.pool().begin().await.map_err(unavailable)?;
        let account = sqlx::query("SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE")
            .bind(e.account_id.0)
            .fetch_optional(&mut *tx)
            .await
            .map_err(unavailable)?;
        if account.is_none() {
            return Err(WebhookError::UnknownAccount(e.account_id));
        }
        let held: i64 =
            sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints WHERE account_id = $1")
                .bind(e.account_id.0)
                .fetch_one(&mut *tx)
                .await
                .map_err(unavailable)?;
        if usize::try_from(held).unwrap_or(usize::MAX) >= at_most {
            return Err(WebhookError::AccountFull);
        }
        let done = sqlx::query(
            "INSERT INTO webhook_endpoints (id, account_id, url, kinds, mowers, sites, enabled, \
             disabled_reason, secrets, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(e.id.0)
        .bind(e.account_id.0)
        .bind(&e.url)
        .bind(kinds(&e))
        .bind(ids(&e.mowers, |m| m.0))
        .bind(ids(&e.sites, |s| s.0))
        .bind(e.enabled)
        .bind(&e.disabled_reason)
        .bind(secrets_json(&e.secrets))
        .bind(e.created_at)
        .bind(e.updated_at)
        .execute(&mut *tx)
        .await;
        match done {
            Ok(_) => tx.commit().await.map_err(unavailable),
            Err(sqlx::Error::Database(d)) if d.is_unique_violation() => Err(WebhookError::Conflict),
            Err(sqlx::Error::Database(d)) if d.is_foreign_key_violation() => {
                Err(WebhookError::UnknownAccount(e.account_id))
            }
            Err(other) => Err(unavailable(other)),
        }
    }

    async fn endpoint(&self, id: WebhookId) -> Result<Option<Endpoint>, WebhookError> {
        sqlx::query(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1"
        ))
        .bind(id.0)
        .fetch_optional(self.pool())
        .await
        .map_err(unavailable)?
        .as_ref()
        .map(endpoint_from)
        .transpose()
    }

    async fn endpoints(
        &self,
        account: AccountId,
        after: Option<WebhookId>,
        limit: usize,
    ) -> Result<Vec<Endpoint>, WebhookError> {
        sqlx::query(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints \
             WHERE account_id = $1 AND ($2::uuid IS NULL OR id > $2) ORDER BY id LIMIT $3"
        ))
        .bind(account.0)
        .bind(after.map(|a| a.0))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?
        .iter()
        .map(endpoint_from)
        .collect()
    }

    async fn enabled_endpoints(&self, account: AccountId) -> Result<Vec<Endpoint>, WebhookError> {
        sqlx::query(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints \
             WHERE account_id = $1 AND enabled ORDER BY id"
        ))
        .bind(account.0)
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?
        .iter()
        .map(endpoint_from)
        .collect()
    }

    async fn put_endpoint(&self, e: Endpoint) -> Result<bool, WebhookError> {
        let done = sqlx::query(
            "UPDATE webhook_endpoints SET url = $2, kinds = $3, mowers = $4, sites = $5, \
             enabled = $6, disabled_reason = $7, secrets = $8, updated_at = $9 WHERE id = $1",
        )
        .bind(e.id.0)
        .bind(&e.url)
        .bind(kinds(&e))
        .bind(ids(&e.mowers, |m| m.0))
        .bind(ids(&e.sites, |s| s.0))
        .bind(e.enabled)
        .bind(&e.disabled_reason)
        .bind(secrets_json(&e.secrets))
        .bind(e.updated_at)
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_endpoint(&self, id: WebhookId) -> Result<bool, WebhookError> {
        let done = sqlx::query("DELETE FROM webhook_endpoints WHERE id = $1")
            .bind(id.0)
            .execute(self.pool())
            .await
            .map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn enqueue(&self, deliveries: Vec<NewDelivery>) -> Result<usize, WebhookError> {
        if deliveries.is_empty() {
            return Ok(0);
        }
        // One statement; `WITH ORDINALITY` keeps the order given, so `seq` follows it.
        let (mut id, mut endpoint, mut kind, mut body, mut at) =
            (vec![], vec![], vec![], vec![], vec![]);
        for d in deliveries {
            id.push(d.id);
            endpoint.push(d.endpoint_id.0);
            kind.push(d.event_type);
            body.push(d.body);
            at.push(d.created_at);
        }
        let done = sqlx::query(
            "INSERT INTO webhook_deliveries (id, endpoint_id, event_type, body, created_at, \
             next_attempt_at, outcome) \
             SELECT n.id, n.endpoint_id, n.event_type, n.body, n.created_at, n.created_at, \
             'pending' FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], \
             $5::timestamptz[]) WITH ORDINALITY AS n(id, endpoint_id, event_type, body, \
             created_at, ord) \
             WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = n.endpoint_id) \
             ORDER BY n.ord ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(endpoint)
        .bind(kind)
        .bind(body)
        .bind(at)
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected() as usize)
    }

    async fn deliveries(
        &self,
        endpoint: WebhookId,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhookError> {
        sqlx::query(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries \
             WHERE endpoint_id = $1 AND ($2::bigint IS NULL OR seq < $2) \
             ORDER BY seq DESC LIMIT $3"
        ))
        .bind(endpoint.0)
        .bind(before)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?
        .iter()
        .map(delivery_from)
        .collect()
    }

    async fn delivery(
        &self,
        endpoint: WebhookId,
        id: Uuid,
    ) -> Result<Option<Delivery>, WebhookError> {
        sqlx::query(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1 AND endpoint_id = $2"
        ))
        .bind(id)
        .bind(endpoint.0)
        .fetch_optional(self.pool())
        .await
        .map_err(unavailable)?
        .as_ref()
        .map(delivery_from)
        .transpose()
    }

    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: &ClaimLimit,
    ) -> Result<Vec<Claimed>, WebhookError> {
        // The candidates are locked (`SKIP LOCKED`: a concurrent claimer's are skipped, and a
        // row it has just claimed is re-checked against `claimed_until`), their oldest pending
        // delivery found, those that are due ranked within their account, and the lowest ranks
        // within each account's room claimed (every account's first before any second).
        let (busy_accounts, busy): (Vec<Uuid>, Vec<i64>) = limit
            .busy
            .iter()
            .map(|(a, n)| (a.0, i64::try_from(*n).unwrap_or(i64::MAX)))
            .unzip();
        let delivery_columns = DELIVERY_COLUMNS
            .split(", ")
            .map(|c| format!("due.{c} AS d_{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let endpoint_columns = ENDPOINT_COLUMNS
            .split(", ")
            .map(|c| format!("e.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = sqlx::query(&format!(
            "WITH candidates AS ( \
               SELECT e.id, e.account_id FROM webhook_endpoints e \
               WHERE e.enabled AND (e.claimed_until IS NULL OR e.claimed_until < $1) \
               AND EXISTS (SELECT 1 FROM webhook_deliveries d \
                           WHERE d.endpoint_id = e.id AND d.outcome = 'pending') \
               ORDER BY e.id FOR UPDATE SKIP LOCKED), \
             heads AS ( \
               SELECT DISTINCT ON (d.endpoint_id) d.*, c.account_id AS account_id \
               FROM webhook_deliveries d JOIN candidates c ON c.id = d.endpoint_id \
               WHERE d.outcome = 'pending' ORDER BY d.endpoint_id, d.seq), \
             ranked AS ( \
               SELECT heads.*, row_number() OVER (PARTITION BY account_id ORDER BY endpoint_id) \
               AS rank FROM heads WHERE next_attempt_at IS NULL OR next_attempt_at <= $1), \
             due AS ( \
               SELECT ranked.* FROM ranked \
               LEFT JOIN unnest($4::uuid[], $5::bigint[]) AS b(account_id, n) \
               ON b.account_id = ranked.account_id \
               WHERE ranked.rank + coalesce(b.n, 0) <= $6 \
               ORDER BY ranked.rank, ranked.endpoint_id LIMIT $3), \
             claimed AS ( \
               UPDATE webhook_endpoints e SET claimed_until = $2 FROM due \
               WHERE e.id = due.endpoint_id RETURNING e.id) \
             SELECT {delivery_columns}, {endpoint_columns} FROM due \
             JOIN webhook_endpoints e ON e.id = due.endpoint_id \
             ORDER BY due.rank, due.endpoint_id"
        ))
        .bind(now)
        .bind(until)
        .bind(i64::try_from(limit.total).unwrap_or(i64::MAX))
        .bind(busy_accounts)
        .bind(busy)
        .bind(i64::try_from(limit.per_account).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|row| {
                Ok(Claimed {
                    endpoint: endpoint_from(row)?,
                    delivery: delivery_at(row, "d_")?,
                })
            })
            .collect()
    }

    async fn record_attempt(&self, id: Uuid, attempt: Attempt) -> Result<(), WebhookError> {
        sqlx::query(
            "WITH done AS ( \
               UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = $2, \
               last_latency_ms = $3, outcome = $4, next_attempt_at = $5 WHERE id = $1 \
               RETURNING endpoint_id) \
             UPDATE webhook_endpoints e SET claimed_until = NULL FROM done \
             WHERE e.id = done.endpoint_id",
        )
        .bind(id)
        .bind(attempt.status.map(i32::from))
        .bind(i32::try_from(attempt.latency_ms).unwrap_or(i32::MAX))
        .bind(attempt.outcome.as_str())
        .bind(attempt.next_attempt_at)
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    async fn disable_endpoint(
        &self,
        id: WebhookId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError> {
        let mut tx = self.pool().begin().await.map_err(unavailable)?;
        let done = sqlx::query(
            "UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2, \
             updated_at = $3, claimed_until = NULL WHERE id = $1",
        )
        .bind(id.0)
        .bind(reason)
        .bind(at)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        sqlx::query(
            "UPDATE webhook_deliveries SET outcome = 'failed', next_attempt_at = NULL \
             WHERE endpoint_id = $1 AND outcome = 'pending'",
        )
        .bind(id.0)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn retry(
        &self,
        endpoint: WebhookId,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError> {
        let done = sqlx::query(
            "UPDATE webhook_deliveries SET outcome = 'pending', next_attempt_at = $3 \
             WHERE id = $1 AND endpoint_id = $2",
        )
        .bind(id)
        .bind(endpoint.0)
        .bind(at)
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn backlog(&self) -> Result<Vec<(WebhookId, u64)>, WebhookError> {
        let rows = sqlx::query(
            "SELECT endpoint_id, count(*) AS n FROM webhook_deliveries \
             WHERE outcome = 'pending' GROUP BY endpoint_id ORDER BY endpoint_id",
        )
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                let id: Uuid = r.try_get("endpoint_id").map_err(bad_column)?;
                let n: i64 = r.try_get("n").map_err(bad_column)?;
                Ok((WebhookId(id), n.max(0) as u64))
            })
            .collect()
    }

    async fn any_endpoint(&self) -> Result<bool, WebhookError> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM webhook_endpoints)")
            .fetch_one(self.pool())
            .await
            .map_err(unavailable)
    }

    async fn expire_deliveries(
        &self,
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, WebhookError> {
        if dry_run {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM webhook_deliveries \
                 WHERE outcome <> 'pending' AND created_at < $1",
            )
            .bind(before)
            .fetch_one(self.pool())
            .await
            .map_err(unavailable)?;
            return Ok(n.max(0) as u64);
        }
        // No index on `created_at`: a chunk's scan stops once it has found `limit` rows.
        let done = sqlx::query(
            "DELETE FROM webhook_deliveries WHERE id IN ( \
               SELECT id FROM webhook_deliveries \
               WHERE outcome <> 'pending' AND created_at < $1 LIMIT $2)",
        )
        .bind(before)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected())
    }
}
