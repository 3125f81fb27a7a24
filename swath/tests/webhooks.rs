//! `/v1/webhooks` (scope `admin`): an endpoint's secret is shown once, lists and reads never show
//! it, endpoints keep to their account and the caller's sites, and the delivery log pages.

mod helpers;

use axum::http::StatusCode;
use helpers::{TestApp, TOKEN_A, TOKEN_A_ADMIN, TOKEN_A_SOUTH_ADMIN, TOKEN_B};
use serde_json::{json, Value};

/// Hides the random secret (after checking its form) and the derived delivery ids.
fn scrub(mut body: Value) -> Value {
    if let Some(secret) = body.get_mut("secret") {
        let text = secret.as_str().unwrap();
        assert!(text.starts_with("whsec_") && text.len() > 30, "{text}");
        *secret = json!("[secret]");
    }
    body
}

#[tokio::test]
async fn an_endpoint_is_created_shown_once_changed_rotated_and_deleted() {
    let app = TestApp::spawn().await;
    let created = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A_ADMIN),
            &json!({"url": "https://hooks.example.com/swath", "kinds": ["error_raised", "alert_cleared", "error_raised"]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let body = created.json();
    let secret = body["secret"].as_str().unwrap().to_owned();
    let id = body["webhook"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        created.header("location"),
        Some(format!("/v1/webhooks/{id}").as_str())
    );
    redacted_snapshot!("webhook_created", &scrub(body));

    let list = app.get("/v1/webhooks", Some(TOKEN_A_ADMIN)).await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(!String::from_utf8_lossy(&list.body).contains(&secret));
    redacted_snapshot!("webhooks", &list.json());
    let one = app
        .get(&format!("/v1/webhooks/{id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(one.status, StatusCode::OK);
    assert!(!String::from_utf8_lossy(&one.body).contains(&secret));

    let changed = app
        .patch(
            &format!("/v1/webhooks/{id}"),
            Some(TOKEN_A_ADMIN),
            &json!({"enabled": false, "sites": [app.a.sites[0]]}),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(changed.json()["enabled"], false);
    assert_eq!(changed.json()["sites"], json!([app.a.sites[0]]));
    let lifted = app
        .patch(
            &format!("/v1/webhooks/{id}"),
            Some(TOKEN_A_ADMIN),
            &json!({"sites": null}),
        )
        .await;
    assert_eq!(lifted.json()["sites"], Value::Null, "null lifts the filter");
    assert_eq!(lifted.json()["enabled"], false, "absent fields stay");

    let rotated = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            Some(TOKEN_A_ADMIN),
            &json!({}),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK);
    let rotated = rotated.json();
    assert_ne!(rotated["secret"], json!(secret));
    assert!(
        rotated["webhook"]["previous_secret_expires_at"].is_string(),
        "the old secret signs for a grace period"
    );
    redacted_snapshot!("webhook_rotated", &scrub(rotated));

    let deleted = app
        .delete(&format!("/v1/webhooks/{id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = app
        .get(&format!("/v1/webhooks/{id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn endpoints_keep_to_their_account_scope_and_sites() {
    let app = TestApp::spawn().await;
    let problems = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A_ADMIN),
            &json!({"url": "http://hooks.example.com/", "kinds": ["error_raised"], "mowers": [app.b.mowers[0]]}),
        )
        .await;
    assert_eq!(problems.status, StatusCode::UNPROCESSABLE_ENTITY);
    redacted_snapshot!("webhook_refused", &problems.json());

    let read_only = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A),
            &json!({"url": "https://hooks.example.com/", "kinds": ["error_raised"]}),
        )
        .await;
    assert_eq!(read_only.status, StatusCode::FORBIDDEN);

    let south = app.a.sites[1];
    let unlimited_from_south = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A_SOUTH_ADMIN),
            &json!({"url": "https://hooks.example.com/", "kinds": ["error_raised"]}),
        )
        .await;
    assert_eq!(
        unlimited_from_south.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let south_only = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A_SOUTH_ADMIN),
            &json!({"url": "https://hooks.example.com/s", "kinds": ["error_raised"], "sites": [south]}),
        )
        .await;
    assert_eq!(south_only.status, StatusCode::CREATED);
    let unlimited = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A_ADMIN),
            &json!({"url": "https://hooks.example.com/all", "kinds": ["blade_due"]}),
        )
        .await;
    let unlimited_id = unlimited.json()["webhook"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let seen_by_south = app
        .get("/v1/webhooks", Some(TOKEN_A_SOUTH_ADMIN))
        .await
        .json();
    assert_eq!(seen_by_south["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        app.get(
            &format!("/v1/webhooks/{unlimited_id}"),
            Some(TOKEN_A_SOUTH_ADMIN)
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get(&format!("/v1/webhooks/{unlimited_id}"), Some(TOKEN_B))
            .await
            .status,
        StatusCode::NOT_FOUND,
        "another account's endpoint is absent"
    );
    assert_eq!(
        app.get("/v1/webhooks", Some(TOKEN_B)).await.json()["items"],
        json!([])
    );
    let page = app
        .get("/v1/webhooks?limit=1", Some(TOKEN_A_ADMIN))
        .await
        .json();
    assert_eq!(page["truncated"], true);
    let cursor = page["next_cursor"].as_str().unwrap();
    let next = app
        .get(
            &format!("/v1/webhooks?limit=1&cursor={cursor}"),
            Some(TOKEN_A_ADMIN),
        )
        .await
        .json();
    assert_eq!(next["items"][0]["id"], json!(unlimited_id));
    assert_eq!(next["truncated"], false);
    app.assert_empty_cursor_is_the_first_page("/v1/webhooks?limit=1", TOKEN_A_ADMIN)
        .await;
}

#[tokio::test]
async fn a_test_message_is_logged_and_can_be_retried() {
    let app = TestApp::spawn().await;
    let created = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A_ADMIN),
            &json!({"url": "https://hooks.example.com/", "kinds": ["went_offline"]}),
        )
        .await
        .json();
    let id = created["webhook"]["id"].as_str().unwrap();
    for _ in 0..2 {
        let test = app
            .post(
                &format!("/v1/webhooks/{id}/test"),
                Some(TOKEN_A_ADMIN),
                &json!({}),
            )
            .await;
        assert_eq!(test.status, StatusCode::ACCEPTED);
        assert_eq!(test.json()["outcome"], "pending");
    }
    let page = app
        .get(
            &format!("/v1/webhooks/{id}/deliveries?limit=1"),
            Some(TOKEN_A_ADMIN),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let mut page = page.json();
    assert_eq!(page["truncated"], true);
    let delivery = page["items"][0]["id"].as_str().unwrap().to_owned();
    page["items"][0]["id"] = json!("[delivery id]");
    page["next_cursor"] = json!("[cursor]");
    redacted_snapshot!("webhook_deliveries", &page);
    let retried = app
        .post(
            &format!("/v1/webhooks/{id}/deliveries/{delivery}/retry"),
            Some(TOKEN_A_ADMIN),
            &json!({}),
        )
        .await;
    assert_eq!(retried.status, StatusCode::ACCEPTED);
    assert_eq!(retried.json()["id"], json!(delivery));
    let unknown = app
        .post(
            &format!("/v1/webhooks/{id}/deliveries/{}/retry", uuid::Uuid::nil()),
            Some(TOKEN_A_ADMIN),
            &json!({}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let foreign = app
        .get(&format!("/v1/webhooks/{id}/deliveries"), Some(TOKEN_B))
        .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
}

/// URLs are stored in their normal form, or refused (decision 174): a leading space, a line
/// break, user information or a fragment is a 422, never stored as given.
#[tokio::test]
async fn urls_are_normalised_or_refused() {
    let app = TestApp::spawn().await;
    let created = app
        .post(
            "/v1/webhooks",
            Some(TOKEN_A_ADMIN),
            &json!({"url": "HTTPS://Hooks.Example.COM:443/a/../swath", "kinds": ["error_raised"]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(
        created.json()["webhook"]["url"],
        "https://hooks.example.com/swath"
    );
    let id = created.json()["webhook"]["id"].as_str().unwrap().to_owned();
    for url in [
        " https://hooks.example.com/",
        "https://hooks.example.com/\r\nx-injected: 1",
        "https://user:pass@hooks.example.com/",
        "https://hooks.example.com/#fragment",
    ] {
        let refused = app
            .post(
                "/v1/webhooks",
                Some(TOKEN_A_ADMIN),
                &json!({"url": url, "kinds": ["error_raised"]}),
            )
            .await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{url:?}");
        let patched = app
            .patch(
                &format!("/v1/webhooks/{id}"),
                Some(TOKEN_A_ADMIN),
                &json!({"url": url}),
            )
            .await;
        assert_eq!(patched.status, StatusCode::UNPROCESSABLE_ENTITY, "{url:?}");
    }
    let listed = app.get("/v1/webhooks", Some(TOKEN_A_ADMIN)).await.json();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(listed["items"][0]["url"], "https://hooks.example.com/swath");
}

/// Creates an endpoint of `token`'s account with `body`'s fields over a plain one.
async fn create(app: &TestApp, token: &str, extra: Value) -> helpers::TestResponse {
    let mut body = json!({"url": "https://hooks.example.com/", "kinds": ["error_raised"]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    app.post("/v1/webhooks", Some(token), &body).await
}

/// 50 000 ids are refused in a few hundred bytes (the list is past its bound: one problem); a
/// list at the bound, 1000 mowers the token sees, is accepted.
#[tokio::test]
async fn an_id_list_past_its_bound_is_refused_in_a_small_answer_and_one_at_it_is_accepted() {
    let app = TestApp::spawn().await;
    let many: Vec<String> = (0..50_000)
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    let refused = create(&app, TOKEN_A_ADMIN, json!({"mowers": many})).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.len() < 1024, "{} bytes", refused.body.len());
    assert_eq!(refused.problem().errors.len(), 1);
    assert_eq!(refused.problem().errors[0].pointer, "/mowers");

    let north = app.a.sites[0];
    let mut fleet = Vec::new();
    for n in 0..1000 {
        let id = swath_domain::MowerId::new();
        let m = swath_tests::support::mower(id, app.a.account_id, north, format!("Extra {n}"), n);
        swath_tests::support::add_mower(&app.store, m).await;
        fleet.push(id);
    }
    let accepted = create(&app, TOKEN_A_ADMIN, json!({"mowers": fleet})).await;
    assert_eq!(accepted.status, StatusCode::CREATED);
    assert_eq!(
        accepted.json()["webhook"]["mowers"]
            .as_array()
            .unwrap()
            .len(),
        1000
    );
}

/// Mowers the token cannot see are named ten at most, then counted; the same for a new token's
/// sites.
#[tokio::test]
async fn ids_not_visible_are_named_ten_at_most() {
    let app = TestApp::spawn().await;
    let foreign: Vec<String> = (0..25)
        .map(|n| {
            if n == 3 {
                app.b.mowers[0].to_string()
            } else {
                uuid::Uuid::new_v4().to_string()
            }
        })
        .collect();
    let refused = create(&app, TOKEN_A_ADMIN, json!({"mowers": foreign})).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    let errors = refused.problem().errors;
    assert_eq!(errors.len(), 11);
    assert_eq!(errors[3].pointer, "/mowers/3");
    assert_eq!(errors[9].pointer, "/mowers/9");
    assert_eq!(
        errors[10].detail,
        "`/mowers` names 15 more that are no mowers visible to this token (only the first 10 \
         are listed)."
    );

    let sites: Vec<String> = (0..12).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let token = app
        .post(
            "/v1/tokens",
            Some(TOKEN_A_ADMIN),
            &json!({"scopes": ["read"], "sites": sites}),
        )
        .await;
    assert_eq!(token.status, StatusCode::UNPROCESSABLE_ENTITY);
    let errors = token.problem().errors;
    assert_eq!(errors.len(), 11);
    assert_eq!(errors[10].pointer, "/sites");
}

/// An account has at most 50 endpoints (the default): the 51st is a `409`, another account's
/// first is created, and deleting one makes room.
#[tokio::test]
async fn the_endpoints_of_an_account_are_capped() {
    let app = TestApp::spawn().await;
    let mut ids = Vec::new();
    let mut refusals = 0;
    for _ in 0..53 {
        let answer = create(&app, TOKEN_A_ADMIN, json!({})).await;
        match answer.status {
            StatusCode::CREATED => ids.push(answer.json()["webhook"]["id"].clone()),
            StatusCode::CONFLICT => {
                assert_eq!(answer.problem_type(), "conflict");
                refusals += 1;
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!((ids.len(), refusals), (50, 3));
    assert_eq!(
        create(&app, TOKEN_B, json!({})).await.status,
        StatusCode::CREATED
    );
    let first = ids[0].as_str().unwrap();
    app.delete(&format!("/v1/webhooks/{first}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(
        create(&app, TOKEN_A_ADMIN, json!({})).await.status,
        StatusCode::CREATED
    );
}

/// An endpoint is sent 5 test messages a minute (the default): the others answer `429` with
/// `Retry-After`, enqueue nothing, and a minute later the next is accepted.
#[tokio::test]
async fn test_messages_are_rate_limited_per_endpoint() {
    let app = TestApp::spawn().await;
    let id = create(&app, TOKEN_A_ADMIN, json!({})).await.json()["webhook"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let test = || async {
        app.post(
            &format!("/v1/webhooks/{id}/test"),
            Some(TOKEN_A_ADMIN),
            &json!({}),
        )
        .await
    };
    let mut statuses = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..20 {
        let answer = test().await;
        statuses.push(answer.status);
        waits.extend(answer.header("retry-after").map(str::to_owned));
    }
    let accepted = statuses
        .iter()
        .filter(|s| **s == StatusCode::ACCEPTED)
        .count();
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((accepted, refused), (5, 15));
    assert_eq!(waits, vec!["60"; 15]);
    let logged = app
        .get(
            &format!("/v1/webhooks/{id}/deliveries"),
            Some(TOKEN_A_ADMIN),
        )
        .await
        .json();
    assert_eq!(logged["items"].as_array().unwrap().len(), 5);

    app.clock.advance(chrono::Duration::seconds(60));
    assert_eq!(test().await.status, StatusCode::ACCEPTED);
}
