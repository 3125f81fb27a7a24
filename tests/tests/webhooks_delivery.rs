//! Webhook delivery end to end in process: the dispatcher over the memory store, the real HTTP
//! sender (private addresses allowed, as `SWATH_WEBHOOK_ALLOW_PRIVATE=true` allows them), and a
//! loopback receiver that verifies every delivery with the Standard Webhooks library and answers
//! as each test scripts it.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use swath_application::ports::{
    DeliveryOutcome, Directory, EventBus, LiveOptions, SystemClock, WebhookStore,
};
use swath_application::webhooks::delivery::{DeliverySettings, Dispatcher};
use swath_application::webhooks::wake::{Wake, WakingStore};
use swath_memory::{MemoryBus, MemoryStore, MemoryWebhooks};
use swath_tests::support::seed_account_with_mowers;
use swath_tests::webhook_contract::{endpoint, message};
use swath_webhook_http::{HttpSender, SenderSettings};
use tokio::sync::watch;

/// How the receiver answers one endpoint's `n`th request (from 0).
type Script = Arc<dyn Fn(usize) -> (StatusCode, Duration) + Send + Sync>;

/// One request as received: its `webhook-id`, its body, and whether it was answered 2xx.
type Received = (String, String, bool);

#[derive(Clone, Default)]
struct Receiver {
    scripts: Arc<Mutex<HashMap<String, Script>>>,
    /// Per endpoint path: every request's `webhook-id`, body and whether it was answered 2xx.
    seen: Arc<Mutex<HashMap<String, Vec<Received>>>>,
    /// The secret of each path, to verify with.
    secrets: Arc<Mutex<HashMap<String, String>>>,
}

async fn receive(
    State(r): State<Receiver>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    let secret = r.secrets.lock().unwrap()[&name].clone();
    let hook = standardwebhooks::Webhook::new(&secret).unwrap();
    hook.verify(body.as_bytes(), &headers)
        .expect("every delivery verifies with the Standard Webhooks library");
    let id = headers["webhook-id"].to_str().unwrap().to_owned();
    let n = r.seen.lock().unwrap().get(&name).map_or(0, Vec::len);
    let script = r.scripts.lock().unwrap()[&name].clone();
    let (status, delay) = script(n);
    tokio::time::sleep(delay).await;
    r.seen
        .lock()
        .unwrap()
        .entry(name)
        .or_default()
        .push((id, body, status.is_success()));
    status
}

struct Setup {
    store: Arc<dyn WebhookStore>,
    bus: Arc<MemoryBus>,
    receiver: Receiver,
    base: String,
    account: swath_domain::AccountId,
    stop: watch::Sender<bool>,
}

async fn setup(settings: DeliverySettings, timeout: Duration) -> Setup {
    let receiver = Receiver::default();
    let app = Router::new()
        .route("/{name}", post(receive))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let directory = MemoryStore::default();
    let (account, _) = seed_account_with_mowers(&directory as &dyn Directory, 1, 1000).await;
    // As `swath serve` wires it: the writes wake the dispatcher.
    let wake = Wake::default();
    let store = WakingStore::wrap(Arc::new(MemoryWebhooks::default()), wake.clone());
    let bus = Arc::new(MemoryBus::default());
    let sender = HttpSender::new(SenderSettings {
        connect_timeout: Duration::from_secs(1),
        total_timeout: timeout,
        allow_private: true,
    })
    .unwrap();
    let dispatcher = Arc::new(
        Dispatcher::new(
            store.clone(),
            Arc::new(sender),
            bus.clone(),
            Arc::new(SystemClock),
            settings,
        )
        .waking_on(wake),
    );
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(dispatcher.run(stopped));
    Setup {
        store,
        bus,
        receiver,
        base,
        account,
        stop,
    }
}

impl Setup {
    /// An endpoint at `/<name>` answered by `script`, with `count` deliveries enqueued.
    async fn endpoint(
        &self,
        name: &str,
        count: u32,
        script: impl Fn(usize) -> (StatusCode, Duration) + Send + Sync + 'static,
    ) -> swath_domain::webhook::Endpoint {
        let e = endpoint(self.account, &format!("{}/{name}", self.base));
        self.receiver
            .secrets
            .lock()
            .unwrap()
            .insert(name.to_owned(), e.secrets[0].value.clone());
        self.receiver
            .scripts
            .lock()
            .unwrap()
            .insert(name.to_owned(), Arc::new(script));
        self.store
            .create_endpoint(e.clone(), usize::MAX)
            .await
            .unwrap();
        let now = chrono::Utc::now();
        let batch = (0..count)
            .map(|n| {
                let mut m = message(e.id, n, 0);
                m.created_at = now;
                m
            })
            .collect();
        self.store.enqueue(batch).await.unwrap();
        e
    }

    fn seen(&self, name: &str) -> Vec<Received> {
        self.receiver
            .seen
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until `done` holds, for at most `within`.
    async fn until(&self, within: Duration, done: impl Fn(&Self) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(start.elapsed() < within, "not done within {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn quick() -> DeliverySettings {
    DeliverySettings {
        horizon: Duration::from_secs(60),
        first_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        concurrency: 4,
        per_account: 4,
        claim: Duration::from_secs(30),
        poll: Duration::from_millis(10),
    }
}

fn bodies(n: u32) -> Vec<String> {
    (0..n).map(|n| format!(r#"{{"n":{n}}}"#)).collect()
}

/// An endpoint that answers 500 three times then 200 gets every delivery, in order, each
/// delivered once, with the same `webhook-id` on every attempt of a delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_then_success_deliver_everything_in_order() {
    let s = setup(quick(), Duration::from_secs(5)).await;
    let e = s
        .endpoint("flaky", 5, |n| {
            let status = if n < 3 {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::NO_CONTENT
            };
            (status, Duration::ZERO)
        })
        .await;
    s.until(Duration::from_secs(20), |s| {
        s.seen("flaky").iter().filter(|r| r.2).count() == 5
    })
    .await;
    let seen = s.seen("flaky");
    let ok: Vec<String> = seen.iter().filter(|r| r.2).map(|r| r.1.clone()).collect();
    assert_eq!(ok, bodies(5), "in the order enqueued");
    let first_ids: Vec<&String> = seen[..4].iter().map(|r| &r.0).collect();
    assert!(
        first_ids.iter().all(|id| *id == first_ids[0]),
        "the retries of the first delivery carry its id"
    );
    let listed = s.store.deliveries(e.id, None, 10).await.unwrap();
    assert!(listed
        .iter()
        .all(|d| d.outcome == DeliveryOutcome::Delivered));
    assert_eq!(listed.last().unwrap().attempts, 4);
    assert_eq!(listed.last().unwrap().last_status, Some(204));
    let _ = s.stop.send(true);
}

/// An endpoint that always fails is disabled once the horizon has passed, says why, its pending
/// deliveries fail, and the disabling is told on the bus.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_failing_is_disabled_after_the_horizon() {
    let settings = DeliverySettings {
        horizon: Duration::from_millis(600),
        ..quick()
    };
    let s = setup(settings, Duration::from_secs(5)).await;
    let mut told = s
        .bus
        .subscribe("notifications.webhook.*.disabled", LiveOptions::default())
        .await
        .unwrap();
    let e = s
        .endpoint("down", 3, |_| (StatusCode::BAD_GATEWAY, Duration::ZERO))
        .await;
    let store = s.store.clone();
    let id = e.id;
    let start = Instant::now();
    loop {
        let now = store.endpoint(id).await.unwrap().unwrap();
        if !now.enabled {
            assert!(
                now.disabled_reason
                    .as_deref()
                    .unwrap()
                    .contains("retry horizon"),
                "{:?}",
                now.disabled_reason
            );
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "retried until the horizon"
    );
    let listed = store.deliveries(id, None, 10).await.unwrap();
    assert!(listed.iter().all(|d| d.outcome == DeliveryOutcome::Failed));
    assert!(listed.last().unwrap().attempts > 1);
    assert!(
        s.seen("down").iter().all(|r| r.1 == r#"{"n":0}"#),
        "never past the first"
    );
    let message = tokio::time::timeout(Duration::from_secs(5), told.messages.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        message.subject,
        format!("notifications.webhook.{id}.disabled")
    );
    let _ = s.stop.send(true);
}

/// `410 Gone` disables the endpoint at the first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_disables_at_once() {
    let s = setup(quick(), Duration::from_secs(5)).await;
    let e = s
        .endpoint("gone", 2, |_| (StatusCode::GONE, Duration::ZERO))
        .await;
    s.until(Duration::from_secs(10), |s| !s.seen("gone").is_empty())
        .await;
    let start = Instant::now();
    let endpoint = loop {
        let now = s.store.endpoint(e.id).await.unwrap().unwrap();
        if !now.enabled {
            break now;
        }
        assert!(start.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        endpoint.disabled_reason.as_deref(),
        Some("The endpoint answered 410 Gone.")
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.seen("gone").len(), 1, "one attempt, nothing after");
    let _ = s.stop.send(true);
}

/// An endpoint slower than the time-out holds its own deliveries back, never another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_endpoint_does_not_delay_another() {
    let s = setup(quick(), Duration::from_millis(1500)).await;
    s.endpoint("slow", 3, |_| (StatusCode::OK, Duration::from_secs(30)))
        .await;
    // Let the slow endpoint's first attempt start.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    s.endpoint("fast", 5, |_| (StatusCode::OK, Duration::ZERO))
        .await;
    s.until(Duration::from_secs(10), |s| {
        s.seen("fast").iter().filter(|r| r.2).count() == 5
    })
    .await;
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "the fast endpoint got everything before the slow one's first time-out"
    );
    let fast: Vec<String> = s.seen("fast").into_iter().map(|r| r.1).collect();
    assert_eq!(fast, bodies(5));
    let _ = s.stop.send(true);
}

/// A memory bus with the webhooks' enqueuer subscribed, as `swath serve` subscribes it
/// (exclusive, decision 153), over `store` and `directory`.
async fn enqueuing_bus(
    store: Arc<MemoryWebhooks>,
    directory: MemoryStore,
) -> (Arc<MemoryBus>, swath_application::ports::Subscription) {
    use swath_application::ports::BatchSettings;
    use swath_application::webhooks::delivery::{Enqueuer, WEBHOOK_CONSUMER, WEBHOOK_SUBJECTS};
    let bus = Arc::new(MemoryBus::default());
    let enqueuer = Enqueuer::new(store, Arc::new(directory), Arc::new(SystemClock));
    bus.subscribe_batch(
        WEBHOOK_SUBJECTS,
        WEBHOOK_CONSUMER,
        BatchSettings {
            max_wait: Duration::from_millis(10),
            exclusive: true,
            ..BatchSettings::default()
        },
        Arc::new(enqueuer),
    )
    .await
    .map(|subscription| (bus.clone(), subscription))
    .unwrap()
}

/// The notifications consumer on the memory bus: an event and an alert clear the watcher
/// publishes become one delivery per matching endpoint (kind, mower and site filters applied), in
/// the order published, and a message consumed again makes no second delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_notifications_become_deliveries_of_matching_endpoints() {
    use swath_application::ports::Directory;
    use swath_application::subjects;
    use swath_domain::watch::{AlertKind, ClearCause, ClearedAlert, Event, EventDetail};
    use swath_domain::webhook::WebhookKind;

    let directory = MemoryStore::default();
    let (account, mowers) = seed_account_with_mowers(&directory as &dyn Directory, 2, 1000).await;
    let store = Arc::new(MemoryWebhooks::default());
    let everything = {
        let mut e = endpoint(account, "https://all.example/");
        e.kinds = WebhookKind::all();
        e
    };
    let only_second_mower = {
        let mut e = endpoint(account, "https://second.example/");
        e.mowers = Some(vec![mowers[1]]);
        e
    };
    let other_site = {
        let mut e = endpoint(account, "https://elsewhere.example/");
        e.sites = Some(vec![swath_domain::SiteId::new()]);
        e
    };
    for e in [&everything, &only_second_mower, &other_site] {
        store.create_endpoint(e.clone(), usize::MAX).await.unwrap();
    }
    let (bus, subscription) = enqueuing_bus(store.clone(), directory).await;
    let at = chrono::Utc::now();
    let raised = Event::new(
        mowers[0],
        account,
        at,
        EventDetail::ErrorRaised {
            error_code: Some("E1".into()),
        },
    );
    let second = Event::new(
        mowers[1],
        account,
        at,
        EventDetail::ErrorRaised { error_code: None },
    );
    let cleared = ClearedAlert {
        mower_id: mowers[0],
        account_id: account,
        kind: AlertKind::BatteryLow,
        cleared_at: at,
        cause: ClearCause::BatteryRecovered,
    };
    for _ in 0..2 {
        for event in [&raised, &second] {
            bus.publish(
                &subjects::notification(event.mower_id, event.kind().as_str()),
                serde_json::to_vec(event).unwrap().into(),
                None,
            )
            .await
            .unwrap();
        }
        bus.publish(
            &subjects::alert_cleared(mowers[0]),
            serde_json::to_vec(&cleared).unwrap().into(),
            None,
        )
        .await
        .unwrap();
    }
    let start = Instant::now();
    while store
        .deliveries(everything.id, None, 10)
        .await
        .unwrap()
        .len()
        < 3
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never enqueued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    subscription.unsubscribe().await;
    let types = |list: Vec<swath_application::ports::Delivery>| {
        list.into_iter()
            .rev()
            .map(|d| {
                let body: serde_json::Value = serde_json::from_str(&d.body).unwrap();
                (
                    d.event_type,
                    body["data"]["mower_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    let (m0, m1) = (mowers[0].to_string(), mowers[1].to_string());
    assert_eq!(
        types(store.deliveries(everything.id, None, 10).await.unwrap()),
        [
            ("error_raised".to_owned(), m0.clone()),
            ("error_raised".to_owned(), m1.clone()),
            ("alert_cleared".to_owned(), m0),
        ],
        "each message once, in the order published"
    );
    assert_eq!(
        types(
            store
                .deliveries(only_second_mower.id, None, 10)
                .await
                .unwrap()
        ),
        [("error_raised".to_owned(), m1)]
    );
    assert!(store
        .deliveries(other_site.id, None, 10)
        .await
        .unwrap()
        .is_empty());
}

/// An endpoint that asks for `session_ended` only receives that event, with the session's
/// summary under its wire names in the payload, and nothing of another kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_asking_for_session_ended_receives_it() {
    use swath_application::ports::Directory;
    use swath_application::subjects;
    use swath_domain::sessions::{session_id, EndReason};
    use swath_domain::watch::{Event, EventDetail, EventKind};
    use swath_domain::webhook::WebhookKind;

    let directory = MemoryStore::default();
    let (account, mowers) = seed_account_with_mowers(&directory as &dyn Directory, 1, 1000).await;
    let store = Arc::new(MemoryWebhooks::default());
    let sessions = {
        let mut e = endpoint(account, "https://sessions.example/");
        e.kinds = vec![WebhookKind::Event(EventKind::SessionEnded)];
        e
    };
    store
        .create_endpoint(sessions.clone(), usize::MAX)
        .await
        .unwrap();
    let (bus, subscription) = enqueuing_bus(store.clone(), directory).await;
    let ended_at = chrono::Utc::now();
    let started_at = ended_at - chrono::Duration::hours(2);
    let ended = Event::new(
        mowers[0],
        account,
        ended_at,
        EventDetail::SessionEnded {
            session_id: session_id(mowers[0], started_at),
            started_at,
            ended_at,
            end_reason: EndReason::Docked,
            error_code: None,
            breaks: 1,
            mowing_seconds: 6_000.5,
            blade_seconds: 5_990.0,
            distance_m: 1_234.567,
        },
    );
    let other = Event::new(
        mowers[0],
        account,
        ended_at,
        EventDetail::ErrorRaised { error_code: None },
    );
    for event in [&other, &ended] {
        bus.publish(
            &subjects::notification(event.mower_id, event.kind().as_str()),
            serde_json::to_vec(event).unwrap().into(),
            None,
        )
        .await
        .unwrap();
    }
    let start = Instant::now();
    while store
        .deliveries(sessions.id, None, 10)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never enqueued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    subscription.unsubscribe().await;
    let deliveries = store.deliveries(sessions.id, None, 10).await.unwrap();
    assert_eq!(deliveries.len(), 1, "only the session_ended event");
    assert_eq!(deliveries[0].event_type, "session_ended");
    let body: serde_json::Value = serde_json::from_str(&deliveries[0].body).unwrap();
    let data = &body["data"];
    assert_eq!(data["kind"], "session_ended");
    assert_eq!(
        data["session_id"],
        session_id(mowers[0], started_at).to_string()
    );
    assert_eq!(data["end_reason"], "docked");
    assert_eq!(data["error_code"], serde_json::Value::Null);
    assert_eq!(data["breaks"], 1);
    assert_eq!(data["mowing_seconds"], 6_000.5);
    assert_eq!(data["blade_seconds"], 5_990.0);
    assert_eq!(data["distance_m"], 1_234.567);
    for field in ["started_at", "ended_at"] {
        assert!(data[field].is_string(), "{field}: {data}");
    }
}
