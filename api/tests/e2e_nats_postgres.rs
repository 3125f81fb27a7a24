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
use swath_application::ports::{TelemetryStore, WatchRows, WatchStore};
use swath_nats::{NatsBus, NatsBusSettings};
use swath_postgres::PostgresStore;
use swath_tests::e2e::{self, NatsServer, PgServer, Service, TestDatabase};
use swath_tests::load::{compare, summary, wait_at_least, wait_stored, Checked, Plan};
use swath_tests::reference::{self, BusyClock, WatchChecked};
use tokio::sync::Mutex;

const SWATH: &str = env!("CARGO_BIN_EXE_swath");

/// One scenario at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// Giving up when the stored count does not grow for this long.
const STALL: Duration = Duration::from_secs(60);

/// `ack_wait` of the services under test: short, so that a restart after a crash resumes soon.
const ACK_WAIT: &str = "5";

/// The plans of these tests: with geofences and zones, and a blade threshold of one minute, so
/// that every rule of the watcher, W6 and W7 has something to derive.
fn plan(seed: u64, mowers: usize, states: usize) -> Plan {
    Plan::new(seed, mowers, states)
        .with_fences(true)
        .with_blade_threshold_ms(60_000)
}

/// A database on `server_url`, migrated, with the plan's directory, geofences and zones seeded.
async fn database(server_url: &str, plan: &Plan) -> (TestDatabase, PostgresStore) {
    let db = TestDatabase::create(server_url)
        .await
        .expect("a test database");
    swath_migrations::migrate(&db.url).await.expect("migrate");
    let store = PostgresStore::connect(&db.url, 4).await.expect("connect");
    plan.seed_directory(&store)
        .await
        .expect("seed the directory");
    plan.seed_fences(&store).await.expect("seed the fences");
    (db, store)
}

async fn publisher(nats: &NatsServer) -> NatsBus {
    NatsBus::connect(&nats.url(), NatsBusSettings::default())
        .await
        .expect("the load generator connects to NATS")
}

/// Publishes states `range` of the plan in the background (retrying through outages).
fn publish_in_background(
    bus: NatsBus,
    plan: Plan,
    range: std::ops::Range<usize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        plan.publish(&bus, range, None, 512, Duration::from_secs(90))
            .await
            .expect("publishing the plan");
    })
}

/// Waits until every state is stored and watched, then compares the rows with both references
/// (telemetry: `checked`; notifications: `watched`).
async fn verify(
    store: &PostgresStore,
    plan: &Plan,
    checked: Checked,
    watched: WatchChecked,
    services: &[&Service],
) {
    let logs = || {
        for s in services {
            eprintln!("--- service log (tail) ---\n{}", s.log_tail());
        }
    };
    if let Err(e) = wait_stored(store.pool(), plan, plan.states, STALL, None).await {
        logs();
        panic!("{e}");
    }
    let states = plan.parsed_states();
    let setup = plan.setup();
    let watch = match wait_watched(store, plan, &setup, &states).await {
        Ok(rows) => rows,
        Err(e) => {
            logs();
            panic!("{e}");
        }
    };
    let stored = store.export(&plan.mower_ids()).await.expect("export");
    let one_pass = plan.reference().await.expect("the one-pass reference");
    let differences = compare(&one_pass, &stored, checked);
    assert!(
        differences.is_empty(),
        "the stored rows differ from the one-pass reference:\n{}",
        differences.join("\n")
    );
    let expected = reference::expect(&setup, &states, BusyClock::Wall);
    let differences = compare(&expected.telemetry, &stored, checked);
    assert!(
        differences.is_empty(),
        "the stored rows differ from the independent reference:\n{}",
        differences.join("\n")
    );
    let differences = match watched {
        WatchChecked::Everything => {
            let mut d = reference::compare_watch(&expected.watch, &watch);
            d.extend(reference::check_busy(&states, &watch.busy));
            d
        }
        // `wait_watched` waited for exactly this.
        WatchChecked::FinalState => reference::check_final_state(&setup, &states, &watch),
    };
    assert!(
        differences.is_empty(),
        "the notification rows differ from the independent reference ({watched:?}):\n{}",
        differences.join("\n")
    );
    // The comparison had something to compare: the plan gives every rule work.
    let census = reference::census(&expected.watch);
    for kind in reference::DERIVED_EVENT_KINDS {
        let n = census.get(kind).copied().unwrap_or(0);
        assert!(
            n >= plan.mowers / 4,
            "only {n} {kind} events expected: {census:?}"
        );
    }
    eprintln!(
        "verified ({checked:?}, {watched:?}): {}; expected notifications {census:?}; stored {} events, {} alerts",
        summary(&stored),
        watch.events.len(),
        watch.alerts.len()
    );
}

/// Waits until the watcher has watched, and W7 evaluated, every mower's newest state (they run
/// on their own consumer and after the ingest commit, so a complete history does not mean they
/// are done). Fails after `STALL`.
async fn wait_watched(
    store: &PostgresStore,
    plan: &Plan,
    setup: &std::collections::BTreeMap<swath_domain::MowerId, reference::MowerSetup>,
    states: &[swath_domain::StateReport],
) -> anyhow::Result<WatchRows> {
    let started = std::time::Instant::now();
    loop {
        // A database restart makes a read fail for a while: that is not a verdict.
        let rows = store.export_watch(&plan.mower_ids()).await;
        let missing = match &rows {
            Ok(rows) => reference::check_final_state(setup, states, rows),
            Err(e) => vec![e.to_string()],
        };
        if missing.is_empty() {
            return Ok(rows?);
        }
        anyhow::ensure!(
            started.elapsed() < STALL,
            "the watcher has not caught up after {STALL:?}:\n{}",
            missing
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until at least `count` states are stored.
async fn wait_for_count(store: &PostgresStore, plan: &Plan, count: usize) {
    wait_at_least(store.pool(), plan, count, STALL)
        .await
        .expect("ingestion goes on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn states_of_200_mowers_are_stored_exactly_once() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let plan = plan(100, 200, 100_000);
    let nats = NatsServer::start().expect("a private NATS server");
    let (_db, store) = database(&server, &plan).await;
    let service = Service::start(SWATH, &_db.url, &nats.url(), &[])
        .await
        .expect("swath starts");

    let bus = publisher(&nats).await;
    publish_in_background(bus, plan, 0..plan.states)
        .await
        .unwrap();
    verify(
        &store,
        &plan,
        Checked::Everything,
        WatchChecked::Everything,
        &[&service],
    )
    .await;

    // Exactly once, as the service counted it too.
    assert_eq!(
        service.metric("swath_states_stored_total").await.unwrap(),
        plan.states as f64
    );
    assert!(service.metric("swath_ingest_batches_total").await.unwrap() >= 1.0);
    let dropped = service.get("/metrics").await.unwrap().1;
    assert!(
        !dropped.contains("swath_states_dropped_total{"),
        "no state was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn kill_9_at_random_moments_loses_and_duplicates_nothing() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let plan = plan(200, 200, 40_000);
    let nats = NatsServer::start().expect("a private NATS server");
    let (db, store) = database(&server, &plan).await;
    let env = [("SWATH_NATS_ACK_WAIT_SECONDS", ACK_WAIT)];
    let mut service = Service::start(SWATH, &db.url, &nats.url(), &env)
        .await
        .expect("swath starts");
    let publishing = publish_in_background(publisher(&nats).await, plan, 0..plan.states);

    // Two crashes, each once a random share of the states is stored.
    let mut rng = rand::thread_rng();
    for (low, high) in [(0.05, 0.35), (0.45, 0.75)] {
        let at = (plan.states as f64 * rng.gen_range(low..high)) as usize;
        wait_for_count(&store, &plan, at).await;
        // A random moment inside a batch, not just after a count.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..200))).await;
        eprintln!("kill -9 once {at} states are stored");
        service.kill9();
        service = Service::start(SWATH, &db.url, &nats.url(), &env)
            .await
            .expect("swath restarts");
        // The restarted service resumes once the killed one's deliveries are due (docs/e2e.md):
        // it waited for them, and they came back to it as redeliveries. Both consumers had
        // deliveries in flight (the stream holds thousands of states to go).
        let next = at + 1000;
        wait_for_count(&store, &plan, next.min(plan.states)).await;
        let waited = service
            .log_text()
            .matches("Earlier deliveries are unsettled")
            .count();
        let redelivered = service
            .metric("swath_ingest_redeliveries_total")
            .await
            .unwrap();
        eprintln!(
            "the restarted service waited for the killed one's deliveries {waited} time(s) and \
             saw {redelivered} redelivered messages"
        );
        assert!(
            waited >= 1,
            "the restarted service did not wait for the killed one's deliveries"
        );
        assert!(
            redelivered >= 1.0,
            "the killed service's unsettled states were not redelivered"
        );
    }
    publishing.await.unwrap();
    verify(
        &store,
        &plan,
        Checked::Everything,
        WatchChecked::Everything,
        &[&service],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn a_nats_restart_during_ingestion_loses_nothing() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let plan = plan(300, 200, 40_000);
    let mut nats = NatsServer::start().expect("a private NATS server");
    let (db, store) = database(&server, &plan).await;
    let env = [("SWATH_NATS_ACK_WAIT_SECONDS", ACK_WAIT)];
    let service = Service::start(SWATH, &db.url, &nats.url(), &env)
        .await
        .expect("swath starts");

    // The first half is in the stream before the restart; the second is published after it.
    let half = plan.states / 2;
    let bus = publisher(&nats).await;
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
    verify(
        &store,
        &plan,
        Checked::Everything,
        WatchChecked::Everything,
        &[&service],
    )
    .await;
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
    let plan = plan(400, 200, 40_000);
    let nats = NatsServer::start().expect("a private NATS server");
    let pg = PgServer::start().expect("a private PostgreSQL server");
    let (db, store) = database(&pg.url(), &plan).await;
    let service = Service::start(SWATH, &db.url, &nats.url(), &[])
        .await
        .expect("swath starts");
    let publishing = publish_in_background(publisher(&nats).await, plan, 0..plan.states);

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
    verify(
        &store,
        &plan,
        Checked::Everything,
        WatchChecked::Everything,
        &[&service],
    )
    .await;
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
    let plan = plan(500, 200, 40_000);
    let nats = NatsServer::start().expect("a private NATS server");
    let (db, store) = database(&server, &plan).await;
    let first = Service::start(SWATH, &db.url, &nats.url(), &[])
        .await
        .expect("the first replica starts");
    let second = Service::start(SWATH, &db.url, &nats.url(), &[])
        .await
        .expect("the second replica starts");
    publish_in_background(publisher(&nats).await, plan, 0..plan.states)
        .await
        .unwrap();

    // Every table exactly the reference, totals included, whatever the interleaving: a state
    // stored after a newer one of its mower is merged into the totals (docs/rules.md §3, W4).
    verify(
        &store,
        &plan,
        Checked::Everything,
        WatchChecked::FinalState,
        &[&first, &second],
    )
    .await;

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
