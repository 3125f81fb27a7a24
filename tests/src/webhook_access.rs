//! The webhooks use case ([`swath_application::Webhooks`]) over each store: which endpoints a
//! principal sees (the sites and the mowers they name, also after a mower moved) and the cap on
//! an account's endpoints, exact also when endpoints are created at once (decision 179).

use crate::postgres::PostgresFactory;
use crate::support::{add_account, add_mower, add_site, mower, site};
use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use std::sync::Arc;
use swath_application::ports::{DirectoryAdmin, ManualClock, TokenStore, WebhookStore};
use swath_application::{
    Access, EndpointPatch, EndpointSpec, Revocations, WebhookLimits, Webhooks, WebhooksError,
};
use swath_domain::watch::EventKind;
use swath_domain::webhook::{WebhookId, WebhookKind};
use swath_domain::{AccountId, MowerId, Principal, Scope, SiteId};
use uuid::Uuid;

/// A fresh store behind the directory, the tokens and the webhooks.
#[async_trait]
pub trait WebhookAccessFactory: Send + Sync {
    async fn fresh(
        &self,
    ) -> (
        Arc<dyn DirectoryAdmin>,
        Arc<dyn TokenStore>,
        Arc<dyn WebhookStore>,
    );
}

/// The memory adapters.
pub struct MemoryWebhookAccessFactory;

#[async_trait]
impl WebhookAccessFactory for MemoryWebhookAccessFactory {
    async fn fresh(
        &self,
    ) -> (
        Arc<dyn DirectoryAdmin>,
        Arc<dyn TokenStore>,
        Arc<dyn WebhookStore>,
    ) {
        let store = swath_memory::MemoryStore::default();
        (
            Arc::new(store.clone()),
            Arc::new(store),
            Arc::new(swath_memory::MemoryWebhooks::default()),
        )
    }
}

/// A fresh PostgreSQL database.
pub struct PostgresWebhookAccessFactory(pub PostgresFactory);

#[async_trait]
impl WebhookAccessFactory for PostgresWebhookAccessFactory {
    async fn fresh(
        &self,
    ) -> (
        Arc<dyn DirectoryAdmin>,
        Arc<dyn TokenStore>,
        Arc<dyn WebhookStore>,
    ) {
        let store = Arc::new(self.0.fresh_store().await);
        (store.clone(), store.clone(), store)
    }
}

/// One account with sites North (mower `north_mower`) and South (mower `south_mower`), its
/// unlimited admin and its South-only admin, and the use case over a store.
struct World {
    directory: Arc<dyn DirectoryAdmin>,
    webhooks: Webhooks,
    clock: Arc<ManualClock>,
    north: SiteId,
    south: SiteId,
    north_mower: MowerId,
    south_mower: MowerId,
    admin: Principal,
    south_admin: Principal,
}

impl World {
    async fn new(factory: &dyn WebhookAccessFactory, limits: WebhookLimits) -> World {
        let (directory, tokens, store) = factory.fresh().await;
        let account = AccountId::new();
        add_account(&*directory, account, "Acme").await;
        let (north, south) = (SiteId::new(), SiteId::new());
        for (n, (id, name)) in [(north, "North"), (south, "South")].into_iter().enumerate() {
            let berlin = chrono_tz::Europe::Berlin;
            add_site(&*directory, site(id, account, name, berlin, n)).await;
        }
        let (north_mower, south_mower) = (MowerId::new(), MowerId::new());
        for (n, (id, on)) in [(north_mower, north), (south_mower, south)]
            .into_iter()
            .enumerate()
        {
            add_mower(&*directory, mower(id, account, on, format!("M{n}"), n)).await;
        }
        let clock = Arc::new(ManualClock::new(
            Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap(),
        ));
        let access = Access::new(
            directory.clone(),
            tokens,
            clock.clone(),
            Revocations::default(),
        );
        let webhooks = Webhooks::new(store, access, clock.clone(), false).with_limits(limits);
        let admin = Principal {
            account_id: account,
            scopes: vec![Scope::Admin],
            sites: None,
        };
        let south_admin = Principal {
            sites: Some(vec![south]),
            ..admin.clone()
        };
        World {
            directory,
            webhooks,
            clock,
            north,
            south,
            north_mower,
            south_mower,
            admin,
            south_admin,
        }
    }

    /// An endpoint limited to `sites` and `mowers`, created by the unlimited admin.
    async fn endpoint(&self, sites: Vec<SiteId>, mowers: Option<Vec<MowerId>>) -> WebhookId {
        let spec = spec(Some(sites), mowers);
        self.webhooks.create(&self.admin, spec).await.unwrap().0.id
    }

    /// Moves `mower` to `site`.
    async fn move_mower(&self, id: MowerId, site: SiteId) {
        let mut moved = self.directory.mower(id).await.unwrap().unwrap();
        moved.site_id = site;
        self.directory.update_mower(moved).await.unwrap();
    }

    /// The ids `principal` lists.
    async fn listed(&self, principal: &Principal) -> Vec<WebhookId> {
        let listed = self.webhooks.list(principal, None, 100).await.unwrap();
        listed.into_iter().map(|e| e.id).collect()
    }

    /// Whether each operation on `id` answers it absent to `principal`, in the order get,
    /// update, rotate, deliveries, retry, test, delete.
    async fn absent_on_every_operation(&self, principal: &Principal, id: WebhookId) -> Vec<bool> {
        let w = &self.webhooks;
        let absent = |r: Result<(), WebhooksError>| matches!(r, Err(WebhooksError::NotFound));
        let patch = EndpointPatch {
            enabled: Some(false),
            ..EndpointPatch::default()
        };
        vec![
            absent(w.get(principal, id).await.map(drop)),
            absent(w.update(principal, id, patch).await.map(drop)),
            absent(w.rotate_secret(principal, id).await.map(drop)),
            absent(w.deliveries(principal, id, None, 10).await.map(drop)),
            absent(w.retry(principal, id, Uuid::now_v7()).await.map(drop)),
            absent(w.test(principal, id).await.map(drop)),
            absent(w.delete(principal, id).await),
        ]
    }
}

fn spec(sites: Option<Vec<SiteId>>, mowers: Option<Vec<MowerId>>) -> EndpointSpec {
    EndpointSpec {
        url: "https://hooks.example.com/swath".to_owned(),
        kinds: vec![WebhookKind::Event(EventKind::ErrorRaised)],
        mowers,
        sites,
        enabled: true,
    }
}

/// An endpoint limited to the South site but naming a mower of North is absent to the South
/// admin on every operation (it would show, rotate or delete what concerns a mower the token
/// cannot see); one naming South's mower is not.
pub async fn an_endpoint_naming_a_mower_off_the_tokens_sites_is_absent(
    factory: &dyn WebhookAccessFactory,
) {
    let w = World::new(factory, WebhookLimits::default()).await;
    let foreign = w.endpoint(vec![w.south], Some(vec![w.north_mower])).await;
    let own = w.endpoint(vec![w.south], Some(vec![w.south_mower])).await;
    let unfiltered = w.endpoint(vec![w.south], None).await;
    let mut expected = vec![own, unfiltered];
    expected.sort();
    assert_eq!(w.listed(&w.south_admin).await, expected);
    assert_eq!(
        w.absent_on_every_operation(&w.south_admin, foreign).await,
        [true; 7]
    );
    assert!(
        w.webhooks.get(&w.admin, foreign).await.is_ok(),
        "the unlimited admin still manages it"
    );
    assert!(w.webhooks.get(&w.south_admin, own).await.is_ok());
}

/// A mower moved off the token's sites hides the endpoints that name it from that token, at
/// once; moved back, they show again.
pub async fn a_mower_moved_off_the_tokens_sites_hides_its_endpoints(
    factory: &dyn WebhookAccessFactory,
) {
    let w = World::new(factory, WebhookLimits::default()).await;
    let id = w.endpoint(vec![w.south], Some(vec![w.south_mower])).await;
    assert!(w.webhooks.get(&w.south_admin, id).await.is_ok());

    w.move_mower(w.south_mower, w.north).await;
    assert_eq!(w.listed(&w.south_admin).await, []);
    assert_eq!(
        w.absent_on_every_operation(&w.south_admin, id).await,
        [true; 7]
    );
    assert_eq!(w.listed(&w.admin).await, [id]);

    w.move_mower(w.south_mower, w.south).await;
    assert_eq!(w.listed(&w.south_admin).await, [id]);
}

/// An account has at most `per_account` endpoints, exactly also when many are created at once;
/// another account is not affected, and deleting one makes room for one.
pub async fn endpoints_per_account_are_capped_exactly(factory: &dyn WebhookAccessFactory) {
    let limits = WebhookLimits {
        per_account: 3,
        ..WebhookLimits::default()
    };
    let w = World::new(factory, limits).await;
    let creations = (0..12).map(|_| w.webhooks.create(&w.admin, spec(None, None)));
    let answers = futures::future::join_all(creations).await;
    let created: Vec<WebhookId> = answers
        .iter()
        .filter_map(|a| a.as_ref().ok().map(|(e, _)| e.id))
        .collect();
    let refused = answers
        .iter()
        .filter(|a| matches!(a, Err(WebhooksError::TooManyEndpoints(3))))
        .count();
    assert_eq!((created.len(), refused), (3, 9), "{answers:?}");
    assert_eq!(w.listed(&w.admin).await.len(), 3);

    let other = World::new(factory, limits).await;
    assert!(other
        .webhooks
        .create(&other.admin, spec(None, None))
        .await
        .is_ok());

    w.webhooks.delete(&w.admin, created[0]).await.unwrap();
    assert!(w.webhooks.create(&w.admin, spec(None, None)).await.is_ok());
    assert!(matches!(
        w.webhooks.create(&w.admin, spec(None, None)).await,
        Err(WebhooksError::TooManyEndpoints(3))
    ));
}

/// An endpoint is sent at most `tests_per_minute` test messages a minute; the refusal says when
/// the next is allowed, another endpoint has its own, and a minute later it is allowed again.
pub async fn test_messages_are_limited_per_endpoint(factory: &dyn WebhookAccessFactory) {
    let limits = WebhookLimits {
        tests_per_minute: 2,
        ..WebhookLimits::default()
    };
    let w = World::new(factory, limits).await;
    let (one, two) = (
        w.endpoint(vec![w.south], None).await,
        w.endpoint(vec![w.north], None).await,
    );
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(w.webhooks.test(&w.admin, one).await);
        w.clock.advance(chrono::Duration::seconds(1));
    }
    let sent = answers.iter().filter(|a| a.is_ok()).count();
    let waits: Vec<u64> = answers
        .iter()
        .filter_map(|a| match a {
            Err(WebhooksError::TooManyTests {
                retry_after_seconds,
            }) => Some(*retry_after_seconds),
            _ => None,
        })
        .collect();
    assert_eq!((sent, waits.clone()), (2, vec![58, 57, 56]));
    assert!(w.webhooks.test(&w.admin, two).await.is_ok());
    w.clock.advance(chrono::Duration::seconds(55));
    assert!(w.webhooks.test(&w.admin, one).await.is_ok());
}
