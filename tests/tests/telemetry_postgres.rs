//! The telemetry store contract against PostgreSQL (when `SWATH_TEST_DATABASE_URL` is set), and
//! what only PostgreSQL can show: statements per batch, failures midway, a lost connection.

use async_trait::async_trait;
use chrono::Duration;
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{StoreError, TelemetryStore};
use swath_domain::{apply_states, AccountId, MowerId, StateOutcome};
use swath_memory::MemoryStore;
use swath_tests::postgres::{self, test_database_url, PostgresFactory};
use swath_tests::support::{
    seed_account_with_mowers, trace_start, StoreFactory, TestStore, DEFAULT_THRESHOLD,
};
use swath_tests::telemetry_contract::{self as contract, Harness};
use swath_tests::traces::{distinct_trace, splits, trace};

struct Memory;

#[async_trait]
impl StoreFactory for Memory {
    async fn fresh(&self) -> TestStore {
        TestStore::memory(MemoryStore::default())
    }

    fn kept_per_mower(&self) -> Option<usize> {
        Some(swath_memory::DEFAULT_HISTORY_PER_MOWER)
    }
}

// PostgreSQL has no bound on rows per mower (`kept_per_mower` is `None`): its history and track
// reads always say that nothing was removed, and answer every row.
swath_tests::contract_suite!(
    telemetry_contract,
    postgres = PostgresFactory::new(test_database_url()),
);

swath_tests::postgres_tests!(
    on_postgres:
    a_batch_costs_the_same_statements_whatever_its_size,
    a_batch_raising_blade_due_writes_what_the_ingest_derived_in_two_statements_more,
    a_batch_failing_midway_stores_nothing_and_its_redelivery_stores_it_once,
    a_lost_connection_stores_nothing_and_its_redelivery_stores_it_once,
    a_store_error_keeps_the_database_error_as_its_source,
    a_latest_read_dropped_or_broken_midway_leaves_no_connection_to_reuse,
    ; sync:
    batched_equals_one_at_a_time,
    matches_the_reference,
    any_order_equals_time_order,
    memory_and_postgres_end_with_identical_rows,
    two_writers_end_with_the_rows_of_one,
);

mod on_postgres {
    use super::*;

    /// Runs a property over random traces with one factory (one template database) for all cases.
    fn property(
        cases: u32,
        check: impl Fn(
            &PostgresFactory,
            &[swath_tests::traces::Step],
            &[usize],
            &tokio::runtime::Runtime,
        ),
    ) {
        let factory = PostgresFactory::new(test_database_url());
        postgres::property(
            factory,
            cases,
            64,
            (trace(120), splits()),
            |f, (steps, sizes), rt| check(f, &steps, &sizes, rt),
        );
    }

    pub(super) fn batched_equals_one_at_a_time() {
        property(12, |factory, steps, sizes, rt| {
            rt.block_on(contract::batched_equals_one_at_a_time(
                factory, steps, sizes,
            ))
        });
    }

    /// Random traces in random batches on PostgreSQL end with the independent reference's rows and
    /// `blade_due` events (docs/testing.md, "References").
    pub(super) fn matches_the_reference() {
        property(12, |factory, steps, sizes, rt| {
            rt.block_on(
                swath_tests::reference_contract::telemetry_matches_the_reference(
                    factory, steps, sizes,
                ),
            )
        });
    }

    /// Any permutation of a trace, in any batches, gives the rows of the trace in time order.
    pub(super) fn any_order_equals_time_order() {
        let factory = PostgresFactory::new(test_database_url());
        let strategy = (distinct_trace(120), splits());
        postgres::property(
            factory,
            10,
            64,
            strategy,
            |f, ((steps, again, order), sizes), rt| {
                rt.block_on(contract::any_order_equals_time_order(
                    f, &steps, &again, &order, &sizes,
                ))
            },
        );
    }

    pub(super) fn memory_and_postgres_end_with_identical_rows() {
        property(16, |factory, steps, sizes, rt| {
            rt.block_on(contract::stores_agree(&Memory, factory, steps, sizes))
        });
    }

    pub(super) fn two_writers_end_with_the_rows_of_one() {
        property(8, |factory, steps, sizes, rt| {
            rt.block_on(contract::two_writers_end_with_the_rows_of_one(
                factory, steps, sizes,
            ))
        });
    }

    fn state(account: AccountId, mower: MowerId, seconds: i64) -> Value {
        json!({
            "mower_id": mower,
            "account_id": account,
            "observed_at": (trace_start() + Duration::seconds(seconds)).to_rfc3339(),
            "activity": if seconds % 7 == 0 { "error" } else { "mowing" },
            "blade_on": true,
            "battery_percent": 50,
            "error_code": if seconds % 7 == 0 { Some("E1") } else { None },
            "position": {"lat": 52.0 + seconds as f64 * 1e-5, "lon": 13.0},
        })
    }

    pub(super) async fn a_batch_costs_the_same_statements_whatever_its_size(
        factory: PostgresFactory,
    ) {
        let store = Arc::new(factory.fresh_store().await);
        let (account, mowers) =
            seed_account_with_mowers(store.as_ref(), 8, DEFAULT_THRESHOLD).await;
        let clock = Arc::new(swath_application::ports::ManualClock::new(
            swath_tests::traces::ingest_clock(),
        ));
        let ingest = swath_application::Ingest::new(
            store.clone(),
            Arc::new(swath_tests::support::RecordingBus::default()),
            clock,
        );
        let record = |reports: Vec<Value>| {
            let parsed = reports
                .iter()
                .map(|r| ingest.parse(r.to_string().as_bytes()))
                .collect();
            ingest.record_states(parsed)
        };

        let (s0, c0) = (store.counters().statements(), store.counters().commits());
        let small = record(vec![
            state(account, mowers[0], 1),
            state(account, mowers[0], 2),
        ])
        .await
        .unwrap();
        let (s1, c1) = (store.counters().statements(), store.counters().commits());
        let large: Vec<Value> = (0..64)
            .map(|i| state(account, mowers[i % 8], 10 + i as i64))
            .collect();
        let outcomes = record(large).await.unwrap();
        let (s2, c2) = (store.counters().statements(), store.counters().commits());

        assert!(small
            .iter()
            .chain(&outcomes)
            .all(|o| *o == StateOutcome::Stored));
        assert_eq!(
            s1 - s0,
            s2 - s1,
            "2 states of 1 mower and 64 states of 8 mowers"
        );
        assert_eq!(
        s1 - s0,
        2,
        "one read, and one statement writing every table (history, positions, latest, health, days)"
    );
        assert_eq!((c1 - c0, c2 - c1), (1, 1), "one commit per batch");

        // Late states (older than their mower's newest) cost one more statement: their stored
        // neighbours within a week of them, read at once for the whole batch, however many late
        // states and mowers (decision 168).
        let late = record(vec![
            state(account, mowers[0], 3),  // between 2 and 10
            state(account, mowers[1], 12), // between 11 and 19
        ])
        .await
        .unwrap();
        let s3 = store.counters().statements();
        // Even: in order; odd: 4 s after a stored state of its mower (late, but for the last).
        let mixed: Vec<Value> = (0..64)
            .map(|i| {
                let seconds = if i % 2 == 0 { 100 + i } else { 14 + i } as i64;
                state(account, mowers[i % 8], seconds)
            })
            .collect();
        let mixed = record(mixed).await.unwrap();
        let s4 = store.counters().statements();
        assert!(late
            .iter()
            .chain(&mixed)
            .all(|o| *o == StateOutcome::Stored));
        // And two for W8: the bounds of their mowers' session windows, and the states in them
        // (decision 200).
        assert_eq!(
            (s3 - s2, s4 - s3),
            (5, 5),
            "the read, the neighbours of the late states, the session windows, one write"
        );
        // A late state older than every stored state of its mower has no neighbour before it
        // within the week: nothing there proves that none is further back, so its neighbours
        // are read again without bounds, one statement more.
        let oldest = record(vec![state(account, mowers[2], 5)]).await.unwrap();
        assert_eq!(oldest, vec![StateOutcome::Stored]);
        let s5 = store.counters().statements();
        assert_eq!(
            s5 - s4,
            6,
            "the read, the neighbours near it, its neighbours anywhere, the session window, one write"
        );
        let in_order = record(vec![state(account, mowers[0], 500)]).await.unwrap();
        assert_eq!(in_order, vec![StateOutcome::Stored]);
        let s6 = store.counters().statements();
        assert_eq!(s6 - s5, 2, "no neighbours read without late states");
        // A mower's late states are read as one range of its stored rows, bounded by the number
        // of late states (decision 171). Mower 3 holds 13, 17, 21, ... 73: one stored row lies
        // between 14 and 20; then fifteen between 15 and 72 (20 among them), more than the bound
        // for two late states, so the newest one's neighbours are read again without the range.
        let interleaved = record(vec![
            state(account, mowers[3], 14),
            state(account, mowers[3], 20),
        ])
        .await
        .unwrap();
        let s7 = store.counters().statements();
        let spread = record(vec![
            state(account, mowers[3], 15),
            state(account, mowers[3], 72),
        ])
        .await
        .unwrap();
        assert!(interleaved
            .iter()
            .chain(&spread)
            .all(|o| *o == StateOutcome::Stored));
        assert_eq!(
            (s7 - s6, store.counters().statements() - s7),
            (5, 6),
            "a range read whole; a range cut by its bound, and the rest read anywhere"
        );
        let rows = store.export(&mowers).await.unwrap();
        assert_eq!(rows.history.len(), 66 + 2 + 64 + 1 + 1 + 4);
        assert_eq!(rows.latest.len(), 8);
    }

    /// W6's notifications are derived by the ingest and written by the commit as given
    /// (decision 205): a batch that raises `blade_due` costs the events' and the alerts'
    /// statements more than one that raises nothing, and stores the event and its alert once,
    /// the same event the ingest published.
    pub(super) async fn a_batch_raising_blade_due_writes_what_the_ingest_derived_in_two_statements_more(
        factory: PostgresFactory,
    ) {
        use swath_application::ports::WatchStore;
        use swath_domain::watch::{AlertKind, EventKind};
        let store = Arc::new(factory.fresh_store().await);
        // Blade on 1 s apart: due after the 3rd state.
        let (account, mowers) = seed_account_with_mowers(store.as_ref(), 1, 2_000).await;
        let bus = Arc::new(swath_tests::support::RecordingBus::default());
        let ingest = swath_application::Ingest::new(
            store.clone(),
            bus.clone(),
            Arc::new(swath_application::ports::ManualClock::new(
                swath_tests::traces::ingest_clock(),
            )),
        );
        let record = |seconds: std::ops::Range<i64>| {
            let parsed = seconds
                .map(|s| {
                    let report = state(account, mowers[0], 100 + s * 8);
                    ingest.parse(report.to_string().as_bytes())
                })
                .collect();
            ingest.record_states(parsed)
        };
        let s0 = store.counters().statements();
        record(0..1).await.unwrap();
        let s1 = store.counters().statements();
        record(1..3).await.unwrap();
        let s2 = store.counters().statements();
        record(3..4).await.unwrap();
        let s3 = store.counters().statements();
        assert_eq!(
            (s1 - s0, s2 - s1, s3 - s2),
            (2, 4, 2),
            "read and write; with blade_due the events and the alerts; then nothing more"
        );
        let watch = store.export_watch(&mowers).await.unwrap();
        let due: Vec<_> = watch
            .events
            .iter()
            .filter(|e| e.kind() == EventKind::BladeDue)
            .collect();
        assert_eq!(due.len(), 1, "{:?}", watch.events);
        let alerts: Vec<_> = watch
            .alerts
            .iter()
            .filter(|a| a.kind == AlertKind::BladeDue && a.cleared_at.is_none())
            .collect();
        assert_eq!(alerts.len(), 1, "{:?}", watch.alerts);
        assert_eq!(alerts[0].id, due[0].id, "the alert is the event's");
        let published = swath_tests::reference_contract::published_events(&bus);
        assert_eq!(published.len(), 1, "{published:?}");
        assert_eq!(
            &published[0], due[0],
            "the stored event is the published one"
        );
    }

    /// The reference for the failure scenarios: the same batches on the memory store.
    async fn reference_rows(batches: &[Vec<Value>]) -> swath_domain::TelemetryRows {
        let reference = Harness::new(&Memory, DEFAULT_THRESHOLD).await;
        for batch in batches {
            reference.ingest(batch).await;
        }
        reference.rows().await
    }

    fn batches(h: &Harness) -> Vec<Vec<Value>> {
        let f = &h.fleet;
        let state = |mower: usize, seconds: i64| {
            let mower_id = f.mowers[mower];
            json!({
                "mower_id": mower_id,
                "account_id": f.account_of(mower_id),
                "observed_at": (trace_start() + Duration::seconds(seconds)).to_rfc3339(),
                "activity": "mowing",
                "blade_on": true,
                "position": {"lat": 52.0 + seconds as f64 * 1e-5, "lon": 13.0},
            })
        };
        vec![
            (0..6).map(|i| state(i % 3, i as i64)).collect(),
            (6..12).map(|i| state(i % 3, i as i64)).collect(),
        ]
    }

    /// A harness that stored the first of [`batches`]: both batches, and the rows it left.
    async fn first_batch_stored(
        factory: &PostgresFactory,
    ) -> (Harness, Vec<Vec<Value>>, swath_domain::TelemetryRows) {
        let h = Harness::new(factory, DEFAULT_THRESHOLD).await;
        let batches = batches(&h);
        h.ingest(&batches[0]).await;
        let before = h.rows().await;
        (h, batches, before)
    }

    pub(super) async fn a_batch_failing_midway_stores_nothing_and_its_redelivery_stores_it_once(
        factory: PostgresFactory,
    ) {
        let (h, batches, before) = first_batch_stored(&factory).await;

        // A trigger on the last table the batch writes: history, positions, latest and health are
        // already written in the transaction when it fails.
        let pg = PostgresFactory::pool_of(&h);
        sqlx::query(
            "CREATE FUNCTION fail_batch() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$",
        )
        .execute(&pg)
        .await
        .unwrap();
        sqlx::query("CREATE TRIGGER fail_batch BEFORE INSERT ON day_totals FOR EACH ROW EXECUTE FUNCTION fail_batch()")
            .execute(&pg)
            .await
            .unwrap();
        let parsed = batches[1]
            .iter()
            .map(|r| h.ingest.parse(r.to_string().as_bytes()))
            .collect();
        let error = h
            .ingest
            .record_states(parsed)
            .await
            .expect_err("the batch fails");
        assert!(error.to_string().contains("injected failure"), "{error}");
        // The database's own error is still there under the port's (decision 98), SQLSTATE and all.
        let database = sources(&error)
            .find_map(|e| e.downcast_ref::<sqlx::Error>())
            .and_then(|e| e.as_database_error())
            .expect("the database's error among the sources");
        assert_eq!(database.code().as_deref(), Some("P0001"), "{database}");
        assert_eq!(
            h.rows().await,
            before,
            "nothing of the failed batch is stored"
        );

        sqlx::query("DROP TRIGGER fail_batch ON day_totals")
            .execute(&pg)
            .await
            .unwrap();
        h.ingest(&batches[1]).await; // the redelivery
        h.ingest(&batches[1]).await; // and a second one, after its commit
        assert_eq!(h.rows().await, reference_rows(&batches).await);
    }

    pub(super) async fn a_lost_connection_stores_nothing_and_its_redelivery_stores_it_once(
        factory: PostgresFactory,
    ) {
        let (h, batches, before) = first_batch_stored(&factory).await;

        let pg = PostgresFactory::pool_of(&h);
        let states: Vec<_> = batches[1]
            .iter()
            .map(|r| h.ingest.parse(r.to_string().as_bytes()).unwrap())
            .collect();
        let (mut snapshots, unit) = h.store.telemetry.begin(&h.fleet.mowers).await.unwrap();
        let (_, changes) =
            apply_states(&mut snapshots, &states, swath_tests::traces::ingest_clock());
        let terminated: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        .fetch_all(&pg)
        .await
        .unwrap();
        assert_eq!(
            terminated,
            vec![true],
            "the batch's session is the one in a transaction"
        );
        unit.commit(changes, Default::default())
            .await
            .expect_err("the connection is gone");
        assert_eq!(h.rows().await, before);

        h.ingest(&batches[1]).await; // the redelivery
        assert_eq!(h.rows().await, reference_rows(&batches).await);
    }

    /// `error` and every `source()` under it.
    fn sources<'a>(
        error: &'a (dyn std::error::Error + 'static),
    ) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
        std::iter::successors(Some(error), |e| e.source())
    }

    /// A port error carries the adapter's error as its `source()` (decision 98): a closed pool answers
    /// `Unavailable` whose source is sqlx's `PoolClosed`, and the text is the one it always was.
    pub(super) async fn a_store_error_keeps_the_database_error_as_its_source(
        factory: PostgresFactory,
    ) {
        let store = factory.fresh_store().await;
        TelemetryStore::ping(&store)
            .await
            .expect("an open pool answers");
        store.close().await;
        let error = TelemetryStore::ping(&store)
            .await
            .expect_err("a closed pool fails");
        assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
        let source = std::error::Error::source(&error).expect("the error keeps its source");
        assert!(
            matches!(
                source.downcast_ref::<sqlx::Error>(),
                Some(sqlx::Error::PoolClosed)
            ),
            "{source:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("store unavailable: {}", sqlx::Error::PoolClosed)
        );
    }

    /// The latest-state read runs on connections of its own, put back without sqlx's ping (decision
    /// 124). One whose read is dropped before its answer arrives is closed, never put back midway:
    /// the next read gets the right row. One that broke while idle fails its next read, and the read
    /// after answers on a new one.
    pub(super) async fn a_latest_read_dropped_or_broken_midway_leaves_no_connection_to_reuse(
        factory: PostgresFactory,
    ) {
        let h = Harness::new(&factory, DEFAULT_THRESHOLD).await;
        h.ingest(&batches(&h)[0]).await;
        let mower = h.fleet.mowers[0];
        let expected = h.store.telemetry.latest(&[mower]).await.unwrap();
        assert_eq!(expected.len(), 1);

        // The read waits behind a lock until its future is dropped.
        let pg = PostgresFactory::pool_of(&h);
        let mut lock = pg.begin().await.unwrap();
        sqlx::query("LOCK TABLE latest_states IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *lock)
            .await
            .unwrap();
        let read = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            h.store.telemetry.latest(&[mower]),
        )
        .await;
        assert!(read.is_err(), "the read waited for the lock: {read:?}");
        lock.commit().await.unwrap();
        assert_eq!(h.store.telemetry.latest(&[mower]).await.unwrap(), expected);

        // The read's idle connection ends under it.
        let terminated: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
         AND query LIKE '%FROM latest_states%'",
        )
        .fetch_all(&pg)
        .await
        .unwrap();
        assert!(terminated.contains(&true), "{terminated:?}");
        let error = h
            .store
            .telemetry
            .latest(&[mower])
            .await
            .expect_err("the connection is gone");
        assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
        assert_eq!(h.store.telemetry.latest(&[mower]).await.unwrap(), expected);
    }
}
