//! The sessions store on PostgreSQL (W8): the `SessionStore` reads of `mower_sessions`, which the
//! telemetry batch's one write statement keeps (`telemetry/batch.rs`, `WRITE_BATCH`).

use crate::telemetry::StoredSession;
use crate::PostgresStore;
use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use sqlx::types::Json;
use sqlx::Row;
use swath_application::ports::{Cause, SessionError, SessionQuery, SessionStore};
use swath_domain::sessions::SessionRow;
use swath_domain::MowerId;
use uuid::Uuid;

/// A page of sessions (see [`SessionQuery`]): `$1` the mowers, `$2` the account, rows with
/// `started_at < $4` and `ended_at > $3` (open ones always), before the key `($5, $6)` in
/// `(started_at, mower_id)` descending order, at most `$7`. Every bound is always given (an open
/// one as an instant beyond every storable one), so the statement has one text.
const READ_PAGE: &str = "SELECT to_jsonb(s) AS session FROM mower_sessions s \
    WHERE s.mower_id = ANY($1) AND s.account_id = $2 AND s.started_at < $4 \
    AND (s.ended_at IS NULL OR s.ended_at > $3) AND (s.started_at, s.mower_id) < ($5, $6) \
    ORDER BY s.started_at DESC, s.mower_id DESC LIMIT $7";

fn unavailable(e: impl Into<Cause>) -> SessionError {
    SessionError::Unavailable(e.into())
}

fn corrupt(e: impl Into<Cause>) -> SessionError {
    SessionError::Corrupt(e.into())
}

fn rows(rows: Vec<sqlx::postgres::PgRow>) -> Result<Vec<SessionRow>, SessionError> {
    rows.iter()
        .map(|row| {
            let Json(stored): Json<StoredSession> = row.try_get("session").map_err(corrupt)?;
            Ok(stored.row)
        })
        .collect()
}

fn far_past() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(-4000, 1, 1, 0, 0, 0).unwrap()
}

fn far_future() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(100_000, 1, 1, 0, 0, 0).unwrap()
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn page(&self, query: &SessionQuery) -> Result<Vec<SessionRow>, SessionError> {
        if query.limit == 0 || query.mowers.is_empty() {
            return Ok(Vec::new());
        }
        let (before_at, before_mower) =
            query.before.unwrap_or((far_future(), MowerId(Uuid::max())));
        let found = sqlx::query(READ_PAGE)
            .bind(query.mowers.iter().map(|m| m.0).collect::<Vec<_>>())
            .bind(query.account.0)
            .bind(query.from.unwrap_or_else(far_past))
            .bind(query.to.unwrap_or_else(far_future))
            .bind(before_at)
            .bind(before_mower.0)
            .bind(i64::try_from(query.limit).unwrap_or(i64::MAX))
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?;
        rows(found)
    }
}
