//! The access service (`swath_application::Access`) on the memory store, without HTTP: one test
//! per visibility rule, and the principal cache (its store lookups counted, no wall clock).

use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use swath_application::ports::{
    hash_token, Clock, Directory, DirectoryAdmin, ManualClock, NewToken, TokenError, TokenHash,
    TokenId, TokenInfo, TokenQuery, TokenStore,
};
use swath_application::visibility::{sees_site, ACCOUNT_MISMATCH, MOWER_NOT_VISIBLE};
use swath_application::{Access, AccessError, Hidden, Revocations};
use swath_domain::{
    AccountId, DropReason, InvalidReport, Mower, MowerId, Principal, Scope, SiteId, StateReport,
};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_tests::support::{add_account, add_mower, add_site, mower, site};
use uuid::Uuid;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap()
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// Account A with sites North (mowers n0, n1) and South (mower s0); account B with site Main
/// (mower b0).
struct World {
    store: MemoryStore,
    a: AccountId,
    north: SiteId,
    south: SiteId,
    n0: MowerId,
    n1: MowerId,
    s0: MowerId,
    b: AccountId,
    main: SiteId,
    b0: MowerId,
}

impl World {
    async fn new() -> World {
        let store = MemoryStore::new(MemoryStoreSettings {
            history_per_mower: 10,
        });
        let (a, b) = (AccountId(id(0xa0)), AccountId(id(0xb0)));
        for (account, name) in [(a, "Acme"), (b, "Borough")] {
            add_account(&store, account, name).await;
        }
        let (north, south, main) = (SiteId(id(0xa1)), SiteId(id(0xa2)), SiteId(id(0xb1)));
        for (site_id, account) in [(north, a), (south, a), (main, b)] {
            let name = format!("site {}", site_id.0);
            add_site(
                &store,
                site(site_id, account, &name, chrono_tz::Europe::Berlin, 0),
            )
            .await;
        }
        let (n0, n1, s0, b0) = (
            MowerId(id(0xa10)),
            MowerId(id(0xa11)),
            MowerId(id(0xa20)),
            MowerId(id(0xb10)),
        );
        for (id, account, site_id) in [
            (n0, a, north),
            (n1, a, north),
            (s0, a, south),
            (b0, b, main),
        ] {
            let mower = Mower {
                model: "R40".to_owned(),
                serial: String::new(),
                blade_threshold_ms: 3_600_000,
                ..mower(id, account, site_id, format!("mower {}", id.0), 0)
            };
            add_mower(&store, mower).await;
        }
        World {
            store,
            a,
            north,
            south,
            n0,
            n1,
            s0,
            b,
            main,
            b0,
        }
    }

    fn access(&self) -> Access {
        Access::new(
            Arc::new(self.store.clone()),
            Arc::new(self.store.clone()),
            Arc::new(ManualClock::new(t0())),
            Revocations::default(),
        )
    }

    /// Every site of account A.
    fn a_all(&self) -> Principal {
        Principal {
            account_id: self.a,
            scopes: vec![Scope::Read, Scope::Write],
            sites: None,
        }
    }

    /// Account A, South only.
    fn a_south(&self) -> Principal {
        Principal {
            sites: Some(vec![self.south]),
            ..self.a_all()
        }
    }

    fn report(&self, mower: MowerId, account: AccountId) -> Result<StateReport, InvalidReport> {
        StateReport::from_value(
            json!({
                "mower_id": mower.0.to_string(),
                "account_id": account.0.to_string(),
                "observed_at": t0().to_rfc3339(),
                "activity": "mowing",
                "battery_percent": 80,
            }),
            t0(),
        )
    }
}

fn not_visible(result: Result<impl std::fmt::Debug, AccessError>, kind: Hidden) {
    match result {
        Err(AccessError::NotVisible(k)) => assert_eq!(k, kind),
        other => panic!("expected NotVisible({kind:?}), got {other:?}"),
    }
}

#[test]
fn a_site_is_seen_by_an_unlimited_principal_and_by_one_that_lists_it() {
    let (x, y) = (SiteId(id(1)), SiteId(id(2)));
    assert!(sees_site(None, x));
    assert!(sees_site(Some(&[x]), x));
    assert!(!sees_site(Some(&[x]), y));
    assert!(!sees_site(Some(&[]), x));
}

/// Asserts that `look` answers each `visible` id to its principal, and answers each `hidden` one
/// as not visible, of `kind`, as an unknown id would be.
async fn sees_only<Id, Fut>(
    look: impl Fn(Principal, Id) -> Fut,
    visible: Vec<(Principal, Id)>,
    hidden: Vec<(Principal, Id)>,
    kind: Hidden,
) where
    Id: Copy + PartialEq + std::fmt::Debug,
    Fut: std::future::Future<Output = Result<Id, AccessError>>,
{
    for (principal, id) in visible {
        assert_eq!(look(principal, id).await.unwrap(), id);
    }
    for (principal, id) in hidden {
        not_visible(look(principal, id).await, kind);
    }
}

#[tokio::test]
async fn a_mower_is_visible_only_in_its_account_and_on_a_seen_site() {
    let w = World::new().await;
    let access = w.access();
    let look = |p: Principal, m| {
        let access = &access;
        async move { access.visible_mower(&p, m).await.map(|m| m.id) }
    };
    sees_only(
        look,
        // Own account, unlimited: every site's mower; limited to South: South's mower only.
        vec![(w.a_all(), w.n0), (w.a_all(), w.s0), (w.a_south(), w.s0)],
        // North's to South's principal answers as another account's mower and an unknown id do.
        vec![
            (w.a_south(), w.n0),
            (w.a_all(), w.b0),
            (w.a_all(), MowerId(id(0xdead))),
        ],
        Hidden::Mower,
    )
    .await;
}

#[tokio::test]
async fn a_site_is_visible_only_in_its_account_and_when_seen() {
    let w = World::new().await;
    let access = w.access();
    let look = |p: Principal, s| {
        let access = &access;
        async move { access.visible_site(&p, s).await.map(|s| s.id) }
    };
    let visible = vec![(w.a_all(), w.north), (w.a_south(), w.south)];
    let hidden = vec![
        (w.a_south(), w.north),
        (w.a_all(), w.main),
        (w.a_all(), SiteId(id(0xdead))),
    ];
    sees_only(look, visible, hidden, Hidden::Site).await;
}

#[tokio::test]
async fn a_referenced_site_that_is_not_visible_is_one_refusal() {
    let w = World::new().await;
    let access = w.access();
    let look = |p: Principal, s| {
        let access = &access;
        async move { access.referenced_site(&p, s).await.map(|s| s.id) }
    };
    let south = w.a_south();
    let hidden = [w.north, w.main, SiteId(id(0xdead))].map(|s| (south.clone(), s));
    let visible = vec![(south, w.south)];
    sees_only(look, visible, hidden.to_vec(), Hidden::ReferencedSite).await;
}

#[tokio::test]
async fn the_live_set_is_the_accounts_mowers_on_seen_sites() {
    let w = World::new().await;
    let access = w.access();
    assert_eq!(
        access.visible_mowers(&w.a_all()).await.unwrap(),
        HashSet::from([w.n0, w.n1, w.s0])
    );
    assert_eq!(
        access.visible_mowers(&w.a_south()).await.unwrap(),
        HashSet::from([w.s0])
    );
    let b = Principal {
        account_id: w.b,
        scopes: vec![Scope::Read],
        sites: None,
    };
    assert_eq!(
        access.visible_mowers(&b).await.unwrap(),
        HashSet::from([w.b0])
    );
}

#[tokio::test]
async fn a_feed_shows_the_visible_mowers_and_a_hidden_filter_shows_nothing() {
    let w = World::new().await;
    let access = w.access();
    // Unlimited without a filter: the whole account (no list to pass to the store).
    assert_eq!(access.feed_mowers(&w.a_all(), None).await.unwrap(), None);
    // Limited: its sites' mowers.
    assert_eq!(
        access.feed_mowers(&w.a_south(), None).await.unwrap(),
        Some(vec![w.s0])
    );
    // A filter on a visible mower: that mower.
    assert_eq!(
        access.feed_mowers(&w.a_all(), Some(w.n1)).await.unwrap(),
        Some(vec![w.n1])
    );
    // A filter on a hidden, another account's or unknown mower: an empty feed, all alike.
    for m in [w.n0, w.b0, MowerId(id(0xdead))] {
        assert_eq!(
            access.feed_mowers(&w.a_south(), Some(m)).await.unwrap(),
            Some(vec![]),
            "{m}"
        );
    }
}

#[tokio::test]
async fn state_reports_must_name_the_principals_account_and_a_visible_mower() {
    let w = World::new().await;
    let access = w.access();
    let dropped = |r: &Result<StateReport, InvalidReport>| {
        r.as_ref().err().map(|e| (e.reason, e.detail.clone()))
    };

    // Limited to South: another account's report is an account mismatch; North's mower, B's
    // mower (under A's account) and an unknown mower are one `unknown_mower`.
    let mut batch = vec![
        w.report(w.s0, w.a),
        w.report(w.b0, w.b),
        w.report(w.n0, w.a),
        w.report(w.b0, w.a),
        w.report(MowerId(id(0xdead)), w.a),
    ];
    access
        .filter_states(&w.a_south(), &mut batch)
        .await
        .unwrap();
    assert!(batch[0].is_ok());
    assert_eq!(
        dropped(&batch[1]),
        Some((DropReason::AccountMismatch, ACCOUNT_MISMATCH.to_owned()))
    );
    for r in &batch[2..] {
        assert_eq!(
            dropped(r),
            Some((DropReason::UnknownMower, MOWER_NOT_VISIBLE.to_owned()))
        );
    }

    // Unlimited: the account is checked here; the mower is left to W0 during ingestion.
    let mut batch = vec![
        w.report(w.n0, w.a),
        w.report(w.b0, w.b),
        w.report(w.b0, w.a),
    ];
    access.filter_states(&w.a_all(), &mut batch).await.unwrap();
    assert!(batch[0].is_ok());
    assert_eq!(dropped(&batch[1]).unwrap().0, DropReason::AccountMismatch);
    assert!(batch[2].is_ok());

    // A report that failed validation stays as it was.
    let mut batch = vec![Err(InvalidReport::new(DropReason::Malformed, "not JSON"))];
    access
        .filter_states(&w.a_south(), &mut batch)
        .await
        .unwrap();
    assert_eq!(dropped(&batch[0]).unwrap().0, DropReason::Malformed);
}

/// A token store that counts the lookups of a principal.
struct Counting {
    inner: MemoryStore,
    lookups: AtomicUsize,
}

#[async_trait]
impl TokenStore for Counting {
    async fn create_token(&self, hash: TokenHash, token: NewToken) -> Result<(), TokenError> {
        self.inner.create_token(hash, token).await
    }
    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        self.inner.principal(hash).await
    }
    async fn tokens(&self, query: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
        self.inner.tokens(query).await
    }
    async fn token(&self, id: TokenId) -> Result<Option<TokenInfo>, TokenError> {
        self.inner.token(id).await
    }
    async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenInfo>, TokenError> {
        self.inner.token_by_hash(hash).await
    }
    async fn revoke_token(&self, id: TokenId) -> Result<bool, TokenError> {
        self.inner.revoke_token(id).await
    }
}

struct Cache {
    access: Access,
    tokens: Arc<Counting>,
    clock: Arc<ManualClock>,
    revocations: Revocations,
    hash: TokenHash,
    token: TokenId,
    principal: Principal,
}

impl Cache {
    async fn new(ttl: std::time::Duration) -> Cache {
        let w = World::new().await;
        let tokens = Arc::new(Counting {
            inner: w.store.clone(),
            lookups: AtomicUsize::new(0),
        });
        let clock = Arc::new(ManualClock::new(t0()));
        let revocations = Revocations::default();
        let hash = hash_token("swath_cache_test");
        let token = TokenId(id(0xc0));
        tokens
            .create_token(
                hash.clone(),
                NewToken {
                    id: token,
                    name: String::new(),
                    principal: w.a_south(),
                },
            )
            .await
            .unwrap();
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        let access = Access::new(
            Arc::new(w.store.clone()),
            tokens.clone(),
            dyn_clock,
            revocations.clone(),
        )
        .with_cache_ttl(ttl);
        Cache {
            access,
            tokens,
            clock,
            revocations,
            hash,
            token,
            principal: w.a_south(),
        }
    }

    fn lookups(&self) -> usize {
        self.tokens.lookups.load(Ordering::SeqCst)
    }

    async fn principal(&self) -> Option<Principal> {
        self.access.principal(&self.hash).await.unwrap()
    }
}

#[tokio::test]
async fn two_requests_within_the_bound_look_the_token_up_once() {
    let c = Cache::new(std::time::Duration::from_secs(2)).await;
    assert_eq!(c.principal().await, Some(c.principal.clone()));
    c.clock.advance(Duration::milliseconds(1999));
    assert_eq!(c.principal().await, Some(c.principal.clone()));
    assert_eq!(c.lookups(), 1);
    // At the bound the store is asked again.
    c.clock.advance(Duration::milliseconds(1));
    assert_eq!(c.principal().await, Some(c.principal.clone()));
    assert_eq!(c.lookups(), 2);
    // A clock that goes back does not make an entry live for ever.
    c.clock.advance(Duration::seconds(-10));
    assert_eq!(c.principal().await, Some(c.principal.clone()));
    assert_eq!(c.lookups(), 3);
}

#[tokio::test]
async fn a_token_revoked_on_this_replica_is_refused_at_once() {
    let c = Cache::new(std::time::Duration::from_secs(2)).await;
    assert_eq!(c.principal().await, Some(c.principal.clone()));
    assert!(c.tokens.revoke_token(c.token).await.unwrap());
    c.revocations.notify();
    // Same instant, well inside the bound: the store is asked and says no.
    assert_eq!(c.principal().await, None);
    assert_eq!(c.lookups(), 2);
    // Unknown tokens are never kept: each request asks.
    assert_eq!(c.principal().await, None);
    assert_eq!(c.lookups(), 3);
}

#[tokio::test]
async fn a_token_revoked_elsewhere_is_refused_within_the_bound() {
    let c = Cache::new(std::time::Duration::from_secs(2)).await;
    assert_eq!(c.principal().await, Some(c.principal.clone()));
    // Revoked through another replica: no notification here.
    assert!(c.tokens.revoke_token(c.token).await.unwrap());
    c.clock.advance(Duration::seconds(1));
    assert_eq!(
        c.principal().await,
        Some(c.principal.clone()),
        "within the bound"
    );
    c.clock.advance(Duration::seconds(1));
    assert_eq!(c.principal().await, None, "the bound is over");
    // The live stream's check never uses the cache.
    assert_eq!(c.access.principal_uncached(&c.hash).await.unwrap(), None);
}

#[tokio::test]
async fn without_a_bound_every_request_asks_the_store() {
    let c = Cache::new(std::time::Duration::ZERO).await;
    for _ in 0..3 {
        assert_eq!(c.principal().await, Some(c.principal.clone()));
    }
    assert_eq!(c.lookups(), 3);
}

/// The cache behind the router, as `swath serve` wires it: two `GET`s with one token inside the
/// bound ask the token store once; the token revoked through this replica is refused at once.
#[tokio::test]
async fn through_http_one_lookup_per_bound_and_a_revocation_refused_at_once() {
    use axum::body::Body;
    use axum::http::{header, Method, Request, StatusCode};
    use swath::wiring::{wire, Stores};
    use swath_api::router;
    use swath_application::ports::EventBus;
    use swath_memory::{MemoryBus, MemoryBusSettings};
    use tower::ServiceExt;

    let w = World::new().await;
    let tokens = Arc::new(Counting {
        inner: w.store.clone(),
        lookups: AtomicUsize::new(0),
    });
    let token = "swath_http_cache_test";
    let token_id = TokenId(id(0xc1));
    tokens
        .create_token(
            hash_token(token),
            NewToken {
                id: token_id,
                name: String::new(),
                principal: Principal {
                    scopes: vec![Scope::Read, Scope::Admin],
                    ..w.a_south()
                },
            },
        )
        .await
        .unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(t0()));
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new(MemoryBusSettings::default()));
    let mut stores = Stores::memory(w.store.clone());
    stores.tokens = tokens.clone();
    let app = router(wire(stores, bus, clock, cached()).state);
    let send = |method: Method, path: String| {
        let app = app.clone();
        async move {
            app.oneshot(
                Request::builder()
                    .method(method)
                    .uri(path)
                    .header(header::AUTHORIZATION, format!("Bearer {token}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap()
            .status()
        }
    };
    let mower = format!("/v1/mowers/{}", w.s0);
    assert_eq!(send(Method::GET, mower.clone()).await, StatusCode::OK);
    assert_eq!(send(Method::GET, mower.clone()).await, StatusCode::OK);
    assert_eq!(tokens.lookups.load(Ordering::SeqCst), 1);

    assert_eq!(
        send(Method::DELETE, format!("/v1/tokens/{token_id}")).await,
        StatusCode::NO_CONTENT
    );
    // The clock has not moved: well inside the bound, yet refused.
    assert_eq!(send(Method::GET, mower).await, StatusCode::UNAUTHORIZED);
}

/// The mower cache of `Access::visible_mower_id` (decision 108), with a manual clock.
struct Placements {
    world: World,
    access: Access,
    clock: Arc<ManualClock>,
}

impl Placements {
    async fn new(ttl: std::time::Duration) -> Placements {
        let world = World::new().await;
        let clock = Arc::new(ManualClock::new(t0()));
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        let access = Access::new(
            Arc::new(world.store.clone()),
            Arc::new(world.store.clone()),
            dyn_clock,
            Revocations::default(),
        )
        .with_cache_ttl(ttl);
        Placements {
            world,
            access,
            clock,
        }
    }

    /// Moves s0 from South to North in the directory, as another replica would.
    async fn move_s0_north(&self) {
        let w = &self.world;
        let mut mower = w.store.mower(w.s0).await.unwrap().unwrap();
        mower.site_id = w.north;
        w.store.update_mower(mower).await.unwrap();
    }

    async fn sees_s0(&self) -> bool {
        let w = &self.world;
        match self.access.visible_mower_id(&w.a_south(), w.s0).await {
            Ok(id) => {
                assert_eq!(id, w.s0);
                true
            }
            Err(AccessError::NotVisible(Hidden::Mower)) => false,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

#[tokio::test]
async fn a_mower_id_read_applies_the_visibility_rules() {
    let p = Placements::new(std::time::Duration::from_secs(2)).await;
    let w = &p.world;
    assert!(p.sees_s0().await);
    for (principal, mower) in [
        (w.a_south(), w.n0),
        (w.a_all(), w.b0),
        (w.a_all(), MowerId(id(0xdead))),
    ] {
        assert!(matches!(
            p.access.visible_mower_id(&principal, mower).await,
            Err(AccessError::NotVisible(Hidden::Mower))
        ));
    }
    // A kept placement is still judged per principal.
    assert!(p.access.visible_mower_id(&w.a_all(), w.s0).await.is_ok());
    assert!(matches!(
        p.access
            .visible_mower_id(
                &Principal {
                    account_id: w.b,
                    ..w.a_all()
                },
                w.s0
            )
            .await,
        Err(AccessError::NotVisible(Hidden::Mower))
    ));
}

#[tokio::test]
async fn a_mower_moved_elsewhere_keeps_its_visibility_for_the_bound_only() {
    let p = Placements::new(std::time::Duration::from_secs(2)).await;
    assert!(p.sees_s0().await);
    p.move_s0_north().await;
    p.clock.advance(Duration::milliseconds(1999));
    assert!(p.sees_s0().await, "within the bound");
    p.clock.advance(Duration::milliseconds(1));
    assert!(!p.sees_s0().await, "the bound is over");
}

#[tokio::test]
async fn a_mower_moved_through_this_process_is_seen_at_once() {
    let p = Placements::new(std::time::Duration::from_secs(2)).await;
    assert!(p.sees_s0().await);
    p.move_s0_north().await;
    p.access.mower_changed();
    assert!(!p.sees_s0().await);
}

#[tokio::test]
async fn without_a_bound_every_mower_id_read_asks_the_directory() {
    let p = Placements::new(std::time::Duration::ZERO).await;
    assert!(p.sees_s0().await);
    p.move_s0_north().await;
    assert!(!p.sees_s0().await);
}

/// `PATCH /v1/mowers/{id}` through the router, with the caches on as `swath serve` has them: a
/// mower moved off a site-limited token's site is hidden from that token's telemetry reads at
/// once, inside the bound (the route tells the access service).
#[tokio::test]
async fn through_http_a_mower_moved_here_is_hidden_at_once() {
    use axum::body::Body;
    use axum::http::{header, Method, Request, StatusCode};
    use swath::wiring::{wire, Stores};
    use swath_api::router;
    use swath_application::ports::EventBus;
    use swath_memory::{MemoryBus, MemoryBusSettings};
    use tower::ServiceExt;

    let w = World::new().await;
    let (reader, writer) = ("swath_moved_reader", "swath_moved_writer");
    for (n, token, principal) in [(0xd0, reader, w.a_south()), (0xd1, writer, w.a_all())] {
        w.store
            .create_token(
                hash_token(token),
                NewToken {
                    id: TokenId(id(n)),
                    name: String::new(),
                    principal,
                },
            )
            .await
            .unwrap();
    }
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(t0()));
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new(MemoryBusSettings::default()));
    let stores = Stores::memory(w.store.clone());
    let app = router(wire(stores, bus, clock, cached()).state);
    let send = |method: Method, path: String, token: &'static str, body: Option<String>| {
        let app = app.clone();
        async move {
            let mut request = Request::builder()
                .method(method)
                .uri(path)
                .header(header::AUTHORIZATION, format!("Bearer {token}"));
            if body.is_some() {
                request = request.header(header::CONTENT_TYPE, "application/json");
            }
            app.oneshot(
                request
                    .body(body.map(Body::from).unwrap_or_else(Body::empty))
                    .unwrap(),
            )
            .await
            .unwrap()
            .status()
        }
    };
    let history = format!("/v1/mowers/{}/history", w.s0);
    assert_eq!(
        send(Method::GET, history.clone(), reader, None).await,
        StatusCode::OK
    );
    let moved = json!({ "site_id": w.north.0 }).to_string();
    assert_eq!(
        send(
            Method::PATCH,
            format!("/v1/mowers/{}", w.s0),
            writer,
            Some(moved)
        )
        .await,
        StatusCode::OK
    );
    // The clock has not moved: well inside the bound, yet hidden.
    assert_eq!(
        send(Method::GET, history, reader, None).await,
        StatusCode::NOT_FOUND
    );
}

/// The test app's settings with the principal and placement caches on, for 2 s.
fn cached() -> swath::wiring::Settings {
    swath::wiring::Settings {
        cache_ttl: std::time::Duration::from_secs(2),
        ..swath_tests::support::http::test_settings()
    }
}
