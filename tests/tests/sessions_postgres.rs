//! W8's stored sessions (`sessions_contract`) on PostgreSQL (when `SWATH_TEST_DATABASE_URL` is
//! set): against the reference in order and in any order, batched against one at a time, against
//! the health totals, and memory against PostgreSQL.

use async_trait::async_trait;
use chrono::Duration;
use swath_memory::MemoryStore;
use swath_tests::postgres::{self, test_database_url, PostgresFactory};
use swath_tests::sessions_contract as contract;
use swath_tests::support::{StoreFactory, TestStore};
use swath_tests::traces::{distinct_trace, splits};

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

swath_tests::postgres_tests!(
    on_postgres:
    ; sync:
    in_order_matches_the_reference,
    any_order_matches_the_reference,
    batched_equals_one_at_a_time,
    sessions_add_up_to_the_health_totals,
    memory_and_postgres_end_with_identical_sessions,
    an_open_session_is_extended_without_rewriting_its_row,
);

mod on_postgres {
    use super::*;

    fn factory() -> PostgresFactory {
        PostgresFactory::new(test_database_url())
    }

    pub(super) fn in_order_matches_the_reference() {
        let strategy = (distinct_trace(120), splits());
        postgres::property(
            factory(),
            10,
            32,
            strategy,
            |f, ((steps, _, _), sizes), rt| {
                rt.block_on(contract::in_order_matches_the_reference(f, &steps, &sizes))
            },
        );
    }

    pub(super) fn any_order_matches_the_reference() {
        let strategy = (distinct_trace(120), splits(), proptest::bool::ANY);
        postgres::property(
            factory(),
            12,
            32,
            strategy,
            |f, ((steps, again, order), sizes, no_merge), rt| {
                let gap = if no_merge {
                    Duration::zero()
                } else {
                    Duration::hours(2)
                };
                rt.block_on(contract::any_order_matches_the_reference(
                    f, &steps, &again, &order, &sizes, gap,
                ))
            },
        );
    }

    pub(super) fn batched_equals_one_at_a_time() {
        let strategy = (distinct_trace(80), splits());
        postgres::property(
            factory(),
            6,
            32,
            strategy,
            |f, ((steps, again, order), sizes), rt| {
                rt.block_on(contract::batched_equals_one_at_a_time(
                    f, &steps, &again, &order, &sizes,
                ))
            },
        );
    }

    pub(super) fn sessions_add_up_to_the_health_totals() {
        let strategy = (distinct_trace(120), splits());
        postgres::property(
            factory(),
            8,
            32,
            strategy,
            |f, ((steps, _, order), sizes), rt| {
                rt.block_on(contract::sessions_add_up_to_the_health_totals(
                    f, &steps, &order, &sizes,
                ))
            },
        );
    }

    pub(super) fn memory_and_postgres_end_with_identical_sessions() {
        let strategy = (distinct_trace(120), splits());
        postgres::property(
            factory(),
            12,
            32,
            strategy,
            |f, ((steps, _, order), sizes), rt| {
                rt.block_on(contract::stores_agree(&Memory, f, &steps, &order, &sizes))
            },
        );
    }

    /// Decision 207: a batch that only extends a mower's open session writes the session's
    /// running figures into the health row it rewrites anyway; the session's own row (written
    /// when the session started) is left alone, and every read still answers the extended
    /// session, equal to the reference's.
    pub(super) fn an_open_session_is_extended_without_rewriting_its_row() {
        swath_tests::support::block_on(async {
            let factory = factory();
            let harness = contract::Harness::new(&factory, Duration::hours(2)).await;
            let pool = harness
                .store
                .postgres
                .as_ref()
                .expect("a PostgreSQL store")
                .pool()
                .clone();
            let mower = harness.fleet.mowers[0];
            let start = swath_tests::support::trace_start();
            let report = |i: i64| {
                serde_json::json!({
                    "mower_id": mower,
                    "account_id": harness.fleet.account_of(mower),
                    "observed_at": (start + Duration::seconds(i)).to_rfc3339(),
                    "activity": "mowing",
                    "blade_on": true,
                    "battery_percent": 80 - i,
                    "position": {"lat": 52.5 + i as f64 * 1e-5, "lon": 13.4},
                })
            };
            harness.ingest(&[report(0), report(1)]).await;
            let row_version = || async {
                sqlx::query_scalar::<_, String>(
                    "SELECT xmin::text FROM mower_sessions WHERE mower_id = $1",
                )
                .bind(mower.0)
                .fetch_all(&pool)
                .await
                .expect("read the session rows")
            };
            let before = row_version().await;
            assert_eq!(before.len(), 1, "one session row, written when it started");
            for i in 2..6 {
                harness.ingest(&[report(i)]).await;
            }
            assert_eq!(
                row_version().await,
                before,
                "extending the open session rewrote its row"
            );
            let sessions = harness.sessions().await;
            assert_eq!(sessions.len(), 1);
            let session = &sessions[0].session;
            assert_eq!((session.states, session.mowing_ms), (6, 5_000));
            assert_eq!(session.last_battery_percent, Some(75));
            harness.assert_matches_the_reference().await;
        });
    }
}
