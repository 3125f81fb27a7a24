//! Each mower's newest W8 session as its health row keeps it (decision 207, migration 12): the
//! typed columns the batch's first statement reads and its write sets, and their decoding.

use super::rows::corrupt;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::postgres::PgRow;
use sqlx::Row;
use swath_application::ports::StoreError;
use swath_domain::sessions::{session_id, EndReason, Rest, Session, SessionCarry};
use swath_domain::MowerId;

/// The carry's columns on `health_totals` with their array types, in the order the write binds
/// them.
pub(super) const COLUMNS: [(&str, &str); 24] = [
    ("session_started_at", "timestamptz"),
    ("session_local_date", "date"),
    ("session_ended_at", "timestamptz"),
    ("session_end_reason", "text"),
    ("session_error_code", "text"),
    ("session_mowing_ms", "int8"),
    ("session_blade_ms", "int8"),
    ("session_distance_mm", "int8"),
    ("session_breaks", "int8"),
    ("session_states", "int8"),
    ("session_first_lat", "float8"),
    ("session_first_lon", "float8"),
    ("session_last_lat", "float8"),
    ("session_last_lon", "float8"),
    ("session_first_battery_percent", "int2"),
    ("session_last_battery_percent", "int2"),
    ("rest_states", "int8"),
    ("rest_blade_ms", "int8"),
    ("rest_first_lat", "float8"),
    ("rest_first_lon", "float8"),
    ("rest_last_lat", "float8"),
    ("rest_last_lon", "float8"),
    ("rest_first_battery_percent", "int2"),
    ("rest_last_battery_percent", "int2"),
];

/// `h.session_started_at, …`: the carry as the batch's first statement selects it.
pub(super) fn select_list() -> String {
    COLUMNS
        .iter()
        .map(|(name, _)| format!("h.{name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The carry's part of the write: its `SET` items and its columns with their array types, in
/// the order [`bind`] binds them. The first column, `session_given`, says per health row whether
/// the batch changed the carry (else the row keeps its own); one column per [`COLUMNS`] follows.
pub(super) fn write_parts() -> (String, Vec<(&'static str, &'static str)>) {
    let set = COLUMNS
        .iter()
        .map(|(name, _)| {
            format!("{name} = CASE WHEN u.session_given THEN u.{name} ELSE h.{name} END")
        })
        .collect::<Vec<_>>()
        .join(", ");
    let columns = std::iter::once(("session_given", "boolean"))
        .chain(COLUMNS)
        .collect();
    (set, columns)
}

/// Binds the carry's arrays for the batch's health rows, in the write's order: `carries[i]` is
/// the carry of the `i`-th health row's mower, when the batch changed it.
pub(super) fn bind<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    carries: &'q [Option<&'q SessionCarry>],
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    // One array per column: the value of each row's changed carry, NULL for the others.
    fn of<'a, T>(
        carries: &[Option<&'a SessionCarry>],
        f: impl Fn(&'a SessionCarry) -> Option<T>,
    ) -> Vec<Option<T>> {
        carries.iter().map(|c| c.and_then(&f)).collect()
    }
    fn newest(c: &SessionCarry) -> Option<&Session> {
        c.newest.as_ref()
    }
    let battery = |b: Option<u8>| b.map(i16::from);
    query
        .bind(carries.iter().map(Option::is_some).collect::<Vec<_>>())
        .bind(of(carries, |c| newest(c).map(|s| s.started_at)))
        .bind(of(carries, |c| newest(c).map(|s| s.local_date)))
        .bind(of(carries, |c| newest(c).and_then(|s| s.ended_at)))
        .bind(of(carries, |c| {
            newest(c).and_then(|s| s.end_reason).map(EndReason::as_str)
        }))
        .bind(of(carries, |c| {
            newest(c).and_then(|s| s.error_code.as_deref())
        }))
        .bind(of(carries, |c| newest(c).map(|s| s.mowing_ms)))
        .bind(of(carries, |c| newest(c).map(|s| s.blade_ms)))
        .bind(of(carries, |c| newest(c).map(|s| s.distance_mm)))
        .bind(of(carries, |c| newest(c).map(|s| s.breaks)))
        .bind(of(carries, |c| newest(c).map(|s| s.states)))
        .bind(of(carries, |c| newest(c).and_then(|s| s.first_lat)))
        .bind(of(carries, |c| newest(c).and_then(|s| s.first_lon)))
        .bind(of(carries, |c| newest(c).and_then(|s| s.last_lat)))
        .bind(of(carries, |c| newest(c).and_then(|s| s.last_lon)))
        .bind(of(carries, |c| {
            newest(c).and_then(|s| battery(s.first_battery_percent))
        }))
        .bind(of(carries, |c| {
            newest(c).and_then(|s| battery(s.last_battery_percent))
        }))
        .bind(of(carries, |c| Some(c.rest.states)))
        .bind(of(carries, |c| Some(c.rest.blade_ms)))
        .bind(of(carries, |c| c.rest.first_lat))
        .bind(of(carries, |c| c.rest.first_lon))
        .bind(of(carries, |c| c.rest.last_lat))
        .bind(of(carries, |c| c.rest.last_lon))
        .bind(of(carries, |c| battery(c.rest.first_battery_percent)))
        .bind(of(carries, |c| battery(c.rest.last_battery_percent)))
}

/// The newest session of `mower_id` and its rest, from the batch read's carry columns.
pub(super) fn carry_from(row: &PgRow, mower_id: MowerId) -> Result<SessionCarry, StoreError> {
    macro_rules! get {
        ($name:literal) => {
            row.try_get($name).map_err(corrupt)?
        };
    }
    let battery = |b: Option<i16>| b.map(|b| b as u8);
    let started_at: Option<DateTime<Utc>> = get!("session_started_at");
    let newest = match started_at {
        None => None,
        Some(started_at) => {
            let reason: Option<String> = get!("session_end_reason");
            let end_reason = match reason {
                None => None,
                Some(name) => Some(EndReason::parse(&name).ok_or_else(|| {
                    corrupt(format!("mower {mower_id}: unknown end reason {name:?}"))
                })?),
            };
            let local_date: Option<NaiveDate> = get!("session_local_date");
            let figure = |value: Option<i64>| {
                value.ok_or_else(|| corrupt(format!("mower {mower_id}: newest session incomplete")))
            };
            Some(Session {
                id: session_id(mower_id, started_at),
                mower_id,
                started_at,
                ended_at: get!("session_ended_at"),
                end_reason,
                error_code: get!("session_error_code"),
                mowing_ms: figure(get!("session_mowing_ms"))?,
                blade_ms: figure(get!("session_blade_ms"))?,
                distance_mm: figure(get!("session_distance_mm"))?,
                breaks: figure(get!("session_breaks"))?,
                states: figure(get!("session_states"))?,
                first_lat: get!("session_first_lat"),
                first_lon: get!("session_first_lon"),
                last_lat: get!("session_last_lat"),
                last_lon: get!("session_last_lon"),
                first_battery_percent: battery(get!("session_first_battery_percent")),
                last_battery_percent: battery(get!("session_last_battery_percent")),
                local_date: local_date.ok_or_else(|| {
                    corrupt(format!("mower {mower_id}: newest session without a date"))
                })?,
            })
        }
    };
    let states: Option<i64> = get!("rest_states");
    let blade_ms: Option<i64> = get!("rest_blade_ms");
    Ok(SessionCarry {
        newest,
        rest: Rest {
            states: states.unwrap_or(0),
            blade_ms: blade_ms.unwrap_or(0),
            first_lat: get!("rest_first_lat"),
            first_lon: get!("rest_first_lon"),
            last_lat: get!("rest_last_lat"),
            last_lon: get!("rest_last_lon"),
            first_battery_percent: battery(get!("rest_first_battery_percent")),
            last_battery_percent: battery(get!("rest_last_battery_percent")),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_parts_set_every_column_once_after_the_flag() {
        let (set, columns) = write_parts();
        assert_eq!(set.matches("CASE WHEN").count(), COLUMNS.len());
        assert_eq!(columns.len(), COLUMNS.len() + 1);
        assert_eq!(columns[0], ("session_given", "boolean"));
        assert_eq!(columns[1..], COLUMNS);
    }
}
