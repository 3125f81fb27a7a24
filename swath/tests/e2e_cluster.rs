//! End to end on a three-node NATS JetStream cluster (`swath_tests::cluster`) and PostgreSQL:
//! two `swath` replicas connected to different nodes (each given every node as a seed), the
//! streams replicated three times (`SWATH_NATS_REPLICAS=3`), states published through a third
//! node while the cluster fails: the `TELEMETRY` leader's node killed and restarted, a node
//! paused (`SIGSTOP`) past the election timeout and resumed, a `swath` replica killed at the same
//! moment as a node. Every stored row, events and open alerts included, must equal the one-pass
//! and the independent references: nothing JetStream acknowledged to the publisher is lost,
//! nothing is counted twice, per-mower order holds (docs/e2e.md, docs/operations.md).
//!
//! One cluster for the whole schedule, to keep CI's time (about a minute). Run when
//! `SWATH_TEST_DATABASE_URL` and `SWATH_TEST_NATS_URL` are set.

use std::time::{Duration, Instant};
use swath_tests::cluster::{Cluster, Durability};
use swath_tests::e2e::scenario::{database, plan, publish_in_background, wait_for_count};
use swath_tests::e2e::setup::verify_everything;
use swath_tests::e2e::{self, Service};

const SWATH: &str = env!("CARGO_BIN_EXE_swath");

const ENV: [(&str, &str); 1] = [("SWATH_NATS_REPLICAS", "3")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(swath_no_postgres, swath_no_nats),
    ignore = "needs PostgreSQL and NATS: set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL"
)]
async fn a_three_node_cluster_losing_and_pausing_nodes_loses_and_reorders_nothing() {
    let server = e2e::services();
    let started = Instant::now();
    let plan = plan(800, 100, 24_000);
    let mut cluster = Cluster::start(Durability::Default)
        .await
        .expect("a three-node NATS cluster");
    let (db, store) = database(&server, &plan).await;
    let mut a = Service::start(SWATH, &db.url, &cluster.seeds_from(0), &ENV)
        .await
        .expect("replica a starts on node 1");
    let b = Service::start(SWATH, &db.url, &cluster.seeds_from(1), &ENV)
        .await
        .expect("replica b starts on node 2");
    let publisher = swath_nats::NatsBus::connect(
        &cluster.seeds_from(2),
        swath_nats::NatsBusSettings::default(),
    )
    .await
    .expect("the load generator connects to node 3");
    // About 20 s of publishing, so that every fault falls while states arrive.
    let publishing = publish_in_background(publisher, plan, 0..plan.states, Some(1_200.0));

    // 1. The telemetry stream's leader killed, restarted after 3 s.
    wait_for_count(&store, &plan, 2_000).await;
    let leader = cluster
        .stream_leader(2, "TELEMETRY")
        .await
        .expect("the stream's leader");
    eprintln!("killing node {} (TELEMETRY's leader)", cluster.name(leader));
    cluster.kill(leader);
    let stored_at_kill = wait_more(&store, &plan, 2_000).await;
    eprintln!("{stored_at_kill} stored while the leader's node was down");
    cluster.restart(leader).expect("the node restarts");

    // 2. A node paused past the election timeout, then resumed.
    wait_more(&store, &plan, 3_000).await;
    let paused = (leader + 1) % 3;
    eprintln!("pausing node {}", cluster.name(paused));
    cluster.pause(paused);
    tokio::time::sleep(Duration::from_secs(6)).await;
    cluster.resume(paused);

    // 3. A swath replica and a node killed together, both restarted after 2 s.
    wait_more(&store, &plan, 3_000).await;
    let node = (paused + 1) % 3;
    eprintln!("killing replica a and node {} together", cluster.name(node));
    a.kill9();
    cluster.kill(node);
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.restart(node).expect("the node restarts");
    let a_again = Service::start(SWATH, &db.url, &cluster.seeds_from(0), &ENV)
        .await
        .expect("replica a restarts");

    publishing.await.expect("the publisher");
    swath_tests::e2e::scenario::assert_stream_in_published_order(&cluster.url(1), &plan).await;
    verify_everything(&store, &plan, &[&a, &b, &a_again]).await;
    eprintln!("cluster scenario: {:.0} s", started.elapsed().as_secs_f64());
}

/// Waits until `more` states beyond what is stored now are stored (ingestion goes on through
/// the fault); returns the count reached.
async fn wait_more(
    store: &swath_postgres::PostgresStore,
    plan: &swath_tests::load::Plan,
    more: usize,
) -> usize {
    let now = swath_tests::load::stored_count(store.pool(), &plan.mower_ids())
        .await
        .expect("count the stored states");
    let target = (now + more).min(plan.states);
    wait_for_count(store, plan, target).await;
    target
}
