//! End to end on NATS JetStream and PostgreSQL with several replicas of the real `swath`
//! binary killed with `SIGKILL` while states are published: three replicas each killed at
//! random moments (also while starting up), and one replica in a crash loop. Every stored row,
//! the watcher's events and open alerts included, must equal the one-pass and the independent
//! references exactly: per-mower order holds across replicas because a mower's partition is
//! handled by one replica at a time (docs/e2e.md, docs/rules.md §5).
//!
//! Run when `SWATH_TEST_DATABASE_URL` and `SWATH_TEST_NATS_URL` are set; each scenario has a
//! NATS server (2.15, `SWATH_TEST_NATS_SERVER`) and a database of its own. The kill schedules
//! come from a printed dice seed (`SWATH_E2E_SEED` replays one); the moments still depend on
//! the machine's pace.

use std::time::{Duration, Instant};
use swath_tests::e2e::scenario::{publish_in_background, publisher, wait_for_count};
use swath_tests::e2e::setup::{start_scenario, verify_everything};
use swath_tests::e2e::{self, Dice, Replicas};
use tokio::sync::Mutex;

const SWATH: &str = env!("CARGO_BIN_EXE_swath");

/// One scenario at a time: three replicas, NATS and PostgreSQL share two cores.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// The NATS adapter's warning that a partition's pin moved while its holder's batch ran (the
/// holder starved past `priority_timeout`): newer messages may then be handled elsewhere first,
/// so the rows would show it; printed, for the record.
const PIN_MOVED: &str = "A partition's pin moved while its batch ran";

/// Waits until every replica is ready again after the schedule, printing the logs if not.
async fn all_ready(replicas: &mut Replicas) {
    if let Err(e) = replicas.wait_all_ready(Duration::from_secs(60)).await {
        replicas.print_logs();
        panic!("{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn three_replicas_killed_at_random_moments_end_with_the_rows_of_one() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut dice = Dice::from_env("three replicas");
    let (plan, nats, db, store) = start_scenario(&server, 600, 200, 40_000).await;
    let mut replicas = Replicas::start(SWATH, &db.url, &nats.url(), &[], 3)
        .await
        .expect("three replicas start");
    // Published over about 20 s, so that every kill falls while states arrive.
    let publishing = publish_in_background(
        publisher(&nats.url()).await,
        plan,
        0..plan.states,
        Some(2_000.0),
    );
    wait_for_count(&store, &plan, 1_000).await;

    // Each replica: two kills at random moments, and one at a random moment followed by kills
    // while it starts up again (one before `/readyz` answers 200, one 100–900 ms after the
    // spawn). Every killed replica is started again at once.
    let mut events: Vec<(usize, bool)> = (0..3)
        .flat_map(|i| [(i, false), (i, false), (i, true)])
        .collect();
    dice.shuffle(&mut events);
    for (i, startup) in events {
        tokio::time::sleep(dice.millis(300, 2_500)).await;
        replicas.kill9(i).await;
        if startup {
            replicas
                .kill_during_startup(i, &mut dice)
                .await
                .expect("a kill before the replica is ready");
            replicas.spawn(i).expect("the replica restarts");
            tokio::time::sleep(dice.millis(100, 900)).await;
            replicas.kill9(i).await;
        }
        replicas.spawn(i).expect("the replica restarts");
    }
    all_ready(&mut replicas).await;
    publishing.await.expect("the publisher");
    verify_everything(&store, &plan, &replicas.all_services()).await;

    // The schedule did what the scenario says.
    for i in 0..3 {
        let kills: Vec<_> = replicas.kills.iter().filter(|k| k.replica == i).collect();
        assert!(
            kills.len() >= 3,
            "replica {i} was killed {} times",
            kills.len()
        );
        assert!(
            kills.iter().any(|k| !k.was_ready),
            "replica {i} was never killed while starting up: {kills:?}"
        );
    }
    eprintln!(
        "three replicas: {} kills ({} before /readyz was 200), {} pins moved during a batch, \
         {:.0} s",
        replicas.kills.len(),
        replicas.kills.iter().filter(|k| !k.was_ready).count(),
        replicas.log_count(PIN_MOVED),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn a_replica_in_a_crash_loop_loses_and_reorders_nothing() {
    let server = e2e::services();
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut dice = Dice::from_env("crash loop");
    let (plan, nats, db, store) = start_scenario(&server, 700, 200, 20_000).await;
    // One replica, as an orchestrator runs it: while it loops, nobody holds the partitions; each
    // start waits for the pins of the one before to time out, and takes the redeliveries first.
    let mut replicas = Replicas::start(SWATH, &db.url, &nats.url(), &[], 1)
        .await
        .expect("the replica starts");
    // Published over about 13 s: the loop runs while states arrive.
    let publishing = publish_in_background(
        publisher(&nats.url()).await,
        plan,
        0..plan.states,
        Some(1_500.0),
    );
    wait_for_count(&store, &plan, 1_000).await;

    // Killed eight times about a second apart, started again at once each time.
    for _ in 0..8 {
        tokio::time::sleep(dice.millis(800, 1_200)).await;
        replicas.kill9(0).await;
        replicas.spawn(0).expect("the replica restarts");
    }
    all_ready(&mut replicas).await;
    publishing.await.expect("the publisher");
    verify_everything(&store, &plan, &replicas.all_services()).await;
    assert_eq!(replicas.kills.len(), 8, "eight kills");
    eprintln!(
        "crash loop: 8 kills ({} before /readyz was 200), {} pins moved during a batch, {:.0} s",
        replicas.kills.iter().filter(|k| !k.was_ready).count(),
        replicas.log_count(PIN_MOVED),
        started.elapsed().as_secs_f64()
    );
}
