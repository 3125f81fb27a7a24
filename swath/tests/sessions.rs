//! W8's mowing sessions over the API (issue 45 item 2): a mower's sessions newest first and
//! paged, the range, the open session beside the state, visibility (site-limited tokens and other
//! accounts answer `404`), CSV, and refusals.

mod helpers;

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use helpers::{t0, TestApp, TOKEN_A, TOKEN_A_SOUTH, TOKEN_B};
use serde_json::{json, Value};

const CSV: &[(&str, &str)] = &[("accept", "text/csv")];

fn q(at: DateTime<Utc>) -> String {
    at.to_rfc3339().replace('+', "%2B")
}

/// Bravo (seeded: mowing at t0, leaving at t0 + 30 s, an open session) docks at t0 + 60 s; mows
/// again three hours later (beyond the merge gap: a new session) and stops idle; and six hours
/// later starts a third session, still open.
async fn three_sessions(app: &TestApp) {
    let bravo = app.a.mowers[0];
    let report = |at: DateTime<Utc>, activity: &str, battery: u8| {
        json!({
            "mower_id": bravo, "account_id": app.a.account_id, "observed_at": at.to_rfc3339(),
            "activity": activity, "blade_on": activity == "mowing", "battery_percent": battery,
            "position": {"lat": 52.5, "lon": 13.4 + battery as f64 * 1e-5},
        })
    };
    app.record(report(t0() + Duration::seconds(60), "docked", 78))
        .await;
    app.clock
        .set(t0() + Duration::hours(3) + Duration::minutes(1));
    for (s, activity, battery) in [(0, "mowing", 90), (30, "mowing", 89), (60, "idle", 88)] {
        let at = t0() + Duration::hours(3) + Duration::seconds(s);
        app.record(report(at, activity, battery)).await;
    }
    app.clock
        .set(t0() + Duration::hours(6) + Duration::minutes(1));
    app.record(report(t0() + Duration::hours(6), "mowing", 70))
        .await;
}

fn starts(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["started_at"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_mowers_sessions_are_newest_first_paged_and_cut_to_the_range() {
    let app = TestApp::spawn().await;
    three_sessions(&app).await;
    let bravo = app.a.mowers[0];
    let response = app
        .get(&format!("/v1/mowers/{bravo}/sessions"), Some(TOKEN_A))
        .await;
    assert_eq!(response.status, StatusCode::OK);
    let page = response.json();
    assert_eq!(
        starts(&page),
        [
            "2026-06-01T18:00:00Z",
            "2026-06-01T15:00:00Z",
            "2026-06-01T12:00:00Z"
        ]
    );
    assert_eq!(page["items"][0]["open"], true);
    assert_eq!(page["items"][1]["end_reason"], "stopped");
    assert_eq!(page["items"][2]["end_reason"], "docked");
    assert_eq!(page["items"][2]["mowing_seconds"], 30.0);
    redacted_snapshot!("mower_sessions", &page);

    // One a page: three pages, joined by their cursors.
    let mut cursor = String::new();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let path = format!("/v1/mowers/{bravo}/sessions?limit=1&cursor={cursor}");
        let page = app.get(&path, Some(TOKEN_A)).await.json();
        seen.extend(starts(&page).into_iter().map(str::to_owned));
        cursor = page["next_cursor"].as_str().unwrap_or_default().to_owned();
    }
    assert!(cursor.is_empty(), "the third page is the last");
    assert_eq!(
        seen,
        starts(
            &app.get(&format!("/v1/mowers/{bravo}/sessions"), Some(TOKEN_A))
                .await
                .json()
        )
    );

    // Sessions overlapping [t0 + 1 h, t0 + 4 h): only the second.
    let (from, to) = (t0() + Duration::hours(1), t0() + Duration::hours(4));
    let path = format!("/v1/mowers/{bravo}/sessions?from={}&to={}", q(from), q(to));
    let page = app.get(&path, Some(TOKEN_A)).await.json();
    assert_eq!(starts(&page), ["2026-06-01T15:00:00Z"]);
}

#[tokio::test]
async fn the_open_session_is_answered_beside_the_state() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let path = format!("/v1/mowers/{bravo}/sessions/open");
    let open = app.get(&path, Some(TOKEN_A)).await.json();
    assert_eq!(open["session"]["started_at"], "2026-06-01T12:00:00Z");
    assert_eq!(open["session"]["ended_at"], Value::Null);
    let alpha = app.a.mowers[2];
    let none = app
        .get(&format!("/v1/mowers/{alpha}/sessions/open"), Some(TOKEN_A))
        .await
        .json();
    assert_eq!(
        none["session"],
        Value::Null,
        "Alpha only ever reported an error"
    );
    app.record(json!({
        "mower_id": bravo, "account_id": app.a.account_id,
        "observed_at": (t0() + Duration::seconds(60)).to_rfc3339(), "activity": "charging",
    }))
    .await;
    let ended = app.get(&path, Some(TOKEN_A)).await.json();
    assert_eq!(ended["session"], Value::Null, "docked: the session ended");
}

#[tokio::test]
async fn sessions_are_seen_only_through_tokens_that_see_the_mower() {
    let app = TestApp::spawn().await;
    three_sessions(&app).await;
    let bravo = app.a.mowers[0];
    for token in [TOKEN_A_SOUTH, TOKEN_B] {
        for path in [
            format!("/v1/mowers/{bravo}/sessions"),
            format!("/v1/mowers/{bravo}/sessions/open"),
            format!("/v1/sessions?mower_id={bravo}"),
        ] {
            let response = app.get(&path, Some(token)).await;
            assert_eq!(response.status, StatusCode::NOT_FOUND, "{token} {path}");
        }
    }
    let north = app.a.sites[0];
    let response = app
        .get(
            &format!("/v1/sessions?site_id={north}"),
            Some(TOKEN_A_SOUTH),
        )
        .await;
    assert_eq!(response.status, StatusCode::NOT_FOUND);
    // The fleet: every session of the visible mowers, none of the others.
    let all = app.get("/v1/sessions", Some(TOKEN_A)).await.json();
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    let south = app.get("/v1/sessions", Some(TOKEN_A_SOUTH)).await.json();
    assert_eq!(south["items"], json!([]));
    let other = app.get("/v1/sessions", Some(TOKEN_B)).await.json();
    assert_eq!(other["items"], json!([]));
    let of_north = app
        .get(
            &format!("/v1/sessions?site_id={north}&limit=2"),
            Some(TOKEN_A),
        )
        .await
        .json();
    assert_eq!(
        starts(&of_north),
        ["2026-06-01T18:00:00Z", "2026-06-01T15:00:00Z"]
    );
    assert_eq!(of_north["truncated"], true);
}

#[tokio::test]
async fn sessions_answer_csv_with_the_json_rows() {
    let app = TestApp::spawn().await;
    three_sessions(&app).await;
    let bravo = app.a.mowers[0];
    let path = format!("/v1/mowers/{bravo}/sessions?limit=2");
    let json = app.get(&path, Some(TOKEN_A)).await.json();
    let csv = app.get_with(&path, Some(TOKEN_A), CSV).await;
    assert_eq!(csv.status, StatusCode::OK);
    assert_eq!(
        csv.header("swath-next-cursor"),
        json["next_cursor"].as_str()
    );
    let rows: Vec<Vec<String>> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(&csv.body[..])
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect();
    assert_eq!(rows.len(), 3, "the header and two sessions");
    assert_eq!(
        rows[0][..5],
        ["id", "mower_id", "started_at", "ended_at", "end_reason"]
    );
    for (row, item) in rows[1..].iter().zip(json["items"].as_array().unwrap()) {
        assert_eq!(row[0], item["id"].as_str().unwrap());
        assert_eq!(row[2], item["started_at"].as_str().unwrap());
        assert_eq!(row[3], item["ended_at"].as_str().unwrap_or_default());
        assert_eq!(row[4], item["end_reason"].as_str().unwrap_or_default());
    }
    insta::assert_snapshot!(
        "mower_sessions_csv",
        String::from_utf8(csv.body.to_vec()).unwrap()
    );
}

#[tokio::test]
async fn a_bad_range_or_cursor_is_refused() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let path = format!(
        "/v1/mowers/{bravo}/sessions?from={}&to={}",
        q(t0()),
        q(t0())
    );
    let response = app.get(&path, Some(TOKEN_A)).await;
    assert_eq!(response.status, StatusCode::UNPROCESSABLE_ENTITY);
    let response = app
        .get("/v1/sessions?cursor=bm90LWEtY3Vyc29y", Some(TOKEN_A))
        .await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_sessions_export_streams_the_fleets_sessions_as_csv() {
    let app = TestApp::spawn().await;
    three_sessions(&app).await;
    let (from, to) = (t0() - Duration::hours(1), t0() + Duration::hours(12));
    let path = format!("/v1/exports/sessions.csv?from={}&to={}", q(from), q(to));
    let export = app.get_with(&path, Some(TOKEN_A), CSV).await;
    assert_eq!(export.status, StatusCode::OK);
    assert_eq!(
        export.header("content-disposition"),
        Some("attachment; filename=\"swath-sessions-20260601T110000Z-20260602T000000Z.csv\"")
    );
    let page = app.get_with("/v1/sessions", Some(TOKEN_A), CSV).await;
    assert_eq!(
        export.body, page.body,
        "one mower with sessions: the same rows, newest first"
    );
    let south = app.get_with(&path, Some(TOKEN_A_SOUTH), CSV).await;
    assert_eq!(
        south
            .body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        1,
        "the header only"
    );
}
