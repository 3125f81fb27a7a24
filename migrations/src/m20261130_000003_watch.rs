//! The notification side: watch rows, geofences, zones and their occupancy, the events feed,
//! alerts and the scheduler's busy status.
//!
//! Like `health_totals`, the rows a batch locks (`mower_watches` for the watcher, `zone_watches`
//! for virtual zones) exist for every mower, made by a trigger when the mower is inserted: a
//! statement waiting for a row lock re-reads only the locked row, so the row that holds what the
//! rules advance must be the row that is locked, and it must already exist.
//!
//! Events, alerts and busy statuses have no foreign key to `mowers`: inserting them would take a
//! key-share lock on the mower row in every batch, which a concurrent mower deletion (holding the
//! mower row while its cascade waits for the batch's watch row) would turn into a deadlock. A
//! trigger removes them with the mower instead.

sql_migration!("m20261130_000003_watch");

const UP: &str = r#"
-- One row per mower; watched_until NULL: never watched.
CREATE TABLE mower_watches (
    mower_id uuid PRIMARY KEY REFERENCES mowers (id) ON DELETE CASCADE,
    account_id uuid,
    watched_until timestamptz,
    last_seen_at timestamptz,
    last_activity text,
    error_code text,
    outside_geofence boolean NOT NULL DEFAULT false,
    battery_low boolean NOT NULL DEFAULT false,
    offline boolean NOT NULL DEFAULT false,
    geofence_version uuid
);
-- The offline sweep: watched mowers not offline, by silence.
CREATE INDEX mower_watches_silent ON mower_watches (last_seen_at) WHERE NOT offline;

-- One row per mower: what virtual zones (W7) evaluated, and which zones the mower is in.
CREATE TABLE zone_watches (
    mower_id uuid PRIMARY KEY REFERENCES mowers (id) ON DELETE CASCADE,
    evaluated_until timestamptz,
    occupancy jsonb NOT NULL DEFAULT '[]'
);

CREATE FUNCTION swath_create_watch_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO mower_watches (mower_id) VALUES (NEW.id);
    INSERT INTO zone_watches (mower_id) VALUES (NEW.id);
    RETURN NEW;
END
$$;
CREATE TRIGGER mowers_watch_rows AFTER INSERT ON mowers
    FOR EACH ROW EXECUTE FUNCTION swath_create_watch_rows();
INSERT INTO mower_watches (mower_id) SELECT id FROM mowers;
INSERT INTO zone_watches (mower_id) SELECT id FROM mowers;

-- version: a new UUID for every replacement, never reused (the watcher caches parsed fences by it).
CREATE TABLE geofences (
    mower_id uuid PRIMARY KEY REFERENCES mowers (id) ON DELETE CASCADE,
    account_id uuid NOT NULL,
    version uuid NOT NULL,
    polygon jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE zones (
    id uuid PRIMARY KEY,
    mower_id uuid NOT NULL REFERENCES mowers (id) ON DELETE CASCADE,
    account_id uuid NOT NULL,
    name text NOT NULL,
    polygon jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX zones_mower ON zones (mower_id, id);

-- The events feed. document: the event as published.
CREATE TABLE notification_events (
    id uuid PRIMARY KEY,
    mower_id uuid NOT NULL,
    account_id uuid NOT NULL,
    kind text NOT NULL,
    observed_at timestamptz NOT NULL,
    document jsonb NOT NULL
);
CREATE INDEX notification_events_account ON notification_events (account_id, id DESC);
CREATE INDEX notification_events_mower ON notification_events (mower_id, id DESC);

CREATE TABLE alerts (
    id uuid PRIMARY KEY,
    mower_id uuid NOT NULL,
    account_id uuid NOT NULL,
    kind text NOT NULL,
    severity text NOT NULL,
    severity_rank smallint NOT NULL,
    raised_at timestamptz NOT NULL,
    cleared_at timestamptz,
    code text
);
-- One open alert per mower and kind.
CREATE UNIQUE INDEX alerts_open ON alerts (mower_id, kind) WHERE cleared_at IS NULL;
CREATE INDEX alerts_open_account ON alerts (account_id, severity_rank DESC, raised_at DESC, id DESC)
    WHERE cleared_at IS NULL;
CREATE INDEX alerts_mower ON alerts (mower_id);

CREATE TABLE busy_statuses (
    mower_id uuid PRIMARY KEY,
    account_id uuid NOT NULL,
    activity text NOT NULL,
    observed_at timestamptz NOT NULL,
    lat double precision,
    lon double precision,
    written_at timestamptz NOT NULL
);

CREATE FUNCTION swath_delete_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM notification_events WHERE mower_id = OLD.id;
    DELETE FROM alerts WHERE mower_id = OLD.id;
    DELETE FROM busy_statuses WHERE mower_id = OLD.id;
    RETURN OLD;
END
$$;
CREATE TRIGGER mowers_delete_notifications AFTER DELETE ON mowers
    FOR EACH ROW EXECUTE FUNCTION swath_delete_notifications();
"#;

const DOWN: &str = r#"
DROP TRIGGER IF EXISTS mowers_delete_notifications ON mowers;
DROP TRIGGER IF EXISTS mowers_watch_rows ON mowers;
DROP FUNCTION IF EXISTS swath_delete_notifications();
DROP FUNCTION IF EXISTS swath_create_watch_rows();
DROP TABLE IF EXISTS busy_statuses, alerts, notification_events, zones, geofences, zone_watches,
    mower_watches;
"#;
