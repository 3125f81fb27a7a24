//! Each mower's newest W8 session kept with its health totals (decision 207): the row every
//! batch locks and rewrites anyway holds the newest session's running figures (`session_*`) and
//! the rest after its end (`rest_*`), typed, so that an in-order batch reads and extends it with
//! no JSON and writes no `mower_sessions` row. `mower_sessions` keeps a row per session, the
//! newest included from its start; the newest's own row may lag behind its figures, which the
//! view `mower_sessions_now` lays over it: every read of sessions goes through the view.
//!
//! Up moves each mower's newest session and its `rest` into the new columns and drops `rest`;
//! down puts them back.

sql_migration!("m20261206_000012_newest_session");

/// The view of this migration, which migration 14's down creates again.
macro_rules! newest_session_view {
    () => {
        r#"
CREATE VIEW mower_sessions_now AS
SELECT s.mower_id, s.started_at, s.id, s.account_id,
    CASE WHEN h.mower_id IS NULL THEN s.ended_at ELSE h.session_ended_at END AS ended_at,
    CASE WHEN h.mower_id IS NULL THEN s.end_reason ELSE h.session_end_reason END AS end_reason,
    CASE WHEN h.mower_id IS NULL THEN s.error_code ELSE h.session_error_code END AS error_code,
    CASE WHEN h.mower_id IS NULL THEN s.mowing_ms ELSE h.session_mowing_ms END AS mowing_ms,
    CASE WHEN h.mower_id IS NULL THEN s.blade_ms ELSE h.session_blade_ms END AS blade_ms,
    CASE WHEN h.mower_id IS NULL THEN s.distance_mm ELSE h.session_distance_mm END
        AS distance_mm,
    CASE WHEN h.mower_id IS NULL THEN s.breaks ELSE h.session_breaks END AS breaks,
    CASE WHEN h.mower_id IS NULL THEN s.states ELSE h.session_states END AS states,
    CASE WHEN h.mower_id IS NULL THEN s.first_lat ELSE h.session_first_lat END AS first_lat,
    CASE WHEN h.mower_id IS NULL THEN s.first_lon ELSE h.session_first_lon END AS first_lon,
    CASE WHEN h.mower_id IS NULL THEN s.last_lat ELSE h.session_last_lat END AS last_lat,
    CASE WHEN h.mower_id IS NULL THEN s.last_lon ELSE h.session_last_lon END AS last_lon,
    CASE WHEN h.mower_id IS NULL THEN s.first_battery_percent
        ELSE h.session_first_battery_percent END AS first_battery_percent,
    CASE WHEN h.mower_id IS NULL THEN s.last_battery_percent
        ELSE h.session_last_battery_percent END AS last_battery_percent,
    s.local_date
FROM mower_sessions s
LEFT JOIN health_totals h ON h.mower_id = s.mower_id AND h.session_started_at = s.started_at;
"#
    };
}
pub(crate) use newest_session_view;

const UP: &str = concat!(
    r#"
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
    session_started_at = s.started_at, session_local_date = s.local_date,
    session_ended_at = s.ended_at, session_end_reason = s.end_reason,
    session_error_code = s.error_code, session_mowing_ms = s.mowing_ms,
    session_blade_ms = s.blade_ms, session_distance_mm = s.distance_mm,
    session_breaks = s.breaks, session_states = s.states,
    session_first_lat = s.first_lat, session_first_lon = s.first_lon,
    session_last_lat = s.last_lat, session_last_lon = s.last_lon,
    session_first_battery_percent = s.first_battery_percent,
    session_last_battery_percent = s.last_battery_percent,
    rest_states = COALESCE((s.rest->>'states')::bigint, 0),
    rest_blade_ms = COALESCE((s.rest->>'blade_ms')::bigint, 0),
    rest_first_lat = (s.rest->>'first_lat')::double precision,
    rest_first_lon = (s.rest->>'first_lon')::double precision,
    rest_last_lat = (s.rest->>'last_lat')::double precision,
    rest_last_lon = (s.rest->>'last_lon')::double precision,
    rest_first_battery_percent = (s.rest->>'first_battery_percent')::smallint,
    rest_last_battery_percent = (s.rest->>'last_battery_percent')::smallint
FROM (SELECT DISTINCT ON (mower_id) * FROM mower_sessions
      ORDER BY mower_id, started_at DESC) s
WHERE h.mower_id = s.mower_id;

ALTER TABLE mower_sessions DROP COLUMN rest;

"#,
    newest_session_view!()
);

const DOWN: &str = r#"
DROP VIEW IF EXISTS mower_sessions_now;

ALTER TABLE mower_sessions ADD COLUMN rest jsonb;

UPDATE mower_sessions s SET
    ended_at = h.session_ended_at, end_reason = h.session_end_reason,
    error_code = h.session_error_code, mowing_ms = h.session_mowing_ms,
    blade_ms = h.session_blade_ms, distance_mm = h.session_distance_mm,
    breaks = h.session_breaks, states = h.session_states,
    first_lat = h.session_first_lat, first_lon = h.session_first_lon,
    last_lat = h.session_last_lat, last_lon = h.session_last_lon,
    first_battery_percent = h.session_first_battery_percent,
    last_battery_percent = h.session_last_battery_percent,
    rest = jsonb_build_object('states', COALESCE(h.rest_states, 0),
        'blade_ms', COALESCE(h.rest_blade_ms, 0),
        'first_lat', h.rest_first_lat, 'first_lon', h.rest_first_lon,
        'last_lat', h.rest_last_lat, 'last_lon', h.rest_last_lon,
        'first_battery_percent', h.rest_first_battery_percent,
        'last_battery_percent', h.rest_last_battery_percent)
FROM health_totals h
WHERE h.mower_id = s.mower_id AND h.session_started_at = s.started_at;

ALTER TABLE health_totals
    DROP COLUMN IF EXISTS session_started_at,
    DROP COLUMN IF EXISTS session_local_date,
    DROP COLUMN IF EXISTS session_ended_at,
    DROP COLUMN IF EXISTS session_end_reason,
    DROP COLUMN IF EXISTS session_error_code,
    DROP COLUMN IF EXISTS session_mowing_ms,
    DROP COLUMN IF EXISTS session_blade_ms,
    DROP COLUMN IF EXISTS session_distance_mm,
    DROP COLUMN IF EXISTS session_breaks,
    DROP COLUMN IF EXISTS session_states,
    DROP COLUMN IF EXISTS session_first_lat,
    DROP COLUMN IF EXISTS session_first_lon,
    DROP COLUMN IF EXISTS session_last_lat,
    DROP COLUMN IF EXISTS session_last_lon,
    DROP COLUMN IF EXISTS session_first_battery_percent,
    DROP COLUMN IF EXISTS session_last_battery_percent,
    DROP COLUMN IF EXISTS rest_states,
    DROP COLUMN IF EXISTS rest_blade_ms,
    DROP COLUMN IF EXISTS rest_first_lat,
    DROP COLUMN IF EXISTS rest_first_lon,
    DROP COLUMN IF EXISTS rest_last_lat,
    DROP COLUMN IF EXISTS rest_last_lon,
    DROP COLUMN IF EXISTS rest_first_battery_percent,
    DROP COLUMN IF EXISTS rest_last_battery_percent;
"#;
