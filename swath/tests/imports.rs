//! `POST /v1/imports` and `GET /v1/imports/{id}` on the memory adapters: the counts of an import
//! and of its re-import, refused lines named by their line numbers, another account's mowers
//! refused and never stored, the scopes, the media type and the limits, the poll resource, and
//! the list that shows an import while its body is still being sent.

mod helpers;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use bytes::Bytes;
use chrono::Duration;
use helpers::{
    t0, TestApp, TestResponse, TOKEN_A, TOKEN_A_ADMIN, TOKEN_A_SOUTH_ADMIN, TOKEN_A_WRITE_ONLY,
    TOKEN_B,
};
use serde_json::{json, Value};
use swath_application::ports::{hash_token, NewToken, TokenId, TokenStore};
use swath_domain::{Principal, Scope};

const NDJSON: &str = "application/x-ndjson";

/// A mowing report of account A's mower `mower` at `t0 + seconds`.
fn report(app: &TestApp, mower: usize, seconds: i64) -> Value {
    json!({
        "mower_id": app.a.mowers[mower],
        "account_id": app.a.account_id,
        "observed_at": (t0() + Duration::seconds(seconds)).to_rfc3339(),
        "activity": "mowing",
        "blade_on": true,
        "battery_percent": 70,
        "position": {"lat": 52.5, "lon": 13.41},
    })
}

fn lines(reports: &[Value]) -> String {
    reports.iter().map(|r| format!("{r}\n")).collect()
}

async fn import(app: &TestApp, token: &str, body: impl Into<Body>) -> TestResponse {
    app.send_body(
        Method::POST,
        "/v1/imports",
        Some(token),
        &[("content-type", NDJSON)],
        body,
    )
    .await
}

/// Asserts an accepted import whose `Location` answers the same document, and answers it.
async fn accepted(app: &TestApp, response: &TestResponse, token: &str) -> Value {
    assert_eq!(
        response.status,
        StatusCode::ACCEPTED,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    let document = response.json();
    let location = response.header("location").expect("a Location").to_owned();
    assert_eq!(
        location,
        format!("/v1/imports/{}", document["id"].as_str().unwrap())
    );
    let polled = app.get(&location, Some(token)).await;
    assert_eq!(polled.status, StatusCode::OK);
    assert_eq!(
        polled.json(),
        document,
        "the resource answers the POST's document"
    );
    document
}

fn counts(document: &Value) -> (u64, u64, u64, u64) {
    let c = &document["counts"];
    let n = |k: &str| c[k].as_u64().unwrap();
    (n("new"), n("late_merged"), n("duplicate"), n("dropped"))
}

#[tokio::test]
async fn an_import_counts_new_states_and_its_reimport_only_duplicates() {
    let app = TestApp::spawn().await;
    // Bravo's newest state is at t0 + 30 s: one state before it is late, and merged.
    let reports: Vec<Value> = (40..100)
        .map(|s| report(&app, 0, s))
        .chain([report(&app, 0, 10), report(&app, 2, 5)])
        .collect();
    let body = lines(&reports);

    let first = import(&app, TOKEN_A_WRITE_ONLY, body.clone()).await;
    let first = accepted(&app, &first, TOKEN_A_WRITE_ONLY).await;
    assert_eq!(first["status"], "done");
    assert_eq!(counts(&first), (62, 1, 0, 0));
    assert_eq!(
        (
            first["lines"].clone(),
            first["reports"].clone(),
            first["stored"].clone()
        ),
        (json!(62), json!(62), json!(62))
    );
    assert_eq!(first["bad_lines"], json!([]));
    assert!(first["finished_at"].is_string());
    assert_eq!(first["error"], Value::Null);
    let state = app
        .get(
            &format!("/v1/mowers/{}/state", app.a.mowers[0]),
            Some(TOKEN_A),
        )
        .await
        .json();
    let newest: chrono::DateTime<chrono::Utc> =
        state["observed_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        newest,
        t0() + Duration::seconds(99),
        "the import stored through the ingest path: {state}"
    );

    // Again: every line is a duplicate, nothing is new; a new import of its own.
    let again = import(&app, TOKEN_A_WRITE_ONLY, body).await;
    let again = accepted(&app, &again, TOKEN_A_WRITE_ONLY).await;
    assert_eq!(again["status"], "done");
    assert_eq!(counts(&again), (0, 0, 62, 0));
    assert_eq!(again["stored"], 62);
    assert_ne!(again["id"], first["id"]);
}

#[tokio::test]
async fn bad_lines_are_named_by_their_line_numbers_and_the_others_stored() {
    let app = TestApp::spawn().await;
    let mut battery = report(&app, 0, 42);
    battery["battery_percent"] = json!(140);
    let long = format!("{{\"pad\": \"{}\"}}", "x".repeat(70 * 1024));
    let body = [
        report(&app, 0, 40).to_string(),
        String::new(),
        "{\"mower_id\": nope}".to_owned(),
        battery.to_string(),
        "   ".to_owned(),
        long,
        report(&app, 0, 41).to_string(),
        // The last line without its newline is read all the same.
        "[1, 2]".to_owned(),
    ]
    .join("\n");
    let response = import(&app, TOKEN_A_ADMIN, body).await;
    let document = accepted(&app, &response, TOKEN_A_ADMIN).await;
    assert_eq!(document["status"], "done");
    assert_eq!(
        (document["lines"].clone(), document["reports"].clone()),
        (json!(8), json!(6))
    );
    assert_eq!(counts(&document), (2, 0, 0, 4));
    let bad: Vec<(u64, &str)> = document["bad_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["line"].as_u64().unwrap(), l["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        bad,
        [
            (3, "malformed"),
            (4, "invalid_battery"),
            (6, "too_large"),
            (8, "malformed")
        ]
    );
    let detail = document["bad_lines"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("at column") && !detail.contains("line 1"),
        "{detail}"
    );
    assert_eq!(
        document["dropped_by_reason"],
        json!([
            {"reason": "malformed", "count": 2},
            {"reason": "too_large", "count": 1},
            {"reason": "invalid_battery", "count": 1},
        ])
    );
    assert_eq!(document["bad_lines_truncated"], false);
    redacted_snapshot!("bad_lines", &document);
}

#[tokio::test]
async fn another_accounts_mowers_are_refused_per_line_and_never_stored() {
    let app = TestApp::spawn().await;
    let before = app
        .get(
            &format!("/v1/mowers/{}/state", app.b.mowers[0]),
            Some(TOKEN_B),
        )
        .await
        .json();
    // Account B's mower under A's account id (W0 refuses it), the same under B's id (the tenant
    // filter does), an unknown mower, and a mower of a site the token is not limited to.
    let mut foreign = report(&app, 0, 50);
    foreign["mower_id"] = json!(app.b.mowers[0]);
    let mut foreign_account = foreign.clone();
    foreign_account["account_id"] = json!(app.b.account_id);
    let mut unknown = report(&app, 0, 51);
    unknown["mower_id"] = json!(uuid::Uuid::now_v7());
    let body = lines(&[
        report(&app, 1, 50),
        foreign,
        foreign_account,
        unknown,
        report(&app, 0, 52),
    ]);

    let limited = import(&app, TOKEN_A_SOUTH_ADMIN, body.clone()).await;
    let limited = accepted(&app, &limited, TOKEN_A_SOUTH_ADMIN).await;
    let reasons: Vec<(u64, &str)> = limited["bad_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["line"].as_u64().unwrap(), l["reason"].as_str().unwrap()))
        .collect();
    // Charlie (mower 1) is on South; Bravo (mower 0) on North, hidden from this token.
    assert_eq!(
        reasons,
        [
            (2, "unknown_mower"),
            (3, "account_mismatch"),
            (4, "unknown_mower"),
            (5, "unknown_mower")
        ]
    );
    assert_eq!(counts(&limited), (1, 0, 0, 4));

    let unlimited = import(&app, TOKEN_A_WRITE_ONLY, body).await;
    let unlimited = accepted(&app, &unlimited, TOKEN_A_WRITE_ONLY).await;
    let bad = unlimited["bad_lines"].as_array().unwrap();
    let reasons: Vec<(u64, &str)> = bad
        .iter()
        .map(|l| (l["line"].as_u64().unwrap(), l["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [
            (2, "unknown_mower"),
            (3, "account_mismatch"),
            (4, "unknown_mower")
        ]
    );
    // Another account's mower answers exactly what an unknown one does.
    assert_eq!(bad[0]["detail"], bad[2]["detail"]);
    assert_eq!(counts(&unlimited), (1, 0, 1, 3));

    let after = app
        .get(
            &format!("/v1/mowers/{}/state", app.b.mowers[0]),
            Some(TOKEN_B),
        )
        .await
        .json();
    assert_eq!(after, before, "nothing of account B's mower was stored");
    let history = app
        .get(
            &format!("/v1/mowers/{}/history", app.b.mowers[0]),
            Some(TOKEN_B),
        )
        .await
        .json();
    assert_eq!(history["items"].as_array().unwrap().len(), 1, "{history}");
}

#[tokio::test]
async fn imports_take_write_or_admin_and_ndjson() {
    let app = TestApp::spawn().await;
    let body = lines(&[report(&app, 0, 40)]);

    let read_only = import(&app, TOKEN_A, body.clone()).await;
    assert_eq!(read_only.status, StatusCode::FORBIDDEN);
    assert!(read_only
        .problem()
        .detail
        .contains("`write` nor the `admin`"));
    let anonymous = app
        .send_body(
            Method::POST,
            "/v1/imports",
            None,
            &[("content-type", NDJSON)],
            body.clone(),
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

    // A token with `admin` alone may import, and poll.
    TokenStore::create_token(
        &app.store,
        hash_token("token-a-admin-only"),
        NewToken {
            id: TokenId(uuid::Uuid::now_v7()),
            name: "admin only".to_owned(),
            principal: Principal {
                account_id: app.a.account_id,
                scopes: vec![Scope::Admin],
                sites: None,
            },
        },
    )
    .await
    .unwrap();
    let admin = import(&app, "token-a-admin-only", body.clone()).await;
    let admin = accepted(&app, &admin, "token-a-admin-only").await;
    assert_eq!(counts(&admin), (1, 0, 0, 0));
    // A read-only token cannot poll it.
    let poll = app
        .get(
            &format!("/v1/imports/{}", admin["id"].as_str().unwrap()),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(poll.status, StatusCode::FORBIDDEN);

    let json = app
        .send_body(
            Method::POST,
            "/v1/imports",
            Some(TOKEN_A_WRITE_ONLY),
            &[("content-type", "application/json")],
            body.clone(),
        )
        .await;
    assert_eq!(json.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(json.problem().detail.contains("application/x-ndjson"));
    let none = app
        .send_body(
            Method::POST,
            "/v1/imports",
            Some(TOKEN_A_WRITE_ONLY),
            &[],
            body.clone(),
        )
        .await;
    assert_eq!(none.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let charset = app
        .send_body(
            Method::POST,
            "/v1/imports",
            Some(TOKEN_A_WRITE_ONLY),
            &[("content-type", "Application/X-NDJSON; charset=utf-8")],
            body,
        )
        .await;
    assert_eq!(charset.status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_declared_or_found_while_read() {
    let app = TestApp::spawn().await;
    let declared = app
        .send_body(
            Method::POST,
            "/v1/imports",
            Some(TOKEN_A_WRITE_ONLY),
            &[
                ("content-type", NDJSON),
                ("content-length", &(256 * 1024 * 1024 + 1).to_string()),
            ],
            Body::empty(),
        )
        .await;
    assert_eq!(declared.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(declared.header("location").is_none(), "nothing was started");

    // Streamed without a length: one stored report, then blank lines of 64 000 bytes past the
    // limit. The import stops there; what came before stays stored.
    let first = Bytes::from(lines(&[report(&app, 0, 40)]));
    let mut blank = vec![b' '; 63_999];
    blank.push(b'\n');
    let blank = Bytes::from(blank);
    let chunks = std::iter::once(first)
        .chain(std::iter::repeat_n(blank, 256 * 1024 * 1024 / 64_000 + 2))
        .map(Ok::<_, std::io::Error>);
    let response = import(
        &app,
        TOKEN_A_WRITE_ONLY,
        Body::from_stream(futures::stream::iter(chunks)),
    )
    .await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
    let problem = response.problem();
    assert!(
        problem.detail.contains("importing them again is safe"),
        "{}",
        problem.detail
    );
    let location = response
        .header("location")
        .expect("the import's record")
        .to_owned();
    let record = app.get(&location, Some(TOKEN_A_WRITE_ONLY)).await.json();
    assert_eq!(record["status"], "failed");
    assert_eq!(record["stored"], 1);
    assert!(
        record["error"].as_str().unwrap().contains("larger than"),
        "{record}"
    );
}

#[tokio::test]
async fn a_body_is_read_in_chunks_that_split_lines_anywhere() {
    let app = TestApp::spawn_with_history(1000).await;
    let reports: Vec<Value> = (0..450)
        .map(|i| report(&app, i % 3, 40 + i as i64 / 3))
        .collect();
    let text = lines(&reports);
    // Chunks of 7 bytes: every line arrives in pieces, newlines included.
    let chunks: Vec<Result<Bytes, std::io::Error>> = text
        .as_bytes()
        .chunks(7)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let response = import(
        &app,
        TOKEN_A_WRITE_ONLY,
        Body::from_stream(futures::stream::iter(chunks)),
    )
    .await;
    let document = accepted(&app, &response, TOKEN_A_WRITE_ONLY).await;
    assert_eq!(counts(&document), (450, 0, 0, 0));
}

#[tokio::test]
async fn an_import_is_polled_only_by_its_account_and_sites() {
    let app = TestApp::spawn().await;
    let response = import(&app, TOKEN_A_WRITE_ONLY, lines(&[report(&app, 0, 40)])).await;
    let document = accepted(&app, &response, TOKEN_A_WRITE_ONLY).await;
    let path = format!("/v1/imports/{}", document["id"].as_str().unwrap());

    assert_eq!(
        app.get(&path, Some(TOKEN_A_ADMIN)).await.status,
        StatusCode::OK
    );
    let other_account = app.get(&path, Some(TOKEN_B)).await;
    let unknown = app
        .get(
            &format!("/v1/imports/{}", uuid::Uuid::now_v7()),
            Some(TOKEN_B),
        )
        .await;
    assert_eq!(other_account.status, StatusCode::NOT_FOUND);
    assert_eq!(
        other_account.body, unknown.body,
        "another account's import is unknown"
    );
    // A token limited to South does not see an import made with every site.
    assert_eq!(
        app.get(&path, Some(TOKEN_A_SOUTH_ADMIN)).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/v1/imports/not-a-uuid", Some(TOKEN_A_ADMIN))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
}

/// Each account keeps its last 100: account A's 101 imports forget A's oldest, never B's.
#[tokio::test]
async fn a_replica_keeps_the_records_of_each_accounts_last_100_imports() {
    let app = TestApp::spawn().await;
    let theirs = import(&app, TOKEN_B, "").await;
    assert_eq!(theirs.status, StatusCode::ACCEPTED);
    let theirs = theirs.json()["id"].as_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for _ in 0..101 {
        let response = import(&app, TOKEN_A_WRITE_ONLY, "").await;
        assert_eq!(response.status, StatusCode::ACCEPTED);
        ids.push(response.json()["id"].as_str().unwrap().to_owned());
    }
    for (id, expected) in [
        (&ids[0], StatusCode::NOT_FOUND),
        (&ids[1], StatusCode::OK),
        (&ids[100], StatusCode::OK),
    ] {
        let response = app
            .get(&format!("/v1/imports/{id}"), Some(TOKEN_A_WRITE_ONLY))
            .await;
        assert_eq!(
            response.status, expected,
            "the oldest only is forgotten: {id}"
        );
    }
    let response = app
        .get(&format!("/v1/imports/{theirs}"), Some(TOKEN_B))
        .await;
    assert_eq!(
        response.status,
        StatusCode::OK,
        "another account's imports push none of B's out"
    );
    let listed = app.get("/v1/imports", Some(TOKEN_B)).await.json();
    assert_eq!(listed["items"][0]["id"], theirs.as_str());
}

/// Polls `GET /v1/imports` until its newest import is running with at least `lines` lines
/// counted, and answers that page (a bounded number of polls: the import is stuck otherwise).
async fn running_page(app: &TestApp, token: &str, lines: u64) -> Value {
    for _ in 0..1000 {
        let page = app.get("/v1/imports", Some(token)).await;
        assert_eq!(page.status, StatusCode::OK);
        let page = page.json();
        let newest = &page["items"][0];
        if newest["status"] == "running" && newest["lines"].as_u64() >= Some(lines) {
            return page;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("no running import of {lines} lines was listed");
}

#[tokio::test]
async fn a_running_import_is_listed_with_its_counts_so_far() {
    let app = TestApp::spawn_with_history(1000).await;
    let reports: Vec<Value> = (0..300)
        .map(|i| report(&app, i % 3, 40 + i as i64 / 3))
        .collect();
    let (sender, body) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
    // 250 lines first: one batch of 200 is stored, 50 wait for the rest of the body.
    sender
        .unbounded_send(Ok(Bytes::from(lines(&reports[..250]))))
        .unwrap();
    let post = import(&app, TOKEN_A_WRITE_ONLY, Body::from_stream(body));
    let app_ref = &app;
    // Owns the sender: the body ends when it is dropped.
    let follow = async move {
        let page = running_page(app_ref, TOKEN_A_WRITE_ONLY, 200).await;
        sender
            .unbounded_send(Ok(Bytes::from(lines(&reports[250..]))))
            .unwrap();
        drop(sender);
        page
    };
    let (response, running) = tokio::join!(post, follow);

    let running = &running["items"][0];
    assert_eq!(running["lines"], json!(200), "{running}");
    assert_eq!(counts(running), (200, 0, 0, 0));
    assert_eq!(running["finished_at"], Value::Null);
    let done = accepted(&app, &response, TOKEN_A_WRITE_ONLY).await;
    assert_eq!(done["id"], running["id"], "the listed import is the POST's");
    assert_eq!(done["status"], "done");
    assert_eq!(counts(&done), (300, 0, 0, 0));
    let listed = app
        .get("/v1/imports", Some(TOKEN_A_WRITE_ONLY))
        .await
        .json();
    assert_eq!(
        listed["items"],
        json!([done]),
        "listed as its resource answers it"
    );
}

#[tokio::test]
async fn imports_are_listed_newest_first_by_page_and_only_to_who_may_read_them() {
    let app = TestApp::spawn().await;
    let mut ids = Vec::new();
    for seconds in [40, 41, 42] {
        let response = import(&app, TOKEN_A_WRITE_ONLY, lines(&[report(&app, 0, seconds)])).await;
        ids.push(accepted(&app, &response, TOKEN_A_WRITE_ONLY).await["id"].clone());
    }
    ids.reverse();

    let mut listed = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .get(
                &format!("/v1/imports?limit=2&cursor={cursor}"),
                Some(TOKEN_A_ADMIN),
            )
            .await;
        assert_eq!(page.status, StatusCode::OK);
        let page = page.json();
        assert_eq!(page["limit"], json!(2));
        listed.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].clone()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(page["truncated"], json!(true));
                cursor = next.to_owned();
            }
            None => {
                assert_eq!(page["truncated"], json!(false));
                break;
            }
        }
    }
    assert_eq!(listed, ids, "newest first, each once, over two pages");

    // Another account, and a token limited to a site the importer was not limited to, see none.
    for token in [TOKEN_B, TOKEN_A_SOUTH_ADMIN] {
        let page = app.get("/v1/imports", Some(token)).await;
        assert_eq!(page.status, StatusCode::OK);
        assert_eq!(page.json()["items"], json!([]), "{token}");
    }
    assert_eq!(
        app.get("/v1/imports", Some(TOKEN_A)).await.status,
        StatusCode::FORBIDDEN,
        "a read-only token lists no imports"
    );
    for bad in ["?limit=0", "?cursor=nonsense", "?cursor=ZXZlbnRzOjE"] {
        assert_eq!(
            app.get(&format!("/v1/imports{bad}"), Some(TOKEN_A_ADMIN))
                .await
                .status,
            StatusCode::BAD_REQUEST,
            "{bad}"
        );
    }
}
