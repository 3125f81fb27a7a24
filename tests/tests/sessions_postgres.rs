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
    migration_12_moves_the_newest_session_and_its_rest,
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

    /// Migration 12 (decision 207): each mower's newest session and the `rest` JSON of its row
    /// move into the health row, the older sessions stay as they were, every read answers the
    /// same sessions through the view; migration 14 (decision 210) packs them into one text and
    /// back; down puts the figures and the `rest` document back.
    pub(super) async fn migration_12_moves_the_newest_session_and_its_rest(
        factory: PostgresFactory,
    ) {
        use sqlx::Connection;
        use swath_migrations::sea_orm::Database;
        use swath_migrations::{Migrator, MigratorTrait};
        use uuid::Uuid;
        let url = factory.empty_database().await;
        let db = Database::connect(url.as_str()).await.unwrap();
        Migrator::up(&db, Some(11)).await.unwrap();
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let (account, site) = (Uuid::from_u128(0xa), Uuid::from_u128(0x5));
        let (mower, quiet) = (Uuid::from_u128(1), Uuid::from_u128(2));
        for sql in [
            "INSERT INTO accounts (id, name) VALUES ($1, 'a')",
            "INSERT INTO sites (id, account_id, name, time_zone) VALUES ($2, $1, 's', 'UTC')",
        ] {
            sqlx::query(sql)
                .bind(account)
                .bind(site)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        for id in [mower, quiet] {
            sqlx::query(
                "INSERT INTO mowers (id, account_id, site_id, name, model, serial, \
                 blade_threshold_ms) VALUES ($1, $2, $3, 'm', 'x', '1', 600000)",
            )
            .bind(id)
            .bind(account)
            .bind(site)
            .execute(&mut conn)
            .await
            .unwrap();
            sqlx::query("INSERT INTO health_totals (mower_id) VALUES ($1)")
                .bind(id)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        let rest = serde_json::json!({
            "states": 3, "blade_ms": 4000, "first_lat": 52.0, "first_lon": 13.0,
            "last_lat": 52.5, "last_lon": 13.5, "first_battery_percent": 40,
            "last_battery_percent": 38
        });
        // An older, final session and the newest (ended, may still merge) with its rest.
        for (start, end, states, rest) in [
            ("2026-06-01T08:00:00Z", "2026-06-01T09:00:00Z", 10_i64, None),
            (
                "2026-06-02T08:00:00Z",
                "2026-06-02T09:30:00Z",
                20,
                Some(rest.clone()),
            ),
        ] {
            sqlx::query(
                "INSERT INTO mower_sessions (mower_id, started_at, id, account_id, ended_at, \
                 end_reason, mowing_ms, blade_ms, distance_mm, breaks, states, first_lat, \
                 first_lon, last_lat, last_lon, first_battery_percent, last_battery_percent, \
                 local_date, rest) VALUES ($1, $2::timestamptz, gen_random_uuid(), $3, \
                 $4::timestamptz, 'docked', 1000, 2000, 3000, 1, $5, 52.1, 13.1, 52.2, 13.2, 90, \
                 80, ($2::timestamptz)::date, $6)",
            )
            .bind(mower)
            .bind(start)
            .bind(account)
            .bind(end)
            .bind(states)
            .bind(rest)
            .execute(&mut conn)
            .await
            .unwrap();
        }
        // Each session's columns as one text, compared whole.
        let read = "SELECT ROW(mower_id, started_at, ended_at, end_reason, mowing_ms, blade_ms, \
            distance_mm, breaks, states, first_lat, first_lon, last_lat, last_lon, \
            first_battery_percent, last_battery_percent, local_date)::text \
            FROM {table} ORDER BY mower_id, started_at";
        let before: Vec<String> = sqlx::query_scalar(&read.replace("{table}", "mower_sessions"))
            .fetch_all(&mut conn)
            .await
            .unwrap();

        Migrator::up(&db, Some(2)).await.unwrap();
        let after: Vec<String> = sqlx::query_scalar(&read.replace("{table}", "mower_sessions_now"))
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(after, before, "the view answers the sessions as they were");
        type Carry = (
            Option<chrono::DateTime<chrono::Utc>>,
            Option<i64>,
            Option<i64>,
            Option<f64>,
            Option<i16>,
        );
        // A few of the typed carry columns, each type among them.
        let typed_carry = "SELECT session_started_at, session_states, rest_blade_ms, \
            rest_last_lon, rest_first_battery_percent FROM health_totals WHERE mower_id = $1";
        let carry: Carry = sqlx::query_as(typed_carry)
            .bind(mower)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            carry,
            (
                Some("2026-06-02T08:00:00Z".parse().unwrap()),
                Some(20),
                Some(4000),
                Some(13.5),
                Some(40)
            ),
            "the newest session and its rest moved into the health row"
        );
        let quiet_carry: Option<chrono::DateTime<chrono::Utc>> =
            sqlx::query_scalar("SELECT session_started_at FROM health_totals WHERE mower_id = $1")
                .bind(quiet)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert_eq!(quiet_carry, None, "a mower without sessions has none");

        // Migration 14 (decision 210): the carry as one text, the view answering the same.
        Migrator::up(&db, Some(1)).await.unwrap();
        let after: Vec<String> = sqlx::query_scalar(&read.replace("{table}", "mower_sessions_now"))
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(after, before, "the view answers the sessions as they were");
        let carries: Vec<Option<String>> =
            sqlx::query_scalar("SELECT session_carry FROM health_totals ORDER BY mower_id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        assert_eq!(
            carries,
            [
                Some(
                    "1|1780387200000000|20606|1780392600000000|docked|1000|2000|3000|1|20|52.1|\
                     13.1|52.2|13.2|90|80|3|4000|52|13|52.5|13.5|40|38|"
                        .to_owned()
                ),
                None
            ],
            "the newest session and its rest as the ingest writes them"
        );
        // Down (14): the typed columns as they were.
        Migrator::down(&db, Some(1)).await.unwrap();
        let back: Carry = sqlx::query_as(typed_carry)
            .bind(mower)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(back, carry, "down gives the typed columns back");

        // Down (13, then 12): the rows and the newest's rest as they were.
        Migrator::down(&db, Some(2)).await.unwrap();
        let back: Vec<String> = sqlx::query_scalar(&read.replace("{table}", "mower_sessions"))
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(back, before);
        let rests: Vec<Option<serde_json::Value>> =
            sqlx::query_scalar("SELECT rest FROM mower_sessions ORDER BY started_at")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        // Compared as the code reads them (52 and 52.0 are the same latitude).
        let read_back: Vec<Option<swath_domain::sessions::Rest>> = rests
            .into_iter()
            .map(|r| r.map(|r| serde_json::from_value(r).expect("a rest document")))
            .collect();
        let original: swath_domain::sessions::Rest = serde_json::from_value(rest).unwrap();
        assert_eq!(read_back, vec![None, Some(original)]);
    }
}
