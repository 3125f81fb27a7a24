//! The watch store's contract and the notification side's properties against PostgreSQL (when
//! `SWATH_TEST_DATABASE_URL` is set), and what only PostgreSQL can show: the statements a watcher
//! batch costs. The zone store, the geofence store and the feed have their suites in
//! `zones_postgres`, `geofences_postgres` and `feed_postgres`.

use chrono::Duration;
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{GeofenceStore, ManualClock, WatchStore};
use swath_application::Watcher;
use swath_domain::watch::Geofence;
use swath_domain::watch::DEFAULT_OFFLINE_AFTER;
use swath_domain::{AccountId, MowerId, StateOutcome};
use swath_tests::postgres::{self, test_database_url, PostgresFactory};
use swath_tests::support::{seed_account_with_mowers, RecordingBus, DEFAULT_THRESHOLD};
use swath_tests::traces::{ingest_clock, splits, trace};
use swath_tests::watch_contract::{
    self as contract, lawn_rectangle, trace_at, PostgresWatch as Postgres,
};
use tokio::runtime::Runtime;

swath_tests::contract_suite!(
    watch_contract,
    postgres = Postgres(PostgresFactory::new(test_database_url())),
);

swath_tests::postgres_tests!(
    on_postgres:
    a_watcher_batch_costs_the_same_statements_whatever_its_size,
    ; sync:
    batched_equals_one_at_a_time,
    matches_the_reference,
);

mod on_postgres {
    use super::*;

    /// Runs a property over random traces with one factory (one template database) for all cases.
    fn property(check: impl Fn(&Postgres, &[swath_tests::traces::Step], &[usize], &Runtime)) {
        let factory = Postgres(PostgresFactory::new(test_database_url()));
        postgres::property(
            factory,
            10,
            32,
            (trace(100), splits()),
            |f, (steps, sizes), rt| check(f, &steps, &sizes, rt),
        );
    }

    pub(super) fn batched_equals_one_at_a_time() {
        property(|factory, steps, sizes, rt| {
            rt.block_on(contract::batched_equals_one_at_a_time(
                factory, steps, sizes,
            ))
        });
    }

    /// Random traces, ingested and watched on PostgreSQL, end with the independent reference's rows,
    /// events, alerts, watch rows, zone watches and busy statuses (docs/testing.md, "References").
    pub(super) fn matches_the_reference() {
        property(|factory, steps, sizes, rt| {
            rt.block_on(
                swath_tests::reference_contract::watch_matches_the_reference(factory, steps, sizes),
            )
        });
    }

    /// Eight mowers of one account, each with a geofence.
    async fn eight_fenced_mowers(
        store: &swath_postgres::PostgresStore,
    ) -> (AccountId, Vec<MowerId>) {
        let (account, mowers) = seed_account_with_mowers(store, 8, DEFAULT_THRESHOLD).await;
        for id in &mowers {
            store
                .put_geofence(Geofence {
                    mower_id: *id,
                    account_id: account,
                    version: uuid::Uuid::now_v7(),
                    polygon: lawn_rectangle((0, 0), (300, 300)),
                    updated_at: ingest_clock(),
                })
                .await
                .unwrap();
        }
        (account, mowers)
    }

    fn state(account: AccountId, mower: MowerId, seconds: i64) -> Value {
        json!({
            "mower_id": mower,
            "account_id": account,
            "observed_at": trace_at(seconds).to_rfc3339(),
            "activity": if seconds % 7 == 0 { "error" } else { "mowing" },
            "battery_percent": 100 - seconds % 100,
            "error_code": if seconds % 7 == 0 { Some("E1") } else { None },
            "position": {"lat": 52.5 + (seconds % 500) as f64 * 1e-5, "lon": 13.401, "accuracy_m": 1.0},
        })
    }

    /// A watcher batch of 64 states of 8 mowers costs the same statements as one of 2 states of 1
    /// mower: one read, one statement per table (watches, events, alert clears, raised alerts); a
    /// table without rows costs no statement.
    /// A geofence's polygon comes with the batch's read, only for versions the watcher has not
    /// parsed: no statement of its own, each version parsed once.
    pub(super) async fn a_watcher_batch_costs_the_same_statements_whatever_its_size(
        factory: PostgresFactory,
    ) {
        let store = factory.fresh_store().await;
        let (account, mowers) = eight_fenced_mowers(&store).await;
        let clock = Arc::new(ManualClock::new(ingest_clock()));
        let watcher = Watcher::new(
            Arc::new(store.clone()),
            Arc::new(RecordingBus::default()),
            clock,
            DEFAULT_OFFLINE_AFTER,
        );
        let watch = |reports: Vec<Value>| {
            let parsed: Vec<_> = reports
                .iter()
                .map(|r| watcher.parse(r.to_string().as_bytes()))
                .collect();
            let watcher = &watcher;
            async move { watcher.on_states(&parsed).await.unwrap() }
        };
        let counters = store.watch_counters();

        // The first batch of every mower gets its geofence's polygon with the read.
        let (s0, c0) = (counters.statements(), counters.commits());
        let first: Vec<Value> = mowers.iter().map(|m| state(account, *m, 1)).collect();
        watch(first).await;
        let (s1, c1) = (counters.statements(), counters.commits());
        assert_eq!(
            s1 - s0,
            2,
            "read (with the geofences), watches (a first state of each mower: no event)"
        );
        assert_eq!(watcher.geofence_parses(), 8);

        // A quiet batch (no event, no alert): the read and the watches.
        let quiet = watch(vec![
            state(account, mowers[0], 2),
            state(account, mowers[0], 3),
        ])
        .await;
        let (quiet_statements, quiet_commits) =
            (counters.statements() - s1, counters.commits() - c1);
        // An error open since second 7; then an error cleared and another raised by 2 states of 1
        // mower (seconds 8 and 14), and by 64 states of 8 mowers: every table written, and the same
        // statements for both sizes.
        watch(vec![state(account, mowers[0], 7)]).await;
        let (s2, c2) = (counters.statements(), counters.commits());
        let small = watch(vec![
            state(account, mowers[0], 8),
            state(account, mowers[0], 14),
        ])
        .await;
        let (s3, c3) = (counters.statements(), counters.commits());
        let large: Vec<Value> = (0..64)
            .map(|i| state(account, mowers[i % 8], 20 + i as i64))
            .collect();
        let outcomes = watch(large).await;
        let (s4, c4) = (counters.statements(), counters.commits());

        assert!(quiet
            .iter()
            .chain(&small)
            .chain(&outcomes)
            .all(|o| *o == StateOutcome::Stored));
        assert_eq!(
            quiet_statements, 2,
            "a quiet batch: the read and the watches"
        );
        assert_eq!(
            s3 - s2,
            5,
            "one read and one statement per table (watches, events, clears, alerts)"
        );
        assert_eq!(
            s3 - s2,
            s4 - s3,
            "2 states of 1 mower and 64 states of 8 mowers"
        );
        assert_eq!(
            (c1 - c0, quiet_commits, c3 - c2, c4 - c3),
            (1, 1, 1, 1),
            "one commit per batch"
        );
        assert_eq!(watcher.geofence_parses(), 8, "no geofence parsed twice");
        let rows = store.export_watch(&mowers).await.unwrap();
        assert_eq!(rows.watches.len(), 8);
        assert!(rows
            .events
            .iter()
            .any(|e| e.kind().as_str() == "error_raised"));
        let _ = Duration::zero();
    }
}
