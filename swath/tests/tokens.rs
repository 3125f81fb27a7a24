//! API tokens and accounts (scope `admin`): a token is shown once, lists never show it, a token
//! manages only tokens within its own powers, and an admin sees its own account only.

mod helpers;

use axum::http::StatusCode;
use helpers::{TestApp, TOKEN_A, TOKEN_A_ADMIN, TOKEN_A_SOUTH_ADMIN, TOKEN_A_WRITE_ONLY, TOKEN_B};
use serde_json::json;

#[tokio::test]
async fn a_created_token_is_shown_once_works_and_can_be_revoked() {
    let app = TestApp::spawn().await;
    let created = app
        .post(
            "/v1/tokens",
            Some(TOKEN_A_ADMIN),
            &json!({"name": "Home Assistant", "scopes": ["read"]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let body = created.json();
    let token = body["token"].as_str().unwrap().to_owned();
    assert!(
        token.starts_with("swath_") && token.len() == 6 + 64,
        "{token}"
    );
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        created.header("location"),
        Some(format!("/v1/tokens/{id}").as_str())
    );
    redacted_snapshot!("token_created", &body);

    assert_eq!(
        app.get("/v1/mowers", Some(&token)).await.status,
        StatusCode::OK
    );
    let forbidden = app.get("/v1/tokens", Some(&token)).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN, "read only");

    let list = app.get("/v1/tokens", Some(TOKEN_A_ADMIN)).await;
    let text = String::from_utf8_lossy(&list.body).to_string();
    assert!(!text.contains(&token), "a list never shows a token");
    assert!(!text.contains(&swath_application::ports::hash_token(&token).0));
    let list = list.json();
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["id"] == id && t["name"] == "Home Assistant"));
    redacted_snapshot!("tokens", &list);

    let one = app
        .get(&format!("/v1/tokens/{id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(one.status, StatusCode::OK);
    assert!(one.json().get("token").is_none());

    let revoked = app
        .delete(&format!("/v1/tokens/{id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    let refused = app.get("/v1/mowers", Some(&token)).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let again = app
        .delete(&format!("/v1/tokens/{id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_token_manages_only_tokens_within_its_powers() {
    let app = TestApp::spawn().await;
    let south = app.a.sites[1];
    let north = app.a.sites[0];
    // Limited to South: cannot mint an unlimited token, nor one for North.
    for body in [
        json!({"scopes": ["read"]}),
        json!({"scopes": ["read"], "sites": [north]}),
    ] {
        let response = app
            .post("/v1/tokens", Some(TOKEN_A_SOUTH_ADMIN), &body)
            .await;
        assert!(
            matches!(
                response.status,
                StatusCode::FORBIDDEN | StatusCode::UNPROCESSABLE_ENTITY
            ),
            "{body}: {}",
            response.status
        );
    }
    let ok = app
        .post(
            "/v1/tokens",
            Some(TOKEN_A_SOUTH_ADMIN),
            &json!({"scopes": ["read", "read"], "sites": [south]}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::CREATED);
    assert_eq!(ok.json()["scopes"], json!(["read"]));

    // It sees the tokens it covers, not the unlimited ones, and cannot revoke those.
    let list = app
        .get("/v1/tokens", Some(TOKEN_A_SOUTH_ADMIN))
        .await
        .json();
    for token in list["items"].as_array().unwrap() {
        assert_eq!(token["sites"], json!([south.to_string()]), "{token}");
    }
    let admin_id = app.token_ids[TOKEN_A_ADMIN];
    let response = app
        .delete(&format!("/v1/tokens/{admin_id}"), Some(TOKEN_A_SOUTH_ADMIN))
        .await;
    assert_eq!(response.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get("/v1/mowers", Some(TOKEN_A_ADMIN)).await.status,
        StatusCode::OK
    );

    for body in [
        json!({"scopes": []}),
        json!({"scopes": ["read"], "sites": []}),
        json!({"scopes": ["root"]}),
        json!({"scopes": ["read"], "sites": [app.b.sites[0]]}),
    ] {
        let response = app.post("/v1/tokens", Some(TOKEN_A_ADMIN), &body).await;
        assert_eq!(response.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    let response = app
        .post("/v1/tokens", Some(TOKEN_A), &json!({"scopes": ["read"]}))
        .await;
    assert_eq!(response.status, StatusCode::FORBIDDEN, "admin scope needed");
}

#[tokio::test]
async fn tokens_page_by_cursor() {
    let app = TestApp::spawn().await;
    let mut seen = Vec::new();
    let mut path = "/v1/tokens?limit=2".to_owned();
    loop {
        let page = app.get(&path, Some(TOKEN_A_ADMIN)).await.json();
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/tokens?limit=2&cursor={c}"),
            None => break,
        }
    }
    // A's five tokens, in id order; never B's.
    assert_eq!(seen.len(), 5, "{seen:?}");
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted);
    assert!(!seen.contains(&app.token_ids[TOKEN_B].to_string()));
}

#[tokio::test]
async fn an_admin_sees_its_own_account_and_creates_separate_ones() {
    let app = TestApp::spawn().await;
    let list = app.get("/v1/accounts", Some(TOKEN_A_ADMIN)).await;
    assert_eq!(list.status, StatusCode::OK);
    let list = list.json();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["name"], "Acme Parks");
    redacted_snapshot!("accounts", &list);

    let created = app
        .post(
            "/v1/accounts",
            Some(TOKEN_A_ADMIN),
            &json!({"name": "Green Co"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let body = created.json();
    redacted_snapshot!("account_created", &body);
    let new_id = body["account"]["id"].as_str().unwrap().to_owned();
    let new_token = body["token"]["token"].as_str().unwrap().to_owned();

    // The creator does not see it; its first token does, and sees nothing of A.
    let hidden = app
        .get(&format!("/v1/accounts/{new_id}"), Some(TOKEN_A_ADMIN))
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    let own = app
        .get(&format!("/v1/accounts/{new_id}"), Some(&new_token))
        .await;
    assert_eq!(own.status, StatusCode::OK);
    assert_eq!(own.json()["name"], "Green Co");
    let mowers = app.get("/v1/mowers", Some(&new_token)).await.json();
    assert_eq!(mowers["items"], json!([]));

    let limited = app
        .post(
            "/v1/accounts",
            Some(TOKEN_A_SOUTH_ADMIN),
            &json!({"name": "X"}),
        )
        .await;
    assert_eq!(limited.status, StatusCode::FORBIDDEN);
    let reader = app.get("/v1/accounts", Some(TOKEN_A)).await;
    assert_eq!(reader.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn any_token_learns_its_account_scopes_and_sites_from_me() {
    let app = TestApp::spawn().await;
    // A gateway's write-only token cannot read, but it may learn the account its reports name.
    let me = app.get("/v1/me", Some(TOKEN_A_WRITE_ONLY)).await;
    assert_eq!(me.status, StatusCode::OK);
    let body = me.json();
    let account = app.get("/v1/accounts", Some(TOKEN_A_ADMIN)).await.json()["items"][0].clone();
    assert_eq!(body["account"], account);
    assert_eq!(body["scopes"], json!(["write"]));
    assert_eq!(body["sites"], json!(null));

    let south = app.get("/v1/me", Some(TOKEN_A_SOUTH_ADMIN)).await.json();
    assert_eq!(south["account"], account);
    assert_eq!(south["scopes"], json!(["read", "write", "admin"]));
    assert_eq!(south["sites"].as_array().map(Vec::len), Some(1));

    let other = app.get("/v1/me", Some(TOKEN_B)).await.json();
    assert_ne!(other["account"]["id"], account["id"]);
    assert_eq!(
        app.get("/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.get("/v1/me", Some("no-such-token")).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn an_empty_cursor_is_the_first_page_of_tokens() {
    let app = TestApp::spawn().await;
    app.assert_empty_cursor_is_the_first_page("/v1/tokens?limit=2", TOKEN_A_ADMIN)
        .await;
}
