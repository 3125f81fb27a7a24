//! Compression by `Accept-Encoding` and conditional GETs with weak tags (decision 91): gzip when
//! asked and only then, decoding to the very JSON of the plain answer, with one `ETag` for both;
//! the live stream never compressed; `If-None-Match` compared weakly; the live views tagged over
//! their data (not `generated_at`); and a Home-Assistant-style poller (gzip and `If-None-Match`)
//! answered `304` while nothing changed.

mod helpers;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use chrono::Duration;
use flate2::read::GzDecoder;
use helpers::{t0, TestApp, TestResponse, TOKEN_A};
use http_body_util::BodyExt;
use serde_json::json;
use std::io::Read;
use swath_application::subjects;
use tower::ServiceExt;

const GZIP: (&str, &str) = ("accept-encoding", "gzip");

fn gunzip(response: &TestResponse) -> Vec<u8> {
    assert_eq!(response.header("content-encoding"), Some("gzip"));
    let mut plain = Vec::new();
    GzDecoder::new(&response.body[..])
        .read_to_end(&mut plain)
        .expect("a gzip body");
    plain
}

fn varies_by_encoding(response: &TestResponse) -> bool {
    response.headers.get_all(header::VARY).iter().any(|v| {
        v.to_str()
            .unwrap()
            .to_ascii_lowercase()
            .contains("accept-encoding")
    })
}

/// A new state of Bravo (account A), observed `seconds` after `t0`.
async fn bravo_reports(app: &TestApp, seconds: i64, activity: &str) {
    app.record(json!({
        "mower_id": app.a.mowers[0].to_string(),
        "account_id": app.a.account_id.to_string(),
        "observed_at": (t0() + Duration::seconds(seconds)).to_rfc3339(),
        "activity": activity,
    }))
    .await;
}

#[tokio::test]
async fn gzip_is_answered_when_asked_and_decodes_to_the_same_json() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    for path in [
        "/v1/mowers".to_owned(),
        format!("/v1/mowers/{bravo}/state"),
        "/v1/live/fleet".to_owned(),
        "/v1/live/health".to_owned(),
    ] {
        let plain = app.get(&path, Some(TOKEN_A)).await;
        assert_eq!(plain.status, StatusCode::OK, "{path}");
        assert_eq!(plain.header("content-encoding"), None, "{path}");

        let gzip = app.get_with(&path, Some(TOKEN_A), &[GZIP]).await;
        assert_eq!(gzip.status, StatusCode::OK, "{path}");
        assert!(varies_by_encoding(&gzip), "{path}: {:?}", gzip.headers);
        assert_eq!(gzip.header("content-type"), Some("application/json"));
        let decoded = gunzip(&gzip);
        assert!(
            gzip.body.len() < decoded.len(),
            "{path}: {} bytes gzip",
            gzip.body.len()
        );
        // The live views carry a new `generated_at` each time: compare what they show.
        let (mut plain_json, mut decoded_json) = (
            plain.json(),
            serde_json::from_slice::<serde_json::Value>(&decoded).unwrap(),
        );
        if path.starts_with("/v1/live/") {
            plain_json["generated_at"].take();
            decoded_json["generated_at"].take();
        } else {
            assert_eq!(decoded, plain.body, "{path}: the very bytes");
        }
        assert_eq!(decoded_json, plain_json, "{path}");
        assert_eq!(
            gzip.header("etag"),
            plain.header("etag"),
            "{path}: one tag for both encodings"
        );
        assert!(plain.header("etag").unwrap().starts_with("W/\""), "{path}");
    }

    // Not asked, or asked for what is not offered: the plain answer.
    for accept in ["identity", "br", "gzip;q=0", ""] {
        let plain = app
            .get_with("/v1/mowers", Some(TOKEN_A), &[("accept-encoding", accept)])
            .await;
        assert_eq!(plain.header("content-encoding"), None, "{accept:?}");
        plain.json();
    }
}

#[tokio::test]
async fn a_small_answer_is_not_compressed() {
    let app = TestApp::spawn().await;
    let problem = app
        .get_with("/v1/nothing-here", Some(TOKEN_A), &[GZIP])
        .await;
    assert!(problem.body.len() < 256, "{}", problem.body.len());
    assert_eq!(problem.header("content-encoding"), None);
    problem.problem();
}

#[tokio::test]
async fn the_live_stream_is_not_compressed_and_sends_each_state_at_once() {
    let app = TestApp::spawn().await;
    let request = Request::get("/v1/live/stream")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN_A}"))
        .header(header::ACCEPT_ENCODING, "gzip")
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers().get(header::CONTENT_TYPE).unwrap(),
        "text/event-stream"
    );
    assert!(
        response.headers().get(header::CONTENT_ENCODING).is_none(),
        "{:?}",
        response.headers()
    );

    // One state, far smaller than any compressor's buffer: it comes through as it is, at once.
    let bravo = app.a.mowers[0];
    let report = json!({
        "mower_id": bravo.to_string(),
        "account_id": app.a.account_id.to_string(),
        "observed_at": t0().to_rfc3339(),
        "activity": "mowing",
    });
    app.bus
        .publish(&subjects::telemetry(bravo), report.to_string().into(), None)
        .await
        .unwrap();
    let mut body = response.into_body();
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame())
        .await
        .expect("the state is sent at once")
        .unwrap()
        .unwrap();
    let text = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
    assert!(text.starts_with("event: state\n"), "{text}");
    assert!(text.contains(&bravo.to_string()), "{text}");
}

#[tokio::test]
async fn if_none_match_compares_weakly_in_lists_and_with_star() {
    let app = TestApp::spawn().await;
    let first = app.get("/v1/mowers", Some(TOKEN_A)).await;
    let etag = first.header("etag").unwrap().to_owned();
    let strong = etag.strip_prefix("W/").expect("a weak tag").to_owned();
    for value in [
        etag.clone(),
        strong.clone(),
        format!("\"other\", {etag}"),
        format!("W/\"other\",{strong}"),
        "*".to_owned(),
    ] {
        let again = app
            .get_with("/v1/mowers", Some(TOKEN_A), &[("if-none-match", &value)])
            .await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{value}");
        assert!(again.body.is_empty());
        assert_eq!(again.header("etag"), Some(etag.as_str()), "{value}");
    }
    for value in ["\"other\"", "W/\"other\""] {
        let again = app
            .get_with("/v1/mowers", Some(TOKEN_A), &[("if-none-match", value)])
            .await;
        assert_eq!(again.status, StatusCode::OK, "{value}");
    }
}

#[tokio::test]
async fn a_live_view_answers_304_until_a_state_arrives() {
    let app = TestApp::spawn().await;
    for path in ["/v1/live/fleet", "/v1/live/wall", "/v1/live/health"] {
        let first = app.get(path, Some(TOKEN_A)).await;
        assert_eq!(first.status, StatusCode::OK, "{path}");
        assert_eq!(first.header("cache-control"), Some("private, no-cache"));
        let etag = first.header("etag").expect("an ETag").to_owned();
        // A second later the snapshot's `generated_at` is new; nothing else is.
        app.clock.advance(Duration::seconds(1));
        let again = app
            .get_with(path, Some(TOKEN_A), &[("if-none-match", &etag)])
            .await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{path}");
        assert!(again.body.is_empty(), "{path}");
        assert_eq!(again.header("etag"), Some(etag.as_str()), "{path}");
    }

    let fleet = app.get("/v1/live/fleet", Some(TOKEN_A)).await;
    let etag = fleet.header("etag").unwrap().to_owned();
    bravo_reports(&app, 40, "mowing").await;
    let changed = app
        .get_with("/v1/live/fleet", Some(TOKEN_A), &[("if-none-match", &etag)])
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_ne!(changed.header("etag"), Some(etag.as_str()));
    let bravo = app.a.mowers[0].to_string();
    let items = changed.json()["mowers"]["items"].clone();
    let shown = items
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == bravo.as_str())
        .unwrap()
        .clone();
    assert_eq!(shown["activity"], "mowing");
}

/// What Home Assistant's REST sensor does every few seconds: gzip, and the tag it was given.
#[tokio::test]
async fn a_gzip_poller_gets_304_while_nothing_changed() {
    let app = TestApp::spawn().await;
    for path in ["/v1/mowers", "/v1/live/fleet"] {
        let first = app.get_with(path, Some(TOKEN_A), &[GZIP]).await;
        assert_eq!(first.status, StatusCode::OK, "{path}");
        gunzip(&first);
        let etag = first.header("etag").unwrap().to_owned();
        for _ in 0..3 {
            app.clock.advance(Duration::seconds(1));
            let poll = app
                .get_with(path, Some(TOKEN_A), &[GZIP, ("if-none-match", &etag)])
                .await;
            assert_eq!(poll.status, StatusCode::NOT_MODIFIED, "{path}");
            assert!(poll.body.is_empty(), "{path}");
            assert_eq!(poll.header("etag"), Some(etag.as_str()), "{path}");
        }
    }

    let first = app.get_with("/v1/live/fleet", Some(TOKEN_A), &[GZIP]).await;
    let etag = first.header("etag").unwrap().to_owned();
    bravo_reports(&app, 45, "returning").await;
    let poll = app
        .get_with(
            "/v1/live/fleet",
            Some(TOKEN_A),
            &[GZIP, ("if-none-match", &etag)],
        )
        .await;
    assert_eq!(poll.status, StatusCode::OK);
    assert_ne!(poll.header("etag"), Some(etag.as_str()));
    let fleet: serde_json::Value = serde_json::from_slice(&gunzip(&poll)).unwrap();
    assert!(fleet["mowers"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["activity"] == "returning"));
}
