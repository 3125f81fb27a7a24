//! Riding a store failover (issue 44) without the cluster: the ingest unit of work's deadline
//! against a store that stops answering, the read-only API on a second store with its fallback to
//! the primary, and (with `SWATH_TEST_DATABASE_URL`) the pool's session limits and a primary cut
//! behind a TCP proxy in the test, as a router cuts it.

use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use swath_application::ports::{
    ManualClock, StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows,
};
use swath_application::read_routing::ReadRouted;
use swath_application::{Ingest, IngestError};
use swath_domain::{
    DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, MowerSnapshot, PositionRow,
    TelemetryRows,
};
use swath_memory::MemoryStore;
use swath_tests::support::{trace_start, Fleet, RecordingBus, DEFAULT_THRESHOLD};

const ANSWERS: u8 = 0;
/// Every call waits forever: a primary gone with its connections half-open.
const HANGS: u8 = 1;
/// Every call fails at once: a router with no server behind its port.
const REFUSES: u8 = 2;
/// The next call fails, the ones after it answer: a session the router cut, then a new one.
const CUT_ONCE: u8 = 3;

/// A memory store that can be made to stop answering; counts the calls it was asked.
struct Switchable {
    store: Arc<MemoryStore>,
    mode: AtomicU8,
    calls: AtomicUsize,
}

impl Switchable {
    fn new(store: Arc<MemoryStore>) -> Arc<Self> {
        Arc::new(Self {
            store,
            mode: AtomicU8::new(ANSWERS),
            calls: AtomicUsize::new(0),
        })
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    async fn gate(&self) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.mode.load(Ordering::SeqCst) {
            HANGS => std::future::pending().await,
            REFUSES => Err(StoreError::Unavailable("connection refused".into())),
            CUT_ONCE => {
                self.set(ANSWERS);
                Err(StoreError::Unavailable("connection reset by peer".into()))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl TelemetryStore for Switchable {
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError> {
        self.gate().await?;
        self.store.begin(mowers).await
    }

    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        self.gate().await?;
        self.store.latest(mowers).await
    }

    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError> {
        self.gate().await?;
        self.store.health(mower).await
    }

    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError> {
        self.gate().await?;
        self.store.export(mowers).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.gate().await?;
        self.store.ping().await
    }

    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError> {
        self.gate().await?;
        self.store.history(mower, window).await
    }

    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError> {
        self.gate().await?;
        self.store.track(mower, window).await
    }

    async fn days(
        &self,
        mower: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError> {
        self.gate().await?;
        self.store.days(mower, from, to).await
    }
}

fn report(fleet: &Fleet, mower: usize, at: DateTime<Utc>) -> serde_json::Value {
    let mower_id = fleet.mowers[mower];
    json!({
        "mower_id": mower_id,
        "account_id": fleet.account_of(mower_id),
        "observed_at": at.to_rfc3339(),
        "activity": "mowing",
        "blade_on": true,
        "battery_percent": 70,
    })
}

async fn seeded() -> (Arc<MemoryStore>, Fleet) {
    let store = Arc::new(MemoryStore::default());
    let fleet = Fleet::new();
    fleet.seed(store.as_ref(), DEFAULT_THRESHOLD).await;
    (store, fleet)
}

/// A primary and a standby, each seeded with the same fleet, and one working state of the first
/// mower stored through the read routing: on the primary only (the standby has not replayed it).
async fn one_state_on_the_primary() -> (Arc<Switchable>, Arc<Switchable>, Fleet) {
    let (primary, fleet) = seeded().await;
    let (standby, _) = seeded().await;
    let primary = Switchable::new(primary);
    let standby = Switchable::new(standby);
    let ingest = Ingest::new(
        Arc::new(ReadRouted::new(primary.clone(), standby.clone())),
        Arc::new(RecordingBus::default()),
        Arc::new(ManualClock::new(trace_start())),
    );
    ingest
        .record_states(vec![
            ingest.parse(report(&fleet, 0, trace_start()).to_string().as_bytes())
        ])
        .await
        .expect("stored");
    (primary, standby, fleet)
}

fn window() -> TimeWindow {
    TimeWindow {
        from: None,
        to: None,
        after: None,
        limit: 100,
    }
}

/// A batch whose store stops answering fails once the deadline has passed (paused time: no
/// wall clock is waited), nothing of it is stored, and the next batch, once the store answers
/// again, is stored: the consumer is not held.
#[tokio::test(start_paused = true)]
async fn a_store_that_stops_answering_fails_the_batch_at_the_deadline_and_the_next_is_stored() {
    let (memory, fleet) = seeded().await;
    let store = Switchable::new(memory.clone());
    let ingest = Ingest::new(
        store.clone(),
        Arc::new(RecordingBus::default()),
        Arc::new(ManualClock::new(trace_start())),
    )
    .with_unit_deadline(std::time::Duration::from_secs(3));
    let batch =
        |at: DateTime<Utc>| vec![ingest.parse(report(&fleet, 0, at).to_string().as_bytes())];

    store.set(HANGS);
    let started = tokio::time::Instant::now();
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        ingest.record_states(batch(trace_start())),
    )
    .await
    .expect("the batch failed instead of waiting for a store that never answers");
    assert!(
        matches!(outcome, Err(IngestError::Store(StoreError::Unavailable(_)))),
        "the batch failed as unavailable (redelivered), not {outcome:?}"
    );
    assert_eq!(
        started.elapsed(),
        std::time::Duration::from_secs(3),
        "on the paused clock, exactly the deadline passed"
    );
    assert!(memory
        .export(&fleet.mowers)
        .await
        .unwrap()
        .history
        .is_empty());

    store.set(ANSWERS);
    ingest
        .record_states(batch(trace_start()))
        .await
        .expect("the redelivered batch is stored once the store answers");
    ingest
        .record_states(batch(trace_start() + Duration::seconds(1)))
        .await
        .expect("and the next one");
    assert_eq!(memory.export(&fleet.mowers).await.unwrap().history.len(), 2);
}

/// The read-only API's reads go to the read store; the units of work, the health totals, the
/// export and the ping stay on the primary.
#[tokio::test]
async fn reads_go_to_the_read_store_and_writes_to_the_primary() {
    let (primary, standby, fleet) = one_state_on_the_primary().await;
    let routed = Arc::new(ReadRouted::new(primary.clone(), standby.clone()));
    let mower = fleet.mowers[0];
    routed.ping().await.unwrap();
    assert!(
        routed.health(mower).await.unwrap().is_some(),
        "the primary's totals"
    );
    assert_eq!(routed.export(&[mower]).await.unwrap().history.len(), 1);
    assert_eq!(
        standby.calls(),
        0,
        "no write, ping, health or export on the read store"
    );

    // The standby has not replayed the state: its (empty) answers show where each read went.
    assert!(routed.latest(&[mower]).await.unwrap().is_empty());
    assert!(routed
        .history(mower, &window())
        .await
        .unwrap()
        .rows
        .is_empty());
    assert!(routed
        .track(mower, &window())
        .await
        .unwrap()
        .rows
        .is_empty());
    let day = trace_start().date_naive();
    assert!(routed.days(mower, day, day).await.unwrap().is_empty());
    assert_eq!(standby.calls(), 4);
}

/// A read store that refuses (the router's replica port with no standby left) or fails: each
/// read is answered by the primary.
#[tokio::test]
async fn a_read_store_that_does_not_answer_falls_back_to_the_primary() {
    let (primary, standby, fleet) = one_state_on_the_primary().await;
    let routed = Arc::new(ReadRouted::new(primary.clone(), standby.clone()));
    let mower = fleet.mowers[0];
    standby.set(REFUSES);
    let before = primary.calls();
    assert_eq!(routed.latest(&[mower]).await.unwrap().len(), 1);
    assert_eq!(
        routed.history(mower, &window()).await.unwrap().rows.len(),
        1
    );
    assert_eq!(routed.track(mower, &window()).await.unwrap().rows.len(), 0);
    let day = trace_start().date_naive();
    assert_eq!(routed.days(mower, day, day).await.unwrap().len(), 1);
    assert_eq!(
        primary.calls() - before,
        4,
        "each read asked the primary once"
    );
    assert_eq!(standby.calls(), 4, "after the read store failed it");

    // Both gone: the read fails as unavailable (the API's 503 with Retry-After).
    primary.set(REFUSES);
    assert!(matches!(
        routed.latest(&[mower]).await,
        Err(StoreError::Unavailable(_))
    ));
}

/// A failover of two nodes: the primary is gone and the router cut the read store's sessions
/// while it moved its port to the promoted node. The read is asked of the read store once more,
/// on a new session, and answered, instead of a 503 for the length of the failover.
#[tokio::test]
async fn a_read_cut_while_the_primary_is_gone_is_asked_of_the_read_store_again() {
    let (store, fleet) = seeded().await;
    let primary = Switchable::new(store.clone());
    let standby = Switchable::new(store);
    let routed = ReadRouted::new(primary.clone(), standby.clone());
    let ingest = Ingest::new(
        Arc::new(ReadRouted::new(primary.clone(), standby.clone())),
        Arc::new(RecordingBus::default()),
        Arc::new(ManualClock::new(trace_start())),
    );
    ingest
        .record_states(vec![
            ingest.parse(report(&fleet, 0, trace_start()).to_string().as_bytes())
        ])
        .await
        .expect("stored");
    let mower = fleet.mowers[0];
    primary.set(REFUSES);
    let (primary_before, standby_before) = (primary.calls(), standby.calls());

    standby.set(CUT_ONCE);
    let history = routed.history(mower, &window()).await.expect("answered");
    assert_eq!(history.rows.len(), 1);
    assert_eq!(standby.calls() - standby_before, 2, "the read store, twice");
    assert_eq!(
        primary.calls() - primary_before,
        1,
        "the primary in between"
    );

    // The read store refusing again, and the primary still gone: 503, after the same three tries.
    standby.set(REFUSES);
    assert!(matches!(
        routed.latest(&[mower]).await,
        Err(StoreError::Unavailable(_))
    ));
    assert_eq!(standby.calls() - standby_before, 4);
    assert_eq!(primary.calls() - primary_before, 2);
}

/// The sessions' port through the read routing.
mod sessions {
    use super::*;
    use swath_application::ports::{SessionError, SessionQuery, SessionStore};
    use swath_application::read_routing::ReadRoutedSessions;
    use swath_domain::sessions::SessionRow;

    #[async_trait]
    impl SessionStore for Switchable {
        async fn page(&self, query: &SessionQuery) -> Result<Vec<SessionRow>, SessionError> {
            self.gate().await.map_err(unanswered)?;
            self.store.page(query).await
        }
    }

    fn unanswered(error: StoreError) -> SessionError {
        SessionError::Unavailable(error.to_string().into())
    }

    /// The sessions' pages go to the read store and fall back to the primary when it does not
    /// answer.
    #[tokio::test]
    async fn session_pages_go_to_the_read_store_and_fall_back_to_the_primary() {
        // A working state opens a session, on the primary only.
        let (primary, standby, fleet) = one_state_on_the_primary().await;
        let routed = ReadRoutedSessions::new(primary.clone(), standby.clone());
        let mower = fleet.mowers[0];
        let query = SessionQuery {
            account: fleet.account_of(mower),
            mowers: vec![mower],
            from: None,
            to: None,
            before: None,
            limit: 10,
        };
        let (primary_before, standby_before) = (primary.calls(), standby.calls());
        assert!(
            routed.page(&query).await.unwrap().is_empty(),
            "the standby's (not replayed) answer"
        );
        assert_eq!(standby.calls() - standby_before, 1);
        assert_eq!(primary.calls(), primary_before, "the primary not asked");

        standby.set(REFUSES);
        assert_eq!(routed.page(&query).await.unwrap().len(), 1, "the primary's");
        primary.set(REFUSES);
        assert!(matches!(
            routed.page(&query).await,
            Err(SessionError::Unavailable(_))
        ));
    }
}

swath_tests::postgres_tests!(
    on_postgres:
    the_pool_sets_the_session_limits,
    a_primary_cut_behind_the_router_fails_batches_and_readiness_then_both_recover,
    reads_fall_back_to_the_primary_while_the_read_store_is_cut,
);

mod on_postgres {
    use super::*;
    use swath_application::readiness::Readiness;
    use swath_postgres::{PoolSettings, PostgresStore};
    use swath_tests::postgres::{test_database_url, with_database, PostgresFactory};
    use swath_tests::proxy::Proxy;

    /// A migrated database of `factory`, seeded with the fleet; its URL.
    async fn database(factory: &PostgresFactory) -> (PostgresStore, String, Fleet) {
        let store = factory.fresh_store().await;
        let fleet = Fleet::new();
        fleet.seed(&store, DEFAULT_THRESHOLD).await;
        let name: String = sqlx::query_scalar("SELECT current_database()")
            .fetch_one(store.pool())
            .await
            .unwrap();
        let url = with_database(&test_database_url(), &name);
        (store, url, fleet)
    }

    fn settings() -> PoolSettings {
        PoolSettings {
            max_connections: 4,
            connect_timeout: std::time::Duration::from_secs(1),
            statement_timeout: std::time::Duration::from_secs(7),
            idle_in_transaction_timeout: std::time::Duration::from_secs(3),
            tcp_keepalive: std::time::Duration::from_secs(6),
        }
    }

    pub async fn the_pool_sets_the_session_limits(factory: PostgresFactory) {
        let (_, url, _) = database(&factory).await;
        let store = PostgresStore::connect_with(&url, &settings())
            .await
            .unwrap();
        let mut shown = Vec::new();
        for name in [
            "statement_timeout",
            "idle_in_transaction_session_timeout",
            "tcp_keepalives_idle",
            "tcp_keepalives_interval",
            "tcp_keepalives_count",
            "tcp_user_timeout",
        ] {
            let value: String = sqlx::query_scalar(&format!("SHOW {name}"))
                .fetch_one(store.pool())
                .await
                .unwrap();
            shown.push(value);
        }
        assert_eq!(shown, ["7s", "3s", "6", "2", "3", "6000"]);
        // The server ends a session idle in its transaction: its locks go with it.
        let mut tx = store.pool().begin().await.unwrap();
        sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(4)).await;
        assert!(
            sqlx::query("SELECT 1").execute(&mut *tx).await.is_err(),
            "the session idle in its transaction past the limit was ended"
        );
        store.close().await;
    }

    pub async fn a_primary_cut_behind_the_router_fails_batches_and_readiness_then_both_recover(
        factory: PostgresFactory,
    ) {
        let (_, url, fleet) = database(&factory).await;
        let proxy = Proxy::start(&url).await;
        let store = Arc::new(
            PostgresStore::connect_with(&proxy.url(&url), &settings())
                .await
                .unwrap(),
        );
        let bus = Arc::new(RecordingBus::default());
        let ingest = Arc::new(
            Ingest::new(
                store.clone(),
                bus.clone(),
                Arc::new(ManualClock::new(trace_start())),
            )
            .with_unit_deadline(std::time::Duration::from_secs(2)),
        );
        let readiness = Readiness::new(store.clone(), bus, ingest.clone());
        let batch =
            |at: DateTime<Utc>| vec![ingest.parse(report(&fleet, 0, at).to_string().as_bytes())];
        ingest.record_states(batch(trace_start())).await.unwrap();
        assert!(readiness.check().await.store.is_ok());

        // The primary stops answering: every byte in flight is swallowed, connections stay open.
        proxy.blackhole();
        let failed = ingest
            .record_states(batch(trace_start() + Duration::seconds(1)))
            .await;
        assert!(
            matches!(failed, Err(IngestError::Store(StoreError::Unavailable(_)))),
            "{failed:?}"
        );
        assert!(
            readiness.check().await.store.is_err(),
            "/readyz: store down"
        );

        // The router cuts the dead primary's sessions and sends new ones to the promoted node.
        proxy.heal();
        let mut attempts = 0;
        loop {
            attempts += 1;
            match ingest
                .record_states(batch(trace_start() + Duration::seconds(1)))
                .await
            {
                Ok(_) => break,
                Err(e) => assert!(attempts < 3, "still failing after {attempts}: {e}"),
            }
        }
        assert!(readiness.check().await.store.is_ok(), "/readyz: store up");
        let rows = store.export(&fleet.mowers).await.unwrap();
        assert_eq!(rows.history.len(), 2, "the failed batch stored once, after");
        store.close().await;
    }

    pub async fn reads_fall_back_to_the_primary_while_the_read_store_is_cut(
        factory: PostgresFactory,
    ) {
        let (primary, url, fleet) = database(&factory).await;
        let proxy = Proxy::start(&url).await;
        let reads = PostgresStore::connect_lazy_with(&proxy.url(&url), &settings()).unwrap();
        let routed = ReadRouted::new(Arc::new(primary.clone()), Arc::new(reads.clone()));
        let ingest = Ingest::new(
            Arc::new(primary.clone()),
            Arc::new(RecordingBus::default()),
            Arc::new(ManualClock::new(trace_start())),
        );
        ingest
            .record_states(vec![
                ingest.parse(report(&fleet, 0, trace_start()).to_string().as_bytes())
            ])
            .await
            .unwrap();
        let mower = fleet.mowers[0];
        assert_eq!(routed.latest(&[mower]).await.unwrap().len(), 1);
        assert_eq!(reads.replay_lag().await.unwrap(), 0.0, "not a standby");
        let through_proxy = proxy.connections();
        assert!(through_proxy > 0, "the read went through the read store");

        proxy.refuse();
        for _ in 0..3 {
            assert_eq!(routed.latest(&[mower]).await.unwrap().len(), 1);
            assert_eq!(
                routed.history(mower, &window()).await.unwrap().rows.len(),
                1
            );
        }
        proxy.heal();
        assert_eq!(routed.latest(&[mower]).await.unwrap().len(), 1);
        assert!(
            proxy.connections() > through_proxy,
            "the read store is used again once it answers"
        );
        reads.close().await;
        primary.close().await;
    }
}
