//! Hostile input over HTTP on the memory store and on PostgreSQL (issue 13): a NUL in every
//! string field of every request body (the table of `swath_tests::hostile`, checked against the
//! OpenAPI document) answers `422` on both stores, never `503`; a NUL in a state report drops
//! that report alone; cursors with a NUL or out of range answer `400`. Both stores answer alike.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use swath::wiring::Stores;
use swath_api::router;
use swath_application::ports::SystemClock;
use swath_domain::{AccountId, Scope};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_tests::hostile::{
    check_table_covers_the_document, fill, fill_body, string_paths, table, with_nul_at,
    with_nul_keys,
};
use swath_tests::postgres::PostgresFactory;
use swath_tests::support::add_account;
use swath_tests::support::http::{add_token, send, wire_app};

const TOKEN: &str = "swath_hostile_input_admin_token";

struct App {
    router: axum::Router,
    ids: Map<String, Value>,
}

impl App {
    async fn memory() -> App {
        Self::build(Stores::memory(MemoryStore::new(
            MemoryStoreSettings::default(),
        )))
        .await
    }

    async fn postgres(factory: &PostgresFactory) -> App {
        Self::build(Stores::postgres(factory.fresh_store().await)).await
    }

    /// The app as `swath serve` wires it (its consumers not started: nothing here needs them).
    async fn build(stores: Stores) -> App {
        let wired = wire_app(stores, Arc::new(SystemClock));
        let account = AccountId::new();
        add_account(wired.admin.as_ref(), account, "Hostile").await;
        let scopes = vec![Scope::Read, Scope::Write, Scope::Admin];
        add_token(wired.tokens.as_ref(), TOKEN, account, scopes, None).await;
        let mut app = App {
            router: router(wired.state),
            ids: Map::new(),
        };
        app.ids.insert("account".into(), json!(account.to_string()));
        app.ids
            .insert("new_mower".into(), json!(uuid::Uuid::now_v7().to_string()));
        // The resources the table's paths name, made through the API itself.
        let (status, site) = app
            .send(
                "POST",
                "/v1/sites",
                &json!({"name": "Seed", "time_zone": "UTC"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{site}");
        app.ids.insert("site".into(), site["id"].clone());
        let (status, mower) = app
            .send(
                "POST",
                "/v1/mowers",
                &json!({"site_id": site["id"], "name": "Seed", "model": "M", "serial": "1"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{mower}");
        app.ids.insert("mower".into(), mower["id"].clone());
        let mower_path = format!("/v1/mowers/{}", mower["id"].as_str().unwrap());
        let (status, zone) = app
            .send(
                "POST",
                &format!("{mower_path}/zones"),
                &json!({"name": "Seed", "polygon": {"type": "Polygon", "coordinates":
                    [[[13.0, 52.0], [13.001, 52.0], [13.001, 52.001], [13.0, 52.0]]]}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{zone}");
        app.ids.insert("zone".into(), zone["id"].clone());
        let (status, assignment) = app
            .send(
                "POST",
                &format!("{mower_path}/assignments"),
                &json!({"operator": "Seed", "priority": "low"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{assignment}");
        app.ids
            .insert("assignment".into(), assignment["id"].clone());
        let (status, webhook) = app
            .send(
                "POST",
                "/v1/webhooks",
                &json!({"url": "https://hooks.example.com/seed", "kinds": ["error_raised"]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{webhook}");
        app.ids
            .insert("webhook".into(), webhook["webhook"]["id"].clone());
        app
    }

    async fn send_raw(
        &self,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> (StatusCode, String, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap();
        let answer = send(&self.router, request).await;
        let content_type = answer
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        (answer.status, content_type, body)
    }

    async fn send(&self, method: &str, path: &str, body: &Value) -> (StatusCode, Value) {
        let (status, _, body) = self
            .send_raw(method, path, serde_json::to_vec(body).unwrap())
            .await;
        (status, body)
    }
}

/// What the store answered to each hostile request, to compare the stores.
type Answers = Vec<(String, u16)>;

async fn hostile_bodies(app: &App) -> Answers {
    let mut answers = Vec::new();
    for entry in table() {
        let path = fill(entry.path, &app.ids);
        let body = fill_body(&entry.body, &app.ids);
        if entry.path == "/v1/states" {
            continue;
        }
        let mut variants: Vec<(String, Value)> = string_paths(&body)
            .into_iter()
            .map(|p| (format!("{p:?}"), with_nul_at(&body, &p)))
            .collect();
        variants.extend(with_nul_keys(&body));
        assert!(
            !variants.is_empty(),
            "{} {} has no string",
            entry.method,
            entry.path
        );
        for (what, hostile) in variants {
            let (status, content_type, problem) = app
                .send_raw(entry.method, &path, serde_json::to_vec(&hostile).unwrap())
                .await;
            let case = format!("{} {} with a NUL in {what}", entry.method, entry.path);
            assert_eq!(
                status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{case}: {problem}"
            );
            assert_eq!(content_type, "application/problem+json", "{case}");
            answers.push((case, status.as_u16()));
        }
        // The same body without a NUL is accepted: the 422s above came from the NUL.
        let (status, answer) = app.send(entry.method, &path, &body).await;
        assert!(
            status.is_success(),
            "{} {} refused the table's valid body: {status} {answer}",
            entry.method,
            entry.path
        );
    }
    answers
}

/// A NUL in any string of a state report drops that report alone; the valid one beside it is
/// stored. Never a `503`.
async fn hostile_states(app: &App) -> Answers {
    let mut answers = Vec::new();
    let entry = table()
        .into_iter()
        .find(|e| e.path == "/v1/states")
        .unwrap();
    let body = fill_body(&entry.body, &app.ids);
    let report = &body[0];
    let mut variants: Vec<(String, Value)> = string_paths(report)
        .into_iter()
        .map(|p| (format!("{p:?}"), with_nul_at(report, &p)))
        .collect();
    variants.extend(with_nul_keys(report));
    variants.push(("an unknown field".into(), {
        let mut r = report.clone();
        r["firmware"] = json!("4.\u{0}");
        r
    }));
    for (i, (what, hostile)) in variants.into_iter().enumerate() {
        let mut valid = report.clone();
        valid["observed_at"] = json!(format!("2026-06-01T12:{:02}:{:02}Z", i / 60, i % 60));
        let (status, answer) = app
            .send("POST", "/v1/states", &json!([hostile, valid]))
            .await;
        let case = format!("POST /v1/states with a NUL in {what}");
        assert_eq!(status, StatusCode::OK, "{case}: {answer}");
        assert_eq!(answer["items"][0]["outcome"], "dropped", "{case}: {answer}");
        let reason = answer["items"][0]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            reason == "invalid_text" || reason == "malformed",
            "{case}: {answer}"
        );
        assert_eq!(answer["items"][1]["outcome"], "stored", "{case}: {answer}");
        answers.push((format!("{case}: {reason}"), status.as_u16()));
    }
    // An observed_at before 2000 is refused alone too.
    let mut old = report.clone();
    old["observed_at"] = json!("0000-01-01T00:00:00Z");
    let (status, answer) = app.send("POST", "/v1/states", &json!([old])).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["items"][0]["reason"], "ancient_observed_at",
        "{answer}"
    );
    answers.push(("ancient observed_at".into(), status.as_u16()));
    answers
}

/// Cursors holding a NUL, or dated outside the range every store keeps, and query strings with a
/// NUL answer `400`.
async fn hostile_cursors(app: &App) -> Answers {
    use base64::Engine;
    let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let mower = app.ids["mower"].as_str().unwrap();
    let cursors = [
        (
            "/v1/mowers/{m}/history",
            encode(&format!("history:{}", i64::MIN / 2)),
        ),
        (
            "/v1/mowers/{m}/history",
            encode("history:-210000000000000000"),
        ),
        (
            "/v1/mowers/{m}/track",
            encode(&format!("track:{}", i64::MAX / 2)),
        ),
        (
            "/v1/mowers",
            encode("mowers:[0,\"a\\u0000\",\"0190a2b4-0000-7000-8000-000000000001\"]"),
        ),
        (
            "/v1/sites",
            encode("sites:[0,\"\u{0}\",\"0190a2b4-0000-7000-8000-000000000001\"]"),
        ),
        (
            "/v1/alerts",
            encode("alerts:1,-210000000000000000,0190a2b4-0000-7000-8000-000000000001"),
        ),
        ("/v1/tokens", encode("tokens:\u{0}")),
    ];
    let mut answers = Vec::new();
    for (path, cursor) in cursors {
        let path = format!("{}?cursor={cursor}", path.replace("{m}", mower));
        let (status, content_type, problem) = app.send_raw("GET", &path, Vec::new()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {problem}");
        assert_eq!(content_type, "application/problem+json", "{path}");
        answers.push((path.replace(mower, "{m}"), status.as_u16()));
    }
    for path in [
        format!("/v1/mowers/{mower}/history?cursor=%00"),
        "/v1/mowers?cursor=a%00b".to_owned(),
    ] {
        let (status, _, problem) = app.send_raw("GET", &path, Vec::new()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {problem}");
        answers.push((path.replace(mower, "{m}"), status.as_u16()));
    }
    answers
}

async fn all(app: &App) -> Answers {
    let mut answers = hostile_bodies(app).await;
    answers.extend(hostile_states(app).await);
    answers.extend(hostile_cursors(app).await);
    answers
}

#[test]
fn the_table_covers_every_string_field_of_every_request_body() {
    check_table_covers_the_document(&serde_json::to_value(swath_api::openapi()).unwrap());
}

#[tokio::test]
async fn nul_and_out_of_range_input_on_the_memory_store() {
    all(&App::memory().await).await;
}

swath_tests::postgres_tests!(on_postgres: nul_and_out_of_range_input_on_postgres_answers_as_on_memory);

mod on_postgres {
    use super::*;

    pub(super) async fn nul_and_out_of_range_input_on_postgres_answers_as_on_memory(
        factory: PostgresFactory,
    ) {
        let postgres = all(&App::postgres(&factory).await).await;
        let memory = all(&App::memory().await).await;
        assert_eq!(postgres, memory, "the stores answered differently");
    }
}

/// `POST /v1/states` isolates what the store refuses at once: the refused report answers
/// `rejected_by_store`, the others are stored (a `422`/`503` for the whole request would make a
/// client retry the good ones with the bad one for ever).
#[tokio::test]
async fn a_report_the_store_refuses_is_dropped_alone_over_http() {
    let mut stores = Stores::memory(MemoryStore::new(MemoryStoreSettings::default()));
    stores.telemetry = swath_tests::poison::Faulty::new(stores.telemetry);
    let app = App::build(stores).await;
    let entry = table()
        .into_iter()
        .find(|e| e.path == "/v1/states")
        .unwrap();
    let report = fill_body(&entry.body, &app.ids)[0].clone();
    let mut reports = Vec::new();
    for (i, code) in ["ok", swath_tests::poison::POISON, "ok"].iter().enumerate() {
        let mut r = report.clone();
        r["observed_at"] = json!(format!("2026-06-01T12:00:0{i}Z"));
        r["error_code"] = json!(code);
        reports.push(r);
    }
    let (status, answer) = app.send("POST", "/v1/states", &json!(reports)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let outcomes: Vec<(&str, &str)> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["outcome"].as_str().unwrap(),
                i["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("stored", ""),
            ("dropped", "rejected_by_store"),
            ("stored", "")
        ]
    );
}
