//! The newest session and its rest on `health_totals` as one text, `session_carry` (decision
//! 210), instead of migration 12's 24 typed columns: the ingest reads and rewrites the carry of
//! every mower of every batch, and PostgreSQL's cost of that grew with the number of columns
//! (each one a parameter array, an `unnest`, a `CASE` and a value to send), not with their bytes.
//!
//! The layout (`|`-separated, an empty field for an absent value) is the one the ingest writes
//! (`swath-postgres`, `telemetry/newest.rs`): the version `1`; the newest session's start (Unix
//! microseconds), local date (days since 1970-01-01), end (microseconds), end reason, mowing ms,
//! blade ms, distance mm, breaks, states, first and last latitude and longitude, first and last
//! battery; the rest's states, blade ms, first and last latitude and longitude, first and last
//! battery; last, `+` and the session's error code. A row without a kept session has NULL or a
//! carry whose start is empty. The view `mower_sessions_now` reads the session's fields from it
//! with `swath_carry_time` (a field of microseconds as a time).
//!
//! Up writes each row's carry from the typed columns and drops them; down puts them back and
//! migration 12's view with them.

use crate::m20261206_000012_newest_session::newest_session_view;

sql_migration!("m20261207_000014_session_carry");

const UP: &str = r#"
CREATE FUNCTION swath_carry_time(field text) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN field = '' THEN NULL ELSE timestamptz 'epoch'
        + (field::bigint / 1000000) * interval '1 second'
        + (field::bigint % 1000000) * interval '1 microsecond' END
$$;

DROP VIEW mower_sessions_now;

ALTER TABLE health_totals ADD COLUMN session_carry text;

-- Floats as PostgreSQL prints them by default: their shortest exact decimal.
UPDATE health_totals SET session_carry = concat_ws('|', '1',
    COALESCE((extract(epoch FROM session_started_at) * 1000000)::bigint::text, ''),
    COALESCE((session_local_date - date '1970-01-01')::text, ''),
    COALESCE((extract(epoch FROM session_ended_at) * 1000000)::bigint::text, ''),
    COALESCE(session_end_reason, ''),
    COALESCE(session_mowing_ms::text, ''), COALESCE(session_blade_ms::text, ''),
    COALESCE(session_distance_mm::text, ''), COALESCE(session_breaks::text, ''),
    COALESCE(session_states::text, ''),
    COALESCE(session_first_lat::text, ''), COALESCE(session_first_lon::text, ''),
    COALESCE(session_last_lat::text, ''), COALESCE(session_last_lon::text, ''),
    COALESCE(session_first_battery_percent::text, ''),
    COALESCE(session_last_battery_percent::text, ''),
    COALESCE(rest_states, 0)::text, COALESCE(rest_blade_ms, 0)::text,
    COALESCE(rest_first_lat::text, ''), COALESCE(rest_first_lon::text, ''),
    COALESCE(rest_last_lat::text, ''), COALESCE(rest_last_lon::text, ''),
    COALESCE(rest_first_battery_percent::text, ''),
    COALESCE(rest_last_battery_percent::text, ''),
    COALESCE('+' || session_error_code, ''))
WHERE session_started_at IS NOT NULL OR rest_states IS NOT NULL;

ALTER TABLE health_totals
    DROP COLUMN session_started_at,
    DROP COLUMN session_local_date,
    DROP COLUMN session_ended_at,
    DROP COLUMN session_end_reason,
    DROP COLUMN session_error_code,
    DROP COLUMN session_mowing_ms,
    DROP COLUMN session_blade_ms,
    DROP COLUMN session_distance_mm,
    DROP COLUMN session_breaks,
    DROP COLUMN session_states,
    DROP COLUMN session_first_lat,
    DROP COLUMN session_first_lon,
    DROP COLUMN session_last_lat,
    DROP COLUMN session_last_lon,
    DROP COLUMN session_first_battery_percent,
    DROP COLUMN session_last_battery_percent,
    DROP COLUMN rest_states,
    DROP COLUMN rest_blade_ms,
    DROP COLUMN rest_first_lat,
    DROP COLUMN rest_first_lon,
    DROP COLUMN rest_last_lat,
    DROP COLUMN rest_last_lon,
    DROP COLUMN rest_first_battery_percent,
    DROP COLUMN rest_last_battery_percent;

CREATE VIEW mower_sessions_now AS
SELECT s.mower_id, s.started_at, s.id, s.account_id,
    CASE WHEN n.c IS NULL THEN s.ended_at ELSE swath_carry_time(n.c[4]) END AS ended_at,
    CASE WHEN n.c IS NULL THEN s.end_reason ELSE NULLIF(n.c[5], '') END AS end_reason,
    CASE WHEN n.c IS NULL THEN s.error_code
        ELSE substring(n.carry FROM '^(?:[^|]*\|){24}\+(.*)$') END AS error_code,
    CASE WHEN n.c IS NULL THEN s.mowing_ms ELSE n.c[6]::bigint END AS mowing_ms,
    CASE WHEN n.c IS NULL THEN s.blade_ms ELSE n.c[7]::bigint END AS blade_ms,
    CASE WHEN n.c IS NULL THEN s.distance_mm ELSE n.c[8]::bigint END AS distance_mm,
    CASE WHEN n.c IS NULL THEN s.breaks ELSE n.c[9]::bigint END AS breaks,
    CASE WHEN n.c IS NULL THEN s.states ELSE n.c[10]::bigint END AS states,
    CASE WHEN n.c IS NULL THEN s.first_lat ELSE NULLIF(n.c[11], '')::double precision END
        AS first_lat,
    CASE WHEN n.c IS NULL THEN s.first_lon ELSE NULLIF(n.c[12], '')::double precision END
        AS first_lon,
    CASE WHEN n.c IS NULL THEN s.last_lat ELSE NULLIF(n.c[13], '')::double precision END
        AS last_lat,
    CASE WHEN n.c IS NULL THEN s.last_lon ELSE NULLIF(n.c[14], '')::double precision END
        AS last_lon,
    CASE WHEN n.c IS NULL THEN s.first_battery_percent ELSE NULLIF(n.c[15], '')::smallint END
        AS first_battery_percent,
    CASE WHEN n.c IS NULL THEN s.last_battery_percent ELSE NULLIF(n.c[16], '')::smallint END
        AS last_battery_percent,
    s.local_date
FROM mower_sessions s
LEFT JOIN LATERAL (SELECT h.session_carry AS carry, string_to_array(h.session_carry, '|') AS c
    FROM health_totals h WHERE h.mower_id = s.mower_id) n
    ON swath_carry_time(n.c[2]) = s.started_at;
"#;

const DOWN: &str = concat!(
    r#"
DROP VIEW IF EXISTS mower_sessions_now;

ALTER TABLE health_totals
    ADD COLUMN session_started_at timestamptz,
    ADD COLUMN session_local_date date,
    ADD COLUMN session_ended_at timestamptz,
    ADD COLUMN session_end_reason text,
    ADD COLUMN session_error_code text,
    ADD COLUMN session_mowing_ms bigint,
    ADD COLUMN session_blade_ms bigint,
    ADD COLUMN session_distance_mm bigint,
    ADD COLUMN session_breaks bigint,
    ADD COLUMN session_states bigint,
    ADD COLUMN session_first_lat double precision,
    ADD COLUMN session_first_lon double precision,
    ADD COLUMN session_last_lat double precision,
    ADD COLUMN session_last_lon double precision,
    ADD COLUMN session_first_battery_percent smallint,
    ADD COLUMN session_last_battery_percent smallint,
    ADD COLUMN rest_states bigint,
    ADD COLUMN rest_blade_ms bigint,
    ADD COLUMN rest_first_lat double precision,
    ADD COLUMN rest_first_lon double precision,
    ADD COLUMN rest_last_lat double precision,
    ADD COLUMN rest_last_lon double precision,
    ADD COLUMN rest_first_battery_percent smallint,
    ADD COLUMN rest_last_battery_percent smallint;

UPDATE health_totals h SET
    session_started_at = swath_carry_time(c[2]),
    session_local_date = date '1970-01-01' + NULLIF(c[3], '')::integer,
    session_ended_at = swath_carry_time(c[4]),
    session_end_reason = NULLIF(c[5], ''),
    session_error_code = substring(h.session_carry FROM '^(?:[^|]*\|){24}\+(.*)$'),
    session_mowing_ms = NULLIF(c[6], '')::bigint,
    session_blade_ms = NULLIF(c[7], '')::bigint,
    session_distance_mm = NULLIF(c[8], '')::bigint,
    session_breaks = NULLIF(c[9], '')::bigint,
    session_states = NULLIF(c[10], '')::bigint,
    session_first_lat = NULLIF(c[11], '')::double precision,
    session_first_lon = NULLIF(c[12], '')::double precision,
    session_last_lat = NULLIF(c[13], '')::double precision,
    session_last_lon = NULLIF(c[14], '')::double precision,
    session_first_battery_percent = NULLIF(c[15], '')::smallint,
    session_last_battery_percent = NULLIF(c[16], '')::smallint,
    rest_states = NULLIF(c[17], '')::bigint,
    rest_blade_ms = NULLIF(c[18], '')::bigint,
    rest_first_lat = NULLIF(c[19], '')::double precision,
    rest_first_lon = NULLIF(c[20], '')::double precision,
    rest_last_lat = NULLIF(c[21], '')::double precision,
    rest_last_lon = NULLIF(c[22], '')::double precision,
    rest_first_battery_percent = NULLIF(c[23], '')::smallint,
    rest_last_battery_percent = NULLIF(c[24], '')::smallint
FROM (SELECT mower_id, string_to_array(session_carry, '|') AS c FROM health_totals
    WHERE session_carry IS NOT NULL) k
WHERE h.mower_id = k.mower_id;

ALTER TABLE health_totals DROP COLUMN session_carry;

DROP FUNCTION swath_carry_time(text);
"#,
    newest_session_view!()
);
