//! `swath account create` and `swath token create`: the token is printed once on stdout and only
//! its hash is stored; on the memory store the commands work but say that what they create is
//! lost. `swath import`: refused on the memory store unless asked, it counts new, already stored
//! and refused lines apart, names each refused line, and fails when nothing is stored (or, with
//! `--strict`, when a line was refused). The PostgreSQL parts run when `SWATH_TEST_DATABASE_URL`
//! is set (ignored otherwise).

use std::process::{Command, Output};
use swath_application::ports::{hash_token, TokenStore};
use swath_domain::{AccountId, Principal, Scope};
use uuid::Uuid;

fn swath(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_swath"));
    command.args(args).env("SWATH_LOG", "warn");
    for key in ["SWATH_STORE", "SWATH_DATABASE_URL"] {
        command.env_remove(key);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run swath")
}

/// A database of the test's own on `SWATH_TEST_DATABASE_URL`: its URL, and the connection that
/// drops it at the end.
async fn fresh_database() -> (String, String, sqlx::PgConnection) {
    use sqlx::{Connection, Executor};
    let server = swath_tests::postgres::test_database_url();
    let name = format!("swath_cli_{}", Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    let base = server.rsplit_once('/').unwrap().0;
    (format!("{base}/{name}"), name, admin)
}

async fn drop_database(name: &str, mut admin: sqlx::PgConnection) {
    use sqlx::Executor;
    admin
        .execute(format!("DROP DATABASE {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "swath failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn on_the_memory_store_a_token_is_printed_with_a_warning() {
    let account = Uuid::now_v7().to_string();
    let output = swath(
        &[
            "token",
            "create",
            "--account",
            &account,
            "--scopes",
            "read,admin",
        ],
        &[],
    );
    let token = stdout(&output);
    assert!(token.starts_with("swath_") && token.len() == 70, "{token}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("SWATH_STORE=memory"), "{stderr}");
    assert!(stderr.contains("lost"), "{stderr}");

    let refused = swath(
        &["token", "create", "--account", &account, "--scopes", "root"],
        &[],
    );
    assert!(!refused.status.success());
}

#[tokio::test]
#[cfg_attr(
    swath_no_postgres,
    ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL"
)]
async fn on_postgresql_an_account_and_a_token_are_stored_hashed() {
    let (url, name, admin) = fresh_database().await;
    let env = [
        ("SWATH_STORE", "postgres"),
        ("SWATH_DATABASE_URL", url.as_str()),
    ];

    let account = stdout(&swath(
        &["account", "create", "--name", "CLI Gardens"],
        &env,
    ));
    let account = AccountId(account.parse().expect("an account id"));
    let output = swath(
        &[
            "token",
            "create",
            "--account",
            &account.to_string(),
            "--scopes",
            "write,read,read",
            "--name",
            "gateway",
        ],
        &env,
    );
    let token = stdout(&output);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("memory"));

    let store = swath_postgres::PostgresStore::connect(&url, 2)
        .await
        .unwrap();
    assert_eq!(
        store.principal(&hash_token(&token)).await.unwrap(),
        Some(Principal {
            account_id: account,
            scopes: vec![Scope::Read, Scope::Write],
            sites: None,
        })
    );
    let (stored,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM api_tokens WHERE token_hash = $1 OR name = $1 \
         OR position($1 in array_to_string(scopes, ',')) > 0",
    )
    .bind(&token)
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(stored, 0, "the token itself is stored nowhere");

    let unknown = swath(
        &[
            "token",
            "create",
            "--account",
            &Uuid::now_v7().to_string(),
            "--scopes",
            "read",
        ],
        &env,
    );
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no account"));
    store.close().await;
    drop_database(&name, admin).await;
}

/// Writes `text` to a file of the test's own and answers its path.
fn ndjson_file(text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("swath-import-{}.ndjson", Uuid::new_v4()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn import_refuses_the_memory_store_unless_asked_and_fails_when_nothing_is_stored() {
    let file = ndjson_file("{not json\n");
    let path = file.to_str().unwrap();
    let refused = swath(&["import", path], &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("SWATH_STORE=postgres"), "{stderr}");
    assert!(
        refused.stdout.is_empty(),
        "nothing was imported, nothing is summed up"
    );

    // Asked for: a dry run on the memory store, whose directory knows no mower, so nothing of
    // the file is stored, which fails; the bad line is named by its line in the file.
    let report = format!(
        r#"{{"mower_id":"{}","account_id":"{}","observed_at":"2026-06-01T12:00:00Z","activity":"mowing"}}"#,
        Uuid::now_v7(),
        Uuid::now_v7()
    );
    let file = ndjson_file(&format!("{report}\n\n{{\"mower_id\": nope}}\n"));
    let output = swath(&["import", "--into-memory", file.to_str().unwrap()], &[]);
    assert!(!output.status.success());
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.contains("2 reports: 0 new") && out.contains("2 refused"),
        "{out}"
    );
    assert!(out.contains("line 1: unknown_mower"), "{out}");
    assert!(
        out.contains("line 3: malformed (") && out.contains("at column"),
        "{out}"
    );
    assert!(!out.contains("line 1 column"), "{out}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no state of"), "{stderr}");
}

#[tokio::test]
#[cfg_attr(
    swath_no_postgres,
    ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL"
)]
async fn on_postgresql_an_import_counts_new_already_stored_and_refused_lines_apart() {
    let (url, name, admin) = fresh_database().await;
    let env = [
        ("SWATH_STORE", "postgres"),
        ("SWATH_DATABASE_URL", url.as_str()),
        ("SWATH_SIM_MOWERS", "2"),
        ("SWATH_SIM_SEED", "11"),
    ];
    let history = stdout(&swath(&["simulate", "--hours", "0.02"], &env));
    let mut lines: Vec<&str> = history.lines().collect();
    let states = lines.len();
    assert!(states > 10, "{states} states simulated");
    lines.insert(4, "{\"mower_id\": 12}");
    let file = ndjson_file(&(lines.join("\n") + "\n"));
    let path = file.to_str().unwrap();

    let first = swath(&["import", path], &env);
    let out = stdout(&first);
    assert!(
        out.contains(&format!("{} reports: {states} new", states + 1)),
        "{out}"
    );
    assert!(
        out.contains("0 already stored, 1 refused") && out.contains("line 5: malformed"),
        "{out}"
    );

    // Again: nothing new, every state already stored; that is a success, unless --strict.
    let again = swath(&["import", path], &env);
    let out = stdout(&again);
    assert!(
        out.contains("0 new") && out.contains(&format!("{states} already stored")),
        "{out}"
    );
    let strict = swath(&["import", "--strict", path], &env);
    assert!(!strict.status.success());
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(stderr.contains("--strict: 1 refused"), "{stderr}");
    drop_database(&name, admin).await;
}
