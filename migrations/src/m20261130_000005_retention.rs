//! Retention's progress: the instant up to which positions were downsampled, so that a run only
//! looks at positions that aged past `SWATH_TRACK_FULL_DAYS` since the previous run (see
//! `swath_application::retention`). One row per kind of progress; written after every completed
//! slice, so an interrupted run resumes at the slice it was in.

sql_migration!("m20261130_000005_retention");

const UP: &str = r#"
CREATE TABLE retention_progress (
    name text PRIMARY KEY,
    done_until timestamptz NOT NULL
);
"#;

const DOWN: &str = "DROP TABLE IF EXISTS retention_progress;";
