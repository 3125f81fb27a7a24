//! `/metrics` stays the same size whatever anonymous clients send: a method outside HTTP's
//! standard ones is labelled `other` and a path no route matches `unmatched` (issue 35), so
//! invented methods and paths add no series. Its own test binary, so that no other test's
//! requests add series to the process's recorder while it counts.

mod helpers;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use helpers::TestApp;

/// The series of the HTTP latency histogram `/metrics` shows now.
async fn http_series(app: &TestApp) -> Vec<String> {
    let response = app.get("/metrics", None).await;
    assert_eq!(response.status, StatusCode::OK);
    String::from_utf8_lossy(&response.body)
        .lines()
        .filter(|l| l.starts_with("swath_http_request_duration_seconds_count"))
        .map(|l| {
            l.rsplit_once(' ')
                .map_or(l, |(series, _)| series)
                .to_owned()
        })
        .collect()
}

async fn send(app: &TestApp, method: &str, path: &str) -> StatusCode {
    let request = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri(path)
        .body(Body::empty())
        .unwrap();
    app.request(request).await.status
}

/// One round of invented requests: an invented method on an unknown path and on a route, and a
/// standard method on invented paths of every shape.
async fn invent(app: &TestApp, n: usize) {
    assert_eq!(
        send(app, &format!("M{n}"), &format!("/x{n}")).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send(app, &format!("BREW{n}"), "/v1/mowers").await,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        send(app, "GET", &format!("/v1/mowers/{n}/nope/{n}")).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send(app, "DELETE", &format!("/static/{n}.js")).await,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn invented_methods_and_paths_add_no_series() {
    swath_api::routes::operations::metrics_handle();
    let app = TestApp::spawn().await;
    // Every label combination the rounds below produce, once (and `/metrics` itself).
    invent(&app, 0).await;
    http_series(&app).await;
    let before = http_series(&app).await;

    for n in 1..=2_000 {
        invent(&app, n).await;
    }

    let after = http_series(&app).await;
    assert_eq!(
        after.len(),
        before.len(),
        "invented methods and paths added series"
    );
    assert_eq!(after, before);
    assert!(
        before.iter().any(|s| s.contains(r#"method="other""#)),
        "{before:#?}"
    );
    assert!(
        before.iter().any(|s| s.contains(r#"route="unmatched""#)),
        "{before:#?}"
    );
    let text = String::from_utf8_lossy(&app.get("/metrics", None).await.body).into_owned();
    for invented in ["M1999", "BREW7", "/x5", "/nope/"] {
        assert!(!text.contains(invented), "/metrics names {invented}");
    }
}
