//! The watcher's pending session (decision 208) in typed columns instead of migration 11's
//! `session` JSON document, which was parsed and written again per mower per batch: of the
//! session, what `session_ended` carries (`session_started_at` … `session_breaks`); of the rest
//! after its end, its blade time; of the previous state, its blade and position (its time and
//! activity are `watched_until` and `last_activity`). A session is pending when
//! `session_started_at` is set. None is indexed, so that the per-batch update stays HOT
//! (migration 6).
//!
//! Up moves a pending session's JSON into the columns. Down writes the document back as the
//! code of migration 11 reads it: the session's id derived as `session_id` derives it (UUID v8:
//! the start's Unix milliseconds, then the SHA-256 of `("session", mower, start µs)`), its local
//! date in UTC (the watcher's fold's zone), and the figures the event never carried (state
//! counts, first and last positions and batteries) zero or absent, as a resumed fold leaves them.

sql_migration!("m20261206_000013_watch_session_columns");

const UP: &str = r#"
ALTER TABLE mower_watches
    ADD COLUMN IF NOT EXISTS session_started_at timestamptz,
    ADD COLUMN IF NOT EXISTS session_ended_at timestamptz,
    ADD COLUMN IF NOT EXISTS session_end_reason text,
    ADD COLUMN IF NOT EXISTS session_error_code text,
    ADD COLUMN IF NOT EXISTS session_mowing_ms bigint,
    ADD COLUMN IF NOT EXISTS session_blade_ms bigint,
    ADD COLUMN IF NOT EXISTS session_distance_mm bigint,
    ADD COLUMN IF NOT EXISTS session_breaks bigint,
    ADD COLUMN IF NOT EXISTS session_rest_blade_ms bigint,
    ADD COLUMN IF NOT EXISTS session_last_blade_on boolean,
    ADD COLUMN IF NOT EXISTS session_last_lat float8,
    ADD COLUMN IF NOT EXISTS session_last_lon float8;
-- The previous state of the carry is the watch point (the watcher folds every state it
-- watches); a carry of another would resume a different fold, so it is left behind (the row
-- then holds no session, as at decision 203's upgrade).
UPDATE mower_watches SET
    session_started_at = (session #>> '{current,started_at}')::timestamptz,
    session_ended_at = (session #>> '{current,ended_at}')::timestamptz,
    session_end_reason = session #>> '{current,end_reason}',
    session_error_code = session #>> '{current,error_code}',
    session_mowing_ms = (session #>> '{current,mowing_ms}')::bigint,
    session_blade_ms = (session #>> '{current,blade_ms}')::bigint,
    session_distance_mm = (session #>> '{current,distance_mm}')::bigint,
    session_breaks = (session #>> '{current,breaks}')::bigint,
    session_rest_blade_ms = coalesce((session #>> '{rest,blade_ms}')::bigint, 0),
    session_last_blade_on = (session #>> '{last,blade_on}')::boolean,
    session_last_lat = (session #>> '{last,lat}')::float8,
    session_last_lon = (session #>> '{last,lon}')::float8
WHERE session IS NOT NULL
    AND (session #>> '{last,observed_at}')::timestamptz = watched_until
    AND session #>> '{last,activity}' = last_activity;
UPDATE mower_watches SET session_due_at = NULL
WHERE session IS NOT NULL AND session_started_at IS NULL;
ALTER TABLE mower_watches DROP COLUMN IF EXISTS session;
"#;

const DOWN: &str = r#"
ALTER TABLE mower_watches ADD COLUMN IF NOT EXISTS session jsonb;
UPDATE mower_watches w SET session = jsonb_build_object(
    'current', jsonb_build_object(
        'id', (SELECT encode(set_byte(set_byte(b, 6, (get_byte(b, 6) & 15) | 128),
                8, (get_byte(b, 8) & 63) | 128), 'hex')::uuid
            FROM (SELECT substring(int8send(floor(extract(epoch FROM w.session_started_at)
                    * 1000)::bigint) FROM 3 FOR 6)
                || substring(sha256('session'::bytea || uuid_send(w.mower_id)
                    || int8send((extract(epoch FROM w.session_started_at) * 1000000)::bigint))
                    FROM 1 FOR 10) AS b) id),
        'mower_id', w.mower_id,
        'started_at', to_char(w.session_started_at AT TIME ZONE 'UTC',
            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'ended_at', to_char(w.session_ended_at AT TIME ZONE 'UTC',
            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'end_reason', w.session_end_reason,
        'error_code', w.session_error_code,
        'mowing_ms', w.session_mowing_ms,
        'blade_ms', w.session_blade_ms,
        'distance_mm', w.session_distance_mm,
        'breaks', w.session_breaks,
        'states', 0,
        'local_date', to_char(w.session_started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')),
    'rest', jsonb_build_object('states', 0, 'blade_ms', w.session_rest_blade_ms),
    'last', jsonb_build_object(
        'observed_at', to_char(w.watched_until AT TIME ZONE 'UTC',
            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'activity', w.last_activity,
        'blade_on', w.session_last_blade_on,
        'lat', w.session_last_lat,
        'lon', w.session_last_lon))
WHERE w.session_started_at IS NOT NULL;
ALTER TABLE mower_watches
    DROP COLUMN IF EXISTS session_last_lon,
    DROP COLUMN IF EXISTS session_last_lat,
    DROP COLUMN IF EXISTS session_last_blade_on,
    DROP COLUMN IF EXISTS session_rest_blade_ms,
    DROP COLUMN IF EXISTS session_breaks,
    DROP COLUMN IF EXISTS session_distance_mm,
    DROP COLUMN IF EXISTS session_blade_ms,
    DROP COLUMN IF EXISTS session_mowing_ms,
    DROP COLUMN IF EXISTS session_error_code,
    DROP COLUMN IF EXISTS session_end_reason,
    DROP COLUMN IF EXISTS session_ended_at,
    DROP COLUMN IF EXISTS session_started_at;
"#;
