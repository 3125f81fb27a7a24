//! The watcher's pending session on `mower_watches` as one text, `session_carry` (decision 211),
//! instead of migration 13's twelve typed columns: the watcher reads and rewrites the row of
//! every mower of every batch while a session is pending, and PostgreSQL's cost of that grows
//! with the number of columns, as migration 14 found for the health row. `session_due_at` stays
//! typed: the offline sweep compares it.
//!
//! The layout (`|`-separated, an empty field for an absent value) is the one the watcher writes
//! (`swath-postgres`, `watch/watch_row.rs`): the version `1`; the session's start and end (Unix
//! microseconds), end reason, mowing ms, blade ms, distance mm and breaks; the rest's blade ms;
//! the previous state's blade (`true`/`false`), latitude and longitude; last, `+` and the
//! session's error code. A session is pending when `session_carry` is set.
//!
//! Up writes each pending session's carry from the typed columns and drops them; down puts them
//! back (with `swath_carry_time`, migration 14's).

sql_migration!("m20261207_000015_watch_session_carry");

const UP: &str = r#"
ALTER TABLE mower_watches ADD COLUMN session_carry text;

-- Every field through COALESCE: concat_ws skips NULLs, which would shift the fields after one.
UPDATE mower_watches SET session_carry = concat_ws('|', '1',
    COALESCE((extract(epoch FROM session_started_at) * 1000000)::bigint::text, ''),
    COALESCE((extract(epoch FROM session_ended_at) * 1000000)::bigint::text, ''),
    COALESCE(session_end_reason, ''),
    COALESCE(session_mowing_ms::text, ''), COALESCE(session_blade_ms::text, ''),
    COALESCE(session_distance_mm::text, ''), COALESCE(session_breaks::text, ''),
    COALESCE(session_rest_blade_ms::text, ''), COALESCE(session_last_blade_on::text, ''),
    COALESCE(session_last_lat::text, ''), COALESCE(session_last_lon::text, ''),
    COALESCE('+' || session_error_code, ''))
WHERE session_started_at IS NOT NULL;

ALTER TABLE mower_watches
    DROP COLUMN session_started_at,
    DROP COLUMN session_ended_at,
    DROP COLUMN session_end_reason,
    DROP COLUMN session_error_code,
    DROP COLUMN session_mowing_ms,
    DROP COLUMN session_blade_ms,
    DROP COLUMN session_distance_mm,
    DROP COLUMN session_breaks,
    DROP COLUMN session_rest_blade_ms,
    DROP COLUMN session_last_blade_on,
    DROP COLUMN session_last_lat,
    DROP COLUMN session_last_lon;
"#;

const DOWN: &str = r#"
ALTER TABLE mower_watches
    ADD COLUMN session_started_at timestamptz,
    ADD COLUMN session_ended_at timestamptz,
    ADD COLUMN session_end_reason text,
    ADD COLUMN session_error_code text,
    ADD COLUMN session_mowing_ms bigint,
    ADD COLUMN session_blade_ms bigint,
    ADD COLUMN session_distance_mm bigint,
    ADD COLUMN session_breaks bigint,
    ADD COLUMN session_rest_blade_ms bigint,
    ADD COLUMN session_last_blade_on boolean,
    ADD COLUMN session_last_lat float8,
    ADD COLUMN session_last_lon float8;

UPDATE mower_watches w SET
    session_started_at = swath_carry_time(c[2]),
    session_ended_at = swath_carry_time(c[3]),
    session_end_reason = NULLIF(c[4], ''),
    session_error_code = substring(w.session_carry FROM '^(?:[^|]*\|){12}\+(.*)$'),
    session_mowing_ms = NULLIF(c[5], '')::bigint,
    session_blade_ms = NULLIF(c[6], '')::bigint,
    session_distance_mm = NULLIF(c[7], '')::bigint,
    session_breaks = NULLIF(c[8], '')::bigint,
    session_rest_blade_ms = NULLIF(c[9], '')::bigint,
    session_last_blade_on = NULLIF(c[10], '')::boolean,
    session_last_lat = NULLIF(c[11], '')::float8,
    session_last_lon = NULLIF(c[12], '')::float8
FROM (SELECT mower_id, string_to_array(session_carry, '|') AS c FROM mower_watches
    WHERE session_carry IS NOT NULL) k
WHERE w.mower_id = k.mower_id;

ALTER TABLE mower_watches DROP COLUMN session_carry;
"#;
