//! End to end on NATS JetStream and PostgreSQL: the real `swath` binary (no simulated fleet)
//! ingesting and watching states a load generator publishes, with geofences and zones. The
//! stored rows are compared with the independent reference (`swath_tests::reference`, written
//! from the rule text) and with the one-pass reference (the same states stored one at a time,
//! in publication order, through `Ingest` on a memory store); the watcher's events, alerts,
//! watch rows, zone watches and busy statuses with the independent reference. What each
//! scenario guarantees, and why, is in `docs/e2e.md`.
//!
//! Run when `SWATH_TEST_DATABASE_URL` and `SWATH_TEST_NATS_URL` are set. Each test has a NATS
//! server of its own (the service's stream and consumer names are fixed) and a database of its
//! own; the restart scenarios restart private servers, never the shared ones. The scenarios run
//! one at a time (they measure nothing, but share two cores).

use rand::Rng;
use std::time::Duration;
use swath_tests::e2e::scenario::{
    assert_stream_in_published_order, publish_in_background, publisher, unsettled_ingest,
    wait_for_count,
};
use swath_tests::e2e::setup::{start_scenario, verify_everything};
use swath_tests::e2e::{self, PgServer, Service};
use tokio::sync::Mutex;

const SWATH: &str = env!("CARGO_BIN_EXE_swath");

/// One scenario at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// `ack_wait` of the services under test: short, so that a restart after a crash resumes soon.
const ACK_WAIT: &str = "5";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn states_of_200_mowers_are_stored_exactly_once() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let (plan, nats, _db, store) = start_scenario(&server, 100, 200, 100_000).await;
    let service = Service::start(SWATH, &_db.url, &nats.url(), &[])
        .await
        .expect("swath starts");

    let bus = publisher(&nats.url()).await;
    publish_in_background(bus, plan, 0..plan.states, None)
        .await
        .unwrap();
    verify_everything(&store, &plan, &[&service]).await;

    // Exactly once, as the service counted it too.
    assert_eq!(
        service.metric("swath_states_stored_total").await.unwrap(),
        plan.states as f64
    );
    assert!(service.metric("swath_ingest_batches_total").await.unwrap() >= 1.0);
    // Every reason's series is exposed from the start (at 0): none may have counted a state.
    let metrics = service.get("/metrics").await.unwrap().1;
    let dropped: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("swath_states_dropped_total{"))
        .filter(|l| l.rsplit_once(' ').is_none_or(|(_, v)| v.trim() != "0"))
        .collect();
    assert!(dropped.is_empty(), "no state was dropped: {dropped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn kill_9_at_random_moments_loses_and_duplicates_nothing() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let (plan, nats, db, store) = start_scenario(&server, 200, 200, 40_000).await;
    let env = [("SWATH_NATS_ACK_WAIT_SECONDS", ACK_WAIT)];
    let mut service = Service::start(SWATH, &db.url, &nats.url(), &env)
        .await
        .expect("swath starts");
    let publishing =
        publish_in_background(publisher(&nats.url()).await, plan, 0..plan.states, None);

    // Reads the consumers' unsettled deliveries before each kill.
    let observer = publisher(&nats.url()).await;
    // Two crashes, each once a random share of the states is stored.
    let mut rng = rand::thread_rng();
    for (low, high) in [(0.05, 0.35), (0.45, 0.75)] {
        let at = (plan.states as f64 * rng.gen_range(low..high)) as usize;
        wait_for_count(&store, &plan, at).await;
        // A random moment inside a batch, not just after a count: and one at which the ingest
        // holds deliveries it has not settled (when it has caught up with the publisher, there
        // are moments between batches with none, and a kill then would test nothing).
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..200))).await;
        let mut unsettled = 0;
        for _ in 0..2_000 {
            unsettled = unsettled_ingest(&observer, swath_nats::DEFAULT_TELEMETRY_PARTITIONS)
                .await
                .unwrap_or(0);
            if unsettled > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        service.kill9();
        let at_kill = swath_tests::load::stored_count(store.pool(), &plan.mower_ids())
            .await
            .expect("count the stored states");
        eprintln!("kill -9 once {at_kill} states are stored, {unsettled} deliveries unsettled");
        service = Service::start(SWATH, &db.url, &nats.url(), &env)
            .await
            .expect("swath restarts");
        // The restarted service resumes once the killed one's pins have timed out
        // (`priority_timeout` = `ack_wait` + pull expiry + 1 s, docs/e2e.md), and the killed
        // one's unsettled deliveries come to it first, as redeliveries. So once it has stored
        // 1 000 states more than were stored at the kill (counted after it: the count the kill
        // waited for is long passed by then, at thousands of states a second), it has seen them.
        let next = at_kill + 1000;
        wait_for_count(&store, &plan, next.min(plan.states)).await;
        let redelivered = service
            .metric("swath_ingest_redeliveries_total")
            .await
            .unwrap();
        eprintln!("the restarted service saw {redelivered} redelivered messages");
        assert!(
            redelivered >= 1.0,
            "the killed service's unsettled states were not redelivered"
        );
    }
    publishing.await.unwrap();
    verify_everything(&store, &plan, &[&service]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn a_nats_restart_during_ingestion_loses_nothing() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let (plan, mut nats, db, store) = start_scenario(&server, 300, 200, 40_000).await;
    // `SWATH_E2E_ACK_WAIT` (seconds) lengthens it: a restart then takes less than `ack_wait`,
    // and a partition's new holder waits for its predecessor's deliveries (docs/e2e.md).
    let ack_wait = std::env::var("SWATH_E2E_ACK_WAIT").unwrap_or_else(|_| ACK_WAIT.to_owned());
    let env = [("SWATH_NATS_ACK_WAIT_SECONDS", ack_wait.as_str())];
    let service = Service::start(SWATH, &db.url, &nats.url(), &env)
        .await
        .expect("swath starts");

    // The first half is in the stream before the restart; the second is published after it.
    let half = plan.states / 2;
    let bus = publisher(&nats.url()).await;
    plan.publish(&bus, 0..half, None, 512, Duration::from_secs(30))
        .await
        .expect("publish the first half");
    let at = rand::thread_rng().gen_range(half / 10..half / 2);
    wait_for_count(&store, &plan, at).await;
    eprintln!("restarting NATS once {at} states are stored");
    nats.restart_after(Duration::from_secs(2))
        .expect("NATS restarts");
    plan.publish(&bus, half..plan.states, None, 512, Duration::from_secs(60))
        .await
        .expect("publish the second half after the restart");
    // A publish lost in the restart and retried behind newer ones would leave a mower's states
    // out of order in the stream, which the references do not expect (decision 88): said as such.
    assert_stream_in_published_order(&nats.url(), &plan).await;
    verify_everything(&store, &plan, &[&service]).await;
    let (status, _) = service.get("/readyz").await.unwrap();
    assert_eq!(status, 200, "ready again after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn a_postgres_restart_during_ingestion_loses_nothing() {
    let _server = e2e::services();
    let _serial = SERIAL.lock().await;
    let pg = PgServer::start().expect("a private PostgreSQL server");
    let (plan, nats, db, store) = start_scenario(&pg.url(), 400, 200, 40_000).await;
    let service = Service::start(SWATH, &db.url, &nats.url(), &[])
        .await
        .expect("swath starts");
    let publishing =
        publish_in_background(publisher(&nats.url()).await, plan, 0..plan.states, None);

    let at = rand::thread_rng().gen_range(plan.states / 10..plan.states / 2);
    wait_for_count(&store, &plan, at).await;
    eprintln!("restarting PostgreSQL (fast shutdown) once {at} states are stored");
    pg.stop("fast");
    // Down: readiness says which.
    let (status, body) = service.get("/readyz").await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("the store is down"), "{body}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    pg.restart_after("fast", Duration::ZERO)
        .expect("PostgreSQL restarts");
    publishing.await.unwrap();
    verify_everything(&store, &plan, &[&service]).await;
    let (status, _) = service.get("/readyz").await.unwrap();
    assert_eq!(status, 200, "ready again after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn two_replicas_on_one_durable_consumer_end_with_the_rows_of_one() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let (plan, nats, db, store) = start_scenario(&server, 500, 200, 40_000).await;
    let first = Service::start(SWATH, &db.url, &nats.url(), &[])
        .await
        .expect("the first replica starts");
    let second = Service::start(SWATH, &db.url, &nats.url(), &[])
        .await
        .expect("the second replica starts");
    publish_in_background(publisher(&nats.url()).await, plan, 0..plan.states, None)
        .await
        .unwrap();

    // Every table exactly the reference, the watcher's events and alerts included: each
    // mower's partition is handled by one replica at a time, in publication order (docs/e2e.md).
    verify_everything(&store, &plan, &[&first, &second]).await;

    // Both replicas did share the work, and together stored each state once.
    let a = first.metric("swath_states_stored_total").await.unwrap();
    let b = second.metric("swath_states_stored_total").await.unwrap();
    eprintln!("replica states: {a} + {b}");
    assert!(a > 0.0 && b > 0.0, "both replicas stored batches: {a}, {b}");
    assert_eq!(
        a + b,
        plan.states as f64,
        "each state stored by one replica"
    );
}
