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
