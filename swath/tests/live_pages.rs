//! The live pages' sign-in cookie: a value derived from the token (its hash), never the token;
//! revoked with it; `Secure` behind TLS.

mod helpers;

use axum::http::StatusCode;
use helpers::{TestApp, TOKEN_A};
use swath_application::ports::TokenStore;

async fn sign_in(app: &TestApp, headers: &[(&str, &str)]) -> String {
    let response = app
        .get_with(&format!("/live/fleet?token={TOKEN_A}"), None, headers)
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    response.header("set-cookie").unwrap().to_owned()
}

#[tokio::test]
async fn the_cookie_holds_no_token_and_dies_with_its_revocation() {
    let app = TestApp::spawn().await;
    let cookie = sign_in(&app, &[]).await;
    assert!(
        !cookie.contains(TOKEN_A),
        "the cookie holds the token: {cookie}"
    );
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(!cookie.contains("Secure"), "no TLS, no Secure: {cookie}");
    let pair = cookie.split(';').next().unwrap().to_owned();

    let page = app
        .get_with("/live/fleet?fragment=main", None, &[("cookie", &pair)])
        .await;
    assert_ne!(page.status, StatusCode::UNAUTHORIZED, "the cookie signs in");
    // The cookie is no bearer token for the API.
    let value = pair.split_once('=').unwrap().1;
    let api = app.get("/v1/mowers", Some(value)).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);

    let id = app.token_ids[TOKEN_A];
    assert!(TokenStore::revoke_token(&app.store, id).await.unwrap());
    let page = app
        .get_with("/live/fleet?fragment=main", None, &[("cookie", &pair)])
        .await;
    assert_eq!(
        page.status,
        StatusCode::UNAUTHORIZED,
        "revoked with its token"
    );
}

#[tokio::test]
async fn the_cookie_is_secure_behind_tls() {
    let app = TestApp::spawn().await;
    for headers in [
        [("x-forwarded-proto", "https")],
        [("forwarded", "for=192.0.2.60;proto=https;by=203.0.113.43")],
    ] {
        let cookie = sign_in(&app, &headers).await;
        assert!(cookie.contains("; Secure"), "{headers:?}: {cookie}");
    }
    let cookie = sign_in(&app, &[("x-forwarded-proto", "http")]).await;
    assert!(!cookie.contains("Secure"), "{cookie}");
}
