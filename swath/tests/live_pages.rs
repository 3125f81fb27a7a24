//! The live pages' sign-in (decisions 143 and 189): only the page's own form signs in (a POST
//! from this server's origin; a token in the address sets nothing); the token is checked before
//! any cookie is set; the cookie is a session signed byte for byte with the server's key, naming
//! the token by its id, never the token nor its hash; it expires, dies with its token, and is
//! accepted by every replica given the same secret; `Secure` behind TLS.

mod helpers;

use axum::http::StatusCode;
use chrono::Duration;
use helpers::{TestApp, TOKEN_A, TOKEN_A_WRITE_ONLY};
use swath_application::ports::{hash_token, TokenStore};

const SECRET: &[u8] = b"a session secret shared by every replica";

/// The `name=value` pair of a `Set-Cookie`.
fn pair(cookie: &str) -> String {
    cookie.split(';').next().unwrap().to_owned()
}

async fn fragment(app: &TestApp, cookie: &str) -> StatusCode {
    app.get_with("/live/fleet?fragment=main", None, &[("cookie", cookie)])
        .await
        .status
}

async fn sign_in(app: &TestApp, headers: &[(&str, &str)]) -> String {
    let response = post_sign_in(app, "/live/fleet", TOKEN_A, headers).await;
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

#[tokio::test]
async fn a_token_is_checked_before_any_cookie_is_set() {
    let app = TestApp::spawn().await;
    for (token, says) in [
        ("swath_made_up_by_another_site", "unknown or revoked"),
        (TOKEN_A_WRITE_ONLY, "`read` scope"),
        ("not%20a%20token", "not an API token"),
    ] {
        let origin = [("origin", "http://swath.example")];
        let response = post_sign_in(&app, "/live/fleet", token, &origin).await;
        assert_eq!(response.status, StatusCode::UNAUTHORIZED, "{token}");
        assert_eq!(
            response.header("set-cookie"),
            None,
            "{token}: a cookie was set"
        );
        let body = String::from_utf8_lossy(&response.body);
        assert!(body.contains("<h2 id=\"sign-in\">"), "{token}: {body}");
        assert!(body.contains(says), "{token}: {body}");
    }
}

#[tokio::test]
async fn the_cookie_is_a_signed_session_not_the_stored_hash() {
    let app = TestApp::spawn().await;
    let stored = hash_token(TOKEN_A).0;
    // What the token table holds opens no page.
    assert_eq!(
        fragment(&app, &format!("swath_live={stored}")).await,
        StatusCode::UNAUTHORIZED
    );
    let cookie = pair(&sign_in(&app, &[]).await);
    assert_ne!(cookie, format!("swath_live={stored}"));
    assert_eq!(fragment(&app, &cookie).await, StatusCode::OK);
    // One changed byte of the signature, or of the token id it names, and it is refused.
    let mut tampered = cookie.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    assert_eq!(fragment(&app, &tampered).await, StatusCode::UNAUTHORIZED);
    let id = app.token_ids[TOKEN_A].to_string();
    let other = cookie.replace(&id, &app.token_ids[helpers::TOKEN_B].to_string());
    assert_ne!(other, cookie);
    assert_eq!(fragment(&app, &other).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_session_expires() {
    let app = TestApp::spawn().await;
    let cookie = pair(&sign_in(&app, &[]).await);
    app.clock
        .advance(Duration::hours(12) - Duration::seconds(1));
    assert_eq!(fragment(&app, &cookie).await, StatusCode::OK);
    app.clock.advance(Duration::seconds(1));
    assert_eq!(fragment(&app, &cookie).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn replicas_with_the_same_secret_accept_each_others_sessions() {
    let one = TestApp::spawn_configured(100, |s| s.with_session_secret(SECRET)).await;
    let two = TestApp::spawn_configured(100, |s| s.with_session_secret(SECRET)).await;
    let random = TestApp::spawn().await;
    let cookie = pair(&sign_in(&one, &[]).await);
    assert_eq!(fragment(&two, &cookie).await, StatusCode::OK);
    assert_eq!(
        fragment(&random, &cookie).await,
        StatusCode::UNAUTHORIZED,
        "another key signs other sessions"
    );
}

/// The `name=value` of a session whose expiry field is `expiry` (the rest as signed).
fn with_expiry(cookie: &str, expiry: impl FnOnce(&str) -> String) -> String {
    let (payload, tag) = cookie.rsplit_once('.').unwrap();
    let (head, expires) = payload.rsplit_once('.').unwrap();
    format!("{head}.{}.{tag}", expiry(expires))
}

#[tokio::test]
async fn a_session_re_encoded_is_refused() {
    let app = TestApp::spawn().await;
    let cookie = pair(&sign_in(&app, &[]).await);
    assert_eq!(fragment(&app, &cookie).await, StatusCode::OK);
    // The same number, written otherwise: the signature covers the bytes, not what they parse to.
    for forged in [
        with_expiry(&cookie, |e| format!("+{e}")),
        with_expiry(&cookie, |e| format!("0{e}")),
        with_expiry(&cookie, |e| format!("00{e}")),
    ] {
        assert_ne!(forged, cookie);
        assert_eq!(
            fragment(&app, &forged).await,
            StatusCode::UNAUTHORIZED,
            "{forged}"
        );
    }
}

#[tokio::test]
async fn the_cookie_does_not_name_the_tokens_hash() {
    let app = TestApp::spawn().await;
    let cookie = sign_in(&app, &[]).await;
    let stored = hash_token(TOKEN_A).0;
    assert!(!cookie.contains(&stored), "the token table's key: {cookie}");
    // It names the token by its id, which lists show and which opens nothing by itself.
    let id = app.token_ids[TOKEN_A].to_string();
    assert!(cookie.contains(&id), "{cookie}");
}

#[tokio::test]
async fn a_token_in_the_address_sets_no_cookie() {
    let app = TestApp::spawn().await;
    let response = app
        .get_with(&format!("/live/fleet?token={TOKEN_A}"), None, &[])
        .await;
    assert_eq!(response.status, StatusCode::UNAUTHORIZED);
    assert_eq!(response.header("set-cookie"), None);
    let body = String::from_utf8_lossy(&response.body);
    assert!(
        body.contains("<form method=\"post\" action=\"/live/fleet\">"),
        "{body}"
    );
}

/// `POST path` of the sign-in form with `token`, to the host `swath.example`, with `headers`.
async fn post_sign_in(
    app: &TestApp,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
) -> helpers::TestResponse {
    let mut all = vec![
        ("content-type", "application/x-www-form-urlencoded"),
        ("host", "swath.example"),
    ];
    all.extend_from_slice(headers);
    let body = format!("token={token}");
    app.send_body(axum::http::Method::POST, path, None, &all, body)
        .await
}

#[tokio::test]
async fn a_sign_in_from_another_origin_is_refused() {
    let app = TestApp::spawn().await;
    for headers in [
        vec![("origin", "https://evil.example")],
        vec![("origin", "http://swath.example.evil.example")],
        vec![("origin", "http://swath.example:8080")],
        vec![("origin", "null")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
        // The origin decides when both are sent.
        vec![
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "same-origin"),
        ],
    ] {
        let response = post_sign_in(&app, "/live/fleet", TOKEN_A, &headers).await;
        assert_eq!(response.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert_eq!(response.header("set-cookie"), None, "{headers:?}");
        let body = String::from_utf8_lossy(&response.body);
        assert!(body.contains("<h2 id=\"sign-in\">"), "{headers:?}: {body}");
    }
}

#[tokio::test]
async fn the_pages_own_form_signs_in() {
    let app = TestApp::spawn().await;
    for headers in [
        vec![("origin", "http://swath.example")],
        vec![("origin", "https://swath.example")],
        vec![("sec-fetch-site", "same-origin")],
        // Not a browser (no origin told): nothing a cross-site page could make a browser send.
        vec![],
    ] {
        let response = post_sign_in(&app, "/live/fleet", TOKEN_A, &headers).await;
        assert_eq!(response.status, StatusCode::SEE_OTHER, "{headers:?}");
        assert_eq!(response.header("location"), Some("/live/fleet"));
        let cookie = pair(response.header("set-cookie").unwrap());
        assert_eq!(fragment(&app, &cookie).await, StatusCode::OK, "{headers:?}");
    }
    // The map's site is kept through the sign-in.
    let map = format!("/live/map?site={}", app.a.sites[1]);
    let origin = [("origin", "http://swath.example")];
    let response = post_sign_in(&app, &map, TOKEN_A, &origin).await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.header("location"), Some(map.as_str()));
}
