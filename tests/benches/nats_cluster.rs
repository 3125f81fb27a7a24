//! JetStream publishing on the deployments docs/operations.md compares, side by side in one run:
//! one node with an R1 stream, a three-node cluster (`swath_tests::cluster`) with an R3 stream
//! and the server's default durability (acknowledged once in the memory of a majority, flushed
//! to disk every two minutes), and the same cluster with `sync_interval: always` (on disk on a
//! majority before the acknowledgement).
//!
//! For each: the latency of one publish at a time (a gateway that waits for each
//! acknowledgement: median, p90, p99 over `--latency N` publishes) and the throughput of
//! pipelined publishes (512 acknowledgements outstanding, as `swath-load` publishes; `--states
//! N` states of 200 mowers), through `NatsBus`, the adapter Swath and its load generator use.
//! The end-to-end figures (states stored per second by a replica) are
//! `cargo bench -p swath-tests --bench e2e_nats_postgres -- --nats single,cluster,cluster-sync`.
//!
//! ```text
//! SWATH_TEST_NATS_SERVER=$(.ci/nats-server) cargo bench -p swath-tests --bench nats_cluster
//! ```

use bytes::Bytes;
use std::time::{Duration, Instant};
use swath_nats::{NatsBus, NatsBusSettings, StreamSpec};
use swath_tests::cluster::{Cluster, Durability};
use swath_tests::e2e::NatsServer;

struct Figures {
    setup: &'static str,
    latency: Vec<Duration>,
    per_second: f64,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn measure(
    setup: &'static str,
    url: &str,
    replicas: Option<usize>,
    latency_n: usize,
    states: usize,
) -> Figures {
    let spec = StreamSpec::telemetry();
    let settings = NatsBusSettings {
        replicas,
        ..NatsBusSettings::with_streams(vec![spec])
    };
    let bus = NatsBus::connect(url, settings).await.expect("connect");
    let payload = Bytes::from(vec![b'x'; 400]);
    let mowers: Vec<String> = (0..200)
        .map(|i| format!("0192f3a0-0000-7000-8000-{i:012}"))
        .collect();
    use swath_application::ports::EventBus;
    // Warm-up.
    for n in 0..200 {
        bus.publish(
            &format!("telemetry.mower.{}", mowers[n % 200]),
            payload.clone(),
            None,
        )
        .await
        .expect("publish");
    }
    let mut latency = Vec::with_capacity(latency_n);
    for n in 0..latency_n {
        let started = Instant::now();
        bus.publish(
            &format!("telemetry.mower.{}", mowers[n % 200]),
            payload.clone(),
            None,
        )
        .await
        .expect("publish");
        latency.push(started.elapsed());
    }
    latency.sort();
    let messages = (0..states).map(|n| {
        (
            format!("telemetry.mower.{}", mowers[n % 200]),
            payload.clone(),
            format!("{setup}-{n}"),
        )
    });
    let started = Instant::now();
    let (acknowledged, failure) = bus.publish_pipelined(messages, 512).await;
    let elapsed = started.elapsed();
    assert!(failure.is_none(), "{setup}: {failure:?}");
    Figures {
        setup,
        latency,
        per_second: acknowledged as f64 / elapsed.as_secs_f64(),
    }
}

fn number(flag: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let latency_n = number("--latency", 2_000);
    let states = number("--states", 100_000);
    let mut all = Vec::new();
    {
        let single = NatsServer::start().expect("a NATS server");
        all.push(measure("1 node, R1", &single.url(), None, latency_n, states).await);
    }
    for (setup, durability) in [
        ("3 nodes, R3, default sync", Durability::Default),
        ("3 nodes, R3, sync_interval always", Durability::SyncAlways),
    ] {
        let cluster = Cluster::start(durability).await.expect("a cluster");
        all.push(measure(setup, &cluster.seeds_from(0), Some(3), latency_n, states).await);
    }
    println!("| deployment | publish latency median | p90 | p99 | pipelined publishes/s |");
    println!("|---|---|---|---|---|");
    for f in &all {
        println!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.0} |",
            f.setup,
            percentile(&f.latency, 0.5).as_secs_f64() * 1e3,
            percentile(&f.latency, 0.9).as_secs_f64() * 1e3,
            percentile(&f.latency, 0.99).as_secs_f64() * 1e3,
            f.per_second
        );
    }
    println!("({latency_n} sequential publishes of 400 bytes for the latency, {states} pipelined for the rate)");
}
