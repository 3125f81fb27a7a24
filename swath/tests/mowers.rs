//! `/v1/mowers`, `/v1/mowers/{id}/state` and `/v1/mowers/{id}/health`: the answers as JSON
//! snapshots (what changes from run to run redacted), visibility, and conditional GETs.

mod helpers;

use axum::http::StatusCode;
use chrono::Duration;
use helpers::{t0, TestApp, TOKEN_A, TOKEN_A_SOUTH, TOKEN_B};
use serde_json::json;

#[tokio::test]
async fn the_list_has_every_mower_of_the_account_in_order_with_its_latest_state() {
    let app = TestApp::spawn().await;
    let response = app.get("/v1/mowers", Some(TOKEN_A)).await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.content_type(), Some("application/json"));
    assert!(response.header("etag").is_some());
    let body = response.json();
    let ids: Vec<String> = app.a.mowers.iter().map(ToString::to_string).collect();
    let listed: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed, ids,
        "ordered by (display_order, name, id); only account A's"
    );
    redacted_snapshot!("list", body);
}

#[tokio::test]
async fn a_token_limited_to_some_sites_lists_only_their_mowers() {
    let app = TestApp::spawn().await;
    let body = app.get("/v1/mowers", Some(TOKEN_A_SOUTH)).await.json();
    assert_eq!(body["items"].as_array().unwrap().len(), 1);
    assert_eq!(body["items"][0]["name"], "Charlie");
    assert_eq!(body["items"][0]["state"], json!(null));

    let body = app.get("/v1/mowers", Some(TOKEN_B)).await.json();
    assert_eq!(body["items"].as_array().unwrap().len(), 1);
    assert_eq!(body["items"][0]["name"], "Delta");
}

#[tokio::test]
async fn the_state_is_the_latest_document_with_the_home_assistant_activity() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let response = app
        .get(&format!("/v1/mowers/{bravo}/state"), Some(TOKEN_A))
        .await;
    assert_eq!(response.status, StatusCode::OK);
    let body = response.json();
    assert_eq!(body["mower_id"], bravo.to_string());
    assert_eq!(body["observed_at"], "2026-06-01T12:00:30Z");
    assert_eq!(body["last_seen_at"], "2026-06-01T12:01:00Z");
    assert_eq!(body["activity"], "leaving");
    assert_eq!(body["lawn_mower_activity"], "mowing");
    assert_eq!(body["unknown_fields"], json!({"firmware": "4.2.1"}));
    redacted_snapshot!("state", body);
}

#[tokio::test]
async fn a_mower_that_never_reported_has_no_state_yet() {
    let app = TestApp::spawn().await;
    let charlie = app.a.mowers[1];
    let response = app
        .get(&format!("/v1/mowers/{charlie}/state"), Some(TOKEN_A))
        .await;
    assert_eq!(response.status, StatusCode::NOT_FOUND);
    assert_eq!(response.problem_type(), "no-state-yet");
}

#[tokio::test]
async fn health_totals_are_in_seconds_and_metres() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let response = app
        .get(&format!("/v1/mowers/{bravo}/health"), Some(TOKEN_A))
        .await;
    assert_eq!(response.status, StatusCode::OK);
    let body = response.json();
    assert_eq!(body["mowing_seconds"], json!(30.0));
    assert_eq!(body["blade_seconds"], json!(30.0));
    assert_eq!(body["counted_until"], "2026-06-01T12:00:30Z");
    redacted_snapshot!("health", body);

    let alpha = app.a.mowers[2];
    let body = app
        .get(&format!("/v1/mowers/{alpha}/health"), Some(TOKEN_A))
        .await
        .json();
    assert_eq!(
        body["error_count"],
        json!(1),
        "entering error counts one error"
    );

    let charlie = app.a.mowers[1];
    let body = app
        .get(&format!("/v1/mowers/{charlie}/health"), Some(TOKEN_A))
        .await
        .json();
    assert_eq!(
        body["counted_until"],
        json!(null),
        "never reported: no instant yet"
    );
    redacted_snapshot!("health_never_reported", body);
}

#[tokio::test]
async fn the_state_answers_304_until_a_newer_state_arrives() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let path = format!("/v1/mowers/{bravo}/state");
    let first = app.get(&path, Some(TOKEN_A)).await;
    let etag = first.header("etag").unwrap().to_owned();

    let again = app
        .get_with(&path, Some(TOKEN_A), &[("if-none-match", &etag)])
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.body.is_empty());
    assert_eq!(again.header("etag"), Some(etag.as_str()));

    // The tag is weak (decision 91); its strong form matches too: the comparison is weak.
    let strong = etag.strip_prefix("W/").expect("a weak tag");
    let again = app
        .get_with(&path, Some(TOKEN_A), &[("if-none-match", strong)])
        .await;
    assert_eq!(
        again.status,
        StatusCode::NOT_MODIFIED,
        "If-None-Match compares weakly"
    );

    app.record(json!({
        "mower_id": bravo.to_string(),
        "account_id": app.a.account_id.to_string(),
        "observed_at": (t0() + Duration::seconds(31)).to_rfc3339(),
        "activity": "returning",
    }))
    .await;
    let changed = app
        .get_with(&path, Some(TOKEN_A), &[("if-none-match", &etag)])
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_ne!(changed.header("etag"), Some(etag.as_str()));
    assert_eq!(changed.json()["activity"], "returning");
}

#[tokio::test]
async fn the_list_answers_304_until_a_state_changes() {
    let app = TestApp::spawn().await;
    let first = app.get("/v1/mowers", Some(TOKEN_A)).await;
    let etag = first.header("etag").unwrap().to_owned();

    let again = app
        .get_with("/v1/mowers", Some(TOKEN_A), &[("if-none-match", &etag)])
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.body.is_empty());

    // Another account's states do not change account A's list.
    app.record(json!({
        "mower_id": app.b.mowers[0].to_string(),
        "account_id": app.b.account_id.to_string(),
        "observed_at": (t0() + Duration::seconds(5)).to_rfc3339(),
        "activity": "docked",
    }))
    .await;
    let again = app
        .get_with("/v1/mowers", Some(TOKEN_A), &[("if-none-match", &etag)])
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);

    app.record(json!({
        "mower_id": app.a.mowers[1].to_string(),
        "account_id": app.a.account_id.to_string(),
        "observed_at": t0().to_rfc3339(),
        "activity": "docked",
    }))
    .await;
    let changed = app
        .get_with("/v1/mowers", Some(TOKEN_A), &[("if-none-match", &etag)])
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(changed.json()["items"][1]["state"]["activity"], "docked");
}
