//! CSV answers and fleet-wide exports (issue 45 item 4, decisions 193 and 194): content
//! negotiation, the CSV of a page, the exports' visibility, range checks, and an export stopped
//! by a revocation or by its client going away.

mod helpers;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use chrono::{Duration, NaiveDate};
use helpers::{t0, TestApp, TOKEN_A, TOKEN_A_ADMIN, TOKEN_A_SOUTH};
use http_body_util::BodyExt;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use swath_application::ports::{
    StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows,
};
use swath_domain::{
    DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, MowerSnapshot, PositionRow,
    TelemetryRows,
};
use tower::ServiceExt;

const CSV: &[(&str, &str)] = &[("accept", "text/csv")];

fn parse(body: &[u8]) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(body)
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect()
}

fn range() -> String {
    format!(
        "from={}&to={}",
        (t0() - Duration::hours(1)).to_rfc3339(),
        (t0() + Duration::hours(1)).to_rfc3339()
    )
    .replace('+', "%2B")
}

#[tokio::test]
async fn a_history_page_answers_csv_on_accept_and_json_by_default() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let path = format!("/v1/mowers/{bravo}/history?limit=1");
    let json = app.get(&path, Some(TOKEN_A)).await;
    assert_eq!(json.content_type(), Some("application/json"));
    let csv = app.get_with(&path, Some(TOKEN_A), CSV).await;
    assert_eq!(csv.status, StatusCode::OK);
    assert_eq!(
        csv.content_type(),
        Some("text/csv; charset=utf-8; header=present")
    );
    // The same page: its cursor in a header, the same as the JSON page's.
    assert_eq!(
        csv.header("swath-next-cursor"),
        json.json()["next_cursor"].as_str()
    );
    insta::assert_snapshot!(
        "history_page_csv",
        String::from_utf8(csv.body.to_vec()).unwrap()
    );
}

#[tokio::test]
async fn track_days_and_events_answer_csv_with_the_json_rows() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let track = app
        .get_with(&format!("/v1/mowers/{bravo}/track"), Some(TOKEN_A), CSV)
        .await;
    let rows = parse(&track.body);
    assert_eq!(rows[0][..4], ["mower_id", "observed_at", "lat", "lon"]);
    assert_eq!(rows.len(), 3, "the header and the two positions");
    assert_eq!(rows[2][3], "13.4001");
    let day = t0().date_naive();
    let days = app
        .get_with(
            &format!("/v1/mowers/{bravo}/days?from={day}&to={day}"),
            Some(TOKEN_A),
            CSV,
        )
        .await;
    assert_eq!(parse(&days.body)[1][1], day.to_string());
    let events = app.get_with("/v1/events", Some(TOKEN_A), CSV).await;
    assert_eq!(events.status, StatusCode::OK);
    assert_eq!(
        parse(&events.body)[0],
        ["id", "kind", "mower_id", "observed_at", "details"]
    );
}

#[tokio::test]
async fn an_accept_the_route_cannot_serve_is_406() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let xml = &[("accept", "application/xml")];
    let refused = app
        .get_with(&format!("/v1/mowers/{bravo}/history"), Some(TOKEN_A), xml)
        .await;
    assert_eq!(refused.status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(refused.problem_type(), "not-acceptable");
    let json_only = &[("accept", "application/json")];
    let export = app
        .get_with(
            &format!("/v1/exports/history.csv?{}", range()),
            Some(TOKEN_A),
            json_only,
        )
        .await;
    assert_eq!(export.status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(export.problem_type(), "not-acceptable");
}

#[tokio::test]
async fn an_export_range_that_is_backwards_or_too_long_is_422() {
    let app = TestApp::spawn().await;
    let backwards = app
        .get(
            "/v1/exports/days.csv?from=2026-06-02&to=2026-06-01",
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(backwards.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(backwards.problem().errors[0].pointer, "/to");
    let long = app
        .get(
            "/v1/exports/history.csv?from=2025-01-01T00:00:00Z&to=2026-06-01T00:00:00Z",
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(long.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(long.problem_type(), "validation-failed");
}

#[tokio::test]
async fn an_export_has_every_visible_mowers_rows_and_only_those() {
    let app = TestApp::spawn().await;
    let charlie = app.a.mowers[1];
    app.record(json!({
        "mower_id": charlie.to_string(),
        "account_id": app.a.account_id.to_string(),
        "observed_at": t0().to_rfc3339(),
        "activity": "docked",
        "error_code": "=cmd|'/c calc'!A1",
    }))
    .await;
    let path = format!("/v1/exports/history.csv?{}", range());
    let all = app.get(&path, Some(TOKEN_A)).await;
    assert_eq!(all.status, StatusCode::OK);
    let disposition = all.header("content-disposition").unwrap();
    assert!(
        disposition.starts_with("attachment; filename=\"swath-history-2026"),
        "{disposition}"
    );
    let rows = parse(&all.body);
    let mowers: std::collections::BTreeSet<&str> =
        rows[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        rows.len(),
        1 + 2 + 1 + 1,
        "Bravo's two states, Alpha's and Charlie's"
    );
    assert_eq!(mowers.len(), 3);
    assert!(!mowers.contains(app.b.mowers[0].to_string().as_str()));
    // The site-limited token sees Charlie (South) only; its text cell neutralised.
    let south = parse(&app.get(&path, Some(TOKEN_A_SOUTH)).await.body);
    assert_eq!(south.len(), 2);
    assert_eq!(south[1][0], charlie.to_string());
    assert_eq!(south[1][5], "'=cmd|'/c calc'!A1");
    // A site it cannot see answers like an unknown one.
    let north = app.a.sites[0];
    let hidden = app
        .get(&format!("{path}&site_id={north}"), Some(TOKEN_A_SOUTH))
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    let day = t0().date_naive();
    let days = app
        .get(
            &format!("/v1/exports/days.csv?from={day}&to={day}"),
            Some(TOKEN_A_SOUTH),
        )
        .await;
    assert_eq!(
        days.header("content-disposition"),
        Some(format!("attachment; filename=\"swath-days-{day}-{day}.csv\"").as_str())
    );
    assert!(parse(&days.body)[1..]
        .iter()
        .all(|r| r[0] == charlie.to_string()));
    let _ = NaiveDate::MIN;
}

/// The telemetry store, counting the history pages read.
struct Counting {
    inner: Arc<dyn TelemetryStore>,
    history_reads: Arc<AtomicUsize>,
}

#[async_trait]
impl TelemetryStore for Counting {
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError> {
        self.inner.begin(mowers).await
    }
    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        self.inner.latest(mowers).await
    }
    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError> {
        self.inner.health(mower).await
    }
    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError> {
        self.inner.export(mowers).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError> {
        self.history_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.history(mower, window).await
    }
    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError> {
        self.inner.track(mower, window).await
    }
    async fn days(
        &self,
        mower: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError> {
        self.inner.days(mower, from, to).await
    }
}

/// The app with exports of one row per page, and a count of the history pages read.
async fn counting_app() -> (TestApp, Arc<AtomicUsize>) {
    let reads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&reads);
    let app = TestApp::spawn_with_stores(
        100,
        move |mut stores| {
            stores.telemetry = Arc::new(Counting {
                inner: stores.telemetry,
                history_reads: counter,
            });
            stores
        },
        |state| state.with_export_page_rows(1),
    )
    .await;
    let bravo = app.a.mowers[0];
    for s in 1..=20 {
        app.record(json!({
            "mower_id": bravo.to_string(),
            "account_id": app.a.account_id.to_string(),
            "observed_at": (t0() + Duration::seconds(30 + s)).to_rfc3339(),
            "activity": "mowing",
        }))
        .await;
    }
    (app, reads)
}

fn export_request(token: &str) -> Request<Body> {
    Request::builder()
        .uri(format!("/v1/exports/history.csv?{}", range()))
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn a_revoked_token_stops_its_export_before_the_end() {
    let (app, _) = counting_app().await;
    let response = app
        .router
        .clone()
        .oneshot(export_request(TOKEN_A))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let head = body.frame().await.unwrap().unwrap();
    assert!(head.data_ref().unwrap().starts_with(b"mower_id,"));
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.data_ref().unwrap().split(|&b| b == b'\n').count(), 2);
    let id = app.token_ids[TOKEN_A];
    let revoked = app
        .delete(&format!("/v1/tokens/{id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    // The next page is refused: the body ends with an error, not with a clean end.
    let next = body.frame().await;
    assert!(
        matches!(next, Some(Err(_))),
        "the export went on after the revocation"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_stops_the_producer() {
    let (app, reads) = counting_app().await;
    let response = app
        .router
        .clone()
        .oneshot(export_request(TOKEN_A))
        .await
        .unwrap();
    let mut body = response.into_body();
    body.frame().await.unwrap().unwrap();
    body.frame().await.unwrap().unwrap();
    let read_before = reads.load(Ordering::SeqCst);
    drop(body);
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(
        reads.load(Ordering::SeqCst),
        read_before,
        "pages read after the body was dropped"
    );
    // The whole export reads many more pages: the stop was not its end.
    let whole = app
        .get(
            &format!("/v1/exports/history.csv?{}", range()),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(parse(&whole.body).len(), 1 + 22 + 1);
    assert!(reads.load(Ordering::SeqCst) > read_before + 20);
}

/// A client that accepts gzip gets the export compressed, whole: the compression layer polls
/// the body once more after its end, which the export's stream must answer with its end again
/// (it panicked, and the connection closed without an answer).
#[tokio::test]
async fn an_export_compressed_for_a_gzip_client_ends_cleanly() {
    let app = TestApp::spawn().await;
    let mut request = export_request(TOKEN_A);
    request
        .headers_mut()
        .insert(header::ACCEPT_ENCODING, "gzip".parse().unwrap());
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers().get(header::CONTENT_ENCODING).unwrap(),
        "gzip"
    );
    let body = response.into_body().collect().await;
    assert!(body.is_ok_and(|b| !b.to_bytes().is_empty()));
}
