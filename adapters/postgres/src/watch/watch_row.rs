//! The watch row (`mower_watches`): its columns, decoded into a [`Watch`] and written back by
//! one constant statement per batch. The pending session of W8 (decisions 208 and 211) is one
//! text, `session_carry` (a one-text carry, `carry_text`), NULL while none is pending; a batch
//! none of whose rows had or has one leaves it and `session_due_at` alone.
//!
//! The carry's layout: the version (`1`); the session's start and end (Unix microseconds), end
//! reason, mowing ms, blade ms, distance mm and breaks; the rest's blade ms; the previous state's
//! blade (`true`/`false`), latitude and longitude; last, `+` and the session's error code.

use super::rows::{activity, corrupt, mower_id, unavailable};
use crate::carry_text::{CarryReader, CarryWriter};
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
        w.session_due_at, w.session_carry"
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
const SESSION: [(&str, &str); 2] = [("session_due_at", "timestamptz"), ("session_carry", "text")];

/// The carry's layout version, its first field.
const LAYOUT: &str = "1";

/// Fields before the error code (the version included).
const FIXED: usize = 12;

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
    let carry: Option<&str> = row.try_get("session_carry").map_err(corrupt)?;
    Ok(carry.is_some())
}

/// The pending session of a watch row: `None` when `session_carry` is NULL.
fn session_from(row: &PgRow) -> Result<Option<SessionWatch>, WatchError> {
    let carry: Option<&str> = row.try_get("session_carry").map_err(corrupt)?;
    carry.map(decode).transpose()
}

/// The pending session as the watch row keeps it (module documentation).
fn encode(s: &SessionWatch) -> String {
    let mut out = CarryWriter::new(LAYOUT);
    out.field(Some(s.started_at.timestamp_micros()));
    out.field(s.ended_at.map(|t| t.timestamp_micros()));
    out.field(s.end_reason.map(EndReason::as_str));
    out.field(Some(s.mowing_ms));
    out.field(Some(s.blade_ms));
    out.field(Some(s.distance_mm));
    out.field(Some(s.breaks));
    out.field(Some(s.rest_blade_ms));
    out.field(Some(s.last_blade_on));
    out.field(s.last_lat);
    out.field(s.last_lon);
    out.finish(s.error_code.as_deref())
}

fn decode(text: &str) -> Result<SessionWatch, WatchError> {
    let bad = |what: String| corrupt(format!("pending session carry {what}: {text:?}"));
    let mut c = CarryReader::new(text, LAYOUT, FIXED).map_err(bad)?;
    macro_rules! field {
        ($ty:ty, $what:literal) => {
            c.parsed::<$ty>($what).map_err(bad)?
        };
    }
    macro_rules! set {
        ($ty:ty, $what:literal) => {
            field!($ty, $what).ok_or_else(|| bad(concat!("without a ", $what).to_owned()))?
        };
    }
    let time = |micros: i64| {
        DateTime::from_timestamp_micros(micros)
            .ok_or_else(|| bad("with a time out of range".to_owned()))
    };
    let started_at = time(set!(i64, "start"))?;
    let ended_at = field!(i64, "end").map(time).transpose()?;
    let end_reason = match c.next().map_err(bad)? {
        "" => None,
        name => Some(
            EndReason::parse(name).ok_or_else(|| bad("with an unknown end reason".to_owned()))?,
        ),
    };
    Ok(SessionWatch {
        started_at,
        ended_at,
        end_reason,
        mowing_ms: set!(i64, "mowing time"),
        blade_ms: set!(i64, "blade time"),
        distance_mm: set!(i64, "distance"),
        breaks: set!(i64, "break count"),
        rest_blade_ms: set!(i64, "rest blade time"),
        last_blade_on: set!(bool, "blade"),
        last_lat: field!(f64, "position"),
        last_lon: field!(f64, "position"),
        error_code: c.free().map_err(bad)?,
    })
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
        query = query
            .bind(w.iter().map(|r| r.session_due_at).collect::<Vec<_>>())
            .bind(
                w.iter()
                    .map(|r| r.session.as_ref().map(encode))
                    .collect::<Vec<_>>(),
            );
    }
    query.execute(&mut **tx).await.map_err(unavailable)?;
    counters.statement();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carry_text::strategies::{position, session_ends};
    use chrono::TimeZone;
    use proptest::prelude::*;

    prop_compose! {
        fn a_pending_session()(
            (started_at, ended_at, end_reason, error_code) in session_ends(),
            figures in prop::array::uniform5(0i64..i64::MAX),
            last_blade_on in any::<bool>(),
            last_lat in position(),
            last_lon in position(),
        ) -> SessionWatch {
            SessionWatch {
                started_at,
                ended_at,
                end_reason,
                error_code,
                mowing_ms: figures[0],
                blade_ms: figures[1],
                distance_mm: figures[2],
                breaks: figures[3],
                rest_blade_ms: figures[4],
                last_blade_on,
                last_lat,
                last_lon,
            }
        }
    }

    proptest! {
        #[test]
        fn a_pending_session_reads_back_as_it_was_written(session in a_pending_session()) {
            let back = decode(&encode(&session)).unwrap();
            // Floats compared by their bits: -0.0 stays -0.0.
            prop_assert_eq!(format!("{back:?}"), format!("{session:?}"));
            prop_assert_eq!(back, session);
        }
    }

    #[test]
    fn a_pending_session_is_written_in_its_layout() {
        let session = SessionWatch {
            started_at: Utc.timestamp_micros(1_700_000_000_000_001).unwrap(),
            ended_at: None,
            end_reason: None,
            error_code: Some("E|1".to_owned()),
            mowing_ms: 1,
            blade_ms: 2,
            distance_mm: 3,
            breaks: 4,
            rest_blade_ms: 5,
            last_blade_on: true,
            last_lat: Some(52.5),
            last_lon: None,
        };
        assert_eq!(
            encode(&session),
            "1|1700000000000001|||1|2|3|4|5|true|52.5||+E|1"
        );
    }

    #[test]
    fn a_damaged_pending_session_is_refused_with_what_is_wrong() {
        for (text, says) in [
            ("2|1|||0|0|0|0|0|false|||", "unknown layout"),
            ("1|1|||0|0", "cut short"),
            ("1||||0|0|0|0|0|false|||", "without a start"),
            ("1|1|||0|0|0|0|0|maybe|||", "bad blade"),
            ("1|1||gone|0|0|0|0|0|false|||", "unknown end reason"),
            ("1|1|||0|0|0|0|0|false|||E1", "bad error code"),
        ] {
            let error = decode(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text:?}: {error}");
        }
    }
}
