//! The dispatcher's speed, fairness and idleness on tokio's paused time (issue 42, items 3 and
//! 12), with a sender that answers as each endpoint's host says and counts what it is asked, and
//! retention of settled deliveries through the retention use case.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use swath_application::ports::{
    Attempt, ClaimLimit, Claimed, Delivery, DeliveryOutcome, ManualClock, NewDelivery, SendResult,
    SystemClock, WebhookError, WebhookSender, WebhookStore,
};
use swath_application::retention::{Retention, RetentionOutcome, RetentionPolicy, RunOptions};
use swath_application::webhooks::delivery::{DeliverySettings, Dispatcher};
use swath_application::webhooks::wake::{Wake, WakingStore};
use swath_domain::webhook::{Endpoint, WebhookId};
use swath_domain::AccountId;
use swath_memory::{MemoryBus, MemoryStore, MemoryWebhooks};
use swath_tests::webhook_contract::{endpoint, message};
use tokio::sync::watch;
use uuid::Uuid;

/// Answers `https://slow…` never, everything else at once with 204; keeps every body asked for,
/// per URL, in order.
#[derive(Default)]
struct Sender {
    sent: Mutex<Vec<(String, String)>>,
}

impl Sender {
    fn bodies(&self, url: &str) -> Vec<String> {
        let sent = self.sent.lock().unwrap();
        sent.iter()
            .filter(|(u, _)| u == url)
            .map(|(_, b)| b.clone())
            .collect()
    }
}

#[async_trait]
impl WebhookSender for Sender {
    async fn send(&self, url: &str, _: Vec<(&'static str, String)>, body: String) -> SendResult {
        self.sent.lock().unwrap().push((url.to_owned(), body));
        if url.starts_with("https://slow") {
            std::future::pending::<()>().await;
        }
        SendResult::Answered(204)
    }
}

/// The memory webhook store, counting the claims asked of it.
struct Counting {
    inner: MemoryWebhooks,
    claims: AtomicUsize,
}

#[async_trait]
impl WebhookStore for Counting {
    async fn create_endpoint(&self, e: Endpoint, at_most: usize) -> Result<(), WebhookError> {
        self.inner.create_endpoint(e, at_most).await
    }

    async fn endpoint(&self, id: WebhookId) -> Result<Option<Endpoint>, WebhookError> {
        self.inner.endpoint(id).await
    }

    async fn endpoints(
        &self,
        a: AccountId,
        after: Option<WebhookId>,
        limit: usize,
    ) -> Result<Vec<Endpoint>, WebhookError> {
        self.inner.endpoints(a, after, limit).await
    }

    async fn enabled_endpoints(&self, a: AccountId) -> Result<Vec<Endpoint>, WebhookError> {
        self.inner.enabled_endpoints(a).await
    }

    async fn put_endpoint(&self, e: Endpoint) -> Result<bool, WebhookError> {
        self.inner.put_endpoint(e).await
    }

    async fn delete_endpoint(&self, id: WebhookId) -> Result<bool, WebhookError> {
        self.inner.delete_endpoint(id).await
    }

    async fn enqueue(&self, d: Vec<NewDelivery>) -> Result<usize, WebhookError> {
        self.inner.enqueue(d).await
    }

    async fn deliveries(
        &self,
        e: WebhookId,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhookError> {
        self.inner.deliveries(e, before, limit).await
    }

    async fn delivery(&self, e: WebhookId, id: Uuid) -> Result<Option<Delivery>, WebhookError> {
        self.inner.delivery(e, id).await
    }

    async fn record_attempt(&self, id: Uuid, attempt: Attempt) -> Result<(), WebhookError> {
        self.inner.record_attempt(id, attempt).await
    }

    async fn disable_endpoint(
        &self,
        id: WebhookId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError> {
        self.inner.disable_endpoint(id, reason, at).await
    }

    async fn retry(&self, e: WebhookId, id: Uuid, at: DateTime<Utc>) -> Result<bool, WebhookError> {
        self.inner.retry(e, id, at).await
    }

    async fn backlog(&self) -> Result<Vec<(WebhookId, u64)>, WebhookError> {
        self.inner.backlog().await
    }

    async fn any_endpoint(&self) -> Result<bool, WebhookError> {
        self.inner.any_endpoint().await
    }

    async fn expire_deliveries(
        &self,
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, WebhookError> {
        self.inner.expire_deliveries(before, limit, dry_run).await
    }

    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: &ClaimLimit,
    ) -> Result<Vec<Claimed>, WebhookError> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        self.inner.claim_due(now, until, limit).await
    }
}

struct Setup {
    counting: Arc<Counting>,
    /// The store as this process's writers see it (waking the dispatcher).
    store: Arc<dyn WebhookStore>,
    sender: Arc<Sender>,
    _stop: watch::Sender<bool>,
}

/// A dispatcher with the default settings but `concurrency` and `per_account`, started on an
/// empty store.
async fn start(concurrency: usize, per_account: usize) -> Setup {
    let counting = Arc::new(Counting {
        inner: MemoryWebhooks::default(),
        claims: AtomicUsize::new(0),
    });
    let wake = Wake::default();
    let store = WakingStore::wrap(counting.clone(), wake.clone());
    let sender = Arc::new(Sender::default());
    let dispatcher = Dispatcher::new(
        counting.clone(),
        sender.clone(),
        Arc::new(MemoryBus::default()),
        Arc::new(SystemClock),
        DeliverySettings {
            concurrency,
            per_account,
            ..DeliverySettings::default()
        },
    )
    .waking_on(wake);
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(Arc::new(dispatcher).run(stopped));
    Setup {
        counting,
        store,
        sender,
        _stop: stop,
    }
}

impl Setup {
    /// An endpoint of `account` at `url` with id `id`, and `count` deliveries enqueued now.
    async fn endpoint(&self, account: AccountId, id: u128, url: &str, count: u32) -> Endpoint {
        let mut e = endpoint(account, url);
        e.id = WebhookId(Uuid::from_u128(id));
        self.store
            .create_endpoint(e.clone(), usize::MAX)
            .await
            .unwrap();
        let now = Utc::now();
        let batch = (0..count)
            .map(|n| NewDelivery {
                created_at: now,
                ..message(e.id, n, 0)
            })
            .collect();
        self.store.enqueue(batch).await.unwrap();
        e
    }
}

fn bodies(n: u32) -> Vec<String> {
    (0..n).map(|n| format!(r#"{{"n":{n}}}"#)).collect()
}

/// Waits on paused time until `done`, for at most `within` of it.
async fn within(within: Duration, done: impl Fn() -> bool) -> bool {
    tokio::time::timeout(within, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .is_ok()
}

/// Item 12: an endpoint's next delivery is sent as soon as the previous one is settled, not at
/// the next poll of the store: 200 deliveries, in order, within 100 ms of paused time (the poll
/// alone would take 50 s). The enqueue, not a poll, starts them.
#[tokio::test(start_paused = true)]
async fn an_endpoint_gets_its_deliveries_back_to_back() {
    let s = start(16, 4).await;
    let url = "https://fast.example/";
    s.endpoint(AccountId(Uuid::new_v4()), 1, url, 200).await;
    let sender = s.sender.clone();
    let all = within(Duration::from_millis(100), || {
        sender.bodies(url).len() == 200
    })
    .await;
    assert!(all, "{} of 200 sent", s.sender.bodies(url).len());
    assert_eq!(s.sender.bodies(url), bodies(200), "in the order enqueued");
}

/// Item 12: a replica with no endpoint asks the store nothing, however long it runs; the first
/// endpoint created through it wakes it.
#[tokio::test(start_paused = true)]
async fn no_endpoint_no_claims() {
    let s = start(16, 4).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(s.counting.claims.load(Ordering::SeqCst), 0);
    let url = "https://fast.example/";
    s.endpoint(AccountId(Uuid::new_v4()), 1, url, 3).await;
    let sender = s.sender.clone();
    assert!(within(Duration::from_millis(10), || sender.bodies(url).len() == 3).await);
}

/// Item 3: one account's 20 endpoints that never answer hold at most its share of the slots;
/// another account's delivery is attempted at once, without any of theirs settling. Account A's
/// endpoints have the lowest ids, so a claim by id alone would give them every slot.
#[tokio::test(start_paused = true)]
async fn a_tenants_slow_endpoints_leave_slots_to_another() {
    let s = start(16, 4).await;
    let (a, b) = (AccountId(Uuid::new_v4()), AccountId(Uuid::new_v4()));
    for i in 0..20 {
        s.endpoint(a, 1 + i, &format!("https://slow-{i}.example/"), 2)
            .await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let url = "https://b.example/";
    s.endpoint(b, 1_000, url, 1).await;
    let sender = s.sender.clone();
    let attempted = within(Duration::from_millis(10), || sender.bodies(url).len() == 1).await;
    let slow = s
        .sender
        .sent
        .lock()
        .unwrap()
        .iter()
        .filter(|(u, _)| u.starts_with("https://slow"))
        .count();
    assert!(
        attempted,
        "B waited behind A ({slow} of A's attempts in flight)"
    );
    assert_eq!(slow, 4, "A holds its share of the slots, no more");
}

/// Item 4: retention deletes settled deliveries enqueued before the limit, and keeps pending
/// ones whatever their age.
#[tokio::test]
async fn retention_deletes_old_settled_deliveries_only() {
    let store = Arc::new(MemoryWebhooks::default());
    let now = Utc::now();
    let days = |d: i64| now - chrono::Duration::days(d);
    let e = endpoint(AccountId(Uuid::new_v4()), "https://x.example/");
    store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
    let at = |n: u32, d: i64| NewDelivery {
        created_at: days(d),
        ..message(e.id, n, 0)
    };
    // Old and delivered, old and pending, recent and delivered.
    store
        .enqueue(vec![at(0, 40), at(1, 40), at(2, 1)])
        .await
        .unwrap();
    let settle = |n: u32| {
        let store = store.clone();
        async move {
            let id = message(e.id, n, 0).id;
            let attempt = Attempt {
                status: Some(204),
                latency_ms: 1,
                outcome: DeliveryOutcome::Delivered,
                next_attempt_at: None,
            };
            store.record_attempt(id, attempt).await.unwrap();
        }
    };
    settle(0).await;
    settle(2).await;
    let retention = Retention::new(
        Arc::new(MemoryStore::default()),
        Arc::new(ManualClock::new(now)),
        RetentionPolicy::default(),
    )
    .with_webhooks(store.clone());
    let dry = retention
        .run(
            RunOptions {
                dry_run: true,
                stop: None,
            },
            &mut |_| {},
        )
        .await
        .unwrap();
    let RetentionOutcome::Completed(dry) = dry else {
        panic!("{dry:?}")
    };
    assert_eq!(dry.deliveries_expired, 1);
    assert_eq!(store.deliveries(e.id, None, 10).await.unwrap().len(), 3);
    let done = retention.run(RunOptions::default(), &mut |_| {}).await;
    let RetentionOutcome::Completed(done) = done.unwrap() else {
        panic!()
    };
    assert_eq!(done.deliveries_expired, 1);
    let left: Vec<String> = store
        .deliveries(e.id, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.body)
        .collect();
    assert_eq!(left, vec![r#"{"n":2}"#, r#"{"n":1}"#]);
}

/// Item 4: the memory store keeps at most its cap of settled deliveries per endpoint, the
/// newest, and every pending one.
#[tokio::test]
async fn the_memory_store_keeps_its_cap_of_settled_deliveries() {
    let store = MemoryWebhooks::with_settled_cap(3);
    let e = endpoint(AccountId(Uuid::new_v4()), "https://x.example/");
    store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
    store
        .enqueue((0..8).map(|n| message(e.id, n, 0)).collect())
        .await
        .unwrap();
    let delivered = Attempt {
        status: Some(204),
        latency_ms: 1,
        outcome: DeliveryOutcome::Delivered,
        next_attempt_at: None,
    };
    for n in 0..5 {
        let id = message(e.id, n, 0).id;
        store.record_attempt(id, delivered.clone()).await.unwrap();
    }
    let left: Vec<String> = store
        .deliveries(e.id, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.body)
        .collect();
    let expected: Vec<String> = (2..8).rev().map(|n| format!(r#"{{"n":{n}}}"#)).collect();
    assert_eq!(left, expected, "the 3 newest settled and the 3 pending");
}
