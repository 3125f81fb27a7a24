//! The live feed (what `GET /v1/live/stream` sends, decisions 101–103 and 130) on a real NATS
//! JetStream server: its three live subscriptions (states, events, alerts cleared without an
//! event) on the streams Swath provisions, one sequence over all of them, nothing relayed that
//! does not parse, and a resume from the ring.
//!
//! The feed reads Swath's own subjects (`telemetry.mower.*`, `notifications.…`), which only the
//! service's default streams hold, so this test runs a private server (the pinned binary,
//! `SWATH_TEST_NATS_SERVER`) rather than the shared one, whose other tests must never see these
//! subjects. It runs when `SWATH_TEST_NATS_URL` is set, like every NATS test (CI sets both).

use bytes::Bytes;
use chrono::{SubsecRound, Utc};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use swath_application::live_feed::{Cursor, Delivery, FeedBody, LiveFeed};
use swath_application::ports::{EventBus, SystemClock};
use swath_application::{publish, subjects};
use swath_domain::watch::{AlertKind, ClearCause, ClearedAlert, Event, EventDetail};
use swath_domain::{AccountId, MowerId};
use swath_nats::{NatsBus, NatsBusSettings};
use swath_tests::e2e::NatsServer;

/// The next item of the feed, within a few seconds.
async fn next(cursor: &mut Cursor) -> (u64, FeedBody) {
    match tokio::time::timeout(Duration::from_secs(10), cursor.next())
        .await
        .expect("an item within 10 s")
        .expect("the feed is running")
    {
        Delivery::Item(item) => (item.seq, item.body.clone()),
        Delivery::Reset { reason, head } => panic!("a reset ({}) at {head}", reason.as_str()),
    }
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn the_feed_numbers_states_events_and_cleared_alerts_from_nats_and_resumes() {
    let server = NatsServer::start().expect("a private nats-server");
    let bus: Arc<dyn EventBus> = Arc::new(
        NatsBus::connect(&server.url(), NatsBusSettings::default())
            .await
            .expect("the bus on the private server"),
    );
    let feed = LiveFeed::start(Arc::clone(&bus), Arc::new(SystemClock), 100)
        .await
        .expect("the feed's subscriptions");
    let mut cursor = feed.cursor(None);
    let mower = MowerId(uuid::Uuid::now_v7());
    let account = AccountId(uuid::Uuid::now_v7());
    let at = Utc::now().trunc_subsecs(6);

    // Garbage on each subject is never relayed: the valid message after it is the next item.
    bus.publish(
        &subjects::telemetry(mower),
        Bytes::from_static(b"{not json"),
        None,
    )
    .await
    .unwrap();
    let state = json!({
        "mower_id": mower,
        "account_id": account,
        "observed_at": at.to_rfc3339(),
        "activity": "mowing",
        "battery_percent": 18,
    });
    let publish_state = || async {
        bus.publish(
            &subjects::telemetry(mower),
            Bytes::from(state.to_string()),
            None,
        )
        .await
        .unwrap()
    };
    publish_state().await;
    let (first, body) = next(&mut cursor).await;
    let FeedBody::State(row) = body else {
        panic!("a state first, got {body:?}")
    };
    assert_eq!(
        (row.mower_id, row.account_id, row.observed_at),
        (mower, account, at)
    );

    let event = Event::new(
        mower,
        account,
        at,
        EventDetail::BatteryLow {
            battery_percent: 18,
        },
    );
    bus.publish(
        &subjects::notification(mower, "battery_low"),
        Bytes::from_static(b"[]"),
        None,
    )
    .await
    .unwrap();
    publish::publish(bus.as_ref(), std::slice::from_ref(&event)).await;
    let (second, body) = next(&mut cursor).await;
    assert_eq!(body, FeedBody::Event(event.clone()));

    let clear = ClearedAlert {
        mower_id: mower,
        account_id: account,
        kind: AlertKind::BatteryLow,
        cleared_at: at + chrono::Duration::seconds(1),
        cause: ClearCause::BatteryRecovered,
    };
    bus.publish(
        &subjects::alert_cleared(mower),
        Bytes::from_static(b"{\"kind\": 1}"),
        None,
    )
    .await
    .unwrap();
    publish::publish_told(bus.as_ref(), &[], &[(0, clear.clone())]).await;
    let (third, body) = next(&mut cursor).await;
    assert_eq!(body, FeedBody::Cleared(clear.clone()));
    assert_eq!(
        (first + 1, first + 2),
        (second, third),
        "one sequence over the three subscriptions, nothing numbered for the garbage"
    );

    // The same clear published again (a retried publication) is one message on the bus.
    publish::publish_told(bus.as_ref(), &[], &[(0, clear.clone())]).await;
    publish_state().await;
    let (fourth, body) = next(&mut cursor).await;
    assert!(
        matches!(body, FeedBody::State(_)),
        "the repeated clear was de-duplicated, got {body:?}"
    );
    assert_eq!(fourth, third + 1);

    // A client that had the state resumes after it and gets the event and the clear again.
    let mut resumed = feed.cursor(Some(&feed.event_id(first)));
    assert_eq!(next(&mut resumed).await, (second, FeedBody::Event(event)));
    assert_eq!(next(&mut resumed).await, (third, FeedBody::Cleared(clear)));
    assert_eq!(next(&mut resumed).await.0, fourth);
}
