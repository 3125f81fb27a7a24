//! The webhook store's contract ([`swath_application::ports::WebhookStore`]): endpoints kept to
//! their account, deliveries enqueued once, handed out in order one per endpoint, retried,
//! failed with their endpoint, paged newest first; the same answers from every adapter.

use crate::postgres::PostgresFactory;
use crate::support::seed_account_with_mowers;
use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::collections::HashSet;
use std::sync::Arc;
use swath_application::ports::{
    Attempt, ClaimLimit, Delivery, DeliveryOutcome, Directory, NewDelivery, WebhookError,
    WebhookStore,
};
use swath_domain::watch::EventKind;
use swath_domain::webhook::{delivery_id, Endpoint, Secret, WebhookId, WebhookKind};
use swath_domain::AccountId;

/// A fresh store behind the directory and the webhook ports.
#[async_trait]
pub trait WebhookFactory: Send + Sync {
    async fn fresh(&self) -> (Arc<dyn Directory>, Arc<dyn WebhookStore>);
}

/// The memory adapters.
pub struct MemoryWebhookFactory;

#[async_trait]
impl WebhookFactory for MemoryWebhookFactory {
    async fn fresh(&self) -> (Arc<dyn Directory>, Arc<dyn WebhookStore>) {
        (
            Arc::new(swath_memory::MemoryStore::default()),
            Arc::new(swath_memory::MemoryWebhooks::default()),
        )
    }
}

/// A fresh PostgreSQL database.
pub struct PostgresWebhookFactory(pub PostgresFactory);

#[async_trait]
impl WebhookFactory for PostgresWebhookFactory {
    async fn fresh(&self) -> (Arc<dyn Directory>, Arc<dyn WebhookStore>) {
        let store = Arc::new(self.0.fresh_store().await);
        (store.clone(), store)
    }
}

/// An instant every store keeps exactly (whole microseconds).
pub fn t(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap() + Duration::seconds(seconds)
}

/// An endpoint of `account` asking for errors.
pub fn endpoint(account: AccountId, url: &str) -> Endpoint {
    Endpoint {
        id: WebhookId::new(),
        account_id: account,
        url: url.to_owned(),
        kinds: vec![WebhookKind::Event(EventKind::ErrorRaised)],
        mowers: None,
        sites: None,
        enabled: true,
        disabled_reason: None,
        secrets: vec![Secret {
            value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
            expires_at: None,
        }],
        created_at: t(0),
        updated_at: t(0),
    }
}

/// A delivery of message `n` to `endpoint`, enqueued at `t(at)`.
pub fn message(endpoint: WebhookId, n: u32, at: i64) -> NewDelivery {
    NewDelivery {
        id: delivery_id(endpoint, &format!("m{n}")),
        endpoint_id: endpoint,
        event_type: "error_raised".to_owned(),
        body: format!(r#"{{"n":{n}}}"#),
        created_at: t(at),
    }
}

fn retry_at(at: i64) -> Attempt {
    Attempt {
        status: Some(500),
        latency_ms: 12,
        outcome: DeliveryOutcome::Pending,
        next_attempt_at: Some(t(at)),
    }
}

fn delivered() -> Attempt {
    Attempt {
        status: Some(204),
        latency_ms: 3,
        outcome: DeliveryOutcome::Delivered,
        next_attempt_at: None,
    }
}

/// The deliveries `claim_due` answers, at most `n` whatever their accounts.
async fn claim(
    store: &dyn WebhookStore,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    n: usize,
) -> Vec<Delivery> {
    store
        .claim_due(now, until, &ClaimLimit::total(n))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.delivery)
        .collect()
}

async fn account(directory: &dyn Directory) -> AccountId {
    seed_account_with_mowers(directory, 1, 1_000).await.0
}

/// Endpoints are stored as given, listed in id order per account, replaced, deleted; a second
/// endpoint with the same id is refused.
pub async fn endpoints_are_kept_to_their_account(factory: &dyn WebhookFactory) {
    let (directory, store) = factory.fresh().await;
    let (a, b) = (account(&*directory).await, account(&*directory).await);
    let mut ours = Vec::new();
    for i in 0..3 {
        let e = endpoint(a, &format!("https://a.example/{i}"));
        store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
        ours.push(e);
    }
    let theirs = endpoint(b, "https://b.example/");
    store
        .create_endpoint(theirs.clone(), usize::MAX)
        .await
        .unwrap();
    assert!(matches!(
        store.create_endpoint(theirs.clone(), usize::MAX).await,
        Err(WebhookError::Conflict)
    ));
    assert_eq!(
        store.endpoint(ours[1].id).await.unwrap(),
        Some(ours[1].clone())
    );
    assert_eq!(store.endpoints(a, None, 10).await.unwrap(), ours);
    assert_eq!(store.endpoints(a, None, 2).await.unwrap(), ours[..2]);
    assert_eq!(
        store.endpoints(a, Some(ours[0].id), 10).await.unwrap(),
        ours[1..]
    );
    assert_eq!(
        store.endpoints(b, None, 10).await.unwrap(),
        std::slice::from_ref(&theirs)
    );

    let mut changed = ours[2].clone();
    changed.enabled = false;
    changed.disabled_reason = Some("off".to_owned());
    changed.kinds = vec![WebhookKind::AlertCleared];
    changed.mowers = Some(vec![swath_domain::MowerId::new()]);
    changed.updated_at = t(5);
    assert!(store.put_endpoint(changed.clone()).await.unwrap());
    assert_eq!(
        store.endpoint(changed.id).await.unwrap(),
        Some(changed.clone())
    );
    assert_eq!(
        store.enabled_endpoints(a).await.unwrap(),
        ours[..2],
        "a disabled endpoint is not matched"
    );
    assert!(store.delete_endpoint(ours[0].id).await.unwrap());
    assert!(!store.delete_endpoint(ours[0].id).await.unwrap());
    assert_eq!(store.endpoint(ours[0].id).await.unwrap(), None);
    assert!(!store.put_endpoint(ours[0].clone()).await.unwrap());
}

/// A delivery enqueued twice is one; one for a deleted endpoint is dropped.
pub async fn enqueue_is_idempotent(factory: &dyn WebhookFactory) {
    let (directory, store) = factory.fresh().await;
    let a = account(&*directory).await;
    let e = endpoint(a, "https://a.example/");
    store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
    let gone = WebhookId::new();
    let batch = vec![
        message(e.id, 1, 0),
        message(e.id, 2, 0),
        message(gone, 3, 0),
    ];
    assert_eq!(store.enqueue(batch.clone()).await.unwrap(), 2);
    assert_eq!(store.enqueue(batch).await.unwrap(), 0);
    let listed = store.deliveries(e.id, None, 10).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].body, r#"{"n":2}"#, "newest first");
    assert!(listed[0].seq > listed[1].seq);
    assert_eq!(listed[1].outcome, DeliveryOutcome::Pending);
    assert_eq!(listed[1].attempts, 0);
    assert_eq!(listed[1].next_attempt_at, Some(t(0)), "due at once");
    assert_eq!(
        store
            .deliveries(e.id, Some(listed[0].seq), 10)
            .await
            .unwrap(),
        listed[1..]
    );
    assert_eq!(
        store.delivery(e.id, listed[1].id).await.unwrap(),
        Some(listed[1].clone())
    );
    assert_eq!(store.delivery(gone, listed[1].id).await.unwrap(), None);
    assert_eq!(store.backlog().await.unwrap(), [(e.id, 2)]);
}

/// Each endpoint's oldest pending delivery, one per endpoint, claimed until the attempt is
/// recorded; a retry not due yet holds its endpoint back, never the others.
pub async fn deliveries_are_claimed_in_order_one_per_endpoint(factory: &dyn WebhookFactory) {
    let (directory, store) = factory.fresh().await;
    let a = account(&*directory).await;
    let (e1, e2) = (
        endpoint(a, "https://one.example/"),
        endpoint(a, "https://two.example/"),
    );
    store.create_endpoint(e1.clone(), usize::MAX).await.unwrap();
    store.create_endpoint(e2.clone(), usize::MAX).await.unwrap();
    store
        .enqueue(vec![
            message(e1.id, 1, 0),
            message(e2.id, 1, 0),
            message(e1.id, 2, 0),
            message(e2.id, 2, 0),
        ])
        .await
        .unwrap();
    let bodies = |d: &[swath_application::ports::Delivery]| {
        d.iter()
            .map(|d| (d.endpoint_id, d.body.clone()))
            .collect::<HashSet<_>>()
    };
    let first = claim(&*store, t(1), t(61), 10).await;
    assert_eq!(
        bodies(&first),
        HashSet::from([
            (e1.id, r#"{"n":1}"#.to_owned()),
            (e2.id, r#"{"n":1}"#.to_owned())
        ])
    );
    assert!(
        claim(&*store, t(2), t(62), 10).await.is_empty(),
        "both endpoints are claimed"
    );
    let one = |d: &[swath_application::ports::Delivery], e: WebhookId| {
        d.iter().find(|d| d.endpoint_id == e).unwrap().clone()
    };
    // e1's first fails and is retried at t(100); e2's first is delivered.
    store
        .record_attempt(one(&first, e1.id).id, retry_at(100))
        .await
        .unwrap();
    store
        .record_attempt(one(&first, e2.id).id, delivered())
        .await
        .unwrap();
    let second = claim(&*store, t(3), t(63), 10).await;
    assert_eq!(
        bodies(&second),
        HashSet::from([(e2.id, r#"{"n":2}"#.to_owned())]),
        "e1's second never overtakes its first"
    );
    store
        .record_attempt(second[0].id, delivered())
        .await
        .unwrap();
    let third = claim(&*store, t(100), t(160), 10).await;
    assert_eq!(
        bodies(&third),
        HashSet::from([(e1.id, r#"{"n":1}"#.to_owned())])
    );
    let retried = store.delivery(e1.id, third[0].id).await.unwrap().unwrap();
    assert_eq!(retried.attempts, 1);
    assert_eq!(retried.last_status, Some(500));
    assert_eq!(retried.last_latency_ms, Some(12));
    assert_eq!(retried.next_attempt_at, Some(t(100)));
    // A claim that ended (its holder died) is taken again.
    let again = claim(&*store, t(161), t(220), 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, third[0].id);
    assert_eq!(claim(&*store, t(162), t(220), 1).await.len(), 0);
    assert_eq!(store.backlog().await.unwrap(), [(e1.id, 2)]);
}

/// At most `limit` endpoints per claim, and concurrent claimers never share one.
pub async fn concurrent_claims_never_share_an_endpoint(factory: &dyn WebhookFactory) {
    let (directory, store) = factory.fresh().await;
    let a = account(&*directory).await;
    let mut all = Vec::new();
    for i in 0..12 {
        let e = endpoint(a, &format!("https://{i}.example/"));
        store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
        store.enqueue(vec![message(e.id, 1, 0)]).await.unwrap();
        all.push(e.id);
    }
    assert_eq!(claim(&*store, t(1), t(2), 3).await.len(), 3);
    let claimers = (0..4).map(|_| {
        let store = Arc::clone(&store);
        tokio::spawn(async move { claim(&*store, t(3), t(60), 12).await })
    });
    let mut seen = Vec::new();
    for c in claimers {
        seen.extend(c.await.unwrap().into_iter().map(|d| d.endpoint_id));
    }
    let distinct: HashSet<_> = seen.iter().copied().collect();
    assert_eq!(seen.len(), distinct.len(), "no endpoint claimed twice");
    assert_eq!(
        seen.len(),
        12,
        "the first claim ended at t(2): every endpoint again"
    );
}

/// Disabling fails the pending deliveries and stops claims; a retry makes one pending again.
pub async fn disabling_fails_pending_and_retry_revives(factory: &dyn WebhookFactory) {
    let (directory, store) = factory.fresh().await;
    let a = account(&*directory).await;
    let e = endpoint(a, "https://a.example/");
    store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
    store
        .enqueue(vec![message(e.id, 1, 0), message(e.id, 2, 0)])
        .await
        .unwrap();
    assert!(store
        .disable_endpoint(e.id, "The endpoint answered 410 Gone.", t(4))
        .await
        .unwrap());
    assert!(!store
        .disable_endpoint(WebhookId::new(), "x", t(4))
        .await
        .unwrap());
    let stored = store.endpoint(e.id).await.unwrap().unwrap();
    assert!(!stored.enabled);
    assert_eq!(
        stored.disabled_reason.as_deref(),
        Some("The endpoint answered 410 Gone.")
    );
    assert_eq!(stored.updated_at, t(4));
    let listed = store.deliveries(e.id, None, 10).await.unwrap();
    assert!(listed
        .iter()
        .all(|d| d.outcome == DeliveryOutcome::Failed && d.next_attempt_at.is_none()));
    assert!(claim(&*store, t(5), t(60), 10).await.is_empty());
    assert_eq!(store.backlog().await.unwrap(), []);

    let mut enabled = stored.clone();
    enabled.enabled = true;
    enabled.disabled_reason = None;
    store.put_endpoint(enabled).await.unwrap();
    let first = listed[1].id;
    assert!(store.retry(e.id, first, t(6)).await.unwrap());
    assert!(!store.retry(WebhookId::new(), first, t(6)).await.unwrap());
    let claimed = claim(&*store, t(6), t(60), 10).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, first);
    assert_eq!(claimed[0].outcome, DeliveryOutcome::Pending);
    assert!(store.delete_endpoint(e.id).await.unwrap());
    assert_eq!(store.deliveries(e.id, None, 10).await.unwrap(), []);
}

/// Issue 42, item 3: a claim takes at most an account's room (its share less what it has in
/// flight), every account's first endpoint before any account's second, and answers each
/// delivery with its endpoint.
pub async fn claims_leave_each_account_its_share(factory: &dyn WebhookFactory) {
    let (directory, store) = factory.fresh().await;
    assert!(!store.any_endpoint().await.unwrap());
    let (a, b) = (account(&*directory).await, account(&*directory).await);
    let mut ids = Vec::new();
    for (account, n) in [(a, 5u32), (b, 2)] {
        for i in 0..n {
            let e = endpoint(account, &format!("https://{i}.example/"));
            store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
            store.enqueue(vec![message(e.id, i, 0)]).await.unwrap();
            ids.push((account, e.id));
        }
    }
    assert!(store.any_endpoint().await.unwrap());
    let accounts = |claimed: &[swath_application::ports::Claimed]| {
        let mut n = std::collections::HashMap::new();
        for c in claimed {
            assert_eq!(c.delivery.endpoint_id, c.endpoint.id);
            *n.entry(c.endpoint.account_id).or_insert(0) += 1;
        }
        n
    };
    // A's share is 2 and B's too; of 3, each account's first goes before either's second.
    let limit = ClaimLimit {
        total: 3,
        per_account: 2,
        busy: Default::default(),
    };
    let first = store.claim_due(t(1), t(60), &limit).await.unwrap();
    let n = accounts(&first);
    assert_eq!(first.len(), 3);
    assert!(n[&a] >= 1 && n[&b] >= 1, "{n:?}");
    for c in &first {
        store
            .record_attempt(c.delivery.id, delivered())
            .await
            .unwrap();
    }
    for (_, e) in &ids {
        store.enqueue(vec![message(*e, 100, 2)]).await.unwrap();
    }
    // A has 2 in flight already: its room is 0, B's is 2.
    let limit = ClaimLimit {
        total: 10,
        per_account: 2,
        busy: [(a, 2)].into_iter().collect(),
    };
    let second = store.claim_due(t(3), t(60), &limit).await.unwrap();
    let n = accounts(&second);
    assert_eq!(n.get(&a), None, "{n:?}");
    assert_eq!(n[&b], 2);
}

/// Issue 42, item 4: settled deliveries enqueued before the limit are deleted in chunks of at
/// most `limit`, pending ones never, whatever their age; a dry run counts them all.
pub async fn settled_deliveries_expire_pending_ones_never(factory: &dyn WebhookFactory) {
    let (directory, store) = factory.fresh().await;
    let e = endpoint(account(&*directory).await, "https://old.example/");
    store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
    store
        .enqueue((0..4).map(|n| message(e.id, n, i64::from(n))).collect())
        .await
        .unwrap();
    // 0, 1 and 2 settled (delivered, delivered, failed); 3 pending and as old as them.
    for expected in 0..2 {
        let c = claim(&*store, t(10), t(20), 1).await;
        assert_eq!(c[0].body, format!(r#"{{"n":{expected}}}"#));
        store.record_attempt(c[0].id, delivered()).await.unwrap();
    }
    let c = claim(&*store, t(10), t(20), 1).await;
    let failed = Attempt {
        outcome: DeliveryOutcome::Failed,
        next_attempt_at: None,
        ..retry_at(0)
    };
    store.record_attempt(c[0].id, failed).await.unwrap();
    assert_eq!(store.expire_deliveries(t(2), 10, true).await.unwrap(), 2);
    assert_eq!(store.expire_deliveries(t(100), 10, true).await.unwrap(), 3);
    assert_eq!(store.expire_deliveries(t(100), 2, false).await.unwrap(), 2);
    assert_eq!(store.expire_deliveries(t(100), 2, false).await.unwrap(), 1);
    assert_eq!(store.expire_deliveries(t(100), 2, false).await.unwrap(), 0);
    let left = store.deliveries(e.id, None, 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].outcome, DeliveryOutcome::Pending);
    assert_eq!(left[0].body, r#"{"n":3}"#);
}
