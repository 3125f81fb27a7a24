//! The sessions store on PostgreSQL (W8): the `SessionStore` reads of the stored sessions, which
//! the telemetry batch's one write statement keeps (`telemetry/batch.rs`,
//! `WRITE_BATCH_WITH_SESSIONS`, used by a batch that writes or removes session rows). Every
//! read goes through the view `mower_sessions_now`, which lays each mower's newest session as
//! its health row keeps it over that session's own row (decision 207, migration 12).

use crate::PostgresStore;
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use sqlx::postgres::PgRow;
use sqlx::Row;
use std::sync::LazyLock;
use swath_application::ports::{Cause, SessionError, SessionQuery, SessionStore};
use swath_domain::sessions::{EndReason, Session, SessionRow};
use swath_domain::{AccountId, MowerId};
use uuid::Uuid;

/// The columns [`session_from`] decodes.
const COLUMNS: &str = "s.mower_id, s.started_at, s.id, s.account_id, s.ended_at, s.end_reason, \
    s.error_code, s.mowing_ms, s.blade_ms, s.distance_mm, s.breaks, s.states, s.first_lat, \
    s.first_lon, s.last_lat, s.last_lon, s.first_battery_percent, s.last_battery_percent, \
    s.local_date";

/// A page of sessions (see [`SessionQuery`]): `$1` the mowers, `$2` the account, rows with
/// `started_at < $4` and `ended_at > $3` (open ones always), before the key `($5, $6)` in
/// `(started_at, mower_id)` descending order, at most `$7`. Every bound is always given (an open
/// one as an instant beyond every storable one), so the statement has one text.
static READ_PAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM mower_sessions_now s \
    WHERE s.mower_id = ANY($1) AND s.account_id = $2 AND s.started_at < $4 \
    AND (s.ended_at IS NULL OR s.ended_at > $3) AND (s.started_at, s.mower_id) < ($5, $6) \
    ORDER BY s.started_at DESC, s.mower_id DESC LIMIT $7"
    )
});

/// Every session of the mowers `$1`, by mower then start: the telemetry export's.
pub(crate) static READ_EXPORT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM mower_sessions_now s WHERE s.mower_id = ANY($1) \
    ORDER BY s.mower_id, s.started_at"
    )
});

/// A stored session from a row of [`COLUMNS`]; the error says what could not be read.
pub(crate) fn session_from(row: &PgRow) -> Result<SessionRow, String> {
    macro_rules! get {
        ($name:literal) => {
            row.try_get($name).map_err(|e| e.to_string())?
        };
    }
    let reason: Option<String> = get!("end_reason");
    let end_reason = match reason {
        None => None,
        Some(name) => {
            Some(EndReason::parse(&name).ok_or_else(|| format!("unknown end reason {name:?}"))?)
        }
    };
    let battery = |b: Option<i16>| b.map(|b| b as u8);
    let local_date: NaiveDate = get!("local_date");
    Ok(SessionRow {
        account_id: AccountId(get!("account_id")),
        session: Session {
            id: get!("id"),
            mower_id: MowerId(get!("mower_id")),
            started_at: get!("started_at"),
            ended_at: get!("ended_at"),
            end_reason,
            error_code: get!("error_code"),
            mowing_ms: get!("mowing_ms"),
            blade_ms: get!("blade_ms"),
            distance_mm: get!("distance_mm"),
            breaks: get!("breaks"),
            states: get!("states"),
            first_lat: get!("first_lat"),
            first_lon: get!("first_lon"),
            last_lat: get!("last_lat"),
            last_lon: get!("last_lon"),
            first_battery_percent: battery(get!("first_battery_percent")),
            last_battery_percent: battery(get!("last_battery_percent")),
            local_date,
        },
    })
}

fn unavailable(e: impl Into<Cause>) -> SessionError {
    SessionError::Unavailable(e.into())
}

fn corrupt(e: impl Into<Cause>) -> SessionError {
    SessionError::Corrupt(e.into())
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
        sqlx::query(READ_PAGE.as_str())
            .bind(query.mowers.iter().map(|m| m.0).collect::<Vec<_>>())
            .bind(query.account.0)
            .bind(query.from.unwrap_or_else(far_past))
            .bind(query.to.unwrap_or_else(far_future))
            .bind(before_at)
            .bind(before_mower.0)
            .bind(i64::try_from(query.limit).unwrap_or(i64::MAX))
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?
            .iter()
            .map(|row| session_from(row).map_err(corrupt))
            .collect()
    }
}
