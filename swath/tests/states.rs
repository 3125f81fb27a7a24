//! `POST /v1/states`: each report validated alone and recorded through the ingest path, the
//! answer per report, tenant rules, and the limits.

mod helpers;

use axum::http::{Method, StatusCode};
use chrono::Duration;
use helpers::{t0, TestApp, TOKEN_A, TOKEN_A_ADMIN, TOKEN_A_SOUTH_ADMIN, TOKEN_A_WRITE_ONLY};
use serde_json::{json, Value};

fn report(app: &TestApp, mower: usize, seconds: i64) -> Value {
    json!({
        "mower_id": app.a.mowers[mower],
        "account_id": app.a.account_id,
        "observed_at": (t0() + Duration::seconds(seconds)).to_rfc3339(),
        "activity": "mowing",
        "blade_on": true,
        "battery_percent": 77,
        "position": {"lat": 52.5, "lon": 13.41},
    })
}

#[tokio::test]
async fn each_report_is_stored_or_dropped_alone_with_its_reason() {
    let app = TestApp::spawn().await;
    let mut battery = report(&app, 0, 41);
    battery["battery_percent"] = json!(101);
    let mut future = report(&app, 0, 42);
    future["observed_at"] = json!((t0() + Duration::hours(1)).to_rfc3339());
    let mut foreign_account = report(&app, 0, 43);
    foreign_account["account_id"] = json!(app.b.account_id);
    let mut foreign_mower = report(&app, 0, 44);
    foreign_mower["mower_id"] = json!(app.b.mowers[0]);
    let mut unknown_mower = report(&app, 0, 45);
    unknown_mower["mower_id"] = json!(uuid::Uuid::now_v7());
    let body = json!([
        report(&app, 0, 40),
        battery,
        future,
        "not an object",
        foreign_account,
        foreign_mower,
        unknown_mower,
        report(&app, 2, 40),
        report(&app, 0, 40),
    ]);
    let response = app
        .post("/v1/states", Some(TOKEN_A_WRITE_ONLY), &body)
        .await;
    assert_eq!(response.status, StatusCode::OK);
    let answer = response.json();
    let outcomes: Vec<(&str, &Value)> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["outcome"].as_str().unwrap(), &i["reason"]))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("stored", &json!(null)),
            ("dropped", &json!("invalid_battery")),
            ("dropped", &json!("future_observed_at")),
            ("dropped", &json!("malformed")),
            ("dropped", &json!("account_mismatch")),
            ("dropped", &json!("unknown_mower")),
            ("dropped", &json!("unknown_mower")),
            ("stored", &json!(null)),
            ("stored", &json!(null)),
        ]
    );
    assert_eq!(
        (answer["stored"].clone(), answer["dropped"].clone()),
        (json!(3), json!(6))
    );
    // Another account's mower and an unknown one answer alike.
    assert_eq!(answer["items"][5]["detail"], answer["items"][6]["detail"]);
    redacted_snapshot!("recorded", &answer);

    let state = app
        .get(
            &format!("/v1/mowers/{}/state", app.a.mowers[0]),
            Some(TOKEN_A),
        )
        .await
        .json();
    assert_eq!(state["observed_at"], "2026-06-01T12:00:40Z");
    // Nothing of B's was written.
    let delta = app
        .get(
            &format!("/v1/mowers/{}/state", app.b.mowers[0]),
            Some(helpers::TOKEN_B),
        )
        .await
        .json();
    assert_eq!(delta["observed_at"], "2026-06-01T12:00:00Z");
}

#[tokio::test]
async fn a_token_limited_to_some_sites_writes_only_their_mowers() {
    let app = TestApp::spawn().await;
    // Bravo is on North, Charlie on South.
    let body = json!([report(&app, 0, 50), report(&app, 1, 50)]);
    let answer = app
        .post("/v1/states", Some(TOKEN_A_SOUTH_ADMIN), &body)
        .await
        .json();
    assert_eq!(answer["items"][0]["reason"], "unknown_mower");
    assert_eq!(answer["items"][1]["outcome"], "stored");
}

#[tokio::test]
async fn the_batch_is_limited_in_reports_and_bytes() {
    let app = TestApp::spawn().await;
    let many: Vec<Value> = (0..1001).map(|i| report(&app, 0, 100 + i)).collect();
    let response = app
        .post("/v1/states", Some(TOKEN_A_ADMIN), &Value::Array(many))
        .await;
    assert_eq!(response.status, StatusCode::UNPROCESSABLE_ENTITY);

    let thousand: Vec<Value> = (0..1000).map(|i| report(&app, 0, i - 2000)).collect();
    let response = app
        .post("/v1/states", Some(TOKEN_A_ADMIN), &Value::Array(thousand))
        .await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.json()["stored"], 1000);

    let big = format!("[{}]", vec![r#"{"x":"0123456789"}"#; 120_000].join(","));
    assert!(big.len() > swath_api::BODY_LIMIT_BYTES);
    let response = app
        .send_body(
            Method::POST,
            "/v1/states",
            Some(TOKEN_A_ADMIN),
            &[("content-type", "application/json")],
            big,
        )
        .await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(response.problem_type(), "payload-too-large");
}

#[tokio::test]
async fn recording_needs_the_write_scope() {
    let app = TestApp::spawn().await;
    let response = app
        .post("/v1/states", Some(TOKEN_A), &json!([report(&app, 0, 60)]))
        .await;
    assert_eq!(response.status, StatusCode::FORBIDDEN);
    let response = app.post("/v1/states", None, &json!([])).await;
    assert_eq!(response.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn stored_reports_reach_the_bus_consumers_too() {
    let app = TestApp::spawn().await;
    let mut live = app
        .bus
        .subscribe(
            swath_application::subjects::TELEMETRY_ALL,
            swath_application::ports::LiveOptions::default(),
        )
        .await
        .unwrap();
    let mut foreign = report(&app, 0, 71);
    foreign["account_id"] = json!(app.b.account_id);
    let body = json!([report(&app, 0, 70), foreign]);
    let answer = app
        .post("/v1/states", Some(TOKEN_A_ADMIN), &body)
        .await
        .json();
    assert_eq!(answer["stored"], 1);
    let message = tokio::time::timeout(std::time::Duration::from_secs(5), live.messages.recv())
        .await
        .expect("a message")
        .expect("open");
    assert_eq!(
        message.subject,
        format!("telemetry.mower.{}", app.a.mowers[0])
    );
    let published: Value = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!(published["observed_at"], "2026-06-01T12:01:10Z");
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(200), live.messages.recv())
            .await
            .is_err(),
        "a dropped report is not published"
    );
}
