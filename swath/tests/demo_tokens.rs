//! Demo credentials only for a demo (issue 35, decision 142): when a start makes the demo account
//! and token, and a new demo token revoking the earlier ones, on the memory store and on
//! PostgreSQL (a start as `swath serve` makes it: the demo fleet seeded, then its token), and a
//! start without a demo revoking them all.

use swath::config::StoreKind;
use swath::demo::{self, DEMO_TOKEN_NAME};
use swath_application::ports::{
    generate_token, hash_token, Directory, NewToken, TokenId, TokenQuery, TokenStore,
};
use swath_domain::Scope;
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_simulator::{seed_demo_fleet, SimulatorSettings, DEMO_ACCOUNT_ID};
use swath_tests::postgres::PostgresFactory;

#[test]
fn only_a_simulator_or_a_demo_token_makes_a_demo() {
    assert!(!demo::wanted(0, None));
    assert!(demo::wanted(1, None));
    assert!(demo::wanted(0, Some("demo")));
}

#[test]
fn a_short_demo_token_is_refused_on_postgresql_only() {
    assert!(demo::check_token(StoreKind::Memory, Some("demo")).is_ok());
    let refused = demo::check_token(StoreKind::Postgres, Some("demo")).unwrap_err();
    assert!(
        refused.contains("SWATH_DEMO_TOKEN has 4 characters"),
        "{refused}"
    );
    assert!(demo::check_token(StoreKind::Postgres, Some(&"x".repeat(32))).is_ok());
    assert!(demo::check_token(StoreKind::Postgres, None).is_ok());
}

/// A start of `swath serve` with a demo: the fleet seeded, then `token` installed.
async fn start<S: Directory + TokenStore>(store: &S, token: &str) -> usize {
    let settings = SimulatorSettings {
        mowers: 0,
        ..SimulatorSettings::default()
    };
    let fleet = seed_demo_fleet(store, &settings).await.unwrap();
    demo::install_token(store, fleet.account.id, token)
        .await
        .unwrap()
}

/// The demo account's tokens, by name.
async fn names<S: TokenStore>(store: &S) -> Vec<String> {
    let query = TokenQuery {
        within: demo::demo_principal(DEMO_ACCOUNT_ID),
        after: None,
        limit: 1000,
    };
    let mut names: Vec<String> = store
        .tokens(&query)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    names.sort();
    names
}

async fn resolves<S: TokenStore>(store: &S, token: &str) -> bool {
    store.principal(&hash_token(token)).await.unwrap().is_some()
}

/// The demo account with two tokens besides any demo token: `legacy`, what an earlier version
/// stored (unnamed, every scope, every site), and `ops`, a token someone made in the account.
async fn demo_account_with_legacy_and_ops_tokens<S: Directory + TokenStore>(
    store: &S,
) -> (String, String) {
    let settings = SimulatorSettings {
        mowers: 0,
        ..SimulatorSettings::default()
    };
    seed_demo_fleet(store, &settings).await.unwrap();
    let legacy = generate_token();
    store
        .store_token(hash_token(&legacy), demo::demo_principal(DEMO_ACCOUNT_ID))
        .await
        .unwrap();
    let ops = generate_token();
    let mut principal = demo::demo_principal(DEMO_ACCOUNT_ID);
    principal.scopes = vec![Scope::Read];
    store
        .create_token(
            hash_token(&ops),
            NewToken {
                id: TokenId::new(),
                name: "ops".to_owned(),
                principal,
            },
        )
        .await
        .unwrap();
    (legacy, ops)
}

/// Three starts with random tokens leave one live demo token, the last; an earlier version's
/// unnamed demo token is revoked too, a token someone made in the demo account is not; a restart
/// with the same `SWATH_DEMO_TOKEN` keeps it.
async fn a_new_demo_token_revokes_the_earlier_ones<S: Directory + TokenStore>(store: &S) {
    let (legacy, ops) = demo_account_with_legacy_and_ops_tokens(store).await;

    let tokens: Vec<String> = (0..3).map(|_| generate_token()).collect();
    let mut revoked = Vec::new();
    for token in &tokens {
        revoked.push(start(store, token).await);
    }
    assert_eq!(revoked, [1, 1, 1], "each start revokes the one before");
    assert!(!resolves(store, &legacy).await);
    assert!(!resolves(store, &tokens[0]).await);
    assert!(!resolves(store, &tokens[1]).await);
    assert!(resolves(store, &tokens[2]).await);
    assert!(resolves(store, &ops).await, "not a demo token");
    assert_eq!(names(store).await, [DEMO_TOKEN_NAME, "ops"]);

    let chosen = "a-chosen-demo-token-of-at-least-32-chars";
    assert_eq!(start(store, chosen).await, 1);
    assert_eq!(
        start(store, chosen).await,
        0,
        "a restart keeps its own token"
    );
    assert!(resolves(store, chosen).await);
    assert!(!resolves(store, &tokens[2]).await);
    assert_eq!(names(store).await, [DEMO_TOKEN_NAME, "ops"]);
}

/// A start with a demo, then one without (no simulator, no demo token), as `swath serve` runs
/// them: the second leaves no demo token of the demo account valid, keeps a token someone made in
/// it, and a third start finds none left to revoke (issue 42 item 7, decision 182).
async fn a_start_without_a_demo_revokes_every_demo_token<S: Directory + TokenStore>(store: &S) {
    let (legacy, ops) = demo_account_with_legacy_and_ops_tokens(store).await;
    let earlier = "an-earlier-demo-token-of-at-least-32-chars";
    start(store, earlier).await;
    assert!(resolves(store, earlier).await);

    assert_eq!(
        demo::revoke_all(store, DEMO_ACCOUNT_ID).await.unwrap(),
        1,
        "the demo token of the earlier start (the unnamed legacy one it revoked already)"
    );
    assert!(!resolves(store, earlier).await);
    assert!(!resolves(store, &legacy).await);
    assert!(resolves(store, &ops).await, "not a demo token");
    assert_eq!(names(store).await, ["ops"]);
    assert_eq!(
        demo::revoke_all(store, DEMO_ACCOUNT_ID).await.unwrap(),
        0,
        "none left"
    );
}

#[tokio::test]
async fn a_start_without_a_demo_revokes_every_demo_token_in_memory() {
    let store = MemoryStore::new(MemoryStoreSettings::default());
    a_start_without_a_demo_revokes_every_demo_token(&store).await;
}

#[tokio::test]
async fn a_new_demo_token_revokes_the_earlier_ones_in_memory() {
    let store = MemoryStore::new(MemoryStoreSettings::default());
    a_new_demo_token_revokes_the_earlier_ones(&store).await;
}

swath_tests::postgres_tests!(
    on_postgres: a_new_demo_token_revokes_the_earlier_ones_on_postgresql,
    a_start_without_a_demo_revokes_every_demo_token_on_postgresql,
);

mod on_postgres {
    use super::*;

    pub(super) async fn a_new_demo_token_revokes_the_earlier_ones_on_postgresql(
        factory: PostgresFactory,
    ) {
        let store = factory.fresh_store().await;
        a_new_demo_token_revokes_the_earlier_ones(&store).await;
    }

    pub(super) async fn a_start_without_a_demo_revokes_every_demo_token_on_postgresql(
        factory: PostgresFactory,
    ) {
        let store = factory.fresh_store().await;
        a_start_without_a_demo_revokes_every_demo_token(&store).await;
    }
}
