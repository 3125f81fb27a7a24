//! The live projections (docs/rules.md §6): operator assignments, and the indexes that let every level of
//! a projection stop after its window plus one sentinel row instead of reading the tenant.
//!
//! - `mowers_site_order`: a site's mowers in `(display_order, name, id)` order (names byte by
//!   byte, like `mowers_account_order`), for the per-site windows (`LATERAL … LIMIT n+1`).
//! - `alerts_open_mower_order`: a mower's open alerts in the order the views show them.
//! - `assignments_on_duty`: a mower's active assignments of an account in ranking order, so the
//!   winner is the first index entry (`LIMIT 1`), whatever the number of assignments.

sql_migration!("m20261130_000004_projections");

const UP: &str = r#"
CREATE INDEX mowers_site_order ON mowers (site_id, display_order, name COLLATE "C", id);

CREATE INDEX alerts_open_mower_order
    ON alerts (mower_id, severity_rank DESC, raised_at DESC, id DESC) WHERE cleared_at IS NULL;

-- Operators assigned to mowers. account_id is the account the assignment belongs to (the API
-- always writes the mower's); projections only ever rank assignments of the viewer's account.
-- priority_rank: what the ranking sorts by (critical 4 … low 1), derived so it cannot disagree.
CREATE TABLE assignments (
    id uuid PRIMARY KEY,
    mower_id uuid NOT NULL REFERENCES mowers (id) ON DELETE CASCADE,
    account_id uuid NOT NULL,
    operator text NOT NULL,
    priority text NOT NULL CHECK (priority IN ('critical', 'high', 'normal', 'low')),
    priority_rank smallint NOT NULL GENERATED ALWAYS AS (
        CASE priority WHEN 'critical' THEN 4 WHEN 'high' THEN 3 WHEN 'normal' THEN 2 ELSE 1 END
    ) STORED,
    active boolean NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX assignments_on_duty
    ON assignments (mower_id, account_id, priority_rank DESC, updated_at DESC, id DESC)
    WHERE active;
CREATE INDEX assignments_mower ON assignments (mower_id, id);
"#;

const DOWN: &str = r#"
DROP TABLE IF EXISTS assignments;
DROP INDEX IF EXISTS alerts_open_mower_order;
DROP INDEX IF EXISTS mowers_site_order;
"#;
