//! What the REST API needs beyond the initial schema: tokens get an id and a name (lists and
//! revocation name a token by its id, never by its hash), and the directory lists get indexes in
//! byte order of names (`COLLATE "C"`), the order every store uses (see docs/decisions.md).

sql_migration!("m20261130_000002_api");

const UP: &str = r#"
-- Tokens stored before this migration get a random id and an empty name.
ALTER TABLE api_tokens
    ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE api_tokens ALTER COLUMN id DROP DEFAULT;
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);
DROP INDEX api_tokens_account;
CREATE INDEX api_tokens_account_id ON api_tokens (account_id, id);

-- Pages of sites and mowers: (display_order, name, id) after a key, names byte by byte.
DROP INDEX sites_account_order;
CREATE INDEX sites_account_order ON sites (account_id, display_order, name COLLATE "C", id);
DROP INDEX mowers_account_order;
CREATE INDEX mowers_account_order ON mowers (account_id, display_order, name COLLATE "C", id);
"#;

const DOWN: &str = r#"
DROP INDEX IF EXISTS mowers_account_order;
CREATE INDEX mowers_account_order ON mowers (account_id, display_order, name, id);
DROP INDEX IF EXISTS sites_account_order;
CREATE INDEX sites_account_order ON sites (account_id, display_order, name, id);
DROP INDEX IF EXISTS api_tokens_account_id;
CREATE INDEX api_tokens_account ON api_tokens (account_id);
DROP INDEX IF EXISTS api_tokens_id;
ALTER TABLE api_tokens DROP COLUMN IF EXISTS name, DROP COLUMN IF EXISTS id;
"#;
