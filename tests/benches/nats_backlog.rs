//! Draining a JetStream backlog by partition, nats-server alone (no Swath, no database): the
//! drain rate and nats-server's CPU per message for the stream layouts, at several backlog
//! sizes, side by side in one run (issue 34: "the cost grows with the work").
//!
//! - `interleaved`: Swath's layout. One stream whose subject transform spreads `bl.mower.<id>`
//!   over `bl.p.<N>.mower.<id>` (`partition(8,1)`, as `swath-nats` provisions it); one pull
//!   consumer per partition, filtering `bl.p.<N>.mower.*`. The partitions are interleaved in
//!   every message block.
//! - `interleaved-4mib`: the same with 4 MiB message blocks instead of 8 MiB (a per-subject limit
//!   no mower reaches: nats-server then sizes the blocks for a key-value stream), so that a
//!   filtered consumer loads half as much to read what one block holds of its partition.
//! - `per-partition`: one stream per partition, each capturing `bl.p.<N>.mower.*` (the publisher
//!   names the partition here, as a server-side account mapping would); one consumer per stream,
//!   no filter. Each consumer reads its stream's blocks from end to end.
//!
//! For each layout and backlog: a private nats-server (file storage), the backlog published
//! (pipelined, 300-byte messages of `--mowers` mowers) while nothing consumes, then the
//! partitions' consumers drained concurrently, each fetching batches of `--batch` and
//! acknowledging every message, as Swath's partition workers do. After `--warmup` seconds, the
//! messages acknowledged and nats-server's CPU time (`/proc/<pid>/stat`) are read at the start and
//! the end of a `--window`-second window, which must end before the smallest backlog is drained.
//! `--rate R` paces the consumers to R messages per second together, the pace of a Swath replica
//! behind its database: the server then serves the same backlog over a longer time, as it does
//! end to end.
//!
//! ```text
//! SWATH_TEST_NATS_SERVER=$(.ci/nats-server) cargo bench -p swath-tests --bench nats_backlog -- \
//!   --backlog 500000,4000000 --window 10
//! ```

use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use futures::StreamExt;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swath_tests::e2e::{cpu_time, NatsServer};

const PARTITIONS: u32 = 8;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    Interleaved,
    /// [`Layout::Interleaved`] with 4 MiB message blocks instead of 8 MiB.
    InterleavedSmallBlocks,
    PerPartition,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Interleaved => "interleaved",
            Layout::InterleavedSmallBlocks => "interleaved-4mib",
            Layout::PerPartition => "per-partition",
        }
    }
}

struct Args {
    backlogs: Vec<usize>,
    layouts: Vec<Layout>,
    mowers: usize,
    batch: usize,
    warmup: u64,
    window: u64,
    /// Messages per second for all partitions together (0: as fast as they come).
    rate: f64,
}

fn args() -> Args {
    let mut a = Args {
        backlogs: vec![500_000, 4_000_000],
        layouts: vec![Layout::Interleaved, Layout::PerPartition],
        mowers: 200,
        batch: 64,
        warmup: 2,
        window: 10,
        rate: 0.0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--backlog" => {
                a.backlogs = value.split(',').filter_map(|v| v.parse().ok()).collect();
            }
            "--layouts" => {
                a.layouts = value
                    .split(',')
                    .filter_map(|v| match v {
                        "interleaved" => Some(Layout::Interleaved),
                        "interleaved-4mib" => Some(Layout::InterleavedSmallBlocks),
                        "per-partition" => Some(Layout::PerPartition),
                        _ => None,
                    })
                    .collect();
            }
            "--mowers" => a.mowers = value.parse().unwrap_or(a.mowers),
            "--batch" => a.batch = value.parse().unwrap_or(a.batch),
            "--warmup" => a.warmup = value.parse().unwrap_or(a.warmup),
            "--window" => a.window = value.parse().unwrap_or(a.window),
            "--rate" => a.rate = value.parse().unwrap_or(a.rate),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

struct Figures {
    layout: Layout,
    backlog: usize,
    published_per_s: f64,
    drained_per_s: f64,
    nats_us_per_message: f64,
}

/// The streams of a layout, created on `js`; the consumers, one per partition.
async fn provision(js: &jetstream::Context, layout: Layout) -> Vec<PullConsumer> {
    let mut consumers = Vec::new();
    match layout {
        Layout::Interleaved | Layout::InterleavedSmallBlocks => {
            // nats-server sizes the blocks of a stream without limits at 8 MiB, and at 4 MiB
            // when the stream has a per-subject limit: one that no mower reaches gives the
            // smaller blocks and nothing else.
            let per_subject = if layout == Layout::InterleavedSmallBlocks {
                i64::MAX
            } else {
                0
            };
            let stream = js
                .create_stream(stream::Config {
                    name: "BL".into(),
                    subjects: vec!["bl.mower.*".into()],
                    subject_transform: Some(stream::SubjectTransform {
                        source: "bl.mower.*".into(),
                        destination: format!(
                            "bl.p.{{{{partition({PARTITIONS},1)}}}}.mower.{{{{wildcard(1)}}}}"
                        ),
                    }),
                    storage: stream::StorageType::File,
                    max_messages_per_subject: per_subject,
                    ..Default::default()
                })
                .await
                .expect("stream");
            for n in 0..PARTITIONS {
                consumers.push(
                    stream
                        .create_consumer(pull::Config {
                            durable_name: Some(format!("bl-p{n}")),
                            filter_subject: format!("bl.p.{n}.mower.*"),
                            ack_policy: jetstream::consumer::AckPolicy::Explicit,
                            ..Default::default()
                        })
                        .await
                        .expect("consumer"),
                );
            }
        }
        Layout::PerPartition => {
            for n in 0..PARTITIONS {
                let stream = js
                    .create_stream(stream::Config {
                        name: format!("BL_P{n}"),
                        subjects: vec![format!("bl.p.{n}.mower.*")],
                        storage: stream::StorageType::File,
                        ..Default::default()
                    })
                    .await
                    .expect("stream");
                consumers.push(
                    stream
                        .create_consumer(pull::Config {
                            durable_name: Some(format!("bl-p{n}")),
                            ack_policy: jetstream::consumer::AckPolicy::Explicit,
                            ..Default::default()
                        })
                        .await
                        .expect("consumer"),
                );
            }
        }
    }
    consumers
}

/// Publishes `backlog` messages, 512 acknowledgements outstanding; messages per second.
async fn publish(js: &jetstream::Context, layout: Layout, backlog: usize, mowers: usize) -> f64 {
    let payload = Bytes::from(vec![b'x'; 300]);
    let started = Instant::now();
    let mut pending = VecDeque::with_capacity(512);
    for i in 0..backlog {
        let mower = i % mowers;
        let subject = match layout {
            Layout::Interleaved | Layout::InterleavedSmallBlocks => {
                format!("bl.mower.{mower:08}")
            }
            Layout::PerPartition => {
                format!("bl.p.{}.mower.{mower:08}", mower as u32 % PARTITIONS)
            }
        };
        pending.push_back(js.publish(subject, payload.clone()).await.expect("publish"));
        if pending.len() >= 512 {
            pending
                .pop_front()
                .expect("one pending")
                .await
                .expect("stored");
        }
    }
    for ack in pending {
        ack.await.expect("stored");
    }
    backlog as f64 / started.elapsed().as_secs_f64()
}

/// Fetches batches of `batch` and acknowledges every message, until `stop`; at `rate` messages
/// per second at the most (0: unpaced), as a consumer behind a database would.
async fn drain(
    consumer: PullConsumer,
    batch: usize,
    rate: f64,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    let started = Instant::now();
    let mut mine = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if rate > 0.0 {
            let due = started + Duration::from_secs_f64(mine as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let Ok(mut messages) = consumer
            .fetch()
            .max_messages(batch)
            .expires(Duration::from_millis(500))
            .messages()
            .await
        else {
            continue;
        };
        while let Some(Ok(message)) = messages.next().await {
            if message.ack().await.is_ok() {
                done.fetch_add(1, Ordering::Relaxed);
                mine += 1;
            }
        }
    }
}

async fn measure(layout: Layout, backlog: usize, a: &Args) -> Figures {
    let server = NatsServer::start().expect("nats-server");
    let client = async_nats::connect(server.url()).await.expect("connect");
    let js = jetstream::new(client);
    let consumers = provision(&js, layout).await;
    let published_per_s = publish(&js, layout, backlog, a.mowers).await;

    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = consumers
        .into_iter()
        .map(|c| {
            let rate = a.rate / f64::from(PARTITIONS);
            tokio::spawn(drain(c, a.batch, rate, done.clone(), stop.clone()))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(a.warmup)).await;
    let (n0, cpu0, t0) = (
        done.load(Ordering::Relaxed),
        cpu_time(server.pid()).expect("cpu"),
        Instant::now(),
    );
    tokio::time::sleep(Duration::from_secs(a.window)).await;
    let (n1, cpu1, elapsed) = (
        done.load(Ordering::Relaxed),
        cpu_time(server.pid()).expect("cpu"),
        t0.elapsed(),
    );
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.await;
    }
    let drained = (n1 - n0) as f64;
    assert!(
        (n1 as usize) < backlog,
        "the backlog of {backlog} was drained before the window ended: shorten --window"
    );
    Figures {
        layout,
        backlog,
        published_per_s,
        drained_per_s: drained / elapsed.as_secs_f64(),
        nats_us_per_message: (cpu1 - cpu0).as_secs_f64() * 1e6 / drained,
    }
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut figures = Vec::new();
    for &backlog in &a.backlogs {
        for &layout in &a.layouts {
            let f = rt.block_on(measure(layout, backlog, &a));
            println!(
                "{:>13} backlog {:>9}: published {:>8.0}/s, drained {:>8.0}/s, nats-server {:>5.1} µs/message",
                f.layout.name(),
                f.backlog,
                f.published_per_s,
                f.drained_per_s,
                f.nats_us_per_message
            );
            figures.push(f);
        }
    }
    println!(
        "\nP = {PARTITIONS}, batch {}, {} mowers, {} s window after {} s, paced at {} messages/s (0: unpaced)",
        a.batch, a.mowers, a.window, a.warmup, a.rate
    );
    println!("| layout | backlog | published/s | drained/s | nats-server µs/message | drain rate vs the smallest backlog |");
    println!("|---|---|---|---|---|---|");
    for f in &figures {
        let base = figures
            .iter()
            .find(|g| g.layout == f.layout)
            .map_or(f.drained_per_s, |g| g.drained_per_s);
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.1} | {:.2}× |",
            f.layout.name(),
            f.backlog,
            f.published_per_s,
            f.drained_per_s,
            f.nats_us_per_message,
            f.drained_per_s / base
        );
    }
}
