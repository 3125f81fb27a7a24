//! The notification feed's contract ([`swath_application::ports::NotificationFeed`],
//! docs/rules.md §3 W6, §4): the events feed and the open alerts, whoever raised them, and the
//! blade reset that clears W6's alert, through the use cases, over the same [`WatchFactory`] as
//! the other suites of the notification side.
use crate::traces::ingest_clock;
use crate::watch_contract::{open_alerts, report, WatchFactory, WatchHarness};
use serde_json::{json, Value};
use swath_application::ports::EventQuery;
use swath_domain::watch::{AlertKind, Event, EventKind};
use swath_domain::{AccountId, Activity};
use uuid::Uuid;

/// Events are stored in the feed, published on `notifications.mower.<id>.<kind>` with their id as
/// the de-duplication id, and open and clear one alert per kind and mower.
pub async fn events_are_stored_published_and_alert(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 600_000).await;
    let f = &h.fleet;
    let mut error = report(f, 0, 10, Activity::Error);
    error["error_code"] = json!("E_STUCK");
    let mut low = report(f, 1, 10, Activity::Paused);
    low["battery_percent"] = json!(12);
    h.both(&[report(f, 0, 0, Activity::Docked), error, low])
        .await;

    let published = h.bus.published();
    assert_eq!(published.len(), 2);
    let (subject, payload, dedup) = &published[0];
    assert_eq!(
        subject,
        &format!("notifications.mower.{}.error_raised", f.mowers[0])
    );
    let event: Value = serde_json::from_slice(payload).unwrap();
    assert_eq!(event["kind"], "error_raised");
    assert_eq!(event["error_code"], "E_STUCK");
    assert_eq!(dedup.as_deref(), event["id"].as_str());

    let feed = events(&h, f.account_a, None, 10).await;
    assert_eq!(feed.len(), 2, "both events are in the feed");
    let alerts = open_alerts(&h, None).await;
    let mut kinds: Vec<_> = alerts.iter().map(|a| a.kind).collect();
    kinds.sort();
    assert_eq!(kinds, vec![AlertKind::Error, AlertKind::BatteryLow]);
    assert_eq!(
        alerts[0].kind,
        AlertKind::Error,
        "the more severe alert first"
    );

    // Cleared: the error ends, the battery is recharged to 30 %.
    let mut charged = report(f, 1, 20, Activity::Charging);
    charged["battery_percent"] = json!(30);
    h.both(&[report(f, 0, 20, Activity::Docked), charged]).await;
    assert!(open_alerts(&h, None).await.is_empty());
    let (_, rows) = h.rows().await;
    assert_eq!(rows.alerts.len(), 2);
    assert!(rows.alerts.iter().all(|a| a.cleared_at.is_some()));

    // The feed filters by mower and kind, and pages by cursor.
    let only = h
        .feed
        .events(&EventQuery {
            mowers: Some(vec![f.mowers[0]]),
            kind: Some(EventKind::ErrorCleared),
            ..query(f.account_a, None, 10)
        })
        .await
        .unwrap();
    assert_eq!(only.len(), 1);
    let first = events(&h, f.account_a, None, 2).await;
    let rest = events(&h, f.account_a, Some(first[1].id), 10).await;
    assert_eq!(
        first.len() + rest.len(),
        3,
        "error raised/cleared, battery low"
    );
    assert!(first[0].id > first[1].id && first[1].id > rest[0].id);
    let foreign = events(&h, f.account_b, None, 10).await;
    assert!(foreign.is_empty(), "another account sees none of them");
}

/// The events of `account`'s feed: `limit` of them, newest first, before the event `before`.
async fn events(
    h: &WatchHarness,
    account: AccountId,
    before: Option<Uuid>,
    limit: usize,
) -> Vec<Event> {
    let query = query(account, before, limit);
    h.feed.events(&query).await.expect("read the feed")
}

/// A query of `account`'s whole feed.
fn query(account_id: AccountId, before: Option<Uuid>, limit: usize) -> EventQuery {
    EventQuery {
        account_id,
        mowers: None,
        kind: None,
        before,
        limit,
    }
}

/// W6 through the whole path: `blade_due` is stored in the feed with an open alert, in the
/// ingest transaction; a blade reset clears the alert and re-arms W6.
pub async fn blade_due_alerts_until_the_blade_is_reset(factory: &dyn WatchFactory) {
    let h = WatchHarness::new(factory, 60_000).await;
    let f = &h.fleet;
    let mowing: Vec<Value> = (0..4)
        .map(|i| report(f, 0, i * 30, Activity::Mowing))
        .collect();
    h.ingest(&mowing).await;
    h.ingest(&mowing).await; // a redelivery raises nothing
    assert_eq!(h.published_kinds(), vec!["blade_due"]);
    let alerts = open_alerts(&h, None).await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].kind, AlertKind::BladeDue);
    let (_, rows) = h.rows().await;
    assert_eq!(rows.events.len(), 1);
    assert_eq!(rows.events[0].id, alerts[0].id);

    assert!(
        h.feed
            .reset_blade(f.mowers[0], ingest_clock())
            .await
            .unwrap(),
        "the reset cleared an open alert"
    );
    assert!(open_alerts(&h, None).await.is_empty());
    // A second reset has no alert to clear.
    assert!(!h
        .feed
        .reset_blade(f.mowers[0], ingest_clock())
        .await
        .unwrap());
    let health = h.store.health(f.mowers[0]).await.unwrap();
    assert_eq!(
        (health.blade_since_reset_ms, health.blade_due_raised),
        (0, false)
    );
    let more: Vec<Value> = (4..8)
        .map(|i| report(f, 0, i * 30, Activity::Mowing))
        .collect();
    h.ingest(&more).await;
    assert_eq!(h.published_kinds(), vec!["blade_due", "blade_due"]);
    assert_eq!(open_alerts(&h, None).await.len(), 1);
}
