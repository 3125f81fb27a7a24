//! The watch store's contract and the notification side's properties, against the memory store.
//! The zone store, the geofence store and the feed have their suites in `zones_memory`,
//! `geofences_memory` and `feed_memory`.

use proptest::prelude::*;
use std::sync::Arc;
use swath_application::ports::WatchStore;
use swath_memory::MemoryStore;
use swath_tests::support::block_on;
use swath_tests::traces::{splits, trace};
use swath_tests::watch_contract::{self as contract, MemoryWatch as Memory};

swath_tests::contract_suite!(
    watch_contract,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    factory = Memory,
);

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn batched_equals_one_at_a_time(steps in trace(150), sizes in splits()) {
        block_on(contract::batched_equals_one_at_a_time(&Memory, &steps, &sizes));
    }

    /// Rows, events, alerts, watch rows, zone watches and busy statuses against the independent
    /// reference (docs/rules.md §3–§4 and decision 8 read directly).
    #[test]
    fn matches_the_reference(steps in trace(150), sizes in splits()) {
        block_on(swath_tests::reference_contract::watch_matches_the_reference(
                &Memory, &steps, &sizes,
            ));
    }
}

/// End to end on the memory bus: states published on `telemetry.mower.<id>` reach the watcher's
/// durable consumer (next to ingestion's), and its events come out on
/// `notifications.mower.<id>.<kind>`, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_consumer_publishes_notifications() {
    use chrono::Duration;
    use swath_application::ports::{BatchSettings, EventBus, LiveOptions, ManualClock};
    use swath_application::{subjects, Ingest, SchedulerStatus, Watcher};
    use swath_memory::MemoryBus;
    use swath_tests::support::{trace_start, Fleet, DEFAULT_THRESHOLD};

    let store = MemoryStore::default();
    let fleet = Fleet::new();
    fleet.seed(&store, DEFAULT_THRESHOLD).await;
    let bus = Arc::new(MemoryBus::default());
    let clock = Arc::new(ManualClock::new(trace_start() + Duration::minutes(1)));
    let watch: Arc<dyn WatchStore> = Arc::new(store.clone());
    let ingest = Arc::new(Ingest::new(
        Arc::new(store.clone()),
        bus.clone(),
        clock.clone(),
    ));
    let watcher = Arc::new(Watcher::new(
        watch.clone(),
        bus.clone(),
        clock.clone(),
        swath_domain::watch::DEFAULT_OFFLINE_AFTER,
    ));
    let scheduler = Arc::new(SchedulerStatus::new(watch.clone(), clock.clone()));
    let mut events = bus
        .subscribe(subjects::NOTIFICATIONS_ALL, LiveOptions::default())
        .await
        .unwrap();
    let settings = BatchSettings {
        max_wait: std::time::Duration::from_millis(20),
        ..BatchSettings::default()
    };
    let ingesting = bus
        .subscribe_batch(
            subjects::TELEMETRY_ALL,
            subjects::INGEST_CONSUMER,
            settings,
            ingest.handler(),
        )
        .await
        .unwrap();
    let watching = bus
        .subscribe_batch(
            subjects::TELEMETRY_ALL,
            subjects::WATCHER_CONSUMER,
            settings,
            watcher.handler(Some(scheduler)),
        )
        .await
        .unwrap();
    let mower = fleet.mowers[0];
    for (i, activity) in ["docked", "error", "docked"].iter().enumerate() {
        let report = serde_json::json!({
            "mower_id": mower,
            "account_id": fleet.account_a,
            "observed_at": (trace_start() + Duration::seconds(i as i64)).to_rfc3339(),
            "activity": activity,
        });
        bus.publish(&subjects::telemetry(mower), report.to_string().into(), None)
            .await
            .unwrap();
    }
    let mut subjects_seen = Vec::new();
    while subjects_seen.len() < 2 {
        let message =
            tokio::time::timeout(std::time::Duration::from_secs(10), events.messages.recv())
                .await
                .expect("the watcher publishes its events")
                .unwrap();
        subjects_seen.push(message.subject);
    }
    assert_eq!(
        subjects_seen,
        vec![
            format!("notifications.mower.{mower}.error_raised"),
            format!("notifications.mower.{mower}.error_cleared"),
        ]
    );
    ingesting.unsubscribe().await;
    watching.unsubscribe().await;
    let rows = watch.export_watch(&[mower]).await.unwrap();
    assert_eq!(rows.events.len(), 2);
    assert_eq!(
        rows.busy.len(),
        1,
        "the busy check ran on the watcher's batches"
    );
    assert!(events.messages.try_recv().is_err(), "each event once");
}
