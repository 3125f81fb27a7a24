//! Availability in every mower read (decision 104): `online`, `last_seen_at`, why it is
//! offline and since when, and the site's name; the rule is the live fleet view's (an open
//! `offline` alert), so both always agree.

mod helpers;

use axum::http::StatusCode;
use chrono::Duration;
use serde_json::{json, Value};
use swath_application::ports::Clock;

use helpers::{t0, TestApp, TOKEN_A, TOKEN_A_ADMIN};

fn item<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap()
}

#[tokio::test]
async fn mower_reads_say_whether_each_mower_is_online_and_name_its_site() {
    let app = TestApp::spawn().await;
    let [bravo, charlie, _alpha] = app.a.mowers[..] else {
        unreachable!()
    };
    let list = app.get("/v1/mowers", Some(TOKEN_A)).await.json();
    let b = item(&list, &bravo.to_string());
    assert_eq!(b["online"], true);
    assert_eq!(b["site_name"], "North");
    assert_eq!(b["last_seen_at"], b["state"]["last_seen_at"]);
    assert!(b["last_seen_at"].is_string());
    assert_eq!(b["offline_reason"], Value::Null);
    assert_eq!(b["offline_since"], Value::Null);
    let c = item(&list, &charlie.to_string());
    assert_eq!(
        (
            &c["online"],
            &c["site_name"],
            &c["offline_reason"],
            &c["last_seen_at"]
        ),
        (
            &json!(false),
            &json!("South"),
            &json!("never_reported"),
            &Value::Null
        )
    );

    // The watcher saw Bravo's latest state; eleven minutes of silence later the sweep raises
    // its `offline` alert.
    let report = json!({
        "mower_id": bravo,
        "account_id": app.a.account_id,
        "observed_at": (t0() + Duration::seconds(30)).to_rfc3339(),
        "activity": "mowing",
    });
    let parsed = app.watcher.parse(report.to_string().as_bytes());
    app.watcher.on_states(&[parsed]).await.unwrap();
    app.clock.advance(Duration::minutes(11));
    assert_eq!(app.watcher.sweep_offline().await.unwrap(), 1);
    let swept_at = app.clock.now();

    let one = app.get(&format!("/v1/mowers/{bravo}"), Some(TOKEN_A)).await;
    assert_eq!(one.status, StatusCode::OK);
    let one = one.json();
    assert_eq!(one["online"], false);
    assert_eq!(one["offline_reason"], "silent");
    let since: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(one["offline_since"].clone()).unwrap();
    assert!(since <= swept_at, "{since} after the sweep at {swept_at}");
    assert_eq!(one["site_name"], "North");
    let list = app.get("/v1/mowers", Some(TOKEN_A)).await.json();
    assert_eq!(
        item(&list, &bravo.to_string()),
        &one,
        "the list says the same"
    );

    // The fleet view decides with the same rule.
    let fleet = app.get("/v1/live/fleet", Some(TOKEN_A)).await.json();
    let card = fleet["mowers"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == bravo.to_string())
        .unwrap()
        .clone();
    assert_eq!(card["offline"], true);

    // Its next state brings it back.
    let back = json!({
        "mower_id": bravo,
        "account_id": app.a.account_id,
        "observed_at": app.clock.now().to_rfc3339(),
        "activity": "mowing",
    });
    app.record(back.clone()).await;
    let parsed = app.watcher.parse(back.to_string().as_bytes());
    app.watcher.on_states(&[parsed]).await.unwrap();
    let one = app
        .get(&format!("/v1/mowers/{bravo}"), Some(TOKEN_A_ADMIN))
        .await
        .json();
    assert_eq!(
        (&one["online"], &one["offline_reason"]),
        (&json!(true), &Value::Null)
    );
}
