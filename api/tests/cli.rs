//! `swath account create` and `swath token create`: the token is printed once on stdout and only
//! its hash is stored; on the memory store the commands work but say that what they create is
//! lost. The PostgreSQL part runs when `SWATH_TEST_DATABASE_URL` is set (ignored otherwise).

use std::process::{Command, Output};
use swath_application::ports::{hash_token, Principal, Scope, TokenStore};
use swath_domain::AccountId;
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
    let server = swath_tests::postgres::test_database_url();
    use sqlx::{Connection, Executor};
    let name = format!("swath_cli_{}", Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    let base = server.rsplit_once('/').unwrap().0;
    let url = format!("{base}/{name}");
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
    admin
        .execute(format!("DROP DATABASE {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
}
