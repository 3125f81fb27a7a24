//! The JetStream bus on a three-node cluster (`swath_tests::cluster`): streams provisioned with
//! three replicas from a list of seeds, publishing that goes on while the stream's leader is
//! down, and nothing acknowledged lost when it is killed (issue 19; the end-to-end scenarios
//! with `swath` replicas are in `swath/tests/e2e_cluster.rs`).
//!
//! Runs when `SWATH_TEST_NATS_URL` is set (the variable says NATS tests are wanted; the cluster is
//! this test's own, from the pinned binary `SWATH_TEST_NATS_SERVER` names).

use bytes::Bytes;
use std::time::Duration;
use swath_application::ports::EventBus;
use swath_nats::{NatsBus, NatsBusSettings, StreamSpec};
use swath_tests::cluster::{Cluster, Durability};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(swath_no_nats, ignore = "needs NATS: set SWATH_TEST_NATS_URL")]
async fn an_r3_stream_keeps_every_acknowledged_message_when_its_leader_is_killed() {
    let mut cluster = Cluster::start(Durability::Default)
        .await
        .expect("a three-node cluster");
    let spec = StreamSpec::new("CLUSTERED", ["clustered.>"]);
    let settings = NatsBusSettings {
        replicas: Some(3),
        request_timeout: Duration::from_secs(2),
        ..NatsBusSettings::with_streams(vec![spec])
    };
    let bus = NatsBus::connect(&cluster.seeds_from(0), settings.clone())
        .await
        .expect("connect with the seeds of the cluster");
    let leader = cluster.stream_leader(0, "CLUSTERED").await.unwrap();
    // 300 messages acknowledged before the kill, 300 while the leader's node is down, 300 after
    // its restart. A failed publish is retried with the same de-duplication id, as a gateway
    // does: waiting for a new leader times out a few publishes.
    let mut failed = 0;
    let mut n = 0;
    for phase in [
        "before the kill",
        "while the node is down",
        "after its restart",
    ] {
        match phase {
            "while the node is down" => cluster.kill(leader),
            "after its restart" => cluster.restart(leader).expect("the node restarts"),
            _ => {}
        }
        let mut acknowledged = 0;
        while acknowledged < 300 {
            let payload = Bytes::from(n.to_string());
            match bus
                .publish("clustered.m", payload, Some(format!("m{n}")))
                .await
            {
                Ok(()) => {
                    acknowledged += 1;
                    n += 1;
                }
                Err(e) => {
                    failed += 1;
                    assert!(failed < 200, "publishing does not recover {phase}: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    eprintln!("900 acknowledged, {failed} publishes failed and were retried");
    // Every acknowledged message is in the stream once, read from a node that never went down.
    let survivor = (leader + 1) % 3;
    cluster
        .wait_jetstream(leader, Duration::from_secs(30))
        .await
        .unwrap();
    let client = async_nats::connect(cluster.url(survivor)).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stream = js.get_stream("CLUSTERED").await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.config.num_replicas, 3);
    assert_eq!(
        info.state.messages, 900,
        "each acknowledged message stored once"
    );
    drop(bus);
}
