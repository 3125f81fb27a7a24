//! What the NATS + PostgreSQL scenarios (`swath/tests/e2e_*.rs`) share: their plans, a seeded
//! database, the load generator's connection, and the verdict: every stored row (W8's sessions
//! included) compared with the one-pass and the independent references (docs/e2e.md).

use super::{Service, TestDatabase};
use crate::load::{compare, summary, wait_at_least, wait_stored, Checked, Plan, E2E_MERGE_GAP};
use crate::reference::{self, BusyClock, MowerSetup, WatchChecked};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use swath_application::ports::{TelemetryStore, WatchRows, WatchStore};
use swath_domain::{MowerId, StateReport};
use swath_nats::{NatsBus, NatsBusSettings};
use swath_postgres::PostgresStore;

/// Giving up when the stored count does not grow for this long.
pub const STALL: Duration = Duration::from_secs(60);

/// The plans of the scenarios: with geofences and zones, a blade threshold of one minute, and
/// silences folded at the services' merge gap ([`E2E_MERGE_GAP`], which [`Service`] gives every
/// process it starts), so that every rule of the watcher, W6, W7 and W8 has something to derive.
pub fn plan(seed: u64, mowers: usize, states: usize) -> Plan {
    Plan::new(seed, mowers, states)
        .with_fences(true)
        .with_blade_threshold_ms(60_000)
        .with_silences(true)
        .with_merge_gap(E2E_MERGE_GAP)
}

/// A database on `server_url`, migrated, with the plan's directory, geofences and zones seeded.
pub async fn database(server_url: &str, plan: &Plan) -> (TestDatabase, PostgresStore) {
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

/// The load generator's connection.
pub async fn publisher(nats_url: &str) -> NatsBus {
    NatsBus::connect(nats_url, NatsBusSettings::default())
        .await
        .expect("the load generator connects to NATS")
}

/// Publishes states `range` of the plan in the background (retrying through outages), at most
/// `rate` per second (`None`: as fast as the stream acknowledges).
pub fn publish_in_background(
    bus: NatsBus,
    plan: Plan,
    range: std::ops::Range<usize>,
    rate: Option<f64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        plan.publish(&bus, range, rate, 512, Duration::from_secs(90))
            .await
            .expect("publishing the plan");
    })
}

/// Waits until at least `count` states are stored.
pub async fn wait_for_count(store: &PostgresStore, plan: &Plan, count: usize) {
    wait_at_least(store.pool(), plan, count, STALL)
        .await
        .expect("ingestion goes on");
}

/// Waits until every state is stored and watched, then compares the rows with both references
/// (telemetry: `checked`; notifications: `watched`). `services`' log tails are printed when it
/// fails (killed ones included: their logs stay until they are dropped).
pub async fn verify(
    store: &PostgresStore,
    plan: &Plan,
    checked: Checked,
    watched: WatchChecked,
    services: &[&Service],
) {
    let verdict = verdict(store, plan, checked, watched).await;
    if !verdict.failures.is_empty() {
        print_logs(services);
        panic!("seed {}: {}", plan.seed, verdict.failures.join("\n\n"));
    }
}

/// What [`verdict`] found: the differences from the references, counted and described.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Telemetry rows that differ from the one-pass or the independent reference.
    pub row_diffs: usize,
    /// Events the independent reference derives that are not stored.
    pub events_lost: usize,
    /// Events stored that the independent reference does not derive (or stored twice).
    pub events_extra: usize,
    /// Every difference, as text for people; empty when the rows are right.
    pub failures: Vec<String>,
}

fn print_logs(services: &[&Service]) {
    for s in services {
        eprintln!(
            "--- service log (tail), pid {} ---\n{}",
            s.pid(),
            s.log_tail()
        );
    }
}

/// [`verify`] without the panic: waits until every state is stored and watched (a stall is a
/// failure of the verdict, not a panic), compares, and counts what differs, so that a scenario
/// can print its figures before it fails.
pub async fn verdict(
    store: &PostgresStore,
    plan: &Plan,
    checked: Checked,
    watched: WatchChecked,
) -> Verdict {
    let mut verdict = Verdict::default();
    if let Err(e) = wait_stored(store.pool(), plan, plan.states, STALL, None).await {
        verdict.failures.push(e.to_string());
        return verdict;
    }
    let states = plan.parsed_states();
    let setup = plan.setup();
    let watch = match wait_watched(store, plan, &setup, &states).await {
        Ok(rows) => rows,
        Err(e) => {
            verdict.failures.push(e.to_string());
            return verdict;
        }
    };
    let stored = store.export(&plan.mower_ids()).await.expect("export");
    let one_pass = plan.reference().await.expect("the one-pass reference");
    let differences = compare(&one_pass, &stored, checked);
    if !differences.is_empty() {
        verdict.row_diffs += differences.len();
        verdict.failures.push(format!(
            "the stored rows differ from the one-pass reference:\n{}",
            differences.join("\n")
        ));
    }
    let expected = reference::expect(&setup, &states, BusyClock::Wall);
    let differences = compare(&expected.telemetry, &stored, checked);
    if !differences.is_empty() {
        verdict.row_diffs += differences.len();
        verdict.failures.push(format!(
            "the stored rows differ from the independent reference:\n{}",
            differences.join("\n")
        ));
    }
    let (lost, extra) = reference::events_lost_and_extra(&expected.watch, &watch);
    verdict.events_lost = lost;
    verdict.events_extra = extra;
    let differences = match watched {
        WatchChecked::Everything => {
            let mut d = reference::compare_watch(&expected.watch, &watch);
            d.extend(reference::check_busy(&states, &watch.busy));
            d
        }
        // `wait_watched` waited for exactly this.
        WatchChecked::FinalState => reference::check_final_state(&setup, &states, &watch),
    };
    if !differences.is_empty() {
        verdict.failures.push(format!(
            "the notification rows differ from the independent reference ({watched:?}):\n{}",
            differences.join("\n")
        ));
    }
    if !verdict.failures.is_empty() {
        if let Some(dir) = std::env::var_os("SWATH_E2E_KEEP_LOGS") {
            let dir = std::path::PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            let dump = |rows: &[swath_domain::watch::Event]| {
                rows.iter().map(|e| format!("{e:?}\n")).collect::<String>()
            };
            let _ = std::fs::write(
                dir.join("expected-events.txt"),
                dump(&expected.watch.events),
            );
            let _ = std::fs::write(dir.join("stored-events.txt"), dump(&watch.events));
        }
        return verdict;
    }
    // The comparison had something to compare: the plan gives every rule work.
    let census = reference::census(&expected.watch);
    for kind in reference::DERIVED_EVENT_KINDS {
        let n = census.get(kind).copied().unwrap_or(0);
        if n < plan.mowers / 4 {
            verdict
                .failures
                .push(format!("only {n} {kind} events expected: {census:?}"));
        }
    }
    // And W8: every mower mows, and random activities split its runs into merged stretches.
    let sessions = &expected.telemetry.sessions;
    let with_breaks = sessions.iter().filter(|r| r.session.breaks > 0).count();
    if sessions.len() < plan.mowers / 2 || with_breaks < plan.mowers / 4 {
        verdict.failures.push(format!(
            "only {} sessions ({with_breaks} with breaks) expected of {} mowers",
            sessions.len(),
            plan.mowers
        ));
    }
    eprintln!(
        "verified ({checked:?}, {watched:?}): {}; expected notifications {census:?}; stored {} events, {} alerts",
        summary(&stored),
        watch.events.len(),
        watch.alerts.len()
    );
    verdict
}

/// Waits until the watcher has watched, and W7 evaluated, every mower's newest state (they run
/// on their own consumer and after the ingest commit, so a complete history does not mean they
/// are done). Fails after `STALL`.
async fn wait_watched(
    store: &PostgresStore,
    plan: &Plan,
    setup: &BTreeMap<MowerId, MowerSetup>,
    states: &[StateReport],
) -> anyhow::Result<WatchRows> {
    let started = Instant::now();
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

/// States of a plan published at a steady rate until stopped, a round of the fleet (one state
/// of each mower) at a time: every partition gets messages all along.
pub struct Trickle {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<usize>,
}

impl Trickle {
    /// Publishes the plan's states from 0 on, `rate` per second, until [`Trickle::stop`] (or
    /// the plan's end).
    pub fn start(bus: NatsBus, plan: Plan, rate: f64) -> Trickle {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut next = 0;
            while next < plan.states && !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let end = (next + plan.mowers).min(plan.states);
                plan.publish(&bus, next..end, Some(rate), 512, Duration::from_secs(90))
                    .await
                    .expect("publishing the plan");
                next = end;
            }
            next
        });
        Trickle { stop, task }
    }

    /// Stops after the round being published; returns how many states were published (all
    /// acknowledged by the stream): states `0..n`.
    pub async fn stop(self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.expect("the publisher")
    }
}

/// The states the `TELEMETRY` stream holds, in stream order (read with an ordered consumer of
/// its own): what the consumers were handed, whatever order the publisher's retries left.
pub async fn stream_states(nats_url: &str) -> anyhow::Result<Vec<StateReport>> {
    use futures::StreamExt;
    let client = async_nats::connect(nats_url).await?;
    let js = async_nats::jetstream::new(client);
    let mut stream = js.get_stream(swath_nats::TELEMETRY_STREAM).await?;
    let total = stream.info().await?.state.messages as usize;
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig::default())
        .await?;
    let mut messages = consumer.messages().await?;
    let now = chrono::Utc::now();
    let mut states = Vec::with_capacity(total);
    while states.len() < total {
        let message = tokio::time::timeout(Duration::from_secs(10), messages.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the stream ended early"))??;
        let state = StateReport::parse(&message.payload, now)
            .map_err(|e| anyhow::anyhow!("a state of the stream does not parse: {e:?}"))?;
        states.push(state);
    }
    Ok(states)
}

/// Mowers whose states `stream` holds in another order than `plan` (both in their own order):
/// one line each, naming the first state out of place.
pub fn reordered_mowers(plan: &[StateReport], stream: &[StateReport]) -> Vec<String> {
    let order = |states: &[StateReport]| {
        let mut by: BTreeMap<MowerId, Vec<chrono::DateTime<chrono::Utc>>> = BTreeMap::new();
        for s in states {
            by.entry(s.mower_id).or_default().push(s.observed_at);
        }
        by
    };
    let (a, b) = (order(plan), order(stream));
    a.iter()
        .filter(|(m, times)| b.get(m) != Some(times))
        .map(|(m, times)| {
            let other = b.get(m).cloned().unwrap_or_default();
            let first = times.iter().zip(&other).position(|(x, y)| x != y);
            format!(
                "{m}: {} states published, {} in the stream, first out of place: {first:?}",
                times.len(),
                other.len()
            )
        })
        .collect()
}

/// Asserts that the `TELEMETRY` stream holds each state of `plan` once, each mower's in the order
/// published. The references assume that order: a publisher that retried a lost publish behind
/// newer ones would break it, not Swath (decision 88), so a scenario says so before judging the
/// service.
pub async fn assert_stream_in_published_order(nats_url: &str, plan: &Plan) {
    let in_stream = stream_states(nats_url)
        .await
        .expect("read the telemetry stream back");
    assert_eq!(
        in_stream.len(),
        plan.states,
        "the stream holds every state once"
    );
    let reordered = reordered_mowers(&plan.parsed_states(), &in_stream);
    assert!(
        reordered.is_empty(),
        "the publisher left {} mowers' states out of order in the stream: {reordered:?}",
        reordered.len()
    );
}

/// Deliveries of the telemetry stream's ingest consumers (`swath-ingest-p<N>`, `partitions` of
/// them) not settled yet: what a replica killed now would leave to be redelivered.
pub async fn unsettled_ingest(bus: &NatsBus, partitions: u32) -> anyhow::Result<usize> {
    let mut unsettled = 0;
    for n in 0..partitions {
        let consumer = format!("{}-p{n}", swath_application::subjects::INGEST_CONSUMER);
        let (_, ack_pending) = bus
            .consumer_backlog(swath_nats::TELEMETRY_STREAM, &consumer)
            .await?;
        unsettled += ack_pending;
    }
    Ok(unsettled)
}
