//! Security headers (issue 35, decision 143): every live page sends a Content-Security-Policy that
//! allows its own inline script and style (by hash) and the map's tile host and nothing else,
//! `frame-ancestors 'none'`, `nosniff` and `no-referrer`; API answers send `nosniff` and
//! `frame-ancestors 'none'`.

mod helpers;

use base64::Engine;
use helpers::{TestApp, TestResponse, TOKEN_A};
use sha2::{Digest, Sha256};

/// The inline elements `tag` of a page, their content.
fn inline(page: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    page.split(&open)
        .skip(1)
        .map(|rest| rest.split(&close).next().unwrap().to_owned())
        .collect()
}

fn source_hash(content: &str) -> String {
    let digest = Sha256::digest(content.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The policy's directive `name`: its sources.
fn directive<'a>(policy: &'a str, name: &str) -> Vec<&'a str> {
    policy
        .split(';')
        .map(str::trim)
        .find_map(|d| d.strip_prefix(name).filter(|rest| rest.starts_with(' ')))
        .unwrap_or_else(|| panic!("no {name} in {policy}"))
        .split_whitespace()
        .collect()
}

fn assert_page_headers(what: &str, answer: &TestResponse) {
    let page = String::from_utf8_lossy(&answer.body);
    let policy = answer
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    assert_eq!(directive(policy, "default-src"), ["'none'"], "{what}");
    assert_eq!(directive(policy, "frame-ancestors"), ["'none'"], "{what}");
    assert_eq!(directive(policy, "base-uri"), ["'none'"], "{what}");
    assert_eq!(directive(policy, "connect-src"), ["'self'"], "{what}");
    assert_eq!(
        directive(policy, "img-src"),
        ["https://tile.openstreetmap.org"],
        "{what}: images from the tile host only"
    );
    assert!(!policy.contains("unsafe"), "{what}: {policy}");
    // Exactly the page's own inline script and style, by their hashes.
    for (tag, name) in [("script", "script-src"), ("style", "style-src")] {
        let allowed = directive(policy, name);
        for content in inline(&page, tag) {
            assert_eq!(allowed, [source_hash(&content)], "{what}: {tag}");
        }
    }
    assert!(!page.contains(" style=\""), "{what}: a style attribute");
    assert_eq!(
        answer.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        answer.header("referrer-policy"),
        Some("no-referrer"),
        "{what}"
    );
}

#[tokio::test]
async fn every_page_allows_its_own_script_and_style_and_nothing_else() {
    let app = TestApp::spawn().await;
    let map = format!("/live/map?site={}", app.a.sites[0]);
    for path in ["/live/fleet", "/live/wall", "/live/health", map.as_str()] {
        let page = app.get(path, Some(TOKEN_A)).await;
        assert_eq!(page.status, 200, "{path}");
        let body = String::from_utf8_lossy(&page.body);
        assert_eq!(inline(&body, "script").len(), 1, "{path}: its script");
        assert_eq!(inline(&body, "style").len(), 1, "{path}: its style");
        assert_page_headers(path, &page);
        let fragment = if path.contains('?') {
            format!("{path}&fragment=main")
        } else {
            format!("{path}?fragment=main")
        };
        assert_page_headers(&fragment, &app.get(&fragment, Some(TOKEN_A)).await);
        // The sign-in page of each, without a token.
        let sign_in = app.get(path, None).await;
        assert_eq!(sign_in.status, 401, "{path}");
        assert_page_headers(&format!("{path} (sign-in)"), &sign_in);
    }
}

#[tokio::test]
async fn the_map_draws_its_tiles_without_style_attributes() {
    let app = TestApp::spawn().await;
    let map = app
        .get(&format!("/live/map?site={}", app.a.sites[0]), Some(TOKEN_A))
        .await;
    let page = String::from_utf8_lossy(&map.body);
    assert!(
        page.contains("<div class=\"tile\" data-box=\""),
        "the seeded positions draw tiles: {page}"
    );
    assert_page_headers("map", &map);
}

#[tokio::test]
async fn api_answers_are_not_sniffed_nor_framed() {
    let app = TestApp::spawn().await;
    let mower = format!("/v1/mowers/{}/state", app.a.mowers[0]);
    for (path, token) in [
        ("/v1/mowers", Some(TOKEN_A)),
        ("/v1/mowers", None),
        (mower.as_str(), Some(TOKEN_A)),
        ("/v1/me", Some(TOKEN_A)),
        ("/healthz", None),
        ("/metrics", None),
        ("/openapi.json", None),
        ("/docs/", None),
        ("/no/such/route", None),
        ("/live/fleet?token=garbage", None),
    ] {
        let answer = app.get(path, token).await;
        assert_eq!(
            answer.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        let policy = answer
            .header("content-security-policy")
            .unwrap_or_else(|| panic!("{path}: no policy"));
        assert_eq!(directive(policy, "frame-ancestors"), ["'none'"], "{path}");
    }
}
