//! `POST /v1/imports` on PostgreSQL, when `SWATH_TEST_DATABASE_URL` is set: the app wired as
//! `swath serve` wires it on a fresh database; an import's counts, its bad lines by number,
//! another account's mower refused and never stored, and its re-import counted as duplicates.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;
use swath::wiring::Stores;
use swath_api::router;
use swath_application::ports::{
    hash_token, Directory, ManualClock, NewToken, TelemetryStore, TokenId, TokenStore,
};
use swath_domain::{AccountId, Mower, MowerId, Principal, Scope, SiteId};
use swath_tests::postgres::PostgresFactory;
use swath_tests::support::http::wire_app;
use swath_tests::support::{add_account, add_mower, add_site, first_rows, mower, site};
use uuid::Uuid;

const TOKEN: &str = "swath-imports-postgres-writer";

/// An account with one site and one mower in `store`.
async fn seed(store: &dyn Directory, name: &str) -> (AccountId, MowerId) {
    let account = AccountId(Uuid::now_v7());
    add_account(store, account, name).await;
    let site_id = SiteId(Uuid::now_v7());
    add_site(
        store,
        site(site_id, account, "Main", chrono_tz::Europe::Berlin, 0),
    )
    .await;
    let id = MowerId(Uuid::now_v7());
    let mower = Mower {
        model: "Greenline R40".to_owned(),
        serial: format!("GR40-{}", Uuid::now_v7().simple()),
        blade_threshold_ms: 100 * 3600 * 1000,
        ..mower(id, account, site_id, "Bravo", 0)
    };
    add_mower(store, mower).await;
    (account, id)
}

async fn send(app: &axum::Router, method: Method, path: &str, body: String) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from(body))
        .unwrap();
    let answer = swath_tests::support::http::send(app, request).await;
    let document = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    (answer.status, document)
}

fn counts(document: &Value) -> (u64, u64, u64, u64) {
    let c = &document["counts"];
    let n = |k: &str| c[k].as_u64().unwrap();
    (n("new"), n("late_merged"), n("duplicate"), n("dropped"))
}

swath_tests::postgres_tests!(
    on_postgres: an_import_on_postgresql_counts_refuses_and_reimports_as_duplicates,
    an_import_on_postgresql_stops_when_its_token_is_revoked,
);

mod on_postgres {
    use super::*;

    pub(super) async fn an_import_on_postgresql_counts_refuses_and_reimports_as_duplicates(
        factory: PostgresFactory,
    ) {
        let store = factory.fresh_store().await;
        let t0: chrono::DateTime<chrono::Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
        let clock = Arc::new(ManualClock::new(t0 + chrono::Duration::hours(1)));
        let wired = wire_app(Stores::postgres(store.clone()), clock);
        let (account, mower) = seed(&store, "Acme Parks").await;
        let (_, foreign) = seed(&store, "Borough Lawns").await;
        TokenStore::create_token(
            &store,
            hash_token(TOKEN),
            NewToken {
                id: TokenId(Uuid::now_v7()),
                name: "writer".to_owned(),
                principal: Principal {
                    account_id: account,
                    scopes: vec![Scope::Write],
                    sites: None,
                },
            },
        )
        .await
        .unwrap();
        let app = router(wired.state);

        let report = |mower: MowerId, seconds: i64| {
            json!({
                "mower_id": mower,
                "account_id": account,
                "observed_at": (t0 + chrono::Duration::seconds(seconds)).to_rfc3339(),
                "activity": "mowing",
                "blade_on": true,
                "position": {"lat": 52.5, "lon": 13.4 + seconds as f64 * 1e-5},
            })
            .to_string()
        };
        // 450 states over three units of work, in order but for the last one (late, merged), a bad
        // line and another account's mower.
        let mut lines: Vec<String> = (0..450).map(|i| report(mower, 100 + i)).collect();
        lines.insert(7, "{\"mower_id\": 12}".to_owned());
        lines.insert(300, report(foreign, 10));
        lines.push(report(mower, 50));
        let body = lines.join("\n") + "\n";

        let (status, first) = send(&app, Method::POST, "/v1/imports", body.clone()).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{first}");
        assert_eq!(first["status"], "done");
        assert_eq!(counts(&first), (451, 1, 0, 2));
        let bad: Vec<(u64, &str)> = first["bad_lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["line"].as_u64().unwrap(), l["reason"].as_str().unwrap()))
            .collect();
        assert_eq!(bad, [(8, "malformed"), (301, "unknown_mower")]);
        let history = store.history(foreign, &first_rows(10)).await.unwrap();
        assert!(
            history.rows.is_empty(),
            "another account's mower got nothing"
        );

        let (status, again) = send(&app, Method::POST, "/v1/imports", body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{again}");
        assert_eq!(counts(&again), (0, 0, 451, 2));

        let path = format!("/v1/imports/{}", first["id"].as_str().unwrap());
        let (status, polled) = send(&app, Method::GET, &path, String::new()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(polled, first);
    }

    /// Issue 35 item 4 on PostgreSQL: a token revoked between two units of work stops its import;
    /// the first unit stays stored and counted, nothing after it is stored.
    pub(super) async fn an_import_on_postgresql_stops_when_its_token_is_revoked(
        factory: PostgresFactory,
    ) {
        const ADMIN: &str = "swath-imports-postgres-admin";
        let store = factory.fresh_store().await;
        let t0: chrono::DateTime<chrono::Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
        let clock = Arc::new(ManualClock::new(t0 + chrono::Duration::hours(1)));
        let wired = wire_app(Stores::postgres(store.clone()), clock);
        let (account, mower) = seed(&store, "Acme Parks").await;
        let writer = TokenId(Uuid::now_v7());
        for (token, id, scopes) in [
            (TOKEN, writer, vec![Scope::Write]),
            (
                ADMIN,
                TokenId(Uuid::now_v7()),
                vec![Scope::Read, Scope::Write, Scope::Admin],
            ),
        ] {
            let principal = Principal {
                account_id: account,
                scopes,
                sites: None,
            };
            let new = NewToken {
                id,
                name: token.to_owned(),
                principal,
            };
            TokenStore::create_token(&store, hash_token(token), new)
                .await
                .unwrap();
        }
        let app = router(wired.state);
        let line = |seconds: i64| {
            json!({
                "mower_id": mower,
                "account_id": account,
                "observed_at": (t0 + chrono::Duration::seconds(seconds)).to_rfc3339(),
                "activity": "mowing",
            })
            .to_string()
                + "\n"
        };
        let (sender, body) =
            futures::channel::mpsc::unbounded::<Result<bytes::Bytes, std::io::Error>>();
        let first: String = (0..250).map(line).collect();
        sender.unbounded_send(Ok(first.into())).unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("/v1/imports")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(header::CONTENT_TYPE, "application/x-ndjson")
            .body(Body::from_stream(body))
            .unwrap();
        let post = swath_tests::support::http::send(&app, request);
        let admin = |method: Method, path: String| {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
                .body(Body::empty())
                .unwrap();
            swath_tests::support::http::send(&app, request)
        };
        let revoke = async {
            // Once the first unit of work (200 reports) is stored.
            for _ in 0..2000 {
                let page = admin(Method::GET, "/v1/imports".to_owned()).await;
                let page: Value = serde_json::from_slice(&page.body).unwrap();
                if page["items"][0]["stored"].as_u64() >= Some(200) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            let revoked = admin(Method::DELETE, format!("/v1/tokens/{writer}")).await;
            assert_eq!(revoked.status, StatusCode::NO_CONTENT);
            let rest: String = (300..400).map(line).collect();
            let _ = sender.unbounded_send(Ok(rest.into()));
            drop(sender);
        };
        let (answer, ()) = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            tokio::join!(post, revoke)
        })
        .await
        .expect("the import stops");
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        let location = answer.headers["location"].to_str().unwrap().to_owned();
        let record = admin(Method::GET, location).await;
        let record: Value = serde_json::from_slice(&record.body).unwrap();
        assert_eq!(record["status"], "failed", "{record}");
        assert_eq!(record["failure_reason"], "token_revoked", "{record}");
        assert_eq!(record["stored"], 200, "{record}");
        let history = store.history(mower, &first_rows(1000)).await.unwrap();
        assert_eq!(history.rows.len(), 200, "nothing after the revocation");
    }
}
