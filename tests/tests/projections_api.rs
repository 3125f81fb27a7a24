//! The live projections over HTTP, on the memory adapters: every level of every JSON answer
//! carries `truncated` and `limit`; the assignments API decides who is on duty; and a real
//! browser (Debian's chromium, headless) finds the overflow notice of `/live/fleet`.

use axum::body::{to_bytes, Body};
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;
use swath::wiring::{wire, Settings, Stores};
use swath_api::router;
use swath_application::ports::{hash_token, Directory, SystemClock, TokenStore};
use swath_application::RetentionPolicy;
use swath_domain::watch::DEFAULT_OFFLINE_AFTER;
use swath_domain::{Account, AccountId, Mower, MowerId, Principal, Scope, Site, SiteId};
use swath_memory::{MemoryBus, MemoryBusSettings, MemoryStore, MemoryStoreSettings};
use swath_tests::support::DEFAULT_THRESHOLD;
use tower::ServiceExt;

const TOKEN: &str = "swath_projections_test_token";

/// A memory service with one account of `mowers` mowers on two sites, and a read/write token.
async fn service(mowers: usize) -> (axum::Router, AccountId, Vec<MowerId>) {
    let store = MemoryStore::new(MemoryStoreSettings::default());
    // The app as `swath serve` wires it (its consumers not started: states come through the API).
    let state = wire(
        Stores::memory(store.clone()),
        Arc::new(MemoryBus::new(MemoryBusSettings::default())),
        Arc::new(SystemClock),
        Settings {
            offline_after: DEFAULT_OFFLINE_AFTER,
            retention: RetentionPolicy::default(),
        },
    )
    .state;
    let account = AccountId::new();
    store
        .create_account(Account {
            id: account,
            name: "Projections".into(),
        })
        .await
        .unwrap();
    let sites = [SiteId::new(), SiteId::new()];
    for (i, site) in sites.iter().enumerate() {
        store
            .create_site(Site {
                id: *site,
                account_id: account,
                name: format!("Site {i}"),
                time_zone: chrono_tz::Europe::Berlin,
                display_order: i as i32,
            })
            .await
            .unwrap();
    }
    let mut ids = Vec::new();
    for i in 0..mowers {
        let id = MowerId::new();
        store
            .create_mower(Mower {
                id,
                account_id: account,
                site_id: sites[i % 2],
                name: format!("Mower <{i:03}>"),
                model: "M1".into(),
                serial: format!("SN{i}"),
                display_order: 0,
                blade_threshold_ms: DEFAULT_THRESHOLD,
            })
            .await
            .unwrap();
        ids.push(id);
    }
    store
        .store_token(
            hash_token(TOKEN),
            Principal {
                account_id: account,
                scopes: vec![Scope::Read, Scope::Write],
                sites: None,
            },
        )
        .await
        .unwrap();
    (router(state), account, ids)
}

async fn call(
    app: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    let body = match body {
        Some(b) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(b.to_string())
        }
        None => Body::empty(),
    };
    let response = app
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (status, value)
}

/// Every object with `items` has a boolean `truncated` and a numeric `limit`; returns how many
/// lists it saw.
fn every_list_is_bounded(value: &Value, path: &str) -> usize {
    match value {
        Value::Object(map) => {
            let mut lists = 0;
            if map.contains_key("items") {
                assert!(
                    map.get("truncated").is_some_and(Value::is_boolean),
                    "{path}: {value}"
                );
                assert!(
                    map.get("limit").is_some_and(Value::is_u64),
                    "{path}: {value}"
                );
                lists += 1;
            }
            for (k, v) in map {
                lists += every_list_is_bounded(v, &format!("{path}.{k}"));
            }
            lists
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| every_list_is_bounded(v, &format!("{path}[{i}]")))
            .sum(),
        _ => 0,
    }
}

#[tokio::test]
async fn every_level_of_every_answer_carries_truncated_and_limit() {
    let (app, _, mowers) = service(70).await;
    // Something on every level: an operator on duty for the first mower.
    let (status, created) = call(
        &app,
        Method::POST,
        &format!("/v1/mowers/{}/assignments", mowers[0]),
        Some(json!({"operator": "Robin", "priority": "high"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");

    let (status, fleet) = call(&app, Method::GET, "/v1/live/fleet", None).await;
    assert_eq!(status, StatusCode::OK, "{fleet}");
    assert_eq!(fleet["mowers"]["limit"], 64);
    assert_eq!(fleet["mowers"]["truncated"], true);
    assert_eq!(fleet["mowers"]["items"].as_array().unwrap().len(), 64);
    assert_eq!(fleet["mowers"]["items"][0]["operator"]["operator"], "Robin");
    assert_eq!(fleet["mowers"]["items"][0]["alerts"]["limit"], 32);
    assert_eq!(every_list_is_bounded(&fleet, "fleet"), 1 + 64);

    let (status, wall) = call(&app, Method::GET, "/v1/live/wall", None).await;
    assert_eq!(status, StatusCode::OK, "{wall}");
    assert_eq!(wall["sites"]["limit"], 16);
    assert_eq!(wall["sites"]["items"][0]["mowers"]["limit"], 32);
    assert_eq!(every_list_is_bounded(&wall, "wall"), 1 + 2);

    let (status, health) = call(&app, Method::GET, "/v1/live/health", None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["sites"]["items"][0]["mowers"]["truncated"], true);
    assert_eq!(
        health["sites"]["items"][0]["mowers"]["items"][0]["status"],
        "ok"
    );
    assert_eq!(every_list_is_bounded(&health, "health"), 1 + 2);

    let (status, list) = call(
        &app,
        Method::GET,
        &format!("/v1/mowers/{}/assignments", mowers[0]),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(every_list_is_bounded(&list, "assignments"), 1);
}

#[tokio::test]
async fn assignments_decide_who_is_on_duty() {
    let (app, _, mowers) = service(1).await;
    let path = format!("/v1/mowers/{}/assignments", mowers[0]);
    let (_, low) = call(
        &app,
        Method::POST,
        &path,
        Some(json!({"operator": "Low", "priority": "low"})),
    )
    .await;
    let (_, critical) = call(
        &app,
        Method::POST,
        &path,
        Some(json!({"operator": "Crit", "priority": "critical", "active": false})),
    )
    .await;
    let on_duty = |fleet: &Value| fleet["mowers"]["items"][0]["operator"]["operator"].clone();
    let (_, fleet) = call(&app, Method::GET, "/v1/live/fleet", None).await;
    assert_eq!(on_duty(&fleet), "Low", "an inactive assignment never wins");
    let (status, _) = call(
        &app,
        Method::PUT,
        &format!("{path}/{}", critical["id"].as_str().unwrap()),
        Some(json!({"operator": "Crit", "priority": "critical", "active": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, fleet) = call(&app, Method::GET, "/v1/live/fleet", None).await;
    assert_eq!(on_duty(&fleet), "Crit");
    let (status, _) = call(
        &app,
        Method::DELETE,
        &format!("{path}/{}", critical["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, fleet) = call(&app, Method::GET, "/v1/live/fleet", None).await;
    assert_eq!(on_duty(&fleet), "Low");
    let (status, _) = call(
        &app,
        Method::DELETE,
        &format!("{path}/{}", critical["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, problem) = call(
        &app,
        Method::POST,
        &path,
        Some(json!({"operator": " ", "priority": "low"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    let _ = low;
    let (status, _) = call(
        &app,
        Method::GET,
        &format!("/v1/mowers/{}/assignments", MowerId::new()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_page_renders_notices_and_labelled_regions() {
    let (app, _, _) = service(65).await;
    let (status, _) = call(&app, Method::GET, "/live/fleet", None).await;
    assert_eq!(status, StatusCode::OK);
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .uri("/live/fleet")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let page = String::from_utf8(
        to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(page.contains(
        "<p role=\"status\">Showing the first 64 mowers. Additional mowers are not shown.</p>"
    ));
    assert!(page.contains("<main id=\"live\""));
    assert!(page.contains("aria-labelledby=\"mower-"));
    assert!(page.contains("Mower &lt;000&gt;"), "names are escaped");
    assert!(!page.contains("aria-live=\"assertive\""));
    // Signing in by URL sets a cookie and leaves the token out of the address bar.
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .uri(format!("/live/wall?token={TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[header::LOCATION], "/live/wall");
    let cookie = response.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.contains("HttpOnly"));
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .uri("/live/health?fragment=main")
                .header(header::COOKIE, cookie.split(';').next().unwrap())
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let fragment = String::from_utf8(
        to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(
        fragment.starts_with("<h1 id=\"title\">Health wall</h1>"),
        "{fragment}"
    );
    let anonymous = app
        .clone()
        .oneshot(
            Request::builder()
                .uri("/live/fleet")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

/// Debian's chromium, headless, loads `/live/fleet` of a truncated tenant (signing in by URL,
/// following the redirect with its cookie) and the rendered DOM has the notice with
/// `role="status"`. Ignored, with the reason, when no chromium was found at build time
/// (`tests/build.rs`; `.ci/run` installs it first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    swath_no_chromium,
    ignore = "needs chromium (apt-get install -y chromium), found at build time"
)]
async fn a_browser_finds_the_overflow_notice() {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("chromium was found when this test was built, and is gone");
    let (app, _, _) = service(65).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://{addr}/live/fleet?token={TOKEN}");
    let profile = std::env::temp_dir().join(format!("swath-chromium-{}", uuid::Uuid::new_v4()));
    let dom = tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new("timeout")
            .arg("90")
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                &format!("--user-data-dir={}", profile.display()),
                "--dump-dom",
                &url,
            ])
            .output()
            .expect("run chromium");
        let _ = std::fs::remove_dir_all(&profile);
        assert!(
            out.status.success(),
            "chromium failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .unwrap();
    server.abort();
    assert!(
        dom.contains(
            "<p role=\"status\">Showing the first 64 mowers. Additional mowers are not shown.</p>"
        ),
        "the rendered DOM has no overflow notice:\n{dom}"
    );
    assert!(dom.contains("<title>Fleet dashboard · Swath</title>"));
}
