//! W8's mowing sessions (issue 45, decision 200): one row per session, keyed by mower and start,
//! written by the telemetry batch's one write statement. The mower's newest session keeps `rest`
//! (what the states after its end would add to it were a later stretch to merge), so that an
//! in-order batch extends it without reading states; older sessions have none.
//!
//! `(account_id, started_at)` serves the fleet-wide list; a mower's sessions are read by the key.
//! Deleted with their mower (`ON DELETE CASCADE`), like the mower's other child rows.

sql_migration!("m20261205_000010_sessions");

const UP: &str = r#"
CREATE TABLE mower_sessions (
    mower_id uuid NOT NULL REFERENCES mowers (id) ON DELETE CASCADE,
    started_at timestamptz NOT NULL,
    id uuid NOT NULL,
    account_id uuid NOT NULL,
    ended_at timestamptz,
    end_reason text CHECK (end_reason IN ('docked', 'stopped', 'error', 'silent')),
    error_code text,
    mowing_ms bigint NOT NULL,
    blade_ms bigint NOT NULL,
    distance_mm bigint NOT NULL,
    breaks bigint NOT NULL,
    states bigint NOT NULL,
    first_lat double precision,
    first_lon double precision,
    last_lat double precision,
    last_lon double precision,
    first_battery_percent smallint,
    last_battery_percent smallint,
    local_date date NOT NULL,
    rest jsonb,
    PRIMARY KEY (mower_id, started_at)
) WITH (fillfactor = 70);
CREATE INDEX mower_sessions_account_started ON mower_sessions (account_id, started_at);
"#;

const DOWN: &str = r#"
DROP TABLE IF EXISTS mower_sessions;
"#;
