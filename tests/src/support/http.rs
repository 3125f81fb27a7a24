//! The HTTP tests' app and requests: the router as `swath serve` wires it, driven in process (no
//! socket) with `tower::ServiceExt::oneshot`, and the tokens they sign in with.

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use swath::wiring::{wire, Settings, Stores, Wired};
use swath_application::latest_cache::LATEST_CACHE_TTL;
use swath_application::ports::{hash_token, Clock, TokenStore};
use swath_application::RetentionPolicy;
use swath_domain::watch::DEFAULT_OFFLINE_AFTER;
use swath_domain::{AccountId, Principal, Scope, SiteId};
use swath_memory::{MemoryBus, MemoryBusSettings};
use tower::ServiceExt;

/// The use cases and the API state over `stores` as `swath serve` wires them, on a memory bus,
/// with the default offline delay and retention. Nothing is subscribed: states come through the
/// API, and a test runs the watcher itself when it needs it.
pub fn wire_app(stores: Stores, clock: Arc<dyn Clock>) -> Wired {
    let bus = Arc::new(MemoryBus::new(MemoryBusSettings::default()));
    wire(stores, bus, clock, test_settings())
}

/// The settings of the in-process test app: the default offline delay, retention and webhooks,
/// no principal cache (every request asks the stores).
pub fn test_settings() -> Settings {
    Settings {
        offline_after: DEFAULT_OFFLINE_AFTER,
        retention: RetentionPolicy::default(),
        latest_cache: LATEST_CACHE_TTL,
        webhooks: swath::wiring::WebhookSettings::default(),
        batch_timeout: swath_application::ingest::DEFAULT_UNIT_DEADLINE,
        cache_ttl: std::time::Duration::ZERO,
        session_merge_gap: swath_domain::sessions::DEFAULT_SESSION_MERGE_GAP,
    }
}

/// Stores `token` for `account_id` with `scopes`, on every site (`None`) or on `sites`.
pub async fn add_token<T: TokenStore + ?Sized>(
    tokens: &T,
    token: &str,
    account_id: AccountId,
    scopes: Vec<Scope>,
    sites: Option<Vec<SiteId>>,
) {
    let principal = Principal {
        account_id,
        scopes,
        sites,
    };
    let stored = tokens.store_token(hash_token(token), principal).await;
    stored.expect("seed token");
}

/// What the router answered.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The body as text; panics when it is not UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).expect("a UTF-8 body")
    }

    /// The body as JSON: `null` when empty, the text as a JSON string when it is not JSON.
    pub fn json(&self) -> Value {
        if self.body.is_empty() {
            return Value::Null;
        }
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.body).into()))
    }
}

/// Sends `request` through `app`.
pub async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app
        .clone()
        .oneshot(request)
        .await
        .expect("the router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    Answer {
        status,
        headers,
        body,
    }
}

/// `method uri` with `token` as its bearer token and `body`, when given, as JSON.
pub async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    token: &str,
    body: Option<Value>,
) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    let request = match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    };
    send(app, request.unwrap()).await
}

/// `GET uri` with the headers given and no bearer token (a cookie, or a token in the address).
pub async fn get_with(app: &Router, uri: &str, headers: &[(header::HeaderName, &str)]) -> Answer {
    let mut request = Request::builder().uri(uri);
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    send(app, request.body(Body::empty()).unwrap()).await
}

/// Signs in to the live page `page` (its path and query) as its own form does: a same-origin
/// `POST` of `token=<token>` (decision 189).
pub async fn sign_in_with_form(app: &Router, page: &str, token: &str) -> Answer {
    let request = Request::builder()
        .method(Method::POST)
        .uri(page)
        .header(header::HOST, "swath.test")
        .header(header::ORIGIN, "http://swath.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={token}")))
        .unwrap();
    send(app, request).await
}

/// `app`, and `GET /test-sign-in/<live page path>?<its query>` for a browser: the live page's
/// own sign-in form, as the page renders it to a browser that is not signed in, with `token`
/// filled in and submitted by a script once loaded. Served from the same origin as the pages,
/// so the browser signs in through the form as a person would (the page's policy allows no
/// script of ours, hence this page of the test's).
pub fn with_form_sign_in(app: Router, token: &str) -> Router {
    let token = token.to_owned();
    let pages = app.clone();
    let handler = move |uri: axum::http::Uri| {
        let (pages, token) = (pages.clone(), token.clone());
        async move {
            let page = uri
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or_default()
                .trim_start_matches("/test-sign-in")
                .to_owned();
            let request = Request::builder().uri(&page).body(Body::empty()).unwrap();
            let sign_in = send(&pages, request).await.text();
            let start = sign_in.find("<form").expect("the sign-in page has a form");
            let end = sign_in[start..].find("</form>").expect("a closed form") + start;
            let form = sign_in[start..end + "</form>".len()].replacen(
                "name=\"token\"",
                &format!("name=\"token\" value=\"{token}\""),
                1,
            );
            axum::response::Html(format!(
                "<!doctype html><html><body>{form}\
                 <script>document.forms[0].submit()</script></body></html>"
            ))
        }
    };
    app.route("/test-sign-in/{*page}", axum::routing::get(handler))
}

/// The headless browser the browser tests drive (Debian's chromium): the first of the names
/// `tests/build.rs` looks for that runs. Those tests are ignored when none was found at build
/// time, so finding none here is a failure.
fn chromium() -> &'static str {
    static FOUND: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        ["chromium", "chromium-browser", "google-chrome"]
            .into_iter()
            .find(|c| {
                std::process::Command::new(c)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .expect("chromium was found when this test was built, and is gone")
    })
}

/// Runs the headless browser on `url` (90 s at most) with a fresh profile in `scratch` and the
/// `extra` arguments (`--dump-dom`, `--screenshot=…`); answers what it printed, after checking it
/// succeeded. Blocking: call it from `spawn_blocking`.
pub fn run_chromium(scratch: &std::path::Path, extra: &[String], url: &str) -> String {
    let profile = scratch.join(format!("swath-chromium-{}", uuid::Uuid::new_v4()));
    let out = std::process::Command::new("timeout")
        .arg("90")
        .arg(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1280,900",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
