//! Nothing of a deleted mower outlives it (issue 35): a busy status written after its mower's
//! deletion (the busy check runs after the watcher's batch, outside its locks) stayed behind,
//! and whoever created a mower with the same id next read it.
//!
//! - `busy_statuses` gets the foreign key the other child tables have, `ON DELETE CASCADE`; the
//!   trigger of `m20261130_000003_watch` no longer deletes busy statuses. The busy write is
//!   guarded too (it joins the mower of the same account, `FOR KEY SHARE`), so a late write of
//!   a deleted mower stores nothing instead of failing on the key; the key share is what the
//!   foreign key takes anyway. The deadlock that kept events and alerts without a key does not
//!   arise here: the busy write holds no watch row.
//! - Rows that such late writes left behind are removed first (busy statuses, and events and
//!   alerts, which the trigger removes with their mower) so that the key can be added.

sql_migration!("m20261203_000008_mower_children");

const UP: &str = r#"
DELETE FROM busy_statuses b WHERE NOT EXISTS (SELECT 1 FROM mowers m WHERE m.id = b.mower_id);
DELETE FROM notification_events e WHERE NOT EXISTS (SELECT 1 FROM mowers m WHERE m.id = e.mower_id);
DELETE FROM alerts a WHERE NOT EXISTS (SELECT 1 FROM mowers m WHERE m.id = a.mower_id);
ALTER TABLE busy_statuses ADD CONSTRAINT busy_statuses_mower_id_fkey
    FOREIGN KEY (mower_id) REFERENCES mowers (id) ON DELETE CASCADE;
CREATE OR REPLACE FUNCTION swath_delete_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM notification_events WHERE mower_id = OLD.id;
    DELETE FROM alerts WHERE mower_id = OLD.id;
    RETURN OLD;
END
$$;
"#;

const DOWN: &str = r#"
CREATE OR REPLACE FUNCTION swath_delete_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM notification_events WHERE mower_id = OLD.id;
    DELETE FROM alerts WHERE mower_id = OLD.id;
    DELETE FROM busy_statuses WHERE mower_id = OLD.id;
    RETURN OLD;
END
$$;
ALTER TABLE busy_statuses DROP CONSTRAINT IF EXISTS busy_statuses_mower_id_fkey;
"#;
