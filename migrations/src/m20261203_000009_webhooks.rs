//! Webhooks (issue 31): endpoints with their secrets, and each endpoint's queue of deliveries.
//! `seq` orders an endpoint's deliveries (the order they were enqueued); the endpoint row holds
//! its claim (`claimed_until`), so that one attempt per endpoint is in flight across replicas.

sql_migration!("m20261203_000009_webhooks");

const UP: &str = r#"
CREATE TABLE webhook_endpoints (
    id uuid PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    url text NOT NULL,
    kinds text[] NOT NULL,
    mowers uuid[],
    sites uuid[],
    enabled boolean NOT NULL,
    disabled_reason text,
    secrets jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    claimed_until timestamptz
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, id);
CREATE TABLE webhook_deliveries (
    id uuid PRIMARY KEY,
    endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    event_type text NOT NULL,
    body text NOT NULL,
    created_at timestamptz NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    last_status integer,
    last_latency_ms integer,
    next_attempt_at timestamptz,
    outcome text NOT NULL
);
CREATE UNIQUE INDEX webhook_deliveries_endpoint_seq ON webhook_deliveries (endpoint_id, seq);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, seq)
    WHERE outcome = 'pending';
"#;

const DOWN: &str = r#"
DROP TABLE IF EXISTS webhook_deliveries;
DROP TABLE IF EXISTS webhook_endpoints;
"#;
