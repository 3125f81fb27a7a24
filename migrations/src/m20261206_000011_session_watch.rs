//! What the watcher keeps of W8 for `session_ended` (decision 203): the pending session as the
//! watcher folds it (`session`: the fold's newest session, the rest after its end and the
//! previous state, while the session is open or may still merge) and when its merge gap passes
//! on the receiving side (`session_due_at`), which the offline sweep reads. Neither is indexed:
//! the sweep reads every watch row anyway (migration 6), and an index would make the per-batch
//! update of the row a non-HOT one.

sql_migration!("m20261206_000011_session_watch");

const UP: &str = r#"
ALTER TABLE mower_watches ADD COLUMN IF NOT EXISTS session jsonb;
ALTER TABLE mower_watches ADD COLUMN IF NOT EXISTS session_due_at timestamptz;
"#;

const DOWN: &str = r#"
ALTER TABLE mower_watches DROP COLUMN IF EXISTS session_due_at;
ALTER TABLE mower_watches DROP COLUMN IF EXISTS session;
"#;
