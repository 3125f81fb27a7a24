//! The test application: the real router on the memory adapters, wired by the binary's own
//! [`swath::wiring::wire`] (the same use cases and state as `swath serve`), with a manual clock,
//! two seeded accounts and a few ingested states, driven in process (no socket) with
//! `tower::ServiceExt::oneshot`. No consumer runs: a test calls the use cases itself
//! ([`TestApp::record`], the watcher and the busy check), so that it decides when each happens.
//!
//! Every test builds its own [`TestApp`], so tests never share state and run in parallel.
//!
//! # Layout
//! - [`TestApp`]: the state, the router and request helpers.
//! - [`Tenant`]: what was seeded for one account (ids in list order, tokens).
//! - [`TestResponse`]: status, headers and body, with JSON and problem accessors.

// Each test binary uses a part of these helpers.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use bytes::Bytes;
use chrono::{DateTime, Duration, Utc};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::sync::Arc;
use swath::wiring::Stores;
use swath_api::{router, Problem};
use swath_application::ports::{
    hash_token, Clock, EventBus, ManualClock, NewToken, TokenId, TokenStore,
};
use swath_application::{Ingest, SchedulerStatus, Watcher};
use swath_domain::{
    AccountId, Mower, MowerId, Principal, Scope, Site, SiteId, StateOutcome, StateReport,
};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_tests::support::http::wire_app;
use swath_tests::support::{add_account, add_mower, add_site, mower, site};
use tower::ServiceExt;
use uuid::Uuid;

/// Account A's read token (every site).
pub const TOKEN_A: &str = "token-a";
/// Account A's read token, limited to its second site ("South").
pub const TOKEN_A_SOUTH: &str = "token-a-south";
/// Account A's token without the `read` scope.
pub const TOKEN_A_WRITE_ONLY: &str = "token-a-write-only";
/// Account B's token with every scope.
pub const TOKEN_B: &str = "token-b";
/// Account A's token with every scope (every site).
pub const TOKEN_A_ADMIN: &str = "token-a-admin";
/// Account A's token with every scope, limited to its second site ("South").
pub const TOKEN_A_SOUTH_ADMIN: &str = "token-a-south-admin";

/// The instant the seeded states were observed at (the clock starts a minute later).
pub fn t0() -> DateTime<Utc> {
    "2026-06-01T12:00:00Z".parse().unwrap()
}

/// What was seeded for one account.
pub struct Tenant {
    pub account_id: AccountId,
    pub sites: Vec<SiteId>,
    /// In the order `GET /v1/mowers` lists them.
    pub mowers: Vec<MowerId>,
}

pub struct TestApp {
    pub router: Router,
    pub clock: Arc<ManualClock>,
    pub store: MemoryStore,
    pub ingest: Arc<Ingest>,
    /// The notification rules and the busy check over the same store (not subscribed: a test
    /// hands them states).
    pub watcher: Arc<Watcher>,
    pub scheduler: Arc<SchedulerStatus>,
    /// The memory bus the app publishes on.
    pub bus: Arc<dyn EventBus>,
    /// "Acme Parks": Bravo (North, reported twice), Charlie (South, never reported), Alpha
    /// (North, in error) — listed in that order: display order, then name.
    pub a: Tenant,
    /// "Borough Lawns": Delta (reported once).
    pub b: Tenant,
    /// The ids of the seeded tokens, by token.
    pub token_ids: std::collections::HashMap<&'static str, TokenId>,
}

/// A fixed id, so that snapshots and orderings are the same on every run.
fn id(n: u128) -> Uuid {
    Uuid::from_u128(0x0190_a2b4_0000_7000_8000_0000_0000_0000 | n)
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with_history(100).await
    }

    /// The test app with a memory store keeping `history_per_mower` history rows per mower.
    pub async fn spawn_with_history(history_per_mower: usize) -> TestApp {
        Self::spawn_configured(history_per_mower, |state| state).await
    }

    /// The test app whose router serves `configure(state)` (other limits, a session secret).
    pub async fn spawn_configured(
        history_per_mower: usize,
        configure: impl FnOnce(swath_api::AppState) -> swath_api::AppState,
    ) -> TestApp {
        Self::spawn_with_stores(history_per_mower, |stores| stores, configure).await
    }

    /// The test app over the memory stores as `stores` changes them (a port wrapped to count
    /// its reads), its router serving `configure(state)`.
    pub async fn spawn_with_stores(
        history_per_mower: usize,
        stores: impl FnOnce(Stores) -> Stores,
        configure: impl FnOnce(swath_api::AppState) -> swath_api::AppState,
    ) -> TestApp {
        let store = MemoryStore::new(MemoryStoreSettings { history_per_mower });
        let clock = Arc::new(ManualClock::new(t0() + Duration::minutes(1)));
        let wired = wire_app(stores(Stores::memory(store.clone())), clock.clone());
        let bus = Arc::clone(&wired.bus);

        let a = seed_tenant(
            &store,
            "Acme Parks",
            0xa0,
            &[("North", 0), ("South", 1)],
            &[("Bravo", 0, 0), ("Charlie", 1, 0), ("Alpha", 0, 1)],
        )
        .await;
        let b = seed_tenant(
            &store,
            "Borough Lawns",
            0xb0,
            &[("Main", 0)],
            &[("Delta", 0, 0)],
        )
        .await;

        let all = vec![Scope::Read, Scope::Write, Scope::Admin];
        let mut token_ids = std::collections::HashMap::new();
        for (n, (token, account, scopes, sites)) in [
            (TOKEN_A, a.account_id, vec![Scope::Read], None),
            (TOKEN_A_ADMIN, a.account_id, all.clone(), None),
            (
                TOKEN_A_SOUTH_ADMIN,
                a.account_id,
                all.clone(),
                Some(vec![a.sites[1]]),
            ),
            (
                TOKEN_A_SOUTH,
                a.account_id,
                vec![Scope::Read],
                Some(vec![a.sites[1]]),
            ),
            (TOKEN_A_WRITE_ONLY, a.account_id, vec![Scope::Write], None),
            (TOKEN_B, b.account_id, all.clone(), None),
        ]
        .into_iter()
        .enumerate()
        {
            let token_id = TokenId(id(0xc000 | n as u128));
            TokenStore::create_token(
                &store,
                hash_token(token),
                NewToken {
                    id: token_id,
                    name: format!("{token} ({n})"),
                    principal: Principal {
                        account_id: account,
                        scopes,
                        sites,
                    },
                },
            )
            .await
            .unwrap();
            token_ids.insert(token, token_id);
        }

        let app = TestApp {
            router: router(configure(wired.state)),
            clock,
            store,
            ingest: wired.ingest,
            watcher: wired.watcher,
            scheduler: wired.scheduler,
            bus,
            a,
            b,
            token_ids,
        };
        app.seed_states().await;
        app
    }

    /// Bravo mows 30 s in a straight line; Alpha stops with an error; Delta is docked.
    async fn seed_states(&self) {
        let [bravo, _charlie, alpha] = self.a.mowers[..] else {
            unreachable!()
        };
        self.record(json!({
            "mower_id": bravo.to_string(),
            "account_id": self.a.account_id.to_string(),
            "observed_at": t0().to_rfc3339(),
            "activity": "mowing",
            "battery_percent": 80,
            "position": {"lat": 52.5, "lon": 13.4, "accuracy_m": 0.5, "heading_deg": 90.0},
            "blade_on": true,
            "vendor_state": "MOWING_LANE",
        }))
        .await;
        self.record(json!({
            "mower_id": bravo.to_string(),
            "account_id": self.a.account_id.to_string(),
            "observed_at": (t0() + Duration::seconds(30)).to_rfc3339(),
            "activity": "leaving",
            "battery_percent": 79,
            "position": {"lat": 52.5, "lon": 13.4001},
            "blade_on": true,
            "vendor_state": "MOWING_LANE",
            "extra": {"zone": "front lawn"},
            "firmware": "4.2.1",
        }))
        .await;
        self.record(json!({
            "mower_id": alpha.to_string(),
            "account_id": self.a.account_id.to_string(),
            "observed_at": t0().to_rfc3339(),
            "activity": "error",
            "battery_percent": 41,
            "error_code": "BLADE_BLOCKED",
        }))
        .await;
        self.record(json!({
            "mower_id": self.b.mowers[0].to_string(),
            "account_id": self.b.account_id.to_string(),
            "observed_at": t0().to_rfc3339(),
            "activity": "charging",
            "battery_percent": 12,
        }))
        .await;
    }

    /// Validates and ingests one report through `Ingest::record_states`, as the bus consumer would,
    /// and asserts it was stored.
    pub async fn record(&self, report: Value) {
        let report = StateReport::from_value(report, self.clock.now());
        let outcomes = self.ingest.record_states(vec![report]).await.unwrap();
        assert_eq!(outcomes, vec![StateOutcome::Stored]);
    }

    /// Sends a request through the router.
    pub async fn request(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        TestResponse {
            status,
            headers,
            body,
        }
    }

    /// `GET path`, with a bearer token if given.
    pub async fn get(&self, path: &str, token: Option<&str>) -> TestResponse {
        self.get_with(path, token, &[]).await
    }

    /// How many alerts of `kind` of `mower` `GET /v1/alerts` lists as open to `token`.
    pub async fn open_alerts(&self, token: &str, mower: MowerId, kind: &str) -> usize {
        let alerts = self.get("/v1/alerts", Some(token)).await.json();
        alerts["items"]
            .as_array()
            .expect("a page of alerts")
            .iter()
            .filter(|a| a["kind"] == kind && a["mower_id"] == serde_json::json!(mower))
            .count()
    }

    /// Asserts that `path` (a paged list, its query ending in `limit=<n>`) with an empty
    /// `cursor=` answers exactly its first page, and that this page is cut (so a cursor would
    /// have mattered).
    pub async fn assert_empty_cursor_is_the_first_page(&self, path: &str, token: &str) {
        let first = self.get(path, Some(token)).await;
        assert_eq!(first.status, StatusCode::OK, "{path}");
        let empty = self.get(&format!("{path}&cursor="), Some(token)).await;
        assert_eq!(empty.status, StatusCode::OK, "{path}&cursor=");
        let page = first.json();
        assert_eq!(page["truncated"], true, "{path}: a page with a next one");
        assert!(page["next_cursor"].is_string(), "{path}");
        assert_eq!(empty.json(), page, "{path}&cursor= is the first page");
    }

    /// `GET path` with extra headers.
    pub async fn get_with(
        &self,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> TestResponse {
        self.send(Method::GET, path, token, headers).await
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> TestResponse {
        self.send_body(method, path, token, headers, Body::empty())
            .await
    }

    /// A request with a body (give the content type in `headers`).
    pub async fn send_body(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        self.request(builder.body(body.into()).unwrap()).await
    }

    /// `method path` with a JSON body.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: &Value,
    ) -> TestResponse {
        self.send_body(
            method,
            path,
            token,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> TestResponse {
        self.json(Method::POST, path, token, body).await
    }

    /// `PATCH path` with a JSON body.
    pub async fn patch(&self, path: &str, token: Option<&str>, body: &Value) -> TestResponse {
        self.json(Method::PATCH, path, token, body).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str, token: Option<&str>) -> TestResponse {
        self.send(Method::DELETE, path, token, &[]).await
    }
}

/// Seeds an account with its sites (name, display order) and mowers (name, site index, display
/// order). Ids are fixed per account (`base`); the returned mowers are in list order.
async fn seed_tenant(
    store: &MemoryStore,
    name: &str,
    base: u128,
    sites: &[(&str, i32)],
    mowers: &[(&str, usize, i32)],
) -> Tenant {
    let account_id = AccountId(id(base << 16));
    add_account(store, account_id, name).await;
    let mut site_ids = Vec::new();
    for (i, (site_name, order)) in sites.iter().enumerate() {
        let site_id = SiteId(id((base << 16) | 0x100 | i as u128));
        let berlin = chrono_tz::Europe::Berlin;
        let site = Site {
            display_order: *order,
            ..site(site_id, account_id, site_name, berlin, 0)
        };
        add_site(store, site).await;
        site_ids.push(site_id);
    }
    let mut mower_ids = Vec::new();
    for (i, (mower_name, site, order)) in mowers.iter().enumerate() {
        let mower_id = MowerId(id((base << 16) | 0x200 | i as u128));
        let mower = Mower {
            model: "Greenline R40".to_owned(),
            serial: format!("GR40-{:04}", i + 1),
            display_order: *order,
            blade_threshold_ms: 100 * 3600 * 1000,
            ..mower(mower_id, account_id, site_ids[*site], *mower_name, i)
        };
        add_mower(store, mower).await;
        mower_ids.push(mower_id);
    }
    Tenant {
        account_id,
        sites: site_ids,
        mowers: mower_ids,
    }
}

/// Where every problem type of the API starts.
const PROBLEMS: &str = "https://swath.dev/problems/";

pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl TestResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn content_type(&self) -> Option<&str> {
        self.header("content-type")
    }

    /// The body as JSON; panics with the body when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as a problem, after checking the media type and that the status agrees.
    pub fn problem(&self) -> Problem {
        assert_eq!(
            self.content_type(),
            Some("application/problem+json"),
            "{:?}",
            self.body
        );
        let problem: Problem = serde_json::from_slice(&self.body).unwrap();
        assert_eq!(problem.status, self.status.as_u16());
        assert!(problem.type_uri.starts_with(PROBLEMS));
        problem
    }

    /// The body as a problem ([`TestResponse::problem`]): its type without the common prefix
    /// (`not-found` for `https://swath.dev/problems/not-found`).
    pub fn problem_type(&self) -> String {
        let problem = self.problem();
        problem.type_uri[PROBLEMS.len()..].to_owned()
    }
}

/// What a snapshot hides: only what changes from run to run. An id is hidden when it is a UUID v7
/// made during the run (its timestamp within an hour of the wall clock), an instant when it is
/// within an hour of the wall clock (a `now`-based time); the fixtures' fixed ids
/// ([`TestApp`]'s `id`, timestamp 2024) and fixed instants ([`t0`], June 2026) stay visible, and
/// so does `null`, which says something (no state yet, the last page).
pub fn made_during_the_run(value: &insta::internals::Content) -> Option<&'static str> {
    let text = value.as_str()?;
    let now = Utc::now();
    let recent = |t: DateTime<Utc>| (now - t).num_minutes().abs() < 60;
    if let Ok(id) = Uuid::parse_str(text) {
        let (seconds, nanos) = id.get_timestamp()?.to_unix();
        let made = DateTime::from_timestamp(seconds as i64, nanos)?;
        return (id.get_version_num() == 7 && recent(made)).then_some("[id]");
    }
    let instant = DateTime::parse_from_rfc3339(text).ok()?;
    recent(instant.with_timezone(&Utc)).then_some("[time]")
}

/// A redaction that hides a value only when [`made_during_the_run`] says so.
pub fn runtime_redaction() -> insta::internals::Redaction {
    insta::dynamic_redaction(|value, _| match made_during_the_run(&value) {
        Some(label) => insta::internals::Content::from(label),
        None => value,
    })
}

/// A JSON snapshot with what changes from run to run redacted ([`made_during_the_run`]: ids
/// and instants made during the run), cursors that name such ids, and token secrets. Fixed ids
/// and instants of the fixtures stay visible; `null` is never redacted.
#[macro_export]
macro_rules! redacted_snapshot {
    ($name:expr, $value:expr) => {
        insta::assert_json_snapshot!($name, $value, {
            ".**.id" => $crate::helpers::runtime_redaction(),
            ".**.mower_id" => $crate::helpers::runtime_redaction(),
            ".**.site_id" => $crate::helpers::runtime_redaction(),
            ".**.account_id" => $crate::helpers::runtime_redaction(),
            ".**.sites[]" => $crate::helpers::runtime_redaction(),
            ".**.observed_at" => $crate::helpers::runtime_redaction(),
            ".**.last_seen_at" => $crate::helpers::runtime_redaction(),
            ".**.counted_until" => $crate::helpers::runtime_redaction(),
            ".**.created_at" => $crate::helpers::runtime_redaction(),
            ".**.updated_at" => $crate::helpers::runtime_redaction(),
            ".**.times[]" => $crate::helpers::runtime_redaction(),
            ".**.oldest_kept" => $crate::helpers::runtime_redaction(),
            // A created token's secret, random on every run; `token` is also the object of a
            // created account's token, whose secret is `.token.token`.
            ".**.token" => insta::dynamic_redaction(|value, _| {
                if value.as_str().is_some() {
                    insta::internals::Content::from("[token]")
                } else {
                    value
                }
            }),
            ".token.token" => "[token]",
        })
    };
}
