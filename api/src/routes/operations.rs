//! Operations routes: liveness, readiness, metrics and the OpenAPI document. None needs a token:
//! load balancers, Prometheus and SDK generators call them without one.

use crate::dto::operations::{NotReady, OpenApiDocument, Readiness};
use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use bytes::Bytes;
use std::sync::OnceLock;
use swath_application::ReadinessReport;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "operations";

/// Liveness
#[utoipa::path(
    get,
    path = "/healthz",
    tag = TAG,
    description = "Answers `200 ok` while the process serves HTTP. It checks nothing else: a \
        failing store or bus does not restart the process.",
    responses(
        (status = 200, description = "The process is alive.", body = String, content_type = "text/plain",
            example = "ok"),
    ),
)]
pub async fn healthz() -> &'static str {
    "ok"
}

/// The OpenAPI document
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = TAG,
    operation_id = "openapi",
    description = "This API's OpenAPI 3.1 document, the same as `openapi/openapi.json` in the \
        repository. Generate clients from it; browse it at `/docs`.",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document.", body = OpenApiDocument, content_type = "application/json"),
    ),
)]
pub async fn openapi_json() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document().clone(),
    )
}

/// The document, serialised once: it never changes while the process runs.
fn document() -> &'static Bytes {
    static DOCUMENT: OnceLock<Bytes> = OnceLock::new();
    DOCUMENT.get_or_init(|| match crate::openapi().to_json() {
        Ok(json) => Bytes::from(json),
        Err(e) => {
            tracing::error!(error = %e, "Could not serialise the OpenAPI document.");
            Bytes::from_static(b"{}")
        }
    })
}

/// Readiness
#[utoipa::path(
    get,
    path = "/readyz",
    tag = TAG,
    description = "Answers `200` when the store and the event bus both answer a ping (each \
        within 2 s) and the ingest consumer makes progress, `503` otherwise, naming what is down \
        (`ingest` is `stalled` when every batch it tried failed for 60 s or more). Load balancers send traffic only to a \
        ready replica; unlike `/healthz`, a failing check does not mean the process should be \
        restarted (it recovers on its own when the service is back).",
    responses(
        (status = 200, description = "The store and the bus answer.", body = Readiness,
            example = json!({"store": "up", "bus": "up", "ingest": "up"})),
        (status = 503, description = "The store or the bus (or both) did not answer; `detail` \
            names which.", body = NotReady, content_type = "application/problem+json"),
    ),
)]
pub async fn readyz(
    axum::extract::State(state): axum::extract::State<crate::state::AppState>,
) -> axum::response::Response {
    let (store, bus, stalled) = check_readiness(&state).await;
    let word = |r: &Result<(), String>| if r.is_ok() { "up" } else { "down" }.to_owned();
    let checks = Readiness {
        store: word(&store),
        bus: word(&bus),
        ingest: if stalled.is_some() { "stalled" } else { "up" }.to_owned(),
    };
    if store.is_ok() && bus.is_ok() && stalled.is_none() {
        return axum::Json(checks).into_response();
    }
    not_ready(checks, &store, &bus, stalled)
}

/// The `503` of a replica that is not ready: which checks failed, each logged.
fn not_ready(
    checks: Readiness,
    store: &Result<(), String>,
    bus: &Result<(), String>,
    stalled: Option<std::time::Duration>,
) -> axum::response::Response {
    let mut down = Vec::new();
    if let Err(cause) = store {
        tracing::warn!(error = %cause, "Not ready: the store does not answer.");
        down.push("the store");
    }
    if let Err(cause) = bus {
        tracing::warn!(error = %cause, "Not ready: the event bus does not answer.");
        down.push("the event bus");
    }
    if let Some(stalled) = stalled {
        tracing::warn!(
            failing_seconds = stalled.as_secs(),
            "Not ready: the ingest consumer has failed every batch it tried."
        );
        down.push("the ingest consumer");
    }
    let body = NotReady {
        type_uri: format!("{}unavailable", crate::error::PROBLEM_BASE),
        title: "Service unavailable".to_owned(),
        status: 503,
        detail: format!(
            "Not ready: {} {} down.",
            down.join(" and "),
            if down.len() > 1 { "are" } else { "is" }
        ),
        checks,
    };
    let body = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
    (
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(crate::error::PROBLEM_JSON),
        )],
        body,
    )
        .into_response()
}

/// What `/readyz` and every `/metrics` scrape check: the store's and the bus's pings (each within
/// 2 s, the cause when down) and how long the ingest consumer has failed every batch, if it has
/// for 60 s or more. Each answer is also left in
/// `swath_ready{check}` (1 up, 0 down), so that an alert sees what a load balancer sees.
async fn check_readiness(
    state: &crate::state::AppState,
) -> (
    Result<(), String>,
    Result<(), String>,
    Option<std::time::Duration>,
) {
    let ReadinessReport {
        store,
        bus,
        stalled,
    } = state.readiness.check().await;
    let up = |ok: bool| if ok { 1.0 } else { 0.0 };
    metrics::gauge!(READY, "check" => "store").set(up(store.is_ok()));
    metrics::gauge!(READY, "check" => "bus").set(up(bus.is_ok()));
    metrics::gauge!(READY, "check" => "ingest").set(up(stalled.is_none()));
    (store, bus, stalled)
}

/// The readiness gauge, per check (`store`, `bus`, `ingest`).
const READY: &str = "swath_ready";

/// The Prometheus text exposition format, version 0.0.4.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Metrics
#[utoipa::path(
    get,
    path = "/metrics",
    tag = TAG,
    summary = "Metrics (Prometheus)",
    description = "The process's metrics in the Prometheus text format, for a Prometheus scrape. \
        Counters: `swath_states_received_total` (state reports handed to ingestion, valid or \
        not), `swath_states_stored_total`, `swath_states_dropped_total{reason}` (refused alone: \
        `malformed`, `too_large`, `future_observed_at`, `ancient_observed_at`, \
        `invalid_battery`, `invalid_position`, `field_too_long`, `invalid_text`, \
        `unknown_mower`, `account_mismatch`, `subject_mismatch`, `rejected_by_store`), \
        `swath_ingest_batches_total` (batches stored), \
        `swath_ingest_redeliveries_total` (bus messages seen again: delivery count above 1), \
        `swath_http_connections_closed_total{reason}` (connections cut off: `silent`, \
        `slow_head`, `idle`), \
        `swath_postgres_statements_total`, `swath_postgres_commits_total`. Histogram: \
        `swath_ingest_batch_size` (states per stored batch). Gauge: \
        `swath_ingest_lag_seconds` (the time of the last stored batch minus the `observed_at` of \
        its newest state), `swath_ingest_failed_batches_in_a_row` (0 while the ingest consumer \
        stores its batches; growing when it stopped making progress). Every scrape runs \
        `/readyz`'s checks first and reports them as `swath_ready{check}`. The full list, with \
        the alert rules and the dashboard built on them: `deploy/` and docs/operations.md. A \
        metric appears once it was first recorded.",
    responses(
        (status = 200, description = "The metrics, Prometheus text format 0.0.4.", body = String,
            content_type = "text/plain; version=0.0.4",
            example = "# TYPE swath_states_stored_total counter\nswath_states_stored_total 1024\n"),
    ),
)]
pub async fn metrics(
    axum::extract::State(state): axum::extract::State<crate::state::AppState>,
) -> impl IntoResponse {
    let handle = metrics_handle();
    // Only the gauges matter here; a scrape answers whatever the checks found.
    let _ = check_readiness(&state).await;
    record_process_memory();
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(PROMETHEUS_TEXT),
        )],
        handle.render(),
    )
}

/// Sets `process_resident_memory_bytes` (the name Prometheus's client libraries give it) from
/// `VmRSS` in `/proc/self/status`, which is in kB whatever the page size (Linux; elsewhere the
/// gauge is absent).
fn record_process_memory() {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    if let Some(kb) = kb {
        metrics::gauge!("process_resident_memory_bytes").set((kb * 1024) as f64);
    }
}

/// The bounds of the batch size histogram's buckets: powers of two up to the largest batch.
const BATCH_SIZE_BUCKETS: [f64; 11] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1000.0,
];

/// The bounds of the group commit histogram's buckets: batches written in one unit of work, at
/// most one per partition of both consumers.
const GROUP_BUCKETS: [f64; 7] = [1.0, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0];

/// The Prometheus recorder, installed as the process's global `metrics` recorder on first use
/// (`main` calls it at start-up, so that nothing recorded before the first scrape is lost). When
/// another global recorder is installed already (a test harness), the handle renders an empty
/// registry rather than failing.
pub fn metrics_handle() -> &'static metrics_exporter_prometheus::PrometheusHandle {
    static HANDLE: OnceLock<metrics_exporter_prometheus::PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("swath_ingest_batch_size".to_owned()),
                &BATCH_SIZE_BUCKETS,
            )
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("swath_watch_batch_size".to_owned()),
                    &BATCH_SIZE_BUCKETS,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("swath_group_commit_batches".to_owned()),
                    &GROUP_BUCKETS,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full(crate::http_metrics::HTTP_DURATION.to_owned()),
                    &crate::http_metrics::HTTP_DURATION_BUCKETS,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("swath_ingest_commit_duration_seconds".to_owned()),
                    &crate::http_metrics::HTTP_DURATION_BUCKETS,
                )
            })
            .expect("bucket bounds are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("A metrics recorder is installed already; /metrics will be empty.");
        } else {
            describe_metrics();
            crate::http_metrics::describe_metrics();
            swath_application::retention::describe_metrics();
        }
        handle
    })
}

/// The `# HELP` lines of Swath's metrics.
fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "swath_states_received_total",
        "State reports handed to ingestion, valid or not."
    );
    describe_gauge!(
        "swath_bus_partitions_owned",
        "Partitions of a consumer (label `consumer`) this replica holds now; replicas share them."
    );
    describe_counter!("swath_states_stored_total", "State reports stored.");
    describe_counter!(
        "swath_states_dropped_total",
        "State reports refused alone, by reason."
    );
    describe_counter!(
        "swath_states_late_merged_total",
        "New states older than their mower's newest, merged into the health and day totals."
    );
    describe_counter!(
        "swath_states_late_not_counted_total",
        "New late states stored but not counted: retention may have removed their neighbours."
    );
    describe_counter!(
        "swath_ingest_batches_total",
        "Batches of state reports stored (one unit of work each)."
    );
    describe_counter!(
        "swath_ingest_redeliveries_total",
        "Bus messages the ingest consumer saw again (delivery count above 1)."
    );
    describe_histogram!(
        "swath_ingest_batch_size",
        Unit::Count,
        "States per stored batch."
    );
    describe_gauge!(
        "swath_ingest_lag_seconds",
        Unit::Seconds,
        "When the last batch was stored, minus the observed_at of its newest state."
    );
    describe_counter!(
        "swath_postgres_statements_total",
        "Statements the telemetry path executed on PostgreSQL."
    );
    describe_counter!(
        "swath_postgres_commits_total",
        "Transactions the telemetry path committed on PostgreSQL."
    );
    describe_counter!(
        "swath_busy_writes_total",
        "Busy statuses the watcher's scheduler wrote."
    );
    describe_histogram!(
        "swath_group_commit_batches",
        Unit::Count,
        "Consumer batches written in one unit of work (group commit), by use case."
    );
    describe_gauge!(
        "swath_ingest_failed_batches_in_a_row",
        "Batches the ingest consumer failed in a row: 0 while it stores them."
    );
    describe_gauge!(
        "swath_ingest_last_commit_timestamp_seconds",
        Unit::Seconds,
        "When this replica last committed an ingest batch (Unix time)."
    );
    describe_histogram!(
        "swath_ingest_commit_duration_seconds",
        Unit::Seconds,
        "Time of an ingest batch's unit of work, from its first statement to its commit."
    );
    describe_histogram!(
        "swath_watch_batch_size",
        Unit::Count,
        "States per batch the watcher handled."
    );
    describe_counter!("swath_events_total", "Events the watcher derived, by kind.");
    describe_counter!(
        "swath_webhook_enqueued_total",
        "Webhook deliveries enqueued: one per matching endpoint and notification."
    );
    describe_counter!(
        "swath_webhook_deliveries_total",
        "Webhook delivery attempts, by outcome (delivered, failed, refused, gone)."
    );
    describe_histogram!(
        "swath_webhook_attempt_seconds",
        Unit::Seconds,
        "Time of a webhook delivery attempt, from the request to the answer or the time-out."
    );
    describe_counter!(
        "swath_webhook_endpoints_disabled_total",
        "Webhook endpoints Swath disabled (retry horizon passed, or 410 Gone)."
    );
    describe_gauge!(
        "swath_webhook_backlog",
        "Pending webhook deliveries of an endpoint (label `webhook_id`)."
    );
    describe_gauge!(
        "swath_webhook_endpoints_pending",
        "Webhook endpoints with at least one pending delivery."
    );
    describe_counter!(
        "swath_alerts_cleared_without_event_total",
        "Alerts cleared without an event of their own, by kind."
    );
    describe_counter!(
        "swath_geofence_parses_total",
        "Geofence polygons the watcher parsed (cache misses)."
    );
    describe_counter!(
        "swath_latest_reads_total",
        "Latest-state reads of one mower, by answer: memory (the replica's copy) or store."
    );
    describe_counter!(
        "swath_http_connections_closed_total",
        "HTTP connections cut off by the limits, by reason: silent, slow_head, idle."
    );
    describe_counter!(
        "swath_bus_live_dropped_total",
        "Live messages dropped for a subscriber that read too slowly."
    );
    describe_gauge!(
        "swath_bus_consumer_pending_messages",
        "Messages of a durable consumer's partition not delivered yet (JetStream's num_pending)."
    );
    describe_gauge!(
        "swath_bus_consumer_unacknowledged_messages",
        "Messages of a partition delivered and not acknowledged yet (JetStream only)."
    );
    describe_gauge!(
        "swath_bus_replicas",
        "Replicas subscribed to a consumer, this one included, as its membership counts them."
    );
    describe_gauge!(
        READY,
        "What /readyz found at the last scrape, by check (store, bus, ingest): 1 up, 0 down."
    );
    describe_gauge!(
        "process_resident_memory_bytes",
        Unit::Bytes,
        "Resident memory of the process."
    );
    describe_gauge!(
        "swath_postgres_pool_connections",
        "Connections of the PostgreSQL pool, by state: idle, busy."
    );
    describe_gauge!(
        "swath_postgres_pool_max_connections",
        "The most connections the PostgreSQL pool opens (SWATH_DATABASE_MAX_CONNECTIONS)."
    );
    describe_gauge!(
        "swath_store_replica_lag_seconds",
        "How far the read store (SWATH_DATABASE_READ_URL) replays behind its primary: what a read from it may miss."
    );
    describe_gauge!(
        "swath_store_replica_up",
        "Whether the read store (SWATH_DATABASE_READ_URL) answered its last lag check: 1 yes, 0 no."
    );
    describe_counter!(
        "swath_store_read_fallbacks_total",
        "Reads the read store failed and the primary answered instead, by read."
    );
    describe_counter!(
        "swath_store_primary_fallbacks_total",
        "Token and directory lookups the primary failed and the read store answered instead, by lookup."
    );
    describe_gauge!(
        "swath_memory_store_history_rows_limit",
        "History rows the memory store keeps per mower (SWATH_MEMORY_HISTORY_PER_MOWER)."
    );
    describe_gauge!(
        "swath_memory_store_history_rows_max",
        "The most history rows one mower has held in the memory store since the start."
    );
    // Counters the alert rules watch for an increase start at zero: Prometheus cannot see the
    // first increment of a series that is born with it.
    metrics::counter!("swath_ingest_redeliveries_total").absolute(0);
    metrics::counter!("swath_states_dropped_total", "reason" => "rejected_by_store").absolute(0);
    // The dashboard's events panel reads every kind's series, so each exists before its first event.
    for kind in swath_domain::watch::EventKind::ALL {
        metrics::counter!("swath_events_total", "kind" => kind.as_str()).absolute(0);
    }
}
