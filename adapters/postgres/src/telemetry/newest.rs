//! Each mower's newest W8 session as its health row keeps it (decisions 207 and 210, migration
//! 14): one text column, `session_carry`, that the batch's first statement reads and its write
//! sets, and its encoding here.
//!
//! The layout is a one-text carry (`carry_text`): the layout's version (`1`); of the newest
//! session its start (Unix microseconds), local date (days since 1970-01-01), end
//! (microseconds), end reason, mowing, blade and distance figures, breaks, states, first and last
//! position, first and last battery; of the rest after its end its states, blade time, first and
//! last position, first and last battery; last, the session's error code after a `+` (the only
//! field whose text is free, so the only one that may hold a `|`). Numbers are written as Rust
//! prints them and read back exactly (a float as its shortest round-trip decimal). The view
//! `mower_sessions_now` reads the same fields in SQL (migration 14).

use super::rows::corrupt;
use crate::carry_text::{CarryReader, CarryWriter};
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use swath_application::ports::StoreError;
use swath_domain::sessions::{session_id, EndReason, Rest, Session, SessionCarry};
use swath_domain::MowerId;

/// The layout's version, its first field.
const LAYOUT: &str = "1";

/// Fields before the error code (the version included).
const FIXED: usize = 24;

/// `NaiveDate::num_days_from_ce` of 1970-01-01.
const EPOCH_DAYS_FROM_CE: i32 = 719_163;

/// The carry as the health row keeps it (module documentation).
pub(super) fn encode(carry: &SessionCarry) -> String {
    let mut out = CarryWriter::new(LAYOUT);
    let s = carry.newest.as_ref();
    let micros = |t: DateTime<Utc>| t.timestamp_micros();
    out.field(s.map(|s| micros(s.started_at)));
    out.field(s.map(|s| i64::from(s.local_date.num_days_from_ce() - EPOCH_DAYS_FROM_CE)));
    out.field(s.and_then(|s| s.ended_at).map(micros));
    out.field(s.and_then(|s| s.end_reason).map(EndReason::as_str));
    for figure in [
        |s: &Session| s.mowing_ms,
        |s: &Session| s.blade_ms,
        |s: &Session| s.distance_mm,
        |s: &Session| s.breaks,
        |s: &Session| s.states,
    ] {
        out.field(s.map(figure));
    }
    out.field(s.and_then(|s| s.first_lat));
    out.field(s.and_then(|s| s.first_lon));
    out.field(s.and_then(|s| s.last_lat));
    out.field(s.and_then(|s| s.last_lon));
    out.field(s.and_then(|s| s.first_battery_percent));
    out.field(s.and_then(|s| s.last_battery_percent));
    let r = &carry.rest;
    out.field(Some(r.states));
    out.field(Some(r.blade_ms));
    out.field(r.first_lat);
    out.field(r.first_lon);
    out.field(r.last_lat);
    out.field(r.last_lon);
    out.field(r.first_battery_percent);
    out.field(r.last_battery_percent);
    out.finish(s.and_then(|s| s.error_code.as_deref()))
}

/// The newest session of `mower_id` and its rest from the health row's `session_carry` (none
/// kept: no session and an empty rest).
pub(super) fn decode(text: Option<&str>, mower_id: MowerId) -> Result<SessionCarry, StoreError> {
    let Some(text) = text else {
        return Ok(SessionCarry::default());
    };
    let bad = |what: &str| corrupt(format!("mower {mower_id}: session carry {what}: {text:?}"));
    let mut c = CarryReader::new(text, LAYOUT, FIXED).map_err(|e| bad(&e))?;
    macro_rules! field {
        ($ty:ty, $what:literal) => {
            c.parsed::<$ty>($what).map_err(|e| bad(&e))?
        };
    }
    let started_at = field!(i64, "start");
    let local_date = field!(i32, "local date");
    let ended_at = field!(i64, "end");
    let reason = c.next().map_err(|e| bad(&e))?;
    let mowing_ms = field!(i64, "mowing time");
    let blade_ms = field!(i64, "blade time");
    let distance_mm = field!(i64, "distance");
    let breaks = field!(i64, "break count");
    let states = field!(i64, "state count");
    let first_lat = field!(f64, "position");
    let first_lon = field!(f64, "position");
    let last_lat = field!(f64, "position");
    let last_lon = field!(f64, "position");
    let first_battery = field!(u8, "battery");
    let last_battery = field!(u8, "battery");
    let rest = Rest {
        states: field!(i64, "rest").unwrap_or(0),
        blade_ms: field!(i64, "rest").unwrap_or(0),
        first_lat: field!(f64, "rest position"),
        first_lon: field!(f64, "rest position"),
        last_lat: field!(f64, "rest position"),
        last_lon: field!(f64, "rest position"),
        first_battery_percent: field!(u8, "rest battery"),
        last_battery_percent: field!(u8, "rest battery"),
    };
    let error_code = c.free().map_err(|e| bad(&e))?;
    let time = |micros: i64| {
        DateTime::from_timestamp_micros(micros).ok_or_else(|| bad("with a time out of range"))
    };
    let newest = match started_at {
        None => None,
        Some(started_at) => {
            let started_at = time(started_at)?;
            let end_reason = match reason {
                "" => None,
                name => {
                    Some(EndReason::parse(name).ok_or_else(|| bad("with an unknown end reason"))?)
                }
            };
            let local_date = local_date
                .and_then(|d| d.checked_add(EPOCH_DAYS_FROM_CE))
                .and_then(NaiveDate::from_num_days_from_ce_opt)
                .ok_or_else(|| bad("without a date"))?;
            let figure = |value: Option<i64>| value.ok_or_else(|| bad("incomplete"));
            Some(Session {
                id: session_id(mower_id, started_at),
                mower_id,
                started_at,
                ended_at: ended_at.map(time).transpose()?,
                end_reason,
                error_code,
                mowing_ms: figure(mowing_ms)?,
                blade_ms: figure(blade_ms)?,
                distance_mm: figure(distance_mm)?,
                breaks: figure(breaks)?,
                states: figure(states)?,
                first_lat,
                first_lon,
                last_lat,
                last_lon,
                first_battery_percent: first_battery,
                last_battery_percent: last_battery,
                local_date,
            })
        }
    };
    Ok(SessionCarry { newest, rest })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carry_text::strategies::{position, session_ends};
    use proptest::prelude::*;

    fn mower() -> MowerId {
        MowerId(uuid::Uuid::from_u128(7))
    }

    /// First and last latitude and longitude.
    fn positions() -> impl Strategy<Value = [Option<f64>; 4]> {
        [position(), position(), position(), position()]
    }

    /// First and last battery.
    fn batteries() -> impl Strategy<Value = [Option<u8>; 2]> {
        [prop::option::of(0u8..=100), prop::option::of(0u8..=100)]
    }

    prop_compose! {
        fn a_session()(
            (started_at, ended_at, end_reason, error_code) in session_ends(),
            figures in prop::array::uniform5(0i64..i64::MAX),
            positions in positions(),
            batteries in batteries(),
            days in -30_000i32..30_000,
        ) -> Session {
            Session {
                id: session_id(mower(), started_at),
                mower_id: mower(),
                started_at,
                ended_at,
                end_reason,
                error_code,
                mowing_ms: figures[0],
                blade_ms: figures[1],
                distance_mm: figures[2],
                breaks: figures[3],
                states: figures[4],
                first_lat: positions[0],
                first_lon: positions[1],
                last_lat: positions[2],
                last_lon: positions[3],
                first_battery_percent: batteries[0],
                last_battery_percent: batteries[1],
                local_date: NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()
                    + chrono::Duration::days(days.into()),
            }
        }
    }

    prop_compose! {
        fn a_carry()(
            newest in prop::option::of(a_session()),
            counts in (0i64..1_000_000, 0i64..i64::MAX),
            positions in positions(),
            batteries in batteries(),
        ) -> SessionCarry {
            SessionCarry {
                newest,
                rest: Rest {
                    states: counts.0,
                    blade_ms: counts.1,
                    first_lat: positions[0],
                    first_lon: positions[1],
                    last_lat: positions[2],
                    last_lon: positions[3],
                    first_battery_percent: batteries[0],
                    last_battery_percent: batteries[1],
                },
            }
        }
    }

    proptest! {
        #[test]
        fn a_carry_reads_back_as_it_was_written(carry in a_carry()) {
            let text = encode(&carry);
            let back = decode(Some(&text), mower()).unwrap();
            // Floats compared by their bits: -0.0 stays -0.0.
            prop_assert_eq!(format!("{back:?}"), format!("{carry:?}"));
            prop_assert_eq!(back, carry);
        }
    }

    #[test]
    fn no_carry_is_no_session_and_an_empty_rest() {
        assert_eq!(decode(None, mower()).unwrap(), SessionCarry::default());
        let empty = encode(&SessionCarry::default());
        assert_eq!(empty, "1||||||||||||||||0|0|||||||");
        assert_eq!(
            decode(Some(&empty), mower()).unwrap(),
            SessionCarry::default()
        );
    }

    #[test]
    fn a_damaged_carry_is_refused_with_what_is_wrong() {
        let good = encode(&SessionCarry::default());
        for (text, says) in [
            ("2||||||||||||||||0|0|||||||".to_owned(), "unknown layout"),
            ("1|||".to_owned(), "cut short"),
            (good.replacen("|0|", "|x|", 1), "bad rest"),
            (format!("{good}E1"), "bad error code"),
        ] {
            let error = decode(Some(&text), mower()).unwrap_err().to_string();
            assert!(error.contains(says), "{text:?}: {error}");
        }
    }
}
