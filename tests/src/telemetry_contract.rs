//! The telemetry store's contract suite. Every scenario is a `pub async fn` taking a
//! [`StoreFactory`], run against the memory store always and against PostgreSQL when
//! `SWATH_TEST_DATABASE_URL` is set. Scenarios go through the `Ingest` use case, as production
//! does, so the store is checked together with the rules it must apply.
//!
//! Layout: the scenarios of late states and backfills (states older than a mower's stored ones)
//! are in `late`, re-exported, so that the suites name every scenario
//! `telemetry_contract::<scenario>`; the others are here.

use crate::support::{
    first_rows, ingest_json, trace_start, Fleet, RecordingBus, StoreFactory, TestStore,
    DEFAULT_THRESHOLD,
};
use crate::traces::{
    arrival, batched_and_single, build_distinct_trace, build_trace, ingest_clock, split,
    DistinctStep, Step,
};
use chrono::Duration;
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{ManualClock, TimeWindow, WindowRows};
use swath_application::Ingest;
use swath_domain::{Activity, DropReason, MowerId, StateOutcome, TelemetryRows};

mod late;
pub use late::*;

/// A store with the fleet seeded, and the ingest use case on top of it.
pub struct Harness {
    pub store: TestStore,
    pub ingest: Arc<Ingest>,
    pub bus: Arc<RecordingBus>,
    pub clock: Arc<ManualClock>,
    pub fleet: Fleet,
}

impl Harness {
    pub async fn new(factory: &dyn StoreFactory, blade_threshold_ms: i64) -> Self {
        let store = factory.fresh().await;
        let fleet = Fleet::new();
        fleet
            .seed(store.directory.as_ref(), blade_threshold_ms)
            .await;
        let bus = Arc::new(RecordingBus::default());
        let clock = Arc::new(ManualClock::new(ingest_clock()));
        let ingest = Arc::new(Ingest::new(
            store.telemetry.clone(),
            bus.clone(),
            clock.clone(),
        ));
        Self {
            store,
            ingest,
            bus,
            clock,
            fleet,
        }
    }

    /// Parses and records one batch of JSON reports.
    pub async fn ingest(&self, reports: &[Value]) -> Vec<StateOutcome> {
        crate::support::ingest_json(&self.ingest, reports).await
    }

    /// Every row of the fleet's mowers (and of the unknown one, which must have none).
    pub async fn rows(&self) -> TelemetryRows {
        let mut mowers: Vec<MowerId> = self.fleet.mowers.to_vec();
        mowers.push(self.fleet.unknown_mower);
        self.store.telemetry.export(&mowers).await.expect("export")
    }
}

/// A batch gives exactly the rows (and outcomes, and events) of the same states stored one at a
/// time, for a random trace split into random batches.
pub async fn batched_equals_one_at_a_time(
    factory: &dyn StoreFactory,
    steps: &[Step],
    sizes: &[usize],
) {
    let batched = Harness::new(factory, 600_000).await;
    let single = Harness::new(factory, 600_000).await;
    let reports = build_trace(&batched.fleet, steps);

    let (batched_outcomes, single_outcomes) = batched_and_single(
        &reports,
        sizes,
        async |batch| batched.ingest(batch).await,
        async |batch| single.ingest(batch).await,
    )
    .await;

    assert_eq!(batched_outcomes, single_outcomes, "outcomes differ");
    assert_eq!(batched.rows().await, single.rows().await, "rows differ");
    assert_eq!(
        batched.bus.published(),
        single.bus.published(),
        "published events differ"
    );
}

/// Any permutation of a trace of distinct states (with identical redeliveries) split into any
/// batches ends with exactly the rows of the same states sorted by `observed_at` and stored one at
/// a time: every table, health totals and day rows included (docs/rules.md §3, W4–W5). The blade
/// threshold is the default one, never reached: whether `blade_due` was raised may depend on the
/// order (decision 39).
pub async fn any_order_equals_time_order(
    factory: &dyn StoreFactory,
    steps: &[DistinctStep],
    redeliveries: &[usize],
    order: &[usize],
    sizes: &[usize],
) {
    let shuffled = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let ordered = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let reports = build_distinct_trace(&shuffled.fleet, steps);
    let arrival = arrival(&reports, redeliveries, order);
    for batch in split(&arrival, sizes) {
        let outcomes = shuffled.ingest(&batch).await;
        assert!(
            outcomes.iter().all(|o| *o == StateOutcome::Stored),
            "{outcomes:?} {batch:?}"
        );
    }
    let mut by_time = reports.clone();
    by_time.sort_by_key(|r| {
        (
            r["observed_at"].as_str().unwrap().to_owned(),
            r["mower_id"].as_str().unwrap().to_owned(),
        )
    });
    for report in &by_time {
        ordered.ingest(std::slice::from_ref(report)).await;
    }
    let (got, want) = (shuffled.rows().await, ordered.rows().await);
    assert_same_rows(&got, &want);
    assert!(
        shuffled.bus.published().is_empty(),
        "no blade_due below the default threshold"
    );
}

/// Two adapters end with identical rows for the same trace in the same batches.
pub async fn stores_agree(
    a: &dyn StoreFactory,
    b: &dyn StoreFactory,
    steps: &[Step],
    sizes: &[usize],
) {
    let a = Harness::new(a, 600_000).await;
    let b = Harness::new(b, 600_000).await;
    let reports = build_trace(&a.fleet, steps);
    for batch in split(&reports, sizes) {
        assert_eq!(
            a.ingest(&batch).await,
            b.ingest(&batch).await,
            "outcomes differ"
        );
    }
    assert_eq!(
        a.rows().await,
        b.rows().await,
        "rows differ between the stores"
    );
}

/// The same rows in both, table by table, so that a failure names the table.
fn assert_same_rows(got: &TelemetryRows, want: &TelemetryRows) {
    assert_eq!(got.history, want.history, "history differs");
    assert_eq!(got.positions, want.positions, "positions differ");
    assert_eq!(got.latest, want.latest, "latest rows differ");
    assert_eq!(got.health, want.health, "health totals differ");
    assert_eq!(got.days, want.days, "day rows differ");
    assert_eq!(got.sessions, want.sessions, "sessions differ");
}

/// Ingests one batch whose every state must be stored.
async fn ingest_all_stored(h: &Harness, reports: &[Value]) {
    let outcomes = h.ingest(reports).await;
    assert!(
        outcomes.iter().all(|o| *o == StateOutcome::Stored),
        "{outcomes:?}"
    );
}

fn report(fleet: &Fleet, mower: usize, seconds: i64, activity: Activity) -> Value {
    let mower_id = fleet.mowers[mower];
    json!({
        "mower_id": mower_id,
        "account_id": fleet.account_of(mower_id),
        "observed_at": (trace_start() + Duration::seconds(seconds)).to_rfc3339(),
        "activity": activity.as_str(),
        "blade_on": activity == Activity::Mowing,
        "battery_percent": 70,
        "position": {"lat": 52.5 + seconds as f64 * 1e-5, "lon": 13.4},
    })
}

/// A batch stored a second time (a redelivery after its commit) changes no row.
pub async fn redelivered_batch_changes_nothing(factory: &dyn StoreFactory) {
    let h = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let batch: Vec<Value> = (0..10)
        .map(|i| report(&h.fleet, i % 3, i as i64 * 10, Activity::Mowing))
        .collect();
    h.ingest(&batch).await;
    let before = h.rows().await;
    assert_eq!(before.history.len(), 10);
    assert_eq!(before.latest.len(), 3);
    let outcomes = h.ingest(&batch).await;
    assert!(
        outcomes.iter().all(|o| *o == StateOutcome::Stored),
        "a redelivery is acknowledged"
    );
    assert_eq!(h.rows().await, before);
}

/// Invalid, unknown and foreign reports are dropped alone with their reason; the rest is stored.
pub async fn bad_reports_are_refused_alone(factory: &dyn StoreFactory) {
    let h = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let f = &h.fleet;
    let mut foreign = report(f, 0, 20, Activity::Mowing);
    foreign["account_id"] = json!(f.account_b);
    let mut unknown = report(f, 0, 30, Activity::Mowing);
    unknown["mower_id"] = json!(f.unknown_mower);
    let mut battery = report(f, 1, 40, Activity::Mowing);
    battery["battery_percent"] = json!(101);
    let mut future = report(f, 1, 50, Activity::Mowing);
    future["observed_at"] = json!((ingest_clock() + Duration::minutes(6)).to_rfc3339());
    let outcomes = h
        .ingest(&[
            report(f, 0, 10, Activity::Mowing),
            foreign,
            unknown,
            json!({"mower_id": f.mowers[1], "not": "a report"}),
            battery,
            future,
            report(f, 2, 60, Activity::Docked),
        ])
        .await;
    use StateOutcome::*;
    assert_eq!(
        outcomes,
        vec![
            Stored,
            Dropped(DropReason::AccountMismatch),
            Dropped(DropReason::UnknownMower),
            Dropped(DropReason::Malformed),
            Dropped(DropReason::InvalidBattery),
            Dropped(DropReason::FutureObservedAt),
            Stored,
        ]
    );
    let rows = h.rows().await;
    let stored: Vec<_> = rows.history.iter().map(|r| r.mower_id).collect();
    assert_eq!(stored, vec![f.mowers[0], f.mowers[2]]);
}

/// A batch opened and dropped without commit stores nothing and releases its locks.
pub async fn an_uncommitted_batch_stores_nothing(factory: &dyn StoreFactory) {
    let h = Harness::new(factory, DEFAULT_THRESHOLD).await;
    h.ingest(&[report(&h.fleet, 0, 0, Activity::Mowing)]).await;
    let before = h.rows().await;
    {
        let (snapshots, _unit) = h
            .store
            .telemetry
            .begin(&h.fleet.mowers)
            .await
            .expect("begin");
        assert_eq!(snapshots.len(), 3, "every directory mower has a snapshot");
        let snap = &snapshots[&h.fleet.mowers[0]];
        assert_eq!(snap.latest.map(|l| l.observed_at), Some(trace_start()));
        assert!(snapshots[&h.fleet.mowers[1]].health.is_none());
        // `_unit` is dropped here without a commit.
    }
    assert_eq!(h.rows().await, before);
    // The locks are free again: this batch would wait forever otherwise.
    let outcomes = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        h.ingest(&[report(&h.fleet, 0, 10, Activity::Mowing)]),
    )
    .await
    .expect("the dropped batch released its locks");
    assert_eq!(outcomes, vec![StateOutcome::Stored]);
}

/// Reads answer the committed rows: latest with its document, health totals.
pub async fn reads_answer_committed_rows(factory: &dyn StoreFactory) {
    let h = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let f = &h.fleet;
    let mut first = report(f, 0, 0, Activity::Mowing);
    first["firmware"] = json!("4.2");
    // Mowing with the blade off from 30 s: mowing time and blade time differ.
    let mut blade_off = report(f, 0, 30, Activity::Mowing);
    blade_off["blade_on"] = json!(false);
    h.ingest(&[first, report(f, 0, 60, Activity::Returning), blade_off])
        .await;
    let latest = h
        .store
        .telemetry
        .latest(&[f.mowers[1], f.mowers[0]])
        .await
        .unwrap();
    assert_eq!(latest.len(), 1, "mower 1 never reported");
    assert_eq!(latest[0].observed_at, trace_start() + Duration::seconds(60));
    assert_eq!(latest[0].state.activity, Activity::Returning);
    assert_eq!(latest[0].last_seen_at, ingest_clock());
    let health = h.store.health(f.mowers[0]).await.expect("health");
    // 0→30 s mowing with the blade on, 30→60 s with it off; 0.0003° north in each interval
    // (33.358 5 m, rounded per interval to 33 359 mm).
    assert_eq!(
        (health.mowing_ms, health.blade_ms, health.distance_mm),
        (60_000, 30_000, 2 * 33_359)
    );
    assert!(h.store.health(f.mowers[1]).await.is_none());

    // The unknown fields are kept in the stored document of a newer state.
    let mut newest = report(f, 0, 90, Activity::Docked);
    newest["firmware"] = json!("4.3");
    h.ingest(&[newest]).await;
    let latest = h.store.telemetry.latest(&[f.mowers[0]]).await.unwrap();
    assert_eq!(latest[0].state.unknown.get("firmware"), Some(&json!("4.3")));
    // 60→90 s, returning, has positions at both ends: no distance, no mowing, no blade time.
    let health = h.store.health(f.mowers[0]).await.expect("health");
    assert_eq!(
        (health.mowing_ms, health.blade_ms, health.distance_mm),
        (60_000, 30_000, 2 * 33_359)
    );
}

/// A read of one mower's latest row made after a commit returned answers what it committed,
/// however often the mower was read before (a store that keeps answers must forget them on its
/// commits), and a late state leaves the latest row as it was.
pub async fn a_read_after_a_commit_sees_it(factory: &dyn StoreFactory) {
    let h = Arc::new(Harness::new(factory, DEFAULT_THRESHOLD).await);
    let mower = h.fleet.mowers[0];
    let latest_at = async |h: &Harness| {
        let rows = h.store.telemetry.latest(&[mower]).await.expect("latest");
        rows.first().map(|row| row.observed_at)
    };
    assert_eq!(latest_at(&h).await, None, "nothing stored yet");
    // Readers polling all along, so that reads are under way while each batch commits.
    let polling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (h, polling) = (Arc::clone(&h), Arc::clone(&polling));
            tokio::spawn(async move {
                while polling.load(std::sync::atomic::Ordering::Relaxed) {
                    h.store.telemetry.latest(&[mower]).await.expect("latest");
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for step in 1..=40 {
        let seconds = step * 10;
        h.ingest(&[report(&h.fleet, 0, seconds, Activity::Mowing)])
            .await;
        let expected = trace_start() + Duration::seconds(seconds);
        assert_eq!(latest_at(&h).await, Some(expected), "after state {step}");
        assert_eq!(latest_at(&h).await, Some(expected), "read again");
    }
    let outcomes = h.ingest(&[report(&h.fleet, 0, 5, Activity::Docked)]).await;
    assert_eq!(
        outcomes,
        vec![StateOutcome::Stored],
        "a late state is stored"
    );
    assert_eq!(
        latest_at(&h).await,
        Some(trace_start() + Duration::seconds(400)),
        "a late state is not the latest"
    );
    polling.store(false, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        reader.await.expect("a reader");
    }
}

/// W6 through the whole path: `blade_due` is published once, after the commit, with a dedup id.
pub async fn blade_due_is_published_once(factory: &dyn StoreFactory) {
    let h = Harness::new(factory, 120_000).await;
    let batch: Vec<Value> = (0..8)
        .map(|i| report(&h.fleet, 0, i * 30, Activity::Mowing))
        .collect();
    h.ingest(&batch[..3]).await;
    assert!(
        h.bus.published().is_empty(),
        "60 s of blade time is below the threshold"
    );
    h.ingest(&batch[3..]).await;
    h.ingest(&batch).await; // a redelivery raises nothing
    let published = h.bus.published();
    assert_eq!(published.len(), 1);
    let (subject, payload, dedup) = &published[0];
    assert_eq!(
        subject,
        &format!("notifications.mower.{}.blade_due", h.fleet.mowers[0])
    );
    let event: Value = serde_json::from_slice(payload).unwrap();
    assert_eq!(event["kind"], "blade_due");
    assert_eq!(event["blade_since_reset_ms"], 120_000);
    assert!(dedup.is_some());
}

/// Batches over the same mowers, run concurrently, all commit (no deadlock, nothing lost).
pub async fn concurrent_batches_all_commit(factory: &dyn StoreFactory) {
    let h = Arc::new(Harness::new(factory, DEFAULT_THRESHOLD).await);
    let mut tasks = Vec::new();
    for t in 0..4i64 {
        let h = Arc::clone(&h);
        tasks.push(tokio::spawn(async move {
            for round in 0..10i64 {
                // Each task touches every mower, in a different order.
                let batch: Vec<Value> = (0..3)
                    .map(|k| {
                        let mower = ((k + t) % 3) as usize;
                        report(&h.fleet, mower, round * 1000 + t * 10 + k, Activity::Mowing)
                    })
                    .collect();
                h.ingest(&batch).await;
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(std::time::Duration::from_secs(60), task)
            .await
            .expect("no deadlock")
            .expect("task");
    }
    let rows = h.rows().await;
    assert_eq!(rows.history.len(), 4 * 10 * 3);
    assert_eq!(rows.latest.len(), 3);
}

/// Two writers (two replicas) ingesting the same batches concurrently, as after a redelivery to
/// the other replica, end with the rows of one writer, without deadlock: each state is first
/// applied by whichever writer reaches it first, and that writer has applied every earlier one.
pub async fn two_writers_end_with_the_rows_of_one(
    factory: &dyn StoreFactory,
    steps: &[Step],
    sizes: &[usize],
) {
    let shared = Harness::new(factory, 600_000).await;
    let reference = Harness::new(factory, 600_000).await;
    let reports = build_trace(&shared.fleet, steps);
    let batches = split(&reports, sizes);
    let second = Arc::new(Ingest::new(
        shared.store.telemetry.clone(),
        shared.bus.clone(),
        shared.clock.clone(),
    ));
    let writer = |ingest: Arc<Ingest>, batches: Vec<Vec<Value>>| async move {
        for batch in batches {
            ingest_json(&ingest, &batch).await;
        }
    };
    let first = tokio::spawn(writer(shared.ingest.clone(), batches.clone()));
    let other = tokio::spawn(writer(second, batches.clone()));
    for task in [first, other] {
        tokio::time::timeout(std::time::Duration::from_secs(120), task)
            .await
            .expect("no deadlock")
            .expect("writer");
    }
    for batch in &batches {
        reference.ingest(batch).await;
    }
    assert_eq!(
        shared.rows().await,
        reference.rows().await,
        "two writers differ from one"
    );
}

/// An NDJSON import stores what live ingestion stores, 200 states per transaction, and sums up
/// what it stored and dropped.
pub async fn import_stores_what_live_ingest_stores(factory: &dyn StoreFactory) {
    let imported = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let live = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let f = &imported.fleet;
    let mut reports: Vec<Value> = (0..450)
        .map(|i| report(f, i % 3, i as i64 * 2, Activity::Mowing))
        .collect();
    let mut unknown = report(f, 0, 5, Activity::Docked);
    unknown["mower_id"] = json!(f.unknown_mower);
    reports.insert(100, unknown);
    let mut ndjson = String::new();
    for (i, r) in reports.iter().enumerate() {
        ndjson.push_str(&r.to_string());
        ndjson.push('\n');
        if i == 300 {
            ndjson.push_str("{not json\n\n");
        }
    }
    let mut progress = Vec::new();
    let summary = swath_application::import_lines::import_ndjson(
        &imported.ingest,
        ndjson.as_bytes(),
        |bytes| progress.push(bytes),
    )
    .await
    .expect("import");
    assert_eq!(summary.reports, 452);
    assert_eq!(summary.stored, 450);
    assert_eq!(
        summary.dropped.into_iter().collect::<Vec<_>>(),
        vec![(DropReason::Malformed, 1), (DropReason::UnknownMower, 1)]
    );
    // Each refused line named by its line in the input (the empty line after the bad one counts).
    let refused: Vec<_> = summary
        .refused
        .iter()
        .map(|r| (r.line, r.reason, r.detail.is_some()))
        .collect();
    assert_eq!(
        refused,
        vec![
            (101, DropReason::UnknownMower, false),
            (302, DropReason::Malformed, true)
        ]
    );
    assert_eq!(progress.len(), 3, "200 + 200 + 52 reports: three batches");
    assert_eq!(*progress.last().unwrap(), ndjson.len() as u64);
    for r in &reports {
        live.ingest(std::slice::from_ref(r)).await;
    }
    assert_eq!(imported.rows().await, live.rows().await);
}
