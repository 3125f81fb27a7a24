//! Totals that do not depend on arrival order (docs/rules.md §3, W4–W6): a late state is merged between
//! its stored neighbours, which needs two more facts per mower in `health_totals`:
//! - `counted_from`: the oldest counted state, so that a late state older than every counted one
//!   is known to be the mower's new first state. Filled from the oldest stored history row (or
//!   `counted_until`); on a database whose retention removed older rows this is the oldest row
//!   kept, which is what the merge can see.
//! - `blade_reset_until`: `counted_until` at the last blade reset, so that a late state from
//!   before a reset changes blade time but not blade time since the reset (NULL: never reset;
//!   for a mower reset before this migration, blade time since the reset keeps what it had and
//!   late states older than the reset may add to it).

sql_migration!("m20261130_000007_merged_totals");

const UP: &str = r#"
ALTER TABLE health_totals ADD COLUMN counted_from timestamptz,
    ADD COLUMN blade_reset_until timestamptz;
UPDATE health_totals h SET counted_from = COALESCE(
    (SELECT min(s.observed_at) FROM state_history s WHERE s.mower_id = h.mower_id),
    h.counted_until)
WHERE h.counted_until IS NOT NULL;
"#;

const DOWN: &str = r#"
ALTER TABLE health_totals DROP COLUMN IF EXISTS blade_reset_until,
    DROP COLUMN IF EXISTS counted_from;
DELETE FROM retention_progress WHERE name IN ('history_floor', 'positions_floor');
"#;
