//! Observability: after some ingest, some requests and a retention run, `/metrics` answers in the
//! Prometheus text format with the named series: HTTP latency histograms per route template,
//! ingest counters and batch sizes, retention progress.

mod helpers;

use axum::http::{header, StatusCode};
use chrono::Duration;
use helpers::{t0, TestApp, TOKEN_A};
use std::sync::Arc;
use swath_application::ports::ManualClock;
use swath_application::retention::RunOptions;
use swath_application::{Retention, RetentionOutcome, RetentionPolicy};

#[tokio::test]
async fn metrics_name_routes_ingest_and_retention() {
    // As `swath serve` does before anything records a metric.
    swath_api::routes::operations::metrics_handle();
    let app = TestApp::spawn().await; // ingests the seeded states
    let mower = app.a.mowers[0];
    assert_eq!(
        app.get("/v1/mowers", Some(TOKEN_A)).await.status,
        StatusCode::OK
    );
    let path = format!("/v1/mowers/{}/state", mower.0);
    assert_eq!(app.get(&path, Some(TOKEN_A)).await.status, StatusCode::OK);
    assert_eq!(
        app.get("/no/such/path", None).await.status,
        StatusCode::NOT_FOUND
    );

    // A year and more later, retention deletes the seeded history.
    let clock = Arc::new(ManualClock::new(t0() + Duration::days(400)));
    let retention = Retention::new(
        Arc::new(app.store.clone()),
        clock,
        RetentionPolicy::default(),
    );
    let outcome = retention
        .run(RunOptions::default(), &mut |_| {})
        .await
        .expect("retention");
    let RetentionOutcome::Completed(summary) = outcome else {
        panic!("completed: {outcome:?}");
    };
    assert!(summary.history_expired > 0, "{summary:?}");

    let response = app.get("/metrics", None).await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(response
        .header(header::CONTENT_TYPE.as_str())
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let text = String::from_utf8_lossy(&response.body).into_owned();
    for series in [
        // Per route template, never per path.
        r#"swath_http_request_duration_seconds_bucket{method="GET",route="/v1/mowers",status="200",le="0.001"}"#,
        r#"route="/v1/mowers/{id}/state",status="200""#,
        r#"route="unmatched",status="404""#,
        "# TYPE swath_http_request_duration_seconds histogram",
        "swath_states_stored_total",
        "swath_ingest_batch_size_bucket",
        "swath_ingest_lag_seconds",
        r#"swath_retention_runs_total{outcome="completed"}"#,
        r#"swath_retention_rows_deleted_total{table="history",reason="expired"}"#,
        "swath_retention_progress_ratio 1",
        "swath_retention_last_completed_timestamp_seconds",
        // What the alert rules and the dashboard of deploy/ read (decision 145).
        r#"swath_ready{check="store"} 1"#,
        r#"swath_ready{check="bus"} 1"#,
        r#"swath_ready{check="ingest"} 1"#,
        "swath_ingest_last_commit_timestamp_seconds",
        "swath_ingest_commit_duration_seconds_bucket",
        "swath_http_live_streams 0",
        "swath_memory_store_history_rows_limit 100",
        "process_resident_memory_bytes",
        r#"swath_states_dropped_total{reason="rejected_by_store"} 0"#,
    ] {
        assert!(text.contains(series), "/metrics lacks {series}:\n{text}");
    }
    assert!(
        !text.contains(&mower.0.to_string()),
        "no series is labelled with an id"
    );
}
