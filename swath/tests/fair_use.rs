//! No single client can hold the service (issue 35, decision 140): live streams per token and in
//! all, answered `429` past them; request bodies that stop coming are cut, and so are those that
//! trickle past their total deadline (issue 42, decision 181); an import whose token is revoked
//! stops (decision 141).

mod helpers;

use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode};
use bytes::Bytes;
use chrono::Duration;
use helpers::{
    t0, TestApp, TestResponse, TOKEN_A, TOKEN_A_ADMIN, TOKEN_A_SOUTH, TOKEN_A_WRITE_ONLY, TOKEN_B,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use swath_api::server::HttpLimits;
use tower::ServiceExt;

const NDJSON: &str = "application/x-ndjson";

/// Opens `GET /v1/live/stream` and keeps its answer (and so the stream) open.
async fn open_stream(app: &TestApp, token: &str) -> Response<Body> {
    let request = Request::get("/v1/live/stream")
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    app.router.clone().oneshot(request).await.unwrap()
}

/// Reads a refused stream's answer: a `429` problem with a `Retry-After`.
async fn assert_refused(response: Response<Body>) -> String {
    use http_body_util::BodyExt;
    let status = response.status();
    // Before the body is read: an accepted stream's never ends.
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let answer = TestResponse {
        status,
        headers,
        body,
    };
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.problem_type(), "too-many-requests");
    let retry: u64 = answer
        .header("retry-after")
        .expect("a Retry-After")
        .parse()
        .expect("seconds");
    assert!(retry > 0);
    answer.problem().detail
}

#[tokio::test]
async fn a_token_holds_at_most_its_streams_and_others_are_not_refused() {
    let app = TestApp::spawn().await;
    let mut open = Vec::new();
    for _ in 0..16 {
        let stream = open_stream(&app, TOKEN_A).await;
        assert_eq!(stream.status(), StatusCode::OK);
        open.push(stream);
    }
    let detail = assert_refused(open_stream(&app, TOKEN_A).await).await;
    assert!(detail.contains("16 live streams"), "{detail}");
    // Another token of the same account, and ordinary requests of the same token, go on.
    let other = open_stream(&app, TOKEN_A_SOUTH).await;
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(
        app.get("/v1/mowers", Some(TOKEN_A)).await.status,
        StatusCode::OK
    );
    // A stream that ends gives its place back.
    open.pop();
    assert_eq!(open_stream(&app, TOKEN_A).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn streams_never_take_the_connections_kept_for_ordinary_requests() {
    let limits = HttpLimits {
        max_connections: 8,
        // The total alone: account A's tokens may take all six.
        streams_per_account: Some(6),
        ..HttpLimits::default()
    };
    assert_eq!(limits.max_streams(), 6, "a quarter is kept");
    let app = TestApp::spawn_configured(100, |state| state.with_http_limits(&limits)).await;
    let mut open = Vec::new();
    for token in [TOKEN_A, TOKEN_A_SOUTH, TOKEN_A_ADMIN] {
        for _ in 0..2 {
            let stream = open_stream(&app, token).await;
            assert_eq!(stream.status(), StatusCode::OK);
            open.push(stream);
        }
    }
    let detail = assert_refused(open_stream(&app, TOKEN_A).await).await;
    assert!(detail.contains("6 live streams"), "{detail}");
    assert_refused(open_stream(&app, TOKEN_B).await).await;
    assert_eq!(
        app.get("/v1/mowers", Some(TOKEN_A)).await.status,
        StatusCode::OK
    );
}

/// A mowing report of account A's first mower at `t0 + seconds`, as an NDJSON line.
fn line(app: &TestApp, seconds: i64) -> String {
    let report = json!({
        "mower_id": app.a.mowers[0],
        "account_id": app.a.account_id,
        "observed_at": (t0() + Duration::seconds(seconds)).to_rfc3339(),
        "activity": "mowing",
        "battery_percent": 70,
    });
    format!("{report}\n")
}

fn lines(app: &TestApp, from: i64, count: i64) -> Bytes {
    Bytes::from(
        (from..from + count)
            .map(|s| line(app, s))
            .collect::<String>(),
    )
}

type Sender = futures::channel::mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

/// A body that sends what it is given, and ends when its sender is dropped.
fn trickle() -> (Sender, Body) {
    let (sender, body) = futures::channel::mpsc::unbounded();
    (sender, Body::from_stream(body))
}

async fn import(app: &TestApp, token: &str, body: Body) -> TestResponse {
    app.send_body(
        Method::POST,
        "/v1/imports",
        Some(token),
        &[("content-type", NDJSON)],
        body,
    )
    .await
}

/// The newest import `token` may read, once it has at least `lines` lines counted.
async fn newest_import(app: &TestApp, token: &str, lines: u64) -> Value {
    for _ in 0..1000 {
        let page = app.get("/v1/imports", Some(token)).await.json();
        let newest = &page["items"][0];
        if newest["lines"].as_u64() >= Some(lines) {
            return newest.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("no import of {lines} lines was listed");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_stops_coming_is_cut_and_its_import_says_so() {
    let app = TestApp::spawn().await;
    let (sender, body) = trickle();
    sender.unbounded_send(Ok(lines(&app, 40, 3))).unwrap();
    // The sender stays: the body neither ends nor sends another byte.
    let response = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        import(&app, TOKEN_A_WRITE_ONLY, body),
    )
    .await
    .expect("the import is cut, not left open");
    drop(sender);
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    let detail = response.problem().detail;
    assert!(
        detail.contains("no byte of the body came for 30 s"),
        "{detail}"
    );
    let location = response.header("location").unwrap().to_owned();
    let record = app.get(&location, Some(TOKEN_A_WRITE_ONLY)).await.json();
    assert_eq!(record["status"], "failed");
    assert_eq!(record["failure_reason"], "input");
    assert_eq!(
        record["stored"], 3,
        "the lines read whole are stored: {record}"
    );
    assert!(
        record["error"]
            .as_str()
            .unwrap()
            .contains("no byte of the body came for 30 s"),
        "{record}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_json_body_that_stops_coming_is_cut() {
    let app = TestApp::spawn().await;
    let (sender, body) = trickle();
    sender
        .unbounded_send(Ok(Bytes::from_static(b"[{\"mower_id\":")))
        .unwrap();
    let response = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        app.send_body(
            Method::POST,
            "/v1/states",
            Some(TOKEN_A_ADMIN),
            &[("content-type", "application/json")],
            body,
        ),
    )
    .await
    .expect("the request is cut, not left open");
    drop(sender);
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert_eq!(response.problem_type(), "bad-request");
}

#[tokio::test]
async fn an_import_stops_when_its_token_is_revoked_between_batches() {
    let app = TestApp::spawn_with_history(1000).await;
    let (sender, body) = trickle();
    // 250 lines: one batch of 200 is stored, 50 wait for the rest of the body.
    sender.unbounded_send(Ok(lines(&app, 40, 250))).unwrap();
    let post = import(&app, TOKEN_A_WRITE_ONLY, body);
    let app_ref = &app;
    let revoke = async move {
        newest_import(app_ref, TOKEN_A_ADMIN, 200).await;
        let id = app_ref.token_ids[TOKEN_A_WRITE_ONLY];
        let revoked = app_ref
            .delete(&format!("/v1/tokens/{id}"), Some(TOKEN_A_ADMIN))
            .await;
        assert_eq!(revoked.status, StatusCode::NO_CONTENT);
        // More lines, then the end: none of them may be stored.
        let _ = sender.unbounded_send(Ok(lines(app_ref, 290, 100)));
    };
    let (response, ()) = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        tokio::join!(post, revoke)
    })
    .await
    .expect("the import stops");
    assert_eq!(response.status, StatusCode::UNAUTHORIZED);
    assert!(response.problem().detail.contains("revoked"));
    let location = response.header("location").unwrap().to_owned();
    let record = app.get(&location, Some(TOKEN_A_ADMIN)).await.json();
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["failure_reason"], "token_revoked", "{record}");
    assert_eq!(
        record["stored"], 200,
        "what was stored stays, counted: {record}"
    );
    let history = app
        .get(
            &format!("/v1/mowers/{}/history?limit=1000", app.a.mowers[0]),
            Some(TOKEN_A),
        )
        .await
        .json();
    let imported = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["activity"] == "mowing" && row["battery_percent"] == 70)
        .count();
    assert_eq!(imported, 200, "nothing after the revocation is stored");
}

#[tokio::test]
async fn a_trickled_import_stops_at_once_when_its_token_is_revoked() {
    let app = TestApp::spawn().await;
    let (sender, body) = trickle();
    sender.unbounded_send(Ok(lines(&app, 40, 10))).unwrap();
    let post = import(&app, TOKEN_A_WRITE_ONLY, body);
    let app_ref = &app;
    let revoke = async move {
        // Listed as soon as it starts.
        newest_import(app_ref, TOKEN_A_ADMIN, 0).await;
        let id = app_ref.token_ids[TOKEN_A_WRITE_ONLY];
        let revoked = app_ref
            .delete(&format!("/v1/tokens/{id}"), Some(TOKEN_A_ADMIN))
            .await;
        assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    };
    // The sender stays open: only the revocation can end the import.
    let (response, ()) = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        tokio::join!(post, revoke)
    })
    .await
    .expect("the import stops at the revocation, not when the client closes");
    drop(sender);
    assert_eq!(response.status, StatusCode::UNAUTHORIZED);
    let location = response.header("location").unwrap().to_owned();
    let record = app.get(&location, Some(TOKEN_A_ADMIN)).await.json();
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["failure_reason"], "token_revoked", "{record}");
    assert_eq!(record["stored"], 0, "{record}");
}

/// Sends `chunk(i)` every 2 s until `count` are sent (or the request is gone), then ends the
/// body; counts what it sent in `sent`.
fn drip(
    sender: Sender,
    chunk: impl Fn(usize) -> Bytes + Send + 'static,
    count: usize,
    sent: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for i in 0..count {
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            if sender.unbounded_send(Ok(chunk(i))).is_err() {
                break;
            }
            sent.fetch_add(1, Ordering::SeqCst);
        }
    })
}

/// Issue 42 item 8: a byte every 2 s never trips the idle timeout, but the body's total deadline
/// (60 s by default) cuts it: a JSON request answers `400` after about 30 bytes, not the 1 000 the
/// client would send.
#[tokio::test(start_paused = true)]
async fn a_body_that_trickles_is_cut_at_its_total_deadline() {
    let app = TestApp::spawn().await;
    let (sender, body) = trickle();
    // Whitespace before a JSON value: every byte keeps the body well-formed so far.
    let sent = Arc::new(AtomicUsize::new(0));
    let dripping = drip(
        sender,
        |_| Bytes::from_static(b" "),
        1000,
        Arc::clone(&sent),
    );
    let response = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        app.send_body(
            Method::POST,
            "/v1/states",
            Some(TOKEN_A_ADMIN),
            &[("content-type", "application/json")],
            body,
        ),
    )
    .await
    .expect("the request is cut at its deadline, not left open");
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    let detail = response.problem().detail;
    assert!(
        detail.contains("did not come whole within 60 s"),
        "{detail}"
    );
    dripping.abort();
    // 60 s of a byte every 2 s.
    let sent = sent.load(Ordering::SeqCst);
    assert!((29..=31).contains(&sent), "{sent} bytes were sent");
}

/// An import keeps its own, longer deadline: lines every 2 s for two minutes (past the other
/// bodies' 60 s) are all stored; with `SWATH_IMPORT_BODY_TIMEOUT_SECONDS` at 10 s the same import
/// is cut and says so.
#[tokio::test(start_paused = true)]
async fn an_import_has_its_own_total_deadline() {
    let app = TestApp::spawn().await;
    let (sender, body) = trickle();
    let template: Vec<Bytes> = (0..60).map(|i| Bytes::from(line(&app, 40 + i))).collect();
    let sent = Arc::new(AtomicUsize::new(0));
    let dripping = drip(sender, move |i| template[i].clone(), 60, Arc::clone(&sent));
    let response = import(&app, TOKEN_A_WRITE_ONLY, body).await;
    dripping.await.unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 60);
    assert_eq!(response.status, StatusCode::ACCEPTED, "{:?}", response.body);
    let location = response.header("location").unwrap().to_owned();
    let record = app.get(&location, Some(TOKEN_A_WRITE_ONLY)).await.json();
    assert_eq!(record["status"], "done", "{record}");
    assert_eq!(record["stored"], 60, "{record}");

    let limits = HttpLimits {
        import_body_timeout: std::time::Duration::from_secs(10),
        ..HttpLimits::default()
    };
    let app = TestApp::spawn_configured(100, |state| state.with_http_limits(&limits)).await;
    let (sender, body) = trickle();
    let template: Vec<Bytes> = (0..60).map(|i| Bytes::from(line(&app, 40 + i))).collect();
    let dripping = drip(
        sender,
        move |i| template[i].clone(),
        60,
        Arc::new(AtomicUsize::new(0)),
    );
    let response = import(&app, TOKEN_A_WRITE_ONLY, body).await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    let detail = response.problem().detail;
    assert!(
        detail.contains("did not come whole within 10 s"),
        "{detail}"
    );
    let location = response.header("location").unwrap().to_owned();
    let record = app.get(&location, Some(TOKEN_A_WRITE_ONLY)).await.json();
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["failure_reason"], "input", "{record}");
    // A line every 2 s for 10 s: four or five whole lines stored, not the 60 sent otherwise.
    let stored = record["stored"].as_u64().unwrap();
    assert!((4..=5).contains(&stored), "{record}");
    dripping.abort();
}

/// Issue 42 item 2: the tokens of one account share a quarter of the streams. With 40
/// connections (30 kept for streams, 7 per account), four tokens of account A asking 16 streams
/// each get 7 in all and 57 refusals; account B still opens one.
#[tokio::test]
async fn one_accounts_tokens_cannot_take_every_stream() {
    let limits = HttpLimits {
        max_connections: 40,
        ..HttpLimits::default()
    };
    assert_eq!(limits.max_streams(), 30);
    assert_eq!(limits.max_streams_per_account(), 7, "a quarter, by default");
    let app = TestApp::spawn_configured(100, |state| state.with_http_limits(&limits)).await;
    let mut tokens = Vec::new();
    for i in 0..4 {
        let created = app
            .post(
                "/v1/tokens",
                Some(TOKEN_A_ADMIN),
                &json!({"name": format!("dashboard {i}"), "scopes": ["read"]}),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED);
        tokens.push(created.json()["token"].as_str().unwrap().to_owned());
    }
    let (mut open, mut refused) = (Vec::new(), 0);
    for token in &tokens {
        for _ in 0..16 {
            let stream = open_stream(&app, token).await;
            if stream.status() == StatusCode::OK {
                open.push(stream);
            } else {
                let detail = assert_refused(stream).await;
                assert!(detail.contains("this account"), "{detail}");
                refused += 1;
            }
        }
    }
    assert_eq!((open.len(), refused), (7, 57));
    let other = open_stream(&app, TOKEN_B).await;
    assert_eq!(other.status(), StatusCode::OK, "another account opens one");
}

/// Issue 42 item 2: token and account creation is rate-limited per account, in the application
/// (so every route and replica applies it alike): past the hour's allowance `429` with a
/// `Retry-After`; another account is not refused.
#[tokio::test]
async fn an_account_creates_tokens_and_accounts_at_a_bounded_rate() {
    let app = TestApp::spawn_configured(100, |state| {
        state.with_creation_limits(swath_application::CreationLimits {
            accounts_per_hour: 2,
            tokens_per_hour: 3,
        })
    })
    .await;
    let mut statuses = Vec::new();
    for i in 0..5 {
        let created = app
            .post(
                "/v1/tokens",
                Some(TOKEN_A_ADMIN),
                &json!({"name": format!("t{i}"), "scopes": ["read"]}),
            )
            .await;
        if created.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(created.problem_type(), "too-many-requests");
            let retry: u64 = created.header("retry-after").unwrap().parse().unwrap();
            assert_eq!(retry, 1200, "an hour over three tokens");
        }
        statuses.push(created.status);
    }
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((statuses.len() - refused, refused), (3, 2), "{statuses:?}");
    let b = app
        .post(
            "/v1/tokens",
            Some(TOKEN_B),
            &json!({"name": "b", "scopes": ["read"]}),
        )
        .await;
    assert_eq!(b.status, StatusCode::CREATED, "another account");

    let mut accounts = Vec::new();
    for i in 0..4 {
        let body = json!({"name": format!("tenant {i}")});
        accounts.push(app.post("/v1/accounts", Some(TOKEN_B), &body).await.status);
    }
    let created = accounts
        .iter()
        .filter(|s| **s == StatusCode::CREATED)
        .count();
    let refused = accounts
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((created, refused), (2, 2), "{accounts:?}");
}
