//! The initial schema. Plain SQL: partitioning and functions read better as SQL than as a builder.
//!
//! History and positions are partitioned by range of `observed_at`, one partition per month, plus
//! a default partition for anything outside the months created so far. `swath_ensure_partitions`
//! creates months idempotently; the migration creates the 24 months before and the 12 after
//! today, and the service calls it at start-up for the months ahead. Retention can then drop
//! whole months instead of deleting rows (see docs/postgres.md).

sql_migration!("m20261130_000001_initial");

const UP: &str = r#"
CREATE TABLE accounts (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sites (
    id uuid PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id),
    name text NOT NULL,
    time_zone text NOT NULL,
    display_order integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sites_account_order ON sites (account_id, display_order, name, id);

CREATE TABLE mowers (
    id uuid PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id),
    site_id uuid NOT NULL REFERENCES sites (id),
    name text NOT NULL,
    model text NOT NULL,
    serial text NOT NULL,
    display_order integer NOT NULL DEFAULT 0,
    blade_threshold_ms bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mowers_account_order ON mowers (account_id, display_order, name, id);
CREATE INDEX mowers_site ON mowers (site_id);

CREATE TABLE api_tokens (
    token_hash text PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id),
    scopes text[] NOT NULL,
    sites uuid[],
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_tokens_account ON api_tokens (account_id);

CREATE TABLE latest_states (
    mower_id uuid PRIMARY KEY REFERENCES mowers (id),
    account_id uuid NOT NULL,
    observed_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    state jsonb NOT NULL
) WITH (fillfactor = 70);

CREATE TABLE state_history (
    mower_id uuid NOT NULL,
    observed_at timestamptz NOT NULL,
    activity text NOT NULL,
    battery_percent smallint,
    error_code text,
    blade_on boolean NOT NULL,
    PRIMARY KEY (mower_id, observed_at)
) PARTITION BY RANGE (observed_at);
CREATE TABLE state_history_default PARTITION OF state_history DEFAULT;

CREATE TABLE positions (
    mower_id uuid NOT NULL,
    observed_at timestamptz NOT NULL,
    lat double precision NOT NULL,
    lon double precision NOT NULL,
    accuracy_m double precision,
    heading_deg double precision,
    PRIMARY KEY (mower_id, observed_at)
) PARTITION BY RANGE (observed_at);
CREATE TABLE positions_default PARTITION OF positions DEFAULT;

-- latest_states, health_totals and day_totals are rewritten by every batch: free space in each
-- page (fillfactor 70) lets PostgreSQL update them in place (HOT), without touching the index.
-- One row per mower, created with the mower: the ingest path locks it (FOR NO KEY UPDATE) and,
-- because a row that a statement locks is re-read after the lock wait, it is always fresh. It is
-- also the latest row's key: counted_until equals the latest observed_at by construction (both
-- advance on exactly the states newer than every earlier one). NULL counted_until: never reported.
CREATE TABLE health_totals (
    mower_id uuid PRIMARY KEY REFERENCES mowers (id),
    account_id uuid,
    counted_until timestamptz,
    last_activity text,
    last_blade_on boolean NOT NULL DEFAULT false,
    last_lat double precision,
    last_lon double precision,
    mowing_ms bigint NOT NULL DEFAULT 0,
    blade_ms bigint NOT NULL DEFAULT 0,
    distance_mm bigint NOT NULL DEFAULT 0,
    error_count bigint NOT NULL DEFAULT 0,
    charge_count bigint NOT NULL DEFAULT 0,
    blade_since_reset_ms bigint NOT NULL DEFAULT 0,
    blade_due_raised boolean NOT NULL DEFAULT false
) WITH (fillfactor = 70);

CREATE TABLE day_totals (
    mower_id uuid NOT NULL REFERENCES mowers (id),
    day date NOT NULL,
    mowing_ms bigint NOT NULL,
    blade_ms bigint NOT NULL,
    distance_mm bigint NOT NULL,
    error_count bigint NOT NULL,
    charge_count bigint NOT NULL,
    state_count bigint NOT NULL,
    PRIMARY KEY (mower_id, day)
) WITH (fillfactor = 70);

-- Creates the monthly partitions of state_history and positions covering [from_month, to_month],
-- skipping those that exist. Idempotent, so replicas may all call it at start-up.
CREATE FUNCTION swath_ensure_partitions(from_month date, to_month date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    month date := date_trunc('month', from_month)::date;
    created integer := 0;
    parent text;
    child text;
BEGIN
    WHILE month <= to_month LOOP
        FOREACH parent IN ARRAY ARRAY['state_history', 'positions'] LOOP
            child := format('%s_%s', parent, to_char(month, 'YYYYMM'));
            IF to_regclass(child) IS NULL THEN
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    child, parent, month::timestamp AT TIME ZONE 'UTC',
                    (month + interval '1 month')::timestamp AT TIME ZONE 'UTC');
                created := created + 1;
            END IF;
        END LOOP;
        month := (month + interval '1 month')::date;
    END LOOP;
    RETURN created;
END
$$;

SELECT swath_ensure_partitions(
    (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '24 months')::date,
    (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '12 months')::date);
"#;

const DOWN: &str = r#"
DROP FUNCTION IF EXISTS swath_ensure_partitions(date, date);
DROP TABLE IF EXISTS day_totals, health_totals, positions, state_history, latest_states,
    api_tokens, mowers, sites, accounts CASCADE;
"#;
