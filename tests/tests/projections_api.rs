//! The live projections over HTTP, on the memory adapters: every level of every JSON answer
//! carries `truncated` and `limit`; the assignments API decides who is on duty; and a real
//! browser (Debian's chromium, headless) finds the overflow notice of `/live/fleet`.

use axum::http::{header, Method, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;
use swath::wiring::Stores;
use swath_api::router;
use swath_application::ports::SystemClock;
use swath_domain::{AccountId, MowerId, Scope, SiteId};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_tests::support::http::{self, add_token, get_with, run_chromium, wire_app};
use swath_tests::support::{add_account, add_mower, add_site, mower, site};

const TOKEN: &str = "swath_projections_test_token";

/// A memory service with one account of `mowers` mowers on two sites, and a read/write token.
async fn service(mowers: usize) -> (axum::Router, AccountId, Vec<MowerId>) {
    let store = MemoryStore::new(MemoryStoreSettings::default());
    // The app as `swath serve` wires it (its consumers not started: states come through the API).
    let state = wire_app(Stores::memory(store.clone()), Arc::new(SystemClock)).state;
    let account = AccountId::new();
    add_account(&store, account, "Projections").await;
    let sites = [SiteId::new(), SiteId::new()];
    for (i, id) in sites.iter().enumerate() {
        let berlin = chrono_tz::Europe::Berlin;
        add_site(&store, site(*id, account, &format!("Site {i}"), berlin, i)).await;
    }
    let mut ids = Vec::new();
    for i in 0..mowers {
        let id = MowerId::new();
        let name = format!("Mower <{i:03}>");
        add_mower(&store, mower(id, account, sites[i % 2], name, i)).await;
        ids.push(id);
    }
    let scopes = vec![Scope::Read, Scope::Write];
    add_token(&store, TOKEN, account, scopes, None).await;
    (router(state), account, ids)
}

async fn call(
    app: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let answer = http::call(app, method, uri, TOKEN, body).await;
    (answer.status, answer.json())
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

/// The operator on duty for the first mower of the fleet dashboard.
async fn on_duty(app: &axum::Router) -> Value {
    let (_, fleet) = call(app, Method::GET, "/v1/live/fleet", None).await;
    fleet["mowers"]["items"][0]["operator"]["operator"].clone()
}

#[tokio::test]
async fn assignments_decide_who_is_on_duty() {
    let (app, _, mowers) = service(1).await;
    let path = format!("/v1/mowers/{}/assignments", mowers[0]);
    let assign = |body: Value| call(&app, Method::POST, &path, Some(body));
    let (_, low) = assign(json!({"operator": "Low", "priority": "low"})).await;
    let (_, critical) =
        assign(json!({"operator": "Crit", "priority": "critical", "active": false})).await;
    assert_eq!(
        on_duty(&app).await,
        "Low",
        "an inactive assignment never wins"
    );
    let critical_path = format!("{path}/{}", critical["id"].as_str().unwrap());
    let active = json!({"operator": "Crit", "priority": "critical", "active": true});
    let (status, _) = call(&app, Method::PUT, &critical_path, Some(active)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(on_duty(&app).await, "Crit");
    let (status, _) = call(&app, Method::DELETE, &critical_path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(on_duty(&app).await, "Low");
    let (status, _) = call(&app, Method::DELETE, &critical_path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, problem) = assign(json!({"operator": " ", "priority": "low"})).await;
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
    let page = http::call(&app, Method::GET, "/live/fleet", TOKEN, None).await;
    assert_eq!(page.status, StatusCode::OK);
    let page = page.text();
    assert!(page.contains(
        "<p role=\"status\">Showing the first 64 mowers. Additional mowers are not shown.</p>"
    ));
    assert!(page.contains("<main id=\"live\""));
    assert!(page.contains("aria-labelledby=\"mower-"));
    assert!(page.contains("Mower &lt;000&gt;"), "names are escaped");
    assert!(!page.contains("aria-live=\"assertive\""));
    // Signing in through the form sets a cookie and sends the browser to the page.
    let response = http::sign_in_with_form(&app, "/live/wall", TOKEN).await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.headers[header::LOCATION], "/live/wall");
    let cookie = response.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.contains("HttpOnly"));
    let session = [(header::COOKIE, cookie.split(';').next().unwrap())];
    let response = get_with(&app, "/live/health?fragment=main", &session).await;
    assert_eq!(response.status, StatusCode::OK);
    let fragment = response.text();
    assert!(
        fragment.starts_with("<h1 id=\"title\">Health wall</h1>"),
        "{fragment}"
    );
    let anonymous = get_with(&app, "/live/fleet", &[]).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

/// Debian's chromium, headless, loads `/live/fleet` of a truncated tenant (signing in through
/// the page's form, following the redirect with its cookie) and the rendered DOM has the notice with
/// `role="status"`. Ignored, with the reason, when no chromium was found at build time
/// (`tests/build.rs`; `.ci/run` installs it first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    swath_no_chromium,
    ignore = "needs chromium (apt-get install -y chromium), found at build time"
)]
async fn a_browser_finds_the_overflow_notice() {
    let (app, _, _) = service(65).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = http::with_form_sign_in(app, TOKEN);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://{addr}/test-sign-in/live/fleet");
    let dom = tokio::task::spawn_blocking(move || {
        let dump = ["--dump-dom".to_owned()];
        run_chromium(&std::env::temp_dir(), &dump, &url)
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
