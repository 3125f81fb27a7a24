//! Tenant isolation, driven by the OpenAPI document itself: for every operation whose path names
//! a resource by id, a token of account A using account B's id must get exactly the answer an
//! unknown id gets, a `404` problem; and B's resource must be untouched afterwards.
//!
//! The operations come from `swath_api::openapi()`, so a route added later is covered without
//! changing this test: its path parameter is filled with B's resource of the collection it follows
//! (`/v1/<collection>/{id}…`), required query parameters and the request body with the document's
//! own examples. A collection this test has no B resource for fails it, naming the collection,
//! unless it is nested under one it has (`/v1/mowers/{id}/zones/{zone_id}`): then B's parent and
//! an unknown child are compared with an unknown parent and an unknown child.

mod helpers;

use axum::http::{Method, StatusCode};
use helpers::{TestApp, TOKEN_A_ADMIN, TOKEN_B};
use serde_json::Value;
use uuid::Uuid;

/// B's resources made by the test (an import, a webhook endpoint).
#[derive(Clone, Copy)]
struct Made {
    import: Uuid,
    webhook: Uuid,
}

/// B's resource of each collection a path may name.
fn foreign_id(app: &TestApp, collection: &str, b: Made) -> Option<Uuid> {
    Some(match collection {
        "imports" => b.import,
        "webhooks" => b.webhook,
        "mowers" => app.b.mowers[0].0,
        "sites" => app.b.sites[0].0,
        "accounts" => app.b.account_id.0,
        "tokens" => app.token_ids[TOKEN_B].0,
        _ => return None,
    })
}

/// One request of the sweep: the method, the path with its ids filled, and the body.
struct Call {
    method: Method,
    path: String,
    body: Option<Value>,
}

/// Every operation of the document with an id in its path, once with B's ids and once with
/// unknown ones.
fn calls(app: &TestApp, doc: &Value, b: Made) -> Vec<(String, Call, Call)> {
    let mut calls = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        if !template.contains('{') {
            continue;
        }
        for (method, operation) in item.as_object().unwrap() {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            if !matches!(
                method,
                Method::GET | Method::POST | Method::PUT | Method::PATCH | Method::DELETE
            ) {
                continue;
            }
            let label = format!("{method} {template}");
            let (mut foreign, mut unknown) = (template.clone(), template.clone());
            let segments: Vec<&str> = template.split('/').collect();
            for (i, segment) in segments.iter().enumerate() {
                let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
                    continue;
                };
                let collection = segments[i - 1];
                let nested = segments[..i - 1].iter().any(|s| s.starts_with('{'));
                let id = match foreign_id(app, collection, b) {
                    Some(id) => id,
                    None if nested => Uuid::now_v7(),
                    None => panic!(
                        "{label}: no resource of account B for the collection `{collection}`; \
                         add one to `foreign_id` in swath/tests/isolation.rs"
                    ),
                };
                foreign = foreign.replace(&format!("{{{name}}}"), &id.to_string());
                unknown = unknown.replace(&format!("{{{name}}}"), &Uuid::now_v7().to_string());
            }
            let mut query = Vec::new();
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if parameter["in"] == "query" && parameter["required"] == true {
                    let example = parameter["example"]
                        .as_str()
                        .or_else(|| parameter["schema"]["example"].as_str())
                        .unwrap_or_else(|| {
                            panic!("{label}: required query parameter without an example")
                        });
                    query.push(format!("{}={example}", parameter["name"].as_str().unwrap()));
                }
            }
            if !query.is_empty() {
                foreign = format!("{foreign}?{}", query.join("&"));
                unknown = format!("{unknown}?{}", query.join("&"));
            }
            let body = operation["requestBody"]["content"]["application/json"]["example"].clone();
            let body = (!body.is_null()).then_some(body);
            calls.push((
                label,
                Call {
                    method: method.clone(),
                    path: foreign,
                    body: body.clone(),
                },
                Call {
                    method,
                    path: unknown,
                    body,
                },
            ));
        }
    }
    calls
}

async fn send(app: &TestApp, call: &Call) -> helpers::TestResponse {
    match &call.body {
        Some(body) => {
            app.json(call.method.clone(), &call.path, Some(TOKEN_A_ADMIN), body)
                .await
        }
        None => {
            app.send(call.method.clone(), &call.path, Some(TOKEN_A_ADMIN), &[])
                .await
        }
    }
}

#[tokio::test]
async fn another_accounts_ids_answer_exactly_like_unknown_ids_on_every_documented_route() {
    let app = TestApp::spawn().await;
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    // An import of B's (an empty one: its record is what the sweep asks for).
    let b_import = app
        .send_body(
            Method::POST,
            "/v1/imports",
            Some(TOKEN_B),
            &[("content-type", "application/x-ndjson")],
            "",
        )
        .await;
    assert_eq!(b_import.status, StatusCode::ACCEPTED);
    let b_import: Uuid = b_import.json()["id"].as_str().unwrap().parse().unwrap();
    let b_webhook = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_B),
            &serde_json::json!({"url": "https://b.example/hook", "kinds": ["error_raised"]}),
        )
        .await;
    assert_eq!(b_webhook.status, StatusCode::CREATED);
    let b_webhook: Uuid = b_webhook.json()["webhook"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let made = Made {
        import: b_import,
        webhook: b_webhook,
    };
    let calls = calls(&app, &doc, made);
    assert!(
        calls.len() >= 15,
        "the sweep found only {} operations",
        calls.len()
    );
    for (label, foreign, unknown) in &calls {
        let foreign_answer = send(&app, foreign).await;
        let unknown_answer = send(&app, unknown).await;
        assert_eq!(
            foreign_answer.status,
            StatusCode::NOT_FOUND,
            "{label}: {}",
            String::from_utf8_lossy(&foreign_answer.body)
        );
        assert_eq!(foreign_answer.status, unknown_answer.status, "{label}");
        assert_eq!(
            foreign_answer.content_type(),
            unknown_answer.content_type(),
            "{label}"
        );
        assert_eq!(foreign_answer.body, unknown_answer.body, "{label}");
        assert_eq!(foreign_answer.problem_type(), "not-found", "{label}");
    }

    // Nothing of B's changed: its resources answer B as before.
    for path in [
        format!("/v1/mowers/{}", app.b.mowers[0]),
        format!("/v1/mowers/{}/state", app.b.mowers[0]),
        format!("/v1/sites/{}", app.b.sites[0]),
        format!("/v1/accounts/{}", app.b.account_id),
        format!("/v1/tokens/{}", app.token_ids[TOKEN_B]),
        format!("/v1/imports/{b_import}"),
        format!("/v1/webhooks/{b_webhook}"),
    ] {
        let response = app.get(&path, Some(TOKEN_B)).await;
        assert_eq!(response.status, StatusCode::OK, "{path}");
    }
    let b_mower = app
        .get(&format!("/v1/mowers/{}", app.b.mowers[0]), Some(TOKEN_B))
        .await
        .json();
    assert_eq!(b_mower["name"], "Delta", "B's mower was not renamed");
    let b_hook = app
        .get(&format!("/v1/webhooks/{b_webhook}"), Some(TOKEN_B))
        .await
        .json();
    assert_eq!(
        b_hook["url"], "https://b.example/hook",
        "B's webhook was not changed"
    );
}

/// The sweep covers every kind of operation this API has on ids: reads, changes and deletes.
#[test]
fn the_sweep_sees_the_operations_of_every_collection() {
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/mowers/{id}", "patch"),
        ("/v1/mowers/{id}", "delete"),
        ("/v1/mowers/{id}/history", "get"),
        ("/v1/mowers/{id}/track", "get"),
        ("/v1/mowers/{id}/days", "get"),
        ("/v1/sites/{id}", "delete"),
        ("/v1/tokens/{id}", "delete"),
        ("/v1/accounts/{id}", "get"),
    ] {
        assert!(
            paths[path].get(method).is_some(),
            "{method} {path} is not documented"
        );
    }
}

/// A state of mower `x` of account A, inside the zone and the geofence of
/// [`a_re_created_mower_id_shows_nothing_of_its_previous_owner`].
fn state_of(app: &TestApp, x: Uuid, seconds: i64, activity: &str) -> Value {
    serde_json::json!({
        "mower_id": x,
        "account_id": app.a.account_id,
        "observed_at": (helpers::t0() + chrono::Duration::seconds(seconds)).to_rfc3339(),
        "activity": activity,
        "error_code": if activity == "error" { Some("E1") } else { None },
        "battery_percent": 60,
        "position": {"lat": 52.5005, "lon": 13.4005, "accuracy_m": 1.0},
    })
}

/// Issue 35: A deletes its mower X (with zones, a geofence, states, events, alerts, a busy
/// status), a busy status of X computed before the deletion is written after it, and B creates a
/// mower X: every per-mower route of B's X shows nothing of A's.
#[tokio::test]
async fn a_re_created_mower_id_shows_nothing_of_its_previous_owner() {
    let app = TestApp::spawn().await;
    let x = Uuid::new_v4();
    let square = serde_json::json!({"type": "Polygon", "coordinates": [[
        [13.4, 52.5], [13.401, 52.5], [13.401, 52.501], [13.4, 52.501], [13.4, 52.5]
    ]]});
    let create = |site: Uuid| serde_json::json!({"id": x, "site_id": site, "name": "X", "model": "M", "serial": "S"});
    let a = Some(TOKEN_A_ADMIN);
    let created = app.post("/v1/mowers", a, &create(app.a.sites[0].0)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let zone = serde_json::json!({"name": "Roses", "polygon": square});
    let zones = format!("/v1/mowers/{x}/zones");
    assert_eq!(app.post(&zones, a, &zone).await.status, StatusCode::CREATED);
    let fence = format!("/v1/mowers/{x}/geofence");
    let put = app.json(Method::PUT, &fence, a, &square).await;
    assert_eq!(put.status, StatusCode::OK);
    let assignments = format!("/v1/mowers/{x}/assignments");
    let assign = serde_json::json!({"operator": "Robin", "priority": "high"});
    let assigned = app.post(&assignments, a, &assign).await;
    assert_eq!(assigned.status, StatusCode::CREATED);
    let states = [
        state_of(&app, x, 0, "mowing"),
        state_of(&app, x, 1, "error"),
    ];
    let mut parsed = Vec::new();
    for report in &states {
        app.record(report.clone()).await;
        let one = [app.watcher.parse(report.to_string().as_bytes())];
        app.watcher.on_states(&one).await.unwrap();
        parsed.extend(one.into_iter().filter_map(Result::ok));
        app.scheduler
            .record(&parsed[parsed.len() - 1..])
            .await
            .unwrap();
    }
    let paths = [
        format!("/v1/mowers/{x}"),
        format!("/v1/mowers/{x}/state"),
        format!("/v1/mowers/{x}/health"),
        zones.clone(),
        fence.clone(),
        format!("/v1/mowers/{x}/busy"),
        format!("/v1/mowers/{x}/history"),
        format!("/v1/mowers/{x}/track"),
        format!("/v1/alerts?mower_id={x}"),
        format!("/v1/events?mower_id={x}"),
        assignments.clone(),
    ];
    let before: Vec<String> = bodies(&app, &paths, a).await;
    assert!(
        before[4].contains("coordinates"),
        "A's geofence: {}",
        before[4]
    );
    assert!(
        before[8].contains("\"error\""),
        "A's error alert: {}",
        before[8]
    );

    let deleted = app.delete(&format!("/v1/mowers/{x}"), a).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    // The busy check of a batch read before the deletion writes after it.
    let late = app
        .watcher
        .parse(state_of(&app, x, 2, "mowing").to_string().as_bytes());
    app.scheduler.record(&[late.unwrap()]).await.unwrap();
    let b = Some(TOKEN_B);
    let created = app.post("/v1/mowers", b, &create(app.b.sites[0].0)).await;
    assert_eq!(created.status, StatusCode::CREATED, "the id is free again");

    let after = bodies(&app, &paths, b).await;
    for (path, body) in paths.iter().zip(&after) {
        for trace in [
            "Roses",
            "13.4005",
            "52.5005",
            "\"error\"",
            "E1",
            "\"mowing\"",
            "Robin",
        ] {
            assert!(
                !body.contains(trace),
                "B's {path} shows A's `{trace}`: {body}"
            );
        }
    }
    for (path, status) in [
        (&paths[1], StatusCode::NOT_FOUND),
        (&paths[4], StatusCode::NOT_FOUND),
        (&paths[5], StatusCode::NOT_FOUND),
    ] {
        assert_eq!(app.get(path, b).await.status, status, "{path}");
    }
    let zones = app.get(&zones, b).await.json();
    assert_eq!(zones["items"], serde_json::json!([]));
    let health = app.get(&paths[2], b).await.json();
    assert_eq!(health["counted_until"], Value::Null, "{health}");
    for path in &paths[6..] {
        let page = app.get(path, b).await.json();
        assert_eq!(page["items"], serde_json::json!([]), "{path}: {page}");
    }

    // The id back with A: nothing of A's first mower X either (its assignments went with it).
    let deleted = app.delete(&format!("/v1/mowers/{x}"), b).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let created = app.post("/v1/mowers", a, &create(app.a.sites[0].0)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    for (path, body) in paths.iter().zip(bodies(&app, &paths, a).await) {
        for trace in ["Roses", "13.4005", "\"error\"", "Robin"] {
            assert!(
                !body.contains(trace),
                "A's new {path} shows `{trace}`: {body}"
            );
        }
    }
}

/// The bodies of `GET path` for each path, as text.
async fn bodies(app: &TestApp, paths: &[String], token: Option<&str>) -> Vec<String> {
    let mut bodies = Vec::new();
    for path in paths {
        let response = app.get(path, token).await;
        bodies.push(String::from_utf8_lossy(&response.body).into_owned());
    }
    bodies
}
