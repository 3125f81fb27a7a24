//! Watch rows updated in place. The watcher rewrites the watch row of every mower of every batch
//! (`watched_until`, `last_seen_at`), about once a second per reporting mower. The index of the
//! offline sweep on `last_seen_at` made each of those updates a non-HOT one: a new entry in every
//! index of the table, and a table and indexes that grew with every batch (the buffers an update
//! read: BENCHMARKS.md, "End to end: JetStream → `swath` → PostgreSQL"). Without it, and with
//! room left in each page as on the other rows rewritten per batch, the updates stay on their
//! page and touch no index. The sweep (every `SWATH_OFFLINE_SWEEP_SECONDS`) reads every watch row
//! instead (decision 36).
//!
//! `fillfactor` applies to pages written from now on; a table filled before this migration gets
//! the room as its rows move (or with `VACUUM FULL`, which this migration does not run: it would
//! lock the table).

sql_migration!("m20261130_000006_hot_watches");

const UP: &str = r#"
DROP INDEX IF EXISTS mower_watches_silent;
ALTER TABLE mower_watches SET (fillfactor = 70);
ALTER TABLE zone_watches SET (fillfactor = 70);
ALTER TABLE busy_statuses SET (fillfactor = 70);
"#;

const DOWN: &str = r#"
ALTER TABLE busy_statuses RESET (fillfactor);
ALTER TABLE zone_watches RESET (fillfactor);
ALTER TABLE mower_watches RESET (fillfactor);
CREATE INDEX IF NOT EXISTS mower_watches_silent ON mower_watches (last_seen_at) WHERE NOT offline;
"#;
