//! `GET /v1/live/stream` ids, resume and filters (decisions 101–103), on the test app: the real
//! router and use cases on the memory adapters, states published on the bus as a gateway would,
//! events published by the watcher itself (its offline sweep, its next state).
//!
//! The Home-Assistant-style flow: a client reads, disconnects, reconnects with `Last-Event-ID`
//! and receives exactly what a client that stayed connected received after that id.

mod helpers;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use bytes::Bytes;
use chrono::Duration as Span;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::time::Duration;
use swath_application::ports::Clock;
use swath_application::subjects;
use swath_domain::watch::AlertKind;
use swath_domain::MowerId;
use swath_tests::support::{open_alert, store_alerts};
use tower::ServiceExt;

use helpers::{TestApp, TOKEN_A, TOKEN_A_ADMIN, TOKEN_B};

const WAIT: Duration = Duration::from_secs(5);

/// One SSE event: `id`, `event` and parsed `data`.
#[derive(Clone, Debug, PartialEq)]
struct Sse {
    id: Option<String>,
    event: String,
    data: Value,
}

/// An open stream, read frame by frame.
struct Client {
    body: Body,
    buffer: String,
}

impl Client {
    async fn connect(app: &TestApp, token: &str, query: &str, last: Option<&str>) -> Client {
        let mut request = Request::get(format!("/v1/live/stream{query}"))
            .header(header::AUTHORIZATION, format!("Bearer {token}"));
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last);
        }
        let response = app
            .router
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        Client {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// The next event, skipping comments; panics when none comes within [`WAIT`].
    async fn next(&mut self) -> Sse {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut sse = Sse {
                    id: None,
                    event: "message".into(),
                    data: Value::Null,
                };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        sse.event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    } else if let Some(v) = line.strip_prefix("id:") {
                        sse.id = Some(v.trim().to_owned());
                    }
                }
                if data.is_empty() {
                    continue; // a comment (keep-alive)
                }
                sse.data = serde_json::from_str(&data).unwrap();
                return sse;
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .expect("an event within the wait")
                .expect("the stream is open")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }

    async fn take(&mut self, n: usize) -> Vec<Sse> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.next().await);
        }
        out
    }
}

/// A report of account A's mower, marked with `vendor_state` to be told apart.
fn report(app: &TestApp, mower: MowerId, marker: &str, battery: u8, lat: f64) -> Value {
    json!({
        "mower_id": mower,
        "account_id": app.a.account_id,
        "observed_at": app.clock.now().to_rfc3339(),
        "activity": "mowing",
        "battery_percent": battery,
        "position": {"lat": lat, "lon": 13.4},
        "blade_on": true,
        "vendor_state": marker,
    })
}

/// Publishes a report as a gateway would.
async fn publish(app: &TestApp, report: &Value) {
    let mower: MowerId = serde_json::from_value(report["mower_id"].clone()).unwrap();
    app.bus
        .publish(
            &subjects::telemetry(mower),
            Bytes::from(report.to_string()),
            None,
        )
        .await
        .unwrap();
}

/// Hands a report to the watcher, which publishes the events it derives.
async fn watch(app: &TestApp, report: &Value) {
    let parsed = app.watcher.parse(report.to_string().as_bytes());
    app.watcher.on_states(&[parsed]).await.unwrap();
}

fn marker(sse: &Sse) -> String {
    match sse.event.as_str() {
        "state" => sse.data["vendor_state"].as_str().unwrap().to_owned(),
        "event" => sse.data["kind"].as_str().unwrap().to_owned(),
        other => other.to_owned(),
    }
}

#[tokio::test]
async fn a_client_that_resumes_with_last_event_id_misses_nothing() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    // A client that never disconnects: what it receives is what "nothing missed" means.
    let mut witness = Client::connect(&app, TOKEN_A_ADMIN, "", None).await;
    let mut ha = Client::connect(&app, TOKEN_A, "", None).await;

    let first = report(&app, bravo, "s1", 80, 52.5);
    publish(&app, &first).await;
    watch(&app, &first).await;
    let received = ha.next().await;
    assert_eq!(marker(&received), "s1");
    assert_eq!(
        witness.next().await,
        received,
        "the same id and data for both"
    );
    let last = received.id.clone().unwrap();
    drop(ha); // the disconnect

    // While it is away: two states, the mower goes offline (the watcher's sweep), and comes
    // back online with its next state. The witness sees each before the next happens, so the
    // order is the feed's.
    let mut during = Vec::new();
    for (i, lat) in [(2, 52.5001), (3, 52.5002)] {
        publish(&app, &report(&app, bravo, &format!("s{i}"), 80, lat)).await;
        during.push(witness.next().await);
    }
    app.clock.advance(Span::minutes(11));
    assert_eq!(app.watcher.sweep_offline().await.unwrap(), 1);
    during.push(witness.next().await);
    let back = report(&app, bravo, "s4", 79, 52.5003);
    publish(&app, &back).await;
    during.push(witness.next().await);
    watch(&app, &back).await;
    during.push(witness.next().await);
    assert_eq!(
        during.iter().map(marker).collect::<Vec<_>>(),
        ["s2", "s3", "went_offline", "s4", "came_online"]
    );

    let mut ha = Client::connect(&app, TOKEN_A, "", Some(&last)).await;
    let resumed = ha.take(during.len()).await;
    assert_eq!(
        resumed, during,
        "exactly what the witness received, ids included"
    );
    // Ids are opaque (they hide the feed's sequence, issue 35): each names one item.
    let ids: std::collections::HashSet<&String> = resumed
        .iter()
        .chain([&received])
        .map(|e| e.id.as_ref().unwrap())
        .collect();
    assert_eq!(ids.len(), resumed.len() + 1, "one id per item");
    // The offline and online events say which alert they raised and cleared.
    assert_eq!(
        resumed[2].data["alert"],
        json!({"kind": "offline", "change": "raised"})
    );
    assert_eq!(
        resumed[4].data["alert"],
        json!({"kind": "offline", "change": "cleared"})
    );
    assert_eq!(resumed[2].data["mower_id"], json!(bravo));

    // And it goes on live after the catch-up.
    publish(&app, &report(&app, bravo, "s5", 79, 52.5003)).await;
    assert_eq!(marker(&ha.next().await), "s5");
}

#[tokio::test]
async fn an_id_the_replica_cannot_resume_from_is_a_reset_first() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let mut first = Client::connect(&app, TOKEN_A, "", None).await;
    publish(&app, &report(&app, bravo, "s1", 80, 52.5)).await;
    let mut head = first.next().await.id.unwrap();
    let (feed, _) = head.rsplit_once('-').unwrap();
    let feed = feed.to_owned();
    for last in [
        "0000000000000000-1".to_owned(),
        "garbage".to_owned(),
        format!("{feed}-999999"),
    ] {
        let mut client = Client::connect(&app, TOKEN_A, "", Some(&last)).await;
        let reset = client.next().await;
        assert_eq!(reset.event, "reset", "{last}");
        assert_eq!(reset.data, json!({"reason": "unknown_id"}));
        assert_eq!(reset.id, Some(head.clone()), "the head it goes on from");
        publish(&app, &report(&app, bravo, "live", 80, 52.5)).await;
        let live = client.next().await;
        assert_eq!(marker(&live), "live");
        head = live.id.unwrap();
    }
}

#[tokio::test]
async fn filters_narrow_the_stream_and_changes_only_sends_what_changed() {
    let app = TestApp::spawn().await;
    let [bravo, charlie, alpha] = app.a.mowers[..] else {
        unreachable!()
    };
    let south = app.a.sites[1];
    let query = format!("?mowers={alpha},{bravo}&kinds=state,went_offline&changes_only=true");
    let mut changes = Client::connect(&app, TOKEN_A, &query, None).await;
    let mut south_only = Client::connect(&app, TOKEN_A, &format!("?sites={south}"), None).await;
    let mut other_tenant = Client::connect(&app, TOKEN_B, &format!("?mowers={alpha}"), None).await;
    let mut b_all = Client::connect(&app, TOKEN_B, "", None).await;

    for (mower, marker, battery, lat) in [
        (charlie, "c1", 50, 52.5),   // not in `mowers`
        (alpha, "a1", 85, 52.5),     // the first: a change
        (alpha, "a2", 85, 52.5),     // the same
        (alpha, "a3", 81, 52.50005), // the same band, moved about 5.6 m
        (alpha, "a4", 69, 52.50005), // another band
        (alpha, "a5", 69, 52.50015), // 11 m from a4
        (bravo, "b1", 50, 52.5),
    ] {
        publish(&app, &report(&app, mower, marker, battery, lat)).await;
    }
    let got: Vec<String> = changes.take(4).await.iter().map(marker).collect();
    assert_eq!(got, ["a1", "a4", "a5", "b1"]);
    assert_eq!(marker(&south_only.next().await), "c1");

    // `kinds`: the state events are not asked for, `went_offline` is; after it, the next state
    // is a change even though nothing else changed.
    watch(&app, &report(&app, alpha, "a5", 69, 52.50015)).await;
    app.clock.advance(Span::minutes(11));
    app.watcher.sweep_offline().await.unwrap();
    let offline = changes.next().await;
    assert_eq!(
        (offline.event.as_str(), marker(&offline).as_str()),
        ("event", "went_offline")
    );
    let back = report(&app, alpha, "a6", 69, 52.50015);
    watch(&app, &back).await; // came_online: not asked for
    publish(&app, &back).await;
    assert_eq!(marker(&changes.next().await), "a6");

    // Another account's token that names A's mower sees nothing of it, while its own
    // mower's states arrive on its other stream.
    let delta = app.b.mowers[0];
    let mut b_report = report(&app, delta, "d1", 50, 52.5);
    b_report["account_id"] = json!(app.b.account_id);
    publish(&app, &report(&app, alpha, "a7", 10, 52.5)).await;
    publish(&app, &b_report).await;
    assert_eq!(marker(&b_all.next().await), "d1");
    let nothing = tokio::time::timeout(Duration::from_millis(300), other_tenant.next()).await;
    assert!(
        nothing.is_err(),
        "B's token filtered on A's mower gets nothing"
    );
}

#[tokio::test]
async fn a_malformed_filter_is_a_400() {
    let app = TestApp::spawn().await;
    for query in ["?kinds=state,nonsense", "?mowers=not-a-uuid", "?sites=1,2"] {
        let response = app
            .get(&format!("/v1/live/stream{query}"), Some(TOKEN_A))
            .await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(response.problem().status, 400);
    }
}

#[tokio::test]
async fn stream_instants_are_to_the_microsecond_like_rest() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    app.clock
        .set(app.clock.now() + Span::nanoseconds(123_456_789));
    let mut client = Client::connect(&app, TOKEN_A, "", None).await;
    publish(&app, &report(&app, bravo, "s1", 80, 52.5)).await;
    let state = client.next().await;
    assert_eq!(
        state.data["last_seen_at"],
        json!("2026-06-01T12:01:00.123456Z"),
        "truncated to the microsecond, as REST's instants are"
    );
}

/// The `alert` event the stream sends for an alert cleared without an event of its own.
fn cleared(mower: MowerId, kind: &str, at: &Value, cause: &str) -> Value {
    json!({
        "mower_id": mower,
        "kind": kind,
        "change": "cleared",
        "cleared_at": at,
        "cause": cause,
    })
}

/// The stream's next event, which must be the `alert` of a clear; its `cleared_at`.
async fn next_clear(
    client: &mut Client,
    mower: MowerId,
    kind: &str,
    cause: &str,
) -> chrono::DateTime<chrono::Utc> {
    let got = client.next().await;
    assert_eq!(got.event, "alert", "{got:?}");
    assert_eq!(
        got.data,
        cleared(mower, kind, &got.data["cleared_at"], cause)
    );
    serde_json::from_value(got.data["cleared_at"].clone()).unwrap()
}

#[tokio::test]
async fn alerts_cleared_without_an_event_are_on_the_stream() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let fence = json!({"type": "Polygon", "coordinates": [[
        [13.399, 52.499], [13.401, 52.499], [13.401, 52.501], [13.399, 52.501], [13.399, 52.499]
    ]]});
    let geofence = format!("/v1/mowers/{bravo}/geofence");
    let put = app
        .json(
            axum::http::Method::PUT,
            &geofence,
            Some(TOKEN_A_ADMIN),
            &fence,
        )
        .await;
    assert_eq!(put.status, StatusCode::OK);
    let mut client = Client::connect(
        &app,
        TOKEN_A,
        "?kinds=alert,battery_low,geofence_left",
        None,
    )
    .await;

    // Outside the fence with 15 %: both alerts raised by events.
    watch(&app, &report(&app, bravo, "w1", 15, 52.51)).await;
    let raised = client.take(2).await;
    assert_eq!(
        raised.iter().map(marker).collect::<Vec<_>>(),
        ["geofence_left", "battery_low"]
    );
    assert_eq!(
        raised[1].data["alert"],
        json!({"kind": "battery_low", "change": "raised"})
    );
    assert_eq!(
        (
            app.open_alerts(TOKEN_A, bravo, "battery_low").await,
            app.open_alerts(TOKEN_A, bravo, "geofence").await
        ),
        (1, 1)
    );

    // Back at 35 %: no event, the alert is cleared, and the stream says so.
    app.clock.advance(Span::seconds(1));
    let recovered = report(&app, bravo, "w2", 35, 52.51);
    watch(&app, &recovered).await;
    let cleared_at = next_clear(&mut client, bravo, "battery_low", "battery_recovered").await;
    assert_eq!(
        cleared_at,
        serde_json::from_value::<chrono::DateTime<chrono::Utc>>(recovered["observed_at"].clone())
            .unwrap(),
        "cleared at the instant of the state that re-armed it"
    );
    assert_eq!(app.open_alerts(TOKEN_A, bravo, "battery_low").await, 0);

    // The geofence removed while outside it: its alarm clears with the next state.
    assert_eq!(
        app.delete(&geofence, Some(TOKEN_A_ADMIN)).await.status,
        StatusCode::NO_CONTENT
    );
    app.clock.advance(Span::seconds(1));
    watch(&app, &report(&app, bravo, "w3", 35, 52.51)).await;
    next_clear(&mut client, bravo, "geofence", "geofence_removed").await;
    assert_eq!(app.open_alerts(TOKEN_A, bravo, "geofence").await, 0);

    // A blade reset clears an open blade alert (stored as W6 would have raised it).
    let reset = format!("/v1/mowers/{bravo}/blade-reset");
    let open_blade = || async {
        let raised = open_alert(
            bravo,
            app.a.account_id,
            AlertKind::BladeDue,
            app.clock.now(),
        );
        store_alerts(&app.store, &[bravo], vec![raised]).await;
    };
    let reset_blade = || async {
        let response = app.post(&reset, Some(TOKEN_A_ADMIN), &json!({})).await;
        assert_eq!(response.status, StatusCode::NO_CONTENT);
    };
    open_blade().await;
    assert_eq!(app.open_alerts(TOKEN_A, bravo, "blade_due").await, 1);
    reset_blade().await;
    next_clear(&mut client, bravo, "blade_due", "blade_reset").await;
    assert_eq!(app.open_alerts(TOKEN_A, bravo, "blade_due").await, 0);

    // A reset with no open alert clears nothing and tells nothing.
    reset_blade().await;
    let nothing = tokio::time::timeout(Duration::from_millis(300), client.next()).await;
    assert!(nothing.is_err(), "no alert was open: nothing to tell");

    // Another tenant sees none of it; `kinds` without `alert` leaves them out.
    let mut b_all = Client::connect(&app, TOKEN_B, "", None).await;
    let mut no_alerts = Client::connect(&app, TOKEN_A, "?kinds=state", None).await;
    open_blade().await;
    reset_blade().await;
    publish(&app, &report(&app, bravo, "after", 35, 52.51)).await;
    assert_eq!(
        marker(&no_alerts.next().await),
        "after",
        "the alert was filtered out"
    );
    let nothing = tokio::time::timeout(Duration::from_millis(300), b_all.next()).await;
    assert!(nothing.is_err(), "B's stream gets nothing of A's mower");
}
