//! End to end on NATS JetStream and PostgreSQL: how three replicas of the real `swath` binary
//! share the partitions of `telemetry.mower.*` (docs/e2e.md). With states of every partition
//! arriving all along, each replica holds its share of the ingest and watcher partitions
//! (`P / 3 ± 1`, read from `swath_bus_partitions_owned`); after one is killed the other two
//! hold all `P`, and the first partition stalled by the kill is ingested again after the
//! failover time (printed, not asserted: docs/e2e.md and BENCHMARKS.md); once it returns, it
//! gets its share back. Every wait is bounded; no time is asserted. The rows stored meanwhile
//! must then equal both references exactly.
//!
//! Run when `SWATH_TEST_DATABASE_URL` and `SWATH_TEST_NATS_URL` are set. The services run with
//! the default settings (8 partitions, `ack_wait` 4 s): the failover times are those of a
//! default deployment.

use std::time::{Duration, Instant};
use swath_tests::e2e::scenario::{publisher, Trickle};
use swath_tests::e2e::setup::{start_scenario, verify_everything};
use swath_tests::e2e::{self, partition_counts, wait_every_partition_grows, Replicas};

const SWATH: &str = env!("CARGO_BIN_EXE_swath");

/// `SWATH_TELEMETRY_PARTITIONS`' default.
const PARTITIONS: u32 = 8;

/// The bound of every wait for a balance: a failover (`ack_wait` + pull expiry + 1 s, 7 s by
/// default) and the membership's rounds, with room for a loaded machine.
const BALANCE: Duration = Duration::from_secs(60);

const CONSUMERS: [&str; 2] = ["swath-ingest", "swath-watcher"];

/// Waits until the running replicas share both consumers' partitions evenly; prints the shares.
async fn balanced(replicas: &Replicas, when: &str) {
    for consumer in CONSUMERS {
        match replicas.wait_balanced(consumer, PARTITIONS, BALANCE).await {
            Ok((shares, took)) => eprintln!(
                "{when}: {consumer} partitions held {shares:?} (balanced after {:.1} s)",
                took.as_secs_f64()
            ),
            Err(e) => {
                replicas.print_logs();
                panic!("{when}: {e}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn three_replicas_share_the_partitions_and_take_over_a_killed_ones() {
    let server = e2e::services();
    let started = Instant::now();
    // More states than the trickle publishes before it is stopped.
    let (plan, nats, db, store) = start_scenario(&server, 800, 200, 200_000).await;
    let mut replicas = Replicas::start(SWATH, &db.url, &nats.url(), &[], 3)
        .await
        .expect("three replicas start");
    // 400 states/s of 200 mowers: about 50/s in each partition, so a partition that stores
    // nothing for a second is not being ingested.
    let trickle = Trickle::start(publisher(&nats.url()).await, plan, 400.0);
    balanced(&replicas, "three replicas").await;

    // Each replica killed in turn, twice: the others take its partitions; back, it gets its
    // share again.
    let mut failovers = Vec::new();
    for round in 0..6 {
        let victim = round % 3;
        replicas.kill9(victim).await;
        let at_kill = partition_counts(store.pool(), &plan, PARTITIONS)
            .await
            .expect("counts");
        match wait_every_partition_grows(store.pool(), &plan, &at_kill, BALANCE).await {
            Ok(took) => {
                eprintln!(
                    "every partition ingested again {:.2} s after the kill of replica {victim}",
                    took.as_secs_f64()
                );
                failovers.push(took);
            }
            Err(e) => {
                replicas.print_logs();
                panic!("after the kill of replica {victim}: {e}");
            }
        }
        balanced(&replicas, &format!("replica {victim} killed")).await;
        replicas.spawn(victim).expect("the replica restarts");
        replicas
            .wait_ready(victim, Duration::from_secs(60))
            .await
            .expect("the replica is ready");
        balanced(&replicas, &format!("replica {victim} back")).await;
    }

    let published = trickle.stop().await;
    let plan = swath_tests::load::Plan {
        states: published,
        ..plan
    };
    verify_everything(&store, &plan, &replicas.all_services()).await;
    failovers.sort();
    eprintln!(
        "failover (kill -9 to every partition stored again), default settings: median {:.2} s \
         of {:?}; {published} states; {:.0} s",
        failovers[failovers.len() / 2].as_secs_f64(),
        failovers
            .iter()
            .map(|d| format!("{:.2}", d.as_secs_f64()))
            .collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    );
}
