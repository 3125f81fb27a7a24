//! `GET /v1/live/stream` end to end on the memory adapters: the real router, a real live
//! subscription on the memory bus, states published on the bus as a gateway would, and the
//! response body read as a stream of Server-Sent Events.
//!
//! A client of account A receives A's states, in order, and never B's: not B's mowers, not a
//! report of A's mower that names B's account, not an invalid report; a token limited to a site
//! receives that site's mowers only.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use bytes::Bytes;
use chrono::Utc;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use swath::wiring::{wire, Stores};
use swath_api::router;
use swath_application::ports::{hash_token, Clock, Directory, EventBus, SystemClock, TokenStore};
use swath_application::subjects;
use swath_domain::{Account, AccountId, Mower, MowerId, Principal, Scope, Site, SiteId};
use swath_memory::{MemoryBus, MemoryBusSettings, MemoryStore, MemoryStoreSettings};
use swath_tests::support::http::test_settings;
use tower::ServiceExt;
use uuid::Uuid;

const TOKEN_A: &str = "live-token-a";
const TOKEN_A_SOUTH: &str = "live-token-a-south";
const TOKEN_B: &str = "live-token-b";
const TOKEN_A_WRITE_ONLY: &str = "live-token-a-write";

struct App {
    router: Router,
    store: MemoryStore,
    bus: Arc<dyn EventBus>,
    account_a: AccountId,
    account_b: AccountId,
    /// A's North mower, A's South mower.
    a_north: MowerId,
    a_south: MowerId,
    b_mower: MowerId,
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(0x0190_a2b4_0000_7000_8000_0000_0000_0000 | n)
}

async fn app() -> App {
    let store = MemoryStore::new(MemoryStoreSettings {
        history_per_mower: 100,
    });
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new(MemoryBusSettings::default()));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (account_a, account_b) = (AccountId(id(0xa)), AccountId(id(0xb)));
    let sites = [
        (SiteId(id(0xa1)), account_a, "North"),
        (SiteId(id(0xa2)), account_a, "South"),
        (SiteId(id(0xb1)), account_b, "Main"),
    ];
    let mowers = [MowerId(id(0x1)), MowerId(id(0x2)), MowerId(id(0x3))];
    for (account, name) in [(account_a, "A"), (account_b, "B")] {
        store
            .create_account(Account {
                id: account,
                name: name.into(),
            })
            .await
            .unwrap();
    }
    for ((site, account, name), mower) in sites.iter().zip(mowers) {
        store
            .create_site(Site {
                id: *site,
                account_id: *account,
                name: (*name).into(),
                time_zone: chrono_tz::Europe::Berlin,
                display_order: 0,
            })
            .await
            .unwrap();
        store
            .create_mower(Mower {
                id: mower,
                account_id: *account,
                site_id: *site,
                name: format!("Mower of {name}"),
                model: "M".into(),
                serial: format!("S-{name}"),
                display_order: 0,
                blade_threshold_ms: i64::MAX,
            })
            .await
            .unwrap();
    }
    for (token, account, scopes, limited) in [
        (TOKEN_A, account_a, vec![Scope::Read], None),
        (
            TOKEN_A_SOUTH,
            account_a,
            vec![Scope::Read],
            Some(vec![sites[1].0]),
        ),
        (TOKEN_B, account_b, vec![Scope::Read], None),
        (TOKEN_A_WRITE_ONLY, account_a, vec![Scope::Write], None),
    ] {
        TokenStore::store_token(
            &store,
            hash_token(token),
            Principal {
                account_id: account,
                scopes,
                sites: limited,
            },
        )
        .await
        .unwrap();
    }
    let state = wire(
        Stores::memory(store.clone()),
        Arc::clone(&bus),
        clock,
        test_settings(),
    )
    .state;
    App {
        router: router(state),
        store,
        bus,
        account_a,
        account_b,
        a_north: mowers[0],
        a_south: mowers[1],
        b_mower: mowers[2],
    }
}

/// A client's open stream: the body, read frame by frame, split into events.
struct Client {
    body: Body,
    buffer: String,
}

impl Client {
    async fn connect(app: &App, token: &str) -> Client {
        let request = Request::get("/v1/live/stream")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let response = app.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        Client {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// The next event (`event` and parsed `data`), skipping comments; `None` if none comes
    /// within `wait`.
    async fn next(&mut self, wait: Duration) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a comment (keep-alive)
                }
                return Some((event, serde_json::from_str(&data).unwrap()));
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()??
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }
}

impl App {
    async fn publish(&self, mower: MowerId, account: AccountId, marker: &str) {
        let report = json!({
            "mower_id": mower,
            "account_id": account,
            "observed_at": Utc::now().to_rfc3339(),
            "activity": "mowing",
            "blade_on": true,
            "vendor_state": marker,
        });
        self.bus
            .publish(
                &subjects::telemetry(mower),
                Bytes::from(serde_json::to_vec(&report).unwrap()),
                None,
            )
            .await
            .unwrap();
    }

    async fn publish_raw(&self, mower: MowerId, payload: &'static [u8]) {
        self.bus
            .publish(
                &subjects::telemetry(mower),
                Bytes::from_static(payload),
                None,
            )
            .await
            .unwrap();
    }
}

const WAIT: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(300);

#[tokio::test]
async fn a_client_of_account_a_receives_a_states_and_never_b_states() {
    let app = app().await;
    let mut a = Client::connect(&app, TOKEN_A).await;
    let mut b = Client::connect(&app, TOKEN_B).await;

    // Interleaved: B's mower, A's mower naming B's account (spoofed), an invalid report, A's,
    // A's mower's report published on B's mower's subject (not its gateway's identity).
    app.publish(app.b_mower, app.account_b, "b-1").await;
    let on_b_subject = json!({
        "mower_id": app.a_north, "account_id": app.account_a,
        "observed_at": Utc::now().to_rfc3339(), "activity": "mowing", "vendor_state": "wrong-subject",
    });
    app.bus
        .publish(
            &subjects::telemetry(app.b_mower),
            Bytes::from(serde_json::to_vec(&on_b_subject).unwrap()),
            None,
        )
        .await
        .unwrap();
    app.publish(app.a_north, app.account_b, "spoofed").await;
    app.publish_raw(app.a_north, b"{not json").await;
    app.publish(app.a_north, app.account_a, "a-1").await;
    app.publish(app.b_mower, app.account_b, "b-2").await;
    app.publish(app.a_south, app.account_a, "a-2").await;

    let mut seen_a = Vec::new();
    while let Some((event, data)) = a.next(if seen_a.len() < 2 { WAIT } else { QUIET }).await {
        assert_eq!(event, "state");
        seen_a.push((
            data["mower_id"].as_str().unwrap().to_owned(),
            data["vendor_state"].as_str().unwrap().to_owned(),
        ));
    }
    assert_eq!(
        seen_a,
        vec![
            (app.a_north.to_string(), "a-1".to_owned()),
            (app.a_south.to_string(), "a-2".to_owned()),
        ],
        "A sees exactly its own states, in order"
    );

    let mut seen_b = Vec::new();
    while let Some((_, data)) = b.next(if seen_b.len() < 2 { WAIT } else { QUIET }).await {
        seen_b.push(data["vendor_state"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen_b, vec!["b-1", "b-2"], "B sees exactly its own states");
}

#[tokio::test]
async fn a_token_limited_to_a_site_receives_that_site_only() {
    let app = app().await;
    let mut south = Client::connect(&app, TOKEN_A_SOUTH).await;
    app.publish(app.a_north, app.account_a, "north").await;
    app.publish(app.a_south, app.account_a, "south").await;
    app.publish(app.b_mower, app.account_b, "b").await;
    let (_, data) = south.next(WAIT).await.expect("the South mower's state");
    assert_eq!(data["mower_id"], app.a_south.to_string());
    assert_eq!(data["vendor_state"], "south");
    assert_eq!(data["lawn_mower_activity"], "mowing");
    assert!(south.next(QUIET).await.is_none(), "nothing else");
}

#[tokio::test(start_paused = true)]
async fn mowers_added_after_connecting_are_streamed_after_the_refresh() {
    let app = app().await;
    let mut a = Client::connect(&app, TOKEN_A).await;
    let new_mower = MowerId(id(0x4));
    app.store
        .create_mower(Mower {
            id: new_mower,
            account_id: app.account_a,
            site_id: SiteId(id(0xa1)),
            name: "New".into(),
            model: "M".into(),
            serial: "S-new".into(),
            display_order: 0,
            blade_threshold_ms: i64::MAX,
        })
        .await
        .unwrap();
    app.publish(new_mower, app.account_a, "before").await;
    assert!(
        a.next(QUIET).await.is_none(),
        "not known at connect: not streamed yet"
    );
    tokio::time::advance(swath_api::routes::live::MOWER_REFRESH).await;
    app.publish(new_mower, app.account_a, "after").await;
    let (_, data) = a.next(WAIT).await.expect("streamed after the refresh");
    assert_eq!(data["vendor_state"], "after");
}

#[tokio::test]
async fn the_stream_needs_a_read_token() {
    let app = app().await;
    for (token, status) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some(TOKEN_A_WRITE_ONLY), StatusCode::FORBIDDEN),
        (Some("no-such-token"), StatusCode::UNAUTHORIZED),
    ] {
        let mut request = Request::get("/v1/live/stream");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let response = app
            .router
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{token:?}");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
    }
}

#[tokio::test]
async fn readyz_reports_the_store_and_the_bus() {
    let app = app().await;
    let response = app
        .router
        .clone()
        .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body, json!({"store": "up", "bus": "up", "ingest": "up"}));
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    // As `swath serve` does before anything records a metric.
    swath_api::routes::operations::metrics_handle();
    let app = app().await;
    // Something to count: one state through the ingest path (`POST /v1/states`).
    let report = json!([{
        "mower_id": app.a_north,
        "account_id": app.account_a,
        "observed_at": Utc::now().to_rfc3339(),
        "activity": "mowing",
    }]);
    let response = app
        .router
        .clone()
        .oneshot(
            Request::post("/v1/states")
                .header(
                    header::AUTHORIZATION,
                    format!("Bearer {TOKEN_A_WRITE_ONLY}"),
                )
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(report.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let response = app
        .router
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(body.to_vec()).unwrap();
    // The text format: `# HELP`/`# TYPE` comments, and `name{labels} value` samples.
    for line in text.lines().filter(|l| !l.is_empty()) {
        if line.starts_with('#') {
            assert!(
                line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                "{line}"
            );
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample: series and value");
        // Swath's own, and the process's under the name client libraries give it.
        assert!(
            (series.starts_with("swath_") || series.starts_with("process_"))
                && value.parse::<f64>().is_ok(),
            "{line}"
        );
    }
    assert!(
        text.contains("# TYPE swath_states_stored_total counter"),
        "{text}"
    );
    // Other tests of this binary may have counted states too (the recorder is global).
    let stored: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("swath_states_stored_total "))
        .expect("the stored states are counted")
        .parse()
        .unwrap();
    assert!(stored >= 1.0, "{text}");
}

/// A bus that does not answer its ping (as NATS during a restart).
struct DownBus;

#[async_trait::async_trait]
impl EventBus for DownBus {
    async fn publish(
        &self,
        _: &str,
        _: Bytes,
        _: Option<String>,
    ) -> Result<(), swath_application::ports::BusError> {
        Err(swath_application::ports::BusError::Unavailable(
            "down".into(),
        ))
    }
    async fn subscribe_batch(
        &self,
        _: &str,
        _: &str,
        _: swath_application::ports::BatchSettings,
        _: Arc<dyn swath_application::ports::BatchHandler>,
    ) -> Result<swath_application::ports::Subscription, swath_application::ports::BusError> {
        Err(swath_application::ports::BusError::Unavailable(
            "down".into(),
        ))
    }
    async fn subscribe(
        &self,
        _: &str,
        _: swath_application::ports::LiveOptions,
    ) -> Result<swath_application::ports::LiveSubscription, swath_application::ports::BusError>
    {
        Err(swath_application::ports::BusError::Unavailable(
            "down".into(),
        ))
    }
    async fn ping(&self) -> Result<(), swath_application::ports::BusError> {
        Err(swath_application::ports::BusError::Unavailable(
            "connection refused".into(),
        ))
    }
}

#[tokio::test]
async fn readyz_names_what_is_down() {
    let store = MemoryStore::new(MemoryStoreSettings {
        history_per_mower: 10,
    });
    let bus: Arc<dyn EventBus> = Arc::new(DownBus);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let state = wire(
        Stores::memory(store),
        Arc::clone(&bus),
        clock,
        test_settings(),
    )
    .state;
    let response = router(state)
        .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "application/problem+json"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["type"], "https://swath.dev/problems/unavailable");
    assert_eq!(body["status"], 503);
    assert_eq!(body["detail"], "Not ready: the event bus is down.");
    assert_eq!(
        body["checks"],
        json!({"store": "up", "bus": "down", "ingest": "up"})
    );
    // The cause stays in the logs: nothing of it reaches the client.
    assert!(!body.to_string().contains("connection refused"));
}

const TOKEN_A_ADMIN: &str = "live-token-a-admin";

impl App {
    /// Makes a read token of account A through `POST /v1/tokens`: (id, token).
    async fn new_read_token(&self) -> (String, String) {
        TokenStore::store_token(
            &self.store,
            hash_token(TOKEN_A_ADMIN),
            Principal {
                account_id: self.account_a,
                scopes: vec![Scope::Read, Scope::Write, Scope::Admin],
                sites: None,
            },
        )
        .await
        .ok();
        let request = Request::post("/v1/tokens")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN_A_ADMIN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"name": "wall", "scopes": ["read"]}"#))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let body: Value =
            serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes())
                .unwrap();
        (
            body["id"].as_str().unwrap().to_owned(),
            body["token"].as_str().unwrap().to_owned(),
        )
    }

    async fn revoke(&self, id: &str) {
        let request = Request::delete(format!("/v1/tokens/{id}"))
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN_A_ADMIN}"))
            .body(Body::empty())
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
    }
}

#[tokio::test]
async fn revoking_the_token_ends_its_open_stream_at_once() {
    let app = app().await;
    let (id, token) = app.new_read_token().await;
    let mut client = Client::connect(&app, &token).await;
    let mut other = Client::connect(&app, TOKEN_A).await;
    app.publish(app.a_north, app.account_a, "before").await;
    let (event, data) = client
        .next(WAIT)
        .await
        .expect("a state before the revocation");
    assert_eq!(
        (event.as_str(), data["vendor_state"].as_str()),
        ("state", Some("before"))
    );
    assert!(other.next(WAIT).await.is_some());

    app.revoke(&id).await;
    let (event, data) = client.next(WAIT).await.expect("a last event");
    assert_eq!(event, swath_api::routes::live::END_EVENT);
    assert_eq!(data, json!({"reason": "token_revoked"}));
    app.publish(app.a_north, app.account_a, "after").await;
    assert!(client.next(QUIET).await.is_none(), "the stream is over");
    // Another token's stream goes on.
    let (_, data) = other.next(WAIT).await.expect("the other stream goes on");
    assert_eq!(data["vendor_state"], "after");
}

#[tokio::test(start_paused = true)]
async fn a_token_revoked_elsewhere_ends_its_stream_at_the_next_check() {
    let app = app().await;
    let (id, token) = app.new_read_token().await;
    let mut client = Client::connect(&app, &token).await;
    // Revoked in the store only, as another replica would: this process is not told.
    let id = swath_application::ports::TokenId(id.parse().unwrap());
    assert!(TokenStore::revoke_token(&app.store, id).await.unwrap());
    app.publish(app.a_north, app.account_a, "still").await;
    let (event, _) = client.next(WAIT).await.expect("streamed until the check");
    assert_eq!(event, "state");
    tokio::time::advance(swath_api::routes::live::PRINCIPAL_RECHECK).await;
    let (event, data) = client.next(WAIT).await.expect("a last event");
    assert_eq!(event, swath_api::routes::live::END_EVENT);
    assert_eq!(data["reason"], "token_revoked");
    assert!(client.next(QUIET).await.is_none(), "the stream is over");
}
