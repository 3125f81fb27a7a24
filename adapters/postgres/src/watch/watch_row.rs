//! The watch row (`mower_watches`): its columns, decoded into a [`Watch`] and written back by
//! one constant statement per batch. The pending session of W8 (decision 208) is typed columns,
//! all NULL while none is pending; a batch none of whose rows had or has one leaves them alone.

use super::rows::{activity, corrupt, mower_id, unavailable};
use crate::{arrays, Counters};
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row, Transaction};
use std::sync::LazyLock;
use swath_application::ports::WatchError;
use swath_domain::sessions::EndReason;
use swath_domain::watch::{SessionWatch, Watch};
use swath_domain::AccountId;
use uuid::Uuid;

/// The watch row's columns, `w.`-qualified: a macro, so that the statements naming them stay
/// constant texts (sqlx prepares each once per connection).
macro_rules! watch_columns {
    () => {
        "w.mower_id, w.account_id, w.watched_until, w.last_seen_at, w.last_activity, \
        w.error_code, w.outside_geofence, w.battery_low, w.offline, w.geofence_version, \
        w.session_due_at, w.session_started_at, w.session_ended_at, w.session_end_reason, \
        w.session_error_code, w.session_mowing_ms, w.session_blade_ms, w.session_distance_mm, \
        w.session_breaks, w.session_rest_blade_ms, w.session_last_blade_on, w.session_last_lat, \
        w.session_last_lon"
    };
}
pub(super) use watch_columns;

pub(super) const WATCH_COLUMNS: &str = watch_columns!();

/// The watch row's columns the update writes, `mower_id` (the key) first, with their array types
/// in the order [`update_watches`] binds them.
const UPDATED: [(&str, &str); 10] = [
    ("mower_id", "uuid"),
    ("account_id", "uuid"),
    ("watched_until", "timestamptz"),
    ("last_seen_at", "timestamptz"),
    ("last_activity", "text"),
    ("error_code", "text"),
    ("outside_geofence", "boolean"),
    ("battery_low", "boolean"),
    ("offline", "boolean"),
    ("geofence_version", "uuid"),
];

/// The pending session's columns, bound after [`UPDATED`]'s.
const SESSION: [(&str, &str); 13] = [
    ("session_due_at", "timestamptz"),
    ("session_started_at", "timestamptz"),
    ("session_ended_at", "timestamptz"),
    ("session_end_reason", "text"),
    ("session_error_code", "text"),
    ("session_mowing_ms", "bigint"),
    ("session_blade_ms", "bigint"),
    ("session_distance_mm", "bigint"),
    ("session_breaks", "bigint"),
    ("session_rest_blade_ms", "bigint"),
    ("session_last_blade_on", "boolean"),
    ("session_last_lat", "float8"),
    ("session_last_lon", "float8"),
];

/// The update of the batch's watch rows from `columns` (the key first), its rows built from the
/// arrays side by side (`arrays::zipped`: the session's columns make this the watcher's widest
/// write).
fn update_text(columns: &[(&str, &str)]) -> String {
    format!(
        "UPDATE mower_watches w SET {} FROM ({}) AS u WHERE w.mower_id = u.mower_id",
        arrays::set_from_u(&columns[1..]),
        arrays::zipped(1, columns)
    )
}

/// No session pending before or after the batch: the session's columns stay NULL.
static UPDATE_WATCHES: LazyLock<String> = LazyLock::new(|| update_text(&UPDATED));

static UPDATE_WATCHES_WITH_SESSIONS: LazyLock<String> =
    LazyLock::new(|| update_text(&[&UPDATED[..], &SESSION[..]].concat()));

/// A watch row, or `None` for a mower never watched.
pub(super) fn watch_from(row: &PgRow) -> Result<Option<Watch>, WatchError> {
    let watched_until: Option<DateTime<Utc>> = row.try_get("watched_until").map_err(corrupt)?;
    let Some(watched_until) = watched_until else {
        return Ok(None);
    };
    let account: Option<Uuid> = row.try_get("account_id").map_err(corrupt)?;
    let last_seen_at: Option<DateTime<Utc>> = row.try_get("last_seen_at").map_err(corrupt)?;
    let last_activity: Option<&str> = row.try_get("last_activity").map_err(corrupt)?;
    Ok(Some(from_row!(row, corrupt, Watch {
        error_code, outside_geofence, battery_low, offline, geofence_version, session_due_at;
        session: session_from(row)?,
        mower_id: mower_id(row)?,
        account_id: AccountId(account.ok_or_else(|| corrupt("watch row without account"))?),
        watched_until: watched_until,
        last_seen_at: last_seen_at.ok_or_else(|| corrupt("watch row without last_seen_at"))?,
        last_activity: activity(last_activity.unwrap_or_default())?,
    })))
}

/// Whether `row` holds a pending session.
pub(super) fn has_session(row: &PgRow) -> Result<bool, WatchError> {
    let started_at: Option<DateTime<Utc>> = row.try_get("session_started_at").map_err(corrupt)?;
    Ok(started_at.is_some())
}

/// The pending session of a watch row: `None` when `session_started_at` is NULL.
fn session_from(row: &PgRow) -> Result<Option<SessionWatch>, WatchError> {
    let started_at: Option<DateTime<Utc>> = row.try_get("session_started_at").map_err(corrupt)?;
    let Some(started_at) = started_at else {
        return Ok(None);
    };
    fn set<T>(row: &PgRow, column: &str) -> Result<T, WatchError>
    where
        for<'r> T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
    {
        row.try_get::<Option<T>, _>(column)
            .map_err(corrupt)?
            .ok_or_else(|| corrupt(format!("a pending session without {column}")))
    }
    let end_reason: Option<&str> = row.try_get("session_end_reason").map_err(corrupt)?;
    Ok(Some(SessionWatch {
        started_at,
        ended_at: row.try_get("session_ended_at").map_err(corrupt)?,
        end_reason: end_reason
            .map(|r| EndReason::parse(r).ok_or_else(|| corrupt(format!("end reason {r:?}"))))
            .transpose()?,
        error_code: row.try_get("session_error_code").map_err(corrupt)?,
        mowing_ms: set(row, "session_mowing_ms")?,
        blade_ms: set(row, "session_blade_ms")?,
        distance_mm: set(row, "session_distance_mm")?,
        breaks: set(row, "session_breaks")?,
        rest_blade_ms: set(row, "session_rest_blade_ms")?,
        last_blade_on: set(row, "session_last_blade_on")?,
        last_lat: row.try_get("session_last_lat").map_err(corrupt)?,
        last_lon: row.try_get("session_last_lon").map_err(corrupt)?,
    }))
}

/// Writes the batch's changed watch rows (one statement). `sessions_read`: some row the batch
/// read held a pending session, so the session's columns are written (cleared, if need be) even
/// when no changed row holds one any more.
pub(super) async fn update_watches(
    tx: &mut Transaction<'static, Postgres>,
    watches: &[Watch],
    sessions_read: bool,
    counters: &Counters,
) -> Result<(), WatchError> {
    let w = watches;
    let with_sessions = sessions_read || w.iter().any(|r| r.session.is_some());
    let text = if with_sessions {
        UPDATE_WATCHES_WITH_SESSIONS.as_str()
    } else {
        UPDATE_WATCHES.as_str()
    };
    let mut query = sqlx::query(text)
        .bind(w.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
        .bind(w.iter().map(|r| r.account_id.0).collect::<Vec<_>>())
        .bind(w.iter().map(|r| r.watched_until).collect::<Vec<_>>())
        .bind(w.iter().map(|r| r.last_seen_at).collect::<Vec<_>>())
        .bind(
            w.iter()
                .map(|r| r.last_activity.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            w.iter()
                .map(|r| r.error_code.as_deref())
                .collect::<Vec<_>>(),
        )
        .bind(w.iter().map(|r| r.outside_geofence).collect::<Vec<_>>())
        .bind(w.iter().map(|r| r.battery_low).collect::<Vec<_>>())
        .bind(w.iter().map(|r| r.offline).collect::<Vec<_>>())
        .bind(w.iter().map(|r| r.geofence_version).collect::<Vec<_>>());
    if with_sessions {
        let s = || w.iter().map(|r| r.session.as_ref());
        query = query
            .bind(w.iter().map(|r| r.session_due_at).collect::<Vec<_>>())
            .bind(s().map(|s| s.map(|s| s.started_at)).collect::<Vec<_>>())
            .bind(s().map(|s| s.and_then(|s| s.ended_at)).collect::<Vec<_>>())
            .bind(
                s().map(|s| s.and_then(|s| s.end_reason).map(EndReason::as_str))
                    .collect::<Vec<_>>(),
            )
            .bind(
                s().map(|s| s.and_then(|s| s.error_code.as_deref()))
                    .collect::<Vec<_>>(),
            )
            .bind(s().map(|s| s.map(|s| s.mowing_ms)).collect::<Vec<_>>())
            .bind(s().map(|s| s.map(|s| s.blade_ms)).collect::<Vec<_>>())
            .bind(s().map(|s| s.map(|s| s.distance_mm)).collect::<Vec<_>>())
            .bind(s().map(|s| s.map(|s| s.breaks)).collect::<Vec<_>>())
            .bind(s().map(|s| s.map(|s| s.rest_blade_ms)).collect::<Vec<_>>())
            .bind(s().map(|s| s.map(|s| s.last_blade_on)).collect::<Vec<_>>())
            .bind(s().map(|s| s.and_then(|s| s.last_lat)).collect::<Vec<_>>())
            .bind(s().map(|s| s.and_then(|s| s.last_lon)).collect::<Vec<_>>());
    }
    query.execute(&mut **tx).await.map_err(unavailable)?;
    counters.statement();
    Ok(())
}
