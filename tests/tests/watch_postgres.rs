//! The watch store's contract and the notification side's properties against PostgreSQL (when
//! `SWATH_TEST_DATABASE_URL` is set), and what only PostgreSQL can show: the statements a watcher
//! batch costs. The zone store, the geofence store and the feed have their suites in
//! `zones_postgres`, `geofences_postgres` and `feed_postgres`.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{GeofenceStore, ManualClock, WatchStore};
use swath_application::Watcher;
use swath_domain::sessions::{session_id, EndReason};
use swath_domain::watch::DEFAULT_OFFLINE_AFTER;
use swath_domain::watch::{Geofence, SessionWatch};
use swath_domain::{AccountId, MowerId, StateOutcome};
use swath_tests::postgres::{self, test_database_url, PostgresFactory};
use swath_tests::support::{seed_account_with_mowers, RecordingBus, DEFAULT_THRESHOLD};
use swath_tests::traces::{ingest_clock, splits, trace};
use swath_tests::watch_contract::{
    self as contract, lawn_rectangle, trace_at, PostgresWatch as Postgres,
};
use tokio::runtime::Runtime;
use uuid::Uuid;

swath_tests::contract_suite!(
    watch_contract,
    postgres = Postgres(PostgresFactory::new(test_database_url())),
);

swath_tests::postgres_tests!(
    on_postgres:
    a_watcher_batch_costs_the_same_statements_whatever_its_size,
    migration_13_moves_a_pending_json_session,
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

    /// What the watch row held of a pending session up to migration 13 (migration 11's
    /// `session`, as `serde_json` wrote it): ended with an error at 420 s, or open; the previous
    /// state at `last_at`.
    fn json_session(mower: MowerId, ended: bool, last_at: i64) -> Value {
        let start = trace_at(0);
        json!({
            "current": {
                "id": session_id(mower, start),
                "mower_id": mower,
                "started_at": start,
                "ended_at": ended.then(|| trace_at(420)),
                "end_reason": ended.then_some("error"),
                "error_code": ended.then_some("E42"),
                "mowing_ms": 300_000,
                "blade_ms": 420_000,
                "distance_mm": if ended { 123_456 } else { 0 },
                "breaks": 1,
                "states": 8,
                "first_lat": 52.5,
                "first_lon": 13.4,
                "last_lat": 52.5001,
                "last_lon": 13.4045,
                "first_battery_percent": 80,
                "last_battery_percent": 71,
                "local_date": start.date_naive(),
            },
            "rest": {"states": 1, "blade_ms": 60_000, "first_lat": 52.5001, "first_lon": 13.4045,
                "last_lat": 52.5001, "last_lon": 13.4045, "first_battery_percent": 70,
                "last_battery_percent": 70},
            "last": {
                "observed_at": trace_at(last_at),
                "activity": if ended { "docked" } else { "mowing" },
                "blade_on": true,
                "battery_percent": 70,
                "error_code": null,
                "lat": ended.then_some(52.500_123_456_789),
                "lon": ended.then_some(13.400_987_654_321),
            },
        })
    }

    /// The typed carry of [`json_session`].
    fn typed_session(ended: bool) -> SessionWatch {
        SessionWatch {
            started_at: trace_at(0),
            ended_at: ended.then(|| trace_at(420)),
            end_reason: ended.then_some(EndReason::Error),
            error_code: ended.then(|| "E42".to_owned()),
            mowing_ms: 300_000,
            blade_ms: 420_000,
            distance_mm: if ended { 123_456 } else { 0 },
            breaks: 1,
            rest_blade_ms: 60_000,
            last_blade_on: true,
            last_lat: ended.then_some(52.500_123_456_789),
            last_lon: ended.then_some(13.400_987_654_321),
        }
    }

    /// Migration 13 (decision 208) moves a pending session's JSON into the typed columns
    /// exactly, leaves a carry whose previous state is not the watch point (and its due instant)
    /// behind, and migration 15 (decision 211) packs those columns into one text, exactly; down
    /// through both writes back a document migration 11's code reads: the fields it requires,
    /// the session's id derived as `session_id` derives it. Up again gives the same session.
    pub(super) async fn migration_13_moves_a_pending_json_session(factory: PostgresFactory) {
        use sqlx::Connection;
        use swath_migrations::sea_orm::Database;
        use swath_migrations::{Migrator, MigratorTrait};
        let url = factory.empty_database().await;
        let db = Database::connect(url.as_str()).await.unwrap();
        Migrator::up(&db, Some(11)).await.unwrap();
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let (account, site) = (Uuid::from_u128(0xa), Uuid::from_u128(0x5));
        let mowers = [1u128, 2, 3].map(|m| MowerId(Uuid::from_u128(m)));
        sqlx::query("INSERT INTO accounts (id, name) VALUES ($1, 'a')")
            .bind(account)
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO sites (id, account_id, name, time_zone) VALUES ($1, $2, 's', 'UTC')",
        )
        .bind(site)
        .bind(account)
        .execute(&mut conn)
        .await
        .unwrap();
        let due = trace_at(1_020);
        // Ended and due; open; a carry whose previous state is not the watch point.
        let carries = [(true, 480), (false, 480), (false, 470)];
        for (mower, (ended, last_at)) in mowers.iter().zip(carries) {
            sqlx::query(
                "INSERT INTO mowers (id, account_id, site_id, name, model, serial, \
                 blade_threshold_ms) VALUES ($1, $2, $3, 'm', 'x', '1', 600000)",
            )
            .bind(mower.0)
            .bind(account)
            .bind(site)
            .execute(&mut conn)
            .await
            .unwrap();
            sqlx::query(
                "UPDATE mower_watches SET account_id = $2, watched_until = $3, \
                 last_seen_at = $3, last_activity = $4, session = $5, session_due_at = $6 \
                 WHERE mower_id = $1",
            )
            .bind(mower.0)
            .bind(account)
            .bind(trace_at(480))
            .bind(if ended { "docked" } else { "mowing" })
            .bind(json_session(*mower, ended, last_at))
            .bind(due)
            .execute(&mut conn)
            .await
            .unwrap();
        }
        let expect_typed = |watches: &[swath_domain::watch::Watch]| {
            let kept: Vec<_> = watches
                .iter()
                .map(|w| (w.mower_id, w.session.clone(), w.session_due_at))
                .collect();
            assert_eq!(
                kept,
                vec![
                    (mowers[0], Some(typed_session(true)), Some(due)),
                    (mowers[1], Some(typed_session(false)), Some(due)),
                    (mowers[2], None, None),
                ]
            );
        };

        // Up through 15 (12 to 15): the code reads the watch row as 15 leaves it.
        Migrator::up(&db, Some(4)).await.unwrap();
        let store = swath_postgres::PostgresStore::connect(&url, 2)
            .await
            .unwrap();
        expect_typed(&store.export_watch(&mowers).await.unwrap().watches);
        let carries: Vec<Option<String>> =
            sqlx::query_scalar("SELECT session_carry FROM mower_watches ORDER BY mower_id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let start = trace_at(0).timestamp_micros();
        let end = trace_at(420).timestamp_micros();
        assert_eq!(
            carries,
            vec![
                Some(format!(
                    "1|{start}|{end}|error|300000|420000|123456|1|60000|true|52.500123456789|\
                     13.400987654321|+E42"
                )),
                Some(format!("1|{start}|||300000|420000|0|1|60000|true|||")),
                None,
            ]
        );

        // Down through 15, 14 and 13: 15's down puts the typed columns back as 13's down reads
        // them.
        Migrator::down(&db, Some(3)).await.unwrap();
        let documents: Vec<(Uuid, Option<Value>)> =
            sqlx::query_as("SELECT mower_id, session FROM mower_watches ORDER BY mower_id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        assert_eq!(documents[2], (mowers[2].0, None));
        for ((mower, document), ended) in documents.iter().take(2).zip([true, false]) {
            let written = document.as_ref().expect("the session written back");
            let before = json_session(MowerId(*mower), ended, 480);
            let at = |v: &Value, path: &str| v.pointer(path).cloned().unwrap_or(Value::Null);
            let time = |v: Value| serde_json::from_value::<Option<DateTime<Utc>>>(v).unwrap();
            for path in [
                "/current/started_at",
                "/current/ended_at",
                "/last/observed_at",
            ] {
                assert_eq!(time(at(written, path)), time(at(&before, path)), "{path}");
            }
            for path in [
                "/current/id",
                "/current/mower_id",
                "/current/end_reason",
                "/current/error_code",
                "/current/mowing_ms",
                "/current/blade_ms",
                "/current/distance_mm",
                "/current/breaks",
                "/current/local_date",
                "/rest/blade_ms",
                "/last/activity",
                "/last/blade_on",
                "/last/lat",
                "/last/lon",
            ] {
                assert_eq!(at(written, path), at(&before, path), "{path}");
            }
            for path in ["/current/states", "/rest/states"] {
                assert_eq!(at(written, path), json!(0), "{path}");
            }
        }

        Migrator::up(&db, None).await.unwrap();
        // A new pool: the first one's statements were prepared against the dropped columns.
        let store = swath_postgres::PostgresStore::connect(&url, 2)
            .await
            .unwrap();
        expect_typed(&store.export_watch(&mowers).await.unwrap().watches);
    }
}
