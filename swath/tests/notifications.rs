//! The notification routes through the real router on the memory adapters: geofence, zones,
//! blade reset, the events feed, open alerts and the busy check, with scopes and tenant isolation.

mod helpers;

use axum::http::{Method, StatusCode};
use chrono::Duration;
use helpers::{t0, TestApp, TOKEN_A, TOKEN_A_ADMIN, TOKEN_A_WRITE_ONLY, TOKEN_B};
use serde_json::{json, Value};
use std::sync::Arc;
use swath::wiring::{wire, Stores};
use swath_api::router;
use swath_application::ports::Clock;
use swath_application::{SchedulerStatus, Watcher};
use swath_domain::watch::{AlertKind, Event, EventDetail, EventKind, WatchChanges};
use swath_memory::MemoryBus;
use swath_tests::support::http::test_settings;
use swath_tests::support::{commit_watch, open_alert, store_alerts};

/// The test application, with its watcher and busy check (the same store, as `swath serve` wires
/// them).
async fn app() -> (TestApp, Arc<Watcher>, Arc<SchedulerStatus>) {
    let app = TestApp::spawn().await;
    let (watcher, scheduler) = (app.watcher.clone(), app.scheduler.clone());
    (app, watcher, scheduler)
}

fn square(from: f64, to: f64) -> Value {
    let lat = |d: f64| 52.5 + d * 1e-5;
    let lon = |d: f64| 13.4 + d * 1e-5;
    json!({"type": "Polygon", "coordinates": [[
        [lon(from), lat(from)], [lon(to), lat(from)], [lon(to), lat(to)],
        [lon(from), lat(to)], [lon(from), lat(from)]
    ]]})
}

async fn watch(app: &TestApp, watcher: &Watcher, scheduler: &SchedulerStatus, reports: &[Value]) {
    let parsed: Vec<_> = reports
        .iter()
        .map(|r| watcher.parse(r.to_string().as_bytes()))
        .collect();
    watcher.on_states(&parsed).await.unwrap();
    let ok: Vec<_> = parsed.into_iter().filter_map(Result::ok).collect();
    scheduler.record(&ok).await.unwrap();
    for r in reports {
        app.record(r.clone()).await;
    }
}

fn state(app: &TestApp, seconds: i64, activity: &str, north: f64) -> Value {
    json!({
        "mower_id": app.a.mowers[0],
        "account_id": app.a.account_id,
        "observed_at": (t0() + Duration::seconds(seconds)).to_rfc3339(),
        "activity": activity,
        "battery_percent": 60,
        "position": {"lat": 52.5 + north * 1e-5, "lon": 13.4 + 50e-5, "accuracy_m": 1.0},
    })
}

#[tokio::test]
async fn the_geofence_is_set_read_and_raises_the_theft_alarm() {
    let (app, watcher, scheduler) = app().await;
    let mower = app.a.mowers[0];
    let path = format!("/v1/mowers/{mower}/geofence");
    assert_eq!(
        app.get(&path, Some(TOKEN_A)).await.status,
        StatusCode::NOT_FOUND,
        "no geofence yet"
    );
    let put = app
        .json(Method::PUT, &path, Some(TOKEN_A), &square(0.0, 100.0))
        .await;
    assert_eq!(
        put.status,
        StatusCode::FORBIDDEN,
        "a read token cannot write"
    );
    let put = app
        .json(Method::PUT, &path, Some(TOKEN_A_ADMIN), &square(0.0, 100.0))
        .await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.json());
    let bad = app
        .json(
            Method::PUT,
            &path,
            Some(TOKEN_A_ADMIN),
            &json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 1]]]}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    bad.problem();
    let got = app.get(&path, Some(TOKEN_A)).await.json();
    assert_eq!(got["version"], put.json()["version"]);

    watch(
        &app,
        &watcher,
        &scheduler,
        &[
            state(&app, 100, "mowing", 50.0),
            state(&app, 110, "mowing", 300.0),
        ],
    )
    .await;
    let events = app.get("/v1/events", Some(TOKEN_A)).await.json();
    assert_eq!(events["items"][0]["kind"], "geofence_left");
    assert_eq!(events["items"][0]["mower_id"], json!(mower));
    let alerts = app.get("/v1/alerts", Some(TOKEN_A)).await.json();
    assert_eq!(alerts["items"][0]["kind"], "geofence");
    assert_eq!(alerts["items"][0]["severity"], "critical");
    assert_eq!(alerts["truncated"], false);

    // Another account sees none of it, and gets the 404 of an unknown mower.
    let b_events = app.get("/v1/events", Some(TOKEN_B)).await.json();
    assert!(b_events["items"].as_array().unwrap().is_empty());
    let foreign = app.get(&path, Some(TOKEN_B)).await;
    let unknown = app
        .get(
            &format!("/v1/mowers/{}/geofence", uuid::Uuid::now_v7()),
            Some(TOKEN_B),
        )
        .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
    assert_eq!(foreign.body, unknown.body);
    let filtered = app
        .get(&format!("/v1/events?mower_id={mower}"), Some(TOKEN_B))
        .await
        .json();
    assert!(filtered["items"].as_array().unwrap().is_empty());

    let busy = app
        .get(&format!("/v1/mowers/{mower}/busy"), Some(TOKEN_A))
        .await
        .json();
    assert_eq!(busy["busy"], true);
    assert_eq!(busy["activity"], "mowing");

    let deleted = app.delete(&path, Some(TOKEN_A_WRITE_ONLY)).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn zones_are_managed_and_report_occupancy() {
    let (app, _watcher, _scheduler) = app().await;
    let mower = app.a.mowers[0];
    let zones = format!("/v1/mowers/{mower}/zones");
    let created = app
        .post(
            &zones,
            Some(TOKEN_A_ADMIN),
            &json!({"name": "Roses", "polygon": square(0.0, 100.0)}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.json());
    let zone_id = created.json()["id"].as_str().unwrap().to_owned();
    let nameless = app
        .post(
            &zones,
            Some(TOKEN_A_ADMIN),
            &json!({"name": " ", "polygon": square(0.0, 100.0)}),
        )
        .await;
    assert_eq!(nameless.status, StatusCode::UNPROCESSABLE_ENTITY);

    app.record(state(&app, 100, "mowing", 50.0)).await;
    let list = app.get(&zones, Some(TOKEN_A)).await.json();
    assert_eq!(list["items"][0]["name"], "Roses");
    assert_eq!(list["items"][0]["occupied"], true);
    let events = app
        .get("/v1/events?kind=zone_entered", Some(TOKEN_A))
        .await
        .json();
    assert_eq!(events["items"][0]["details"]["zone_name"], "Roses");

    let renamed = app
        .json(
            Method::PUT,
            &format!("{zones}/{zone_id}"),
            Some(TOKEN_A_ADMIN),
            &json!({"name": "Tulips", "polygon": square(0.0, 100.0)}),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK);
    assert_eq!(renamed.json()["name"], "Tulips");
    let unknown_zone = app
        .delete(
            &format!("{zones}/{}", uuid::Uuid::now_v7()),
            Some(TOKEN_A_ADMIN),
        )
        .await;
    assert_eq!(unknown_zone.status, StatusCode::NOT_FOUND);
    let foreign = app
        .delete(&format!("{zones}/{zone_id}"), Some(TOKEN_B))
        .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.delete(&format!("{zones}/{zone_id}"), Some(TOKEN_A_ADMIN))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn a_blade_reset_clears_the_blade_alert_and_feeds_page_by_cursor() {
    let (app, _watcher, _scheduler) = app().await;
    let mower = app.a.mowers[0];
    // An open blade alert, stored as the watcher would have raised it.
    let raised = open_alert(mower, app.a.account_id, AlertKind::BladeDue, t0());
    store_alerts(&app.store, &[mower], vec![raised]).await;
    let blade_alerts = || app.open_alerts(TOKEN_A, mower, "blade_due");
    assert_eq!(blade_alerts().await, 1, "the blade alert is open");
    assert_eq!(
        app.post(
            &format!("/v1/mowers/{mower}/blade-reset"),
            Some(TOKEN_A),
            &json!({})
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(blade_alerts().await, 1, "a refused reset clears nothing");
    let reset = app
        .post(
            &format!("/v1/mowers/{mower}/blade-reset"),
            Some(TOKEN_A_ADMIN),
            &json!({}),
        )
        .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT);
    assert_eq!(blade_alerts().await, 0, "the reset cleared the blade alert");
    // Zones entered and left, to fill the feed.
    app.post(
        &format!("/v1/mowers/{mower}/zones"),
        Some(TOKEN_A_ADMIN),
        &json!({"name": "Strip", "polygon": square(0.0, 100.0)}),
    )
    .await;
    for i in 0..6 {
        let north = if i % 2 == 0 { 50.0 } else { 200.0 };
        app.record(state(&app, 100 + i, "mowing", north)).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/events?limit=4&cursor={c}"),
            None => "/v1/events?limit=4".to_owned(),
        };
        let page = app.get(&path, Some(TOKEN_A)).await.json();
        for item in page["items"].as_array().unwrap() {
            seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 6, "each event once");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(seen, sorted, "newest first");
    let bad = app.get("/v1/events?cursor=nope", Some(TOKEN_A)).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    bad.problem();
    let busy = app
        .get(
            &format!("/v1/mowers/{}/busy", app.a.mowers[1]),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(busy.status, StatusCode::NOT_FOUND, "never reported");
}

#[tokio::test]
async fn self_intersecting_geofences_and_zones_are_refused_naming_the_problem() {
    let (app, _, _) = app().await;
    let mower = app.a.mowers[0];
    let bow_tie = json!({"type": "Polygon", "coordinates": [[
        [13.4, 52.5], [13.41, 52.51], [13.41, 52.5], [13.4, 52.504], [13.4, 52.5]
    ]]});
    let hole_outside = json!({"type": "Polygon", "coordinates": [
        [[13.4, 52.5], [13.41, 52.5], [13.41, 52.51], [13.4, 52.51], [13.4, 52.5]],
        [[13.42, 52.52], [13.43, 52.52], [13.43, 52.53], [13.42, 52.52]]
    ]});
    for (polygon, problem) in [
        (&bow_tie, "crosses or touches itself"),
        (&hole_outside, "is not inside the exterior ring"),
    ] {
        let fence = app
            .json(
                Method::PUT,
                &format!("/v1/mowers/{mower}/geofence"),
                Some(TOKEN_A_ADMIN),
                polygon,
            )
            .await;
        assert_eq!(fence.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            fence.problem().detail.contains(problem),
            "{:?}",
            fence.problem()
        );
        let zone = app
            .post(
                &format!("/v1/mowers/{mower}/zones"),
                Some(TOKEN_A_ADMIN),
                &json!({"name": "Roses", "polygon": polygon}),
            )
            .await;
        assert_eq!(zone.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            zone.problem().detail.contains(problem),
            "{:?}",
            zone.problem()
        );
    }
}

/// The zone step fails once after the telemetry commit of a `POST /v1/states`: the rows are
/// stored, so the answer is `200` with `zones_pending: true`, never a `503`; the batch's
/// `blade_due` is published at once, and only once; the ingest consumer, receiving the reports
/// the route published, completes the zones (`zone_entered`, once). Sending the same reports
/// again answers `200` without pending zones and publishes nothing new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_reports_with_zones_pending_answer_200_and_publish_blade_due_once() {
    use swath_application::ports::{
        BatchSettings, Directory, DirectoryAdmin, EventBus, LiveOptions,
    };
    use swath_application::subjects;
    use swath_tests::faults::FaultyWatch;

    let mut app = TestApp::spawn().await;
    let store = app.store.clone();
    let shared = Arc::new(store.clone());
    let faulty = FaultyWatch::new(shared.clone(), shared.clone());
    let clock: Arc<dyn Clock> = app.clock.clone();
    let bus = Arc::new(MemoryBus::default());
    // The ingest's zone step over the faulty zones, wired as `swath serve` wires it.
    let mut stores = Stores::memory(store.clone());
    stores.notifications.zones = faulty.clone();
    let wired = wire(stores, bus.clone(), clock, test_settings());
    let ingest = Arc::clone(&wired.ingest);
    app.router = router(wired.state);
    app.ingest = ingest.clone();

    let mower = app.a.mowers[0];
    let mut entry = Directory::mower(&store, mower).await.unwrap().unwrap();
    entry.blade_threshold_ms = 60_000;
    DirectoryAdmin::update_mower(&store, entry).await.unwrap();
    let zone = app
        .post(
            &format!("/v1/mowers/{mower}/zones"),
            Some(TOKEN_A_ADMIN),
            &json!({"name": "Roses", "polygon": square(0.0, 100.0)}),
        )
        .await;
    assert_eq!(zone.status, StatusCode::CREATED);

    let mut events = bus
        .subscribe(subjects::NOTIFICATIONS_ALL, LiveOptions::default())
        .await
        .unwrap();
    let ingesting = bus
        .subscribe_batch(
            subjects::TELEMETRY_ALL,
            subjects::INGEST_CONSUMER,
            BatchSettings {
                max_wait: std::time::Duration::from_millis(20),
                ..BatchSettings::default()
            },
            ingest.handler(),
        )
        .await
        .unwrap();

    // Two minutes of mowing inside the zone, blade on: the blade is due after one.
    let body = Value::Array(
        (0..5)
            .map(|i| {
                let mut s = state(&app, 100 + i * 30, "mowing", 50.0);
                s["blade_on"] = json!(true);
                s
            })
            .collect(),
    );
    faulty.fail_zone_commits(1);
    let response = app
        .post("/v1/states", Some(TOKEN_A_WRITE_ONLY), &body)
        .await;
    assert_eq!(response.status, StatusCode::OK, "stored rows are no 503");
    let answer = response.json();
    assert_eq!(
        (&answer["stored"], &answer["zones_pending"]),
        (&json!(5), &json!(true))
    );

    let mut kinds = Vec::new();
    while !kinds.iter().any(|k| k == "zone_entered") {
        let message =
            tokio::time::timeout(std::time::Duration::from_secs(10), events.messages.recv())
                .await
                .expect("the ingest consumer completes the zones")
                .unwrap();
        kinds.push(message.subject.rsplit('.').next().unwrap().to_owned());
    }
    assert_eq!(kinds, ["blade_due", "zone_entered"]);

    let again = app
        .post("/v1/states", Some(TOKEN_A_WRITE_ONLY), &body)
        .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        (&again.json()["stored"], &again.json()["zones_pending"]),
        (&json!(5), &json!(false))
    );
    // The retry's reports reach the ingest consumer too; give it time to (not) publish.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    ingesting.unsubscribe().await;
    assert!(
        events.messages.try_recv().is_err(),
        "blade_due and zone_entered were published once each"
    );
    let feed = app.get("/v1/events", Some(TOKEN_A)).await.json();
    let stored: Vec<&str> = feed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    let mut stored = stored;
    stored.sort_unstable();
    assert_eq!(stored, ["blade_due", "zone_entered"], "each stored once");
}

#[tokio::test]
async fn an_empty_cursor_is_the_first_page_of_the_events_and_the_alerts() {
    let (app, _watcher, _scheduler) = app().await;
    // Two open alerts, stored as the watcher would have raised them.
    let mowers = &app.a.mowers[..2];
    let account = app.a.account_id;
    let raised = mowers
        .iter()
        .map(|&m| open_alert(m, account, AlertKind::BladeDue, t0()))
        .collect();
    store_alerts(&app.store, mowers, raised).await;
    // Three zone events.
    let mower = app.a.mowers[0];
    app.post(
        &format!("/v1/mowers/{mower}/zones"),
        Some(TOKEN_A_ADMIN),
        &json!({"name": "Strip", "polygon": square(0.0, 100.0)}),
    )
    .await;
    for i in 0..3 {
        let north = if i % 2 == 0 { 50.0 } else { 200.0 };
        app.record(state(&app, 100 + i, "mowing", north)).await;
    }
    app.assert_empty_cursor_is_the_first_page("/v1/events?limit=2", TOKEN_A)
        .await;
    app.assert_empty_cursor_is_the_first_page("/v1/alerts?limit=1", TOKEN_A)
        .await;
}

/// Every kind's `details` in the feed: its own schema, with its kind again and only its fields,
/// non-null where the kind always has them; the blade figures in `_seconds` (decisions 119, 120).
#[tokio::test]
async fn every_event_kind_has_details_of_its_own_shape() {
    let (app, _watcher, _scheduler) = app().await;
    let mower = app.a.mowers[0];
    let version = uuid::Uuid::from_u128(0x0190_a2b4_5c3e_7d21_9f00_0000_0000_0f01);
    let zone = uuid::Uuid::from_u128(0x0190_a2b4_5c3e_7d21_9f00_0000_0000_0a01);
    let details = vec![
        EventDetail::ErrorRaised {
            error_code: Some("BLADE_BLOCKED".into()),
        },
        EventDetail::ErrorCleared { error_code: None },
        EventDetail::GeofenceLeft {
            lat: 52.5012345,
            lon: 13.4012345,
            accuracy_m: Some(0.4),
            distance_m: 12.5,
            geofence_version: version,
        },
        EventDetail::GeofenceReturned {
            lat: 52.5,
            lon: 13.4,
            geofence_version: version,
        },
        EventDetail::BatteryLow {
            battery_percent: 14,
        },
        EventDetail::MowingStarted {},
        EventDetail::MowingFinished {},
        EventDetail::BladeDue {
            blade_since_reset_ms: 360_000_500,
            threshold_ms: 360_000_000,
        },
        EventDetail::ZoneEntered {
            zone_id: zone,
            zone_name: "Roses".into(),
        },
        EventDetail::ZoneLeft {
            zone_id: zone,
            zone_name: "Roses".into(),
        },
        EventDetail::WentOffline { last_seen_at: t0() },
        EventDetail::CameOnline {
            silent_since: t0() + Duration::seconds(1),
        },
        EventDetail::SessionEnded {
            session_id: swath_domain::sessions::session_id(mower, t0()),
            started_at: t0(),
            ended_at: t0() + Duration::hours(2),
            end_reason: swath_domain::sessions::EndReason::Error,
            error_code: Some("LIFTED".into()),
            breaks: 1,
            mowing_seconds: 6_000.5,
            blade_seconds: 5_990.0,
            distance_m: 1_234.567,
        },
    ];
    let events: Vec<Event> = details
        .into_iter()
        .enumerate()
        .map(|(i, detail)| {
            let at = t0() + Duration::minutes(10 + i as i64);
            Event::new(mower, app.a.account_id, at, detail)
        })
        .collect();
    let changes = WatchChanges {
        events,
        ..WatchChanges::default()
    };
    commit_watch(&app.store, &[mower], changes).await;

    let page = app.get("/v1/events?limit=100", Some(TOKEN_A)).await.json();
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), EventKind::ALL.len());
    for item in items {
        assert_eq!(item["details"]["kind"], item["kind"], "{item}");
    }
    // Oldest first, to read in the order above.
    let mut details: Vec<Value> = items.iter().rev().map(|i| i["details"].clone()).collect();
    redacted_snapshot!("event_details_of_every_kind", &details);
    let blade = details.remove(7);
    assert_eq!(blade["blade_since_reset_seconds"], json!(360000.5));
    assert_eq!(blade["blade_threshold_seconds"], json!(360000.0));
}
