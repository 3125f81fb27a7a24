//! The retention contract suite: every scenario runs against the memory store and, when
//! `SWATH_TEST_DATABASE_URL` is set, PostgreSQL (tests/retention_*.rs). States are stored through
//! the `Ingest` use case; retention runs through the `Retention` use case with a manual clock, so
//! every limit is an exact instant and the expected rows are written out by hand.

use crate::support::{Fleet, RecordingBus, TestStore, DEFAULT_THRESHOLD};
use async_trait::async_trait;
use chrono::{DateTime, Duration, SecondsFormat, TimeZone, Utc};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use swath_application::ports::{ManualClock, RetentionStore};
use swath_application::retention::{Cutoffs, RunOptions, MOWERS_PER_CHUNK};
use swath_application::{Ingest, Retention, RetentionOutcome, RetentionPolicy, RetentionSummary};
use swath_domain::{MowerId, StateOutcome, TelemetryRows};
use tokio::sync::watch;

/// Makes stores for the suite.
#[async_trait]
pub trait RetentionFactory: Send + Sync {
    /// A fresh, empty store and its retention side.
    async fn fresh(&self) -> (TestStore, Arc<dyn RetentionStore>);
    /// The retention side of another replica on the same data (its own connections).
    async fn replica(&self, store: &TestStore) -> Arc<dyn RetentionStore>;
}

/// The instant every scenario runs retention at: not on a minute, so that the limits are not
/// either (a minute straddles each of them).
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 30).unwrap()
}

pub fn cutoffs() -> Cutoffs {
    RetentionPolicy::default().cutoffs(now())
}

/// A seeded store, the ingest use case and retention on a manual clock at [`now`].
pub struct Harness {
    pub store: TestStore,
    pub retention_store: Arc<dyn RetentionStore>,
    pub ingest: Ingest,
    pub clock: Arc<ManualClock>,
    pub fleet: Fleet,
}

impl Harness {
    pub async fn new(factory: &dyn RetentionFactory) -> Self {
        let (store, retention_store) = factory.fresh().await;
        let fleet = Fleet::new();
        fleet
            .seed(store.directory.as_ref(), DEFAULT_THRESHOLD)
            .await;
        let clock = Arc::new(ManualClock::new(now()));
        let ingest = Ingest::new(
            store.telemetry.clone(),
            Arc::new(RecordingBus::default()),
            clock.clone(),
        );
        Self {
            store,
            retention_store,
            ingest,
            clock,
            fleet,
        }
    }

    pub fn retention(&self) -> Retention {
        self.retention_on(self.retention_store.clone())
    }

    pub fn retention_on(&self, store: Arc<dyn RetentionStore>) -> Retention {
        Retention::new(store, self.clock.clone(), RetentionPolicy::default())
    }

    /// Stores one mowing state (with a position) per instant, for `mower`, in batches of 200.
    pub async fn store_states(&self, mower: MowerId, instants: &[DateTime<Utc>]) {
        let account = self.fleet.account_of(mower);
        let reports: Vec<Value> = instants
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({
                    "mower_id": mower.0,
                    "account_id": account.0,
                    "observed_at": t.to_rfc3339_opts(SecondsFormat::Micros, true),
                    "activity": "mowing",
                    "battery_percent": 50,
                    "position": {"lat": 52.5 + i as f64 * 1e-5, "lon": 13.4},
                })
            })
            .collect();
        for batch in reports.chunks(200) {
            let parsed = batch
                .iter()
                .map(|r| self.ingest.parse(r.to_string().as_bytes()))
                .collect();
            let outcomes = self.ingest.record_states(parsed).await.expect("stored");
            assert!(
                outcomes.iter().all(|o| *o == StateOutcome::Stored),
                "every state is stored: {outcomes:?}"
            );
        }
    }

    pub async fn rows(&self) -> TelemetryRows {
        self.store
            .telemetry
            .export(&self.fleet.mowers)
            .await
            .expect("export")
    }

    /// Runs retention to the end and answers its summary.
    pub async fn run(&self, dry_run: bool) -> RetentionSummary {
        match self
            .retention()
            .run(
                RunOptions {
                    dry_run,
                    stop: None,
                },
                &mut |_| {},
            )
            .await
            .expect("retention runs")
        {
            RetentionOutcome::Completed(summary) => summary,
            other => panic!("expected a completed run, got {other:?}"),
        }
    }
}

fn position_instants(rows: &TelemetryRows, mower: MowerId) -> Vec<DateTime<Utc>> {
    rows.positions
        .iter()
        .filter(|p| p.mower_id == mower)
        .map(|p| p.observed_at)
        .collect()
}

fn history_instants(rows: &TelemetryRows, mower: MowerId) -> Vec<DateTime<Utc>> {
    rows.history
        .iter()
        .filter(|h| h.mower_id == mower)
        .map(|h| h.observed_at)
        .collect()
}

fn us(n: i64) -> Duration {
    Duration::microseconds(n)
}

fn s(n: i64) -> Duration {
    Duration::seconds(n)
}

/// Instants of rows, in order.
pub type Instants = Vec<DateTime<Utc>>;

/// The boundary scenario's rows: (every stored instant, the positions expected after retention,
/// the history rows expected after retention).
pub fn boundary_trace() -> (Instants, Instants, Instants) {
    let c = cutoffs();
    let (keep, full) = (c.positions_before, c.downsample_before);
    // `keep` and `full` are at hh:mm:30.
    let dense_minute = Utc.with_ymd_and_hms(2026, 3, 15, 10, 7, 0).unwrap();
    let late_first = Utc.with_ymd_and_hms(2026, 3, 15, 10, 9, 15).unwrap();
    let stored = vec![
        // In the DEFAULT partition on PostgreSQL (no partition that old): gone.
        Utc.with_ymd_and_hms(2019, 5, 1, 8, 0, 0).unwrap(),
        // A month entirely past the limit (a partition dropped whole on PostgreSQL): gone.
        Utc.with_ymd_and_hms(2025, 10, 10, 9, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2025, 10, 10, 9, 0, 1).unwrap(),
        // The track limit: older goes, the row at it stays. The minute of `keep` has a row
        // that expires (:10) and one at the limit (:30): the latter is the first to stay, so it
        // stays; :40 is downsampled away.
        keep - s(20),
        keep - us(1),
        keep,
        keep + s(10),
        // A dense minute: only its first row stays.
        dense_minute,
        dense_minute + Duration::milliseconds(500),
        dense_minute + s(30),
        dense_minute + s(59) + us(999_999),
        dense_minute + s(60),
        // A minute whose first row is not on the minute.
        late_first,
        late_first + s(30),
        // The full-resolution limit: older is downsampled (:29.999999 has :10 before it), the
        // row at the limit and newer ones stay.
        full - s(20),
        full - us(1),
        full,
        full + s(10),
        // Recent rows at full resolution.
        c.now - s(50),
        c.now - s(40),
        c.now - s(30),
    ];
    let positions = vec![
        keep,
        dense_minute,
        dense_minute + s(60),
        late_first,
        full - s(20),
        full,
        full + s(10),
        c.now - s(50),
        c.now - s(40),
        c.now - s(30),
    ];
    let history: Vec<DateTime<Utc>> = stored
        .iter()
        .copied()
        .filter(|t| *t >= c.history_before)
        .collect();
    (stored, positions, history)
}

/// Rows at the limits are kept or dropped exactly; downsampling keeps the first point of each
/// minute; latest rows, health and day totals are untouched; a dry run counts exactly what the
/// real run then deletes and changes nothing.
pub async fn boundaries(factory: &dyn RetentionFactory) {
    let h = Harness::new(factory).await;
    let (stored, positions, history) = boundary_trace();
    let [m0, _, m2] = h.fleet.mowers;
    h.store_states(m0, &stored).await;
    // Another mower with rows in the same minutes: its own first points stay.
    h.store_states(m2, &stored).await;
    let before = h.rows().await;
    assert_eq!(position_instants(&before, m0), stored, "all stored first");

    let dry = h.run(true).await;
    assert_eq!(h.rows().await, before, "a dry run changes nothing");

    let summary = h.run(false).await;
    let after = h.rows().await;
    for mower in [m0, m2] {
        assert_eq!(
            position_instants(&after, mower),
            positions,
            "positions kept"
        );
        assert_eq!(history_instants(&after, mower), history, "history kept");
    }
    assert_eq!(after.latest, before.latest, "latest rows are kept");
    assert_eq!(after.health, before.health, "health totals are kept");
    assert_eq!(after.days, before.days, "day totals are kept");

    // What went in chunks plus what went with whole partitions is every row that went. A
    // partition's row count in the summary is the planner's estimate (PostgreSQL), so the rows
    // it held are counted from what was stored: the two mowers' instants in its range.
    let in_partitions = |s: &RetentionSummary, table: &str| -> u64 {
        s.partitions_dropped
            .iter()
            .filter(|(p, _)| p.table.name() == table)
            .map(|(p, _)| {
                2 * stored
                    .iter()
                    .filter(|t| p.start <= **t && **t < p.end)
                    .count()
            })
            .sum::<usize>() as u64
    };
    let gone_positions = 2 * (stored.len() - positions.len()) as u64;
    let gone_history = 2 * (stored.len() - history.len()) as u64;
    assert_eq!(
        summary.positions_expired
            + summary.positions_downsampled
            + in_partitions(&summary, "positions"),
        gone_positions,
        "positions gone in chunks and with partitions: {summary:?}"
    );
    assert_eq!(
        summary.history_expired + in_partitions(&summary, "history"),
        gone_history,
        "history gone in chunks and with partitions: {summary:?}"
    );
    assert_eq!(summary.positions_downsampled, 2 * 6, "downsampled rows");
    assert_eq!(
        dry.positions_downsampled, summary.positions_downsampled,
        "the dry run counted what the run deleted"
    );
    assert_eq!(dry.history_expired, summary.history_expired);
    assert_eq!(dry.positions_expired, summary.positions_expired);
    assert_eq!(
        dry.partitions_dropped
            .iter()
            .map(|(p, _)| &p.name)
            .collect::<Vec<_>>(),
        summary
            .partitions_dropped
            .iter()
            .map(|(p, _)| &p.name)
            .collect::<Vec<_>>()
    );

    // Idempotent: a second run at the same instant finds nothing to do.
    let again = h.run(false).await;
    assert_eq!(again.rows_deleted(), 0, "nothing left: {again:?}");
    assert!(again.partitions_dropped.is_empty());
    assert_eq!(h.rows().await, after);
}

/// Downsampling a dense track (a position every 7 s for two hours, 60 days ago) keeps exactly
/// the first position of each minute; the same track 10 days ago is kept whole.
pub async fn first_point_of_each_minute(factory: &dyn RetentionFactory) {
    let h = Harness::new(factory).await;
    let [m0, m1, _] = h.fleet.mowers;
    let old_start = now() - Duration::days(60) + s(13);
    let old: Vec<_> = (0..1029).map(|i| old_start + s(7 * i)).collect();
    let recent: Vec<_> = (0..1029)
        .map(|i| now() - Duration::days(10) + s(7 * i))
        .collect();
    h.store_states(m0, &old).await;
    h.store_states(m1, &recent).await;

    let mut expected = Vec::new();
    let mut minutes = BTreeSet::new();
    for t in &old {
        // The instants are in order, so the first of each minute is met first.
        if minutes.insert(t.timestamp().div_euclid(60)) {
            expected.push(*t);
        }
    }
    h.run(false).await;
    let rows = h.rows().await;
    assert_eq!(position_instants(&rows, m0), expected);
    assert_eq!(position_instants(&rows, m1), recent, "full resolution");
    assert_eq!(
        history_instants(&rows, m0),
        old,
        "history is not downsampled"
    );
}

/// The steps after which [`interrupted_runs_resume`] stops a run: the first steps one by one (the
/// partition drops and the first downsampling slices), one inside the downsampling, one past its
/// first mark, and one late in the expiry. The same for every adapter.
pub const STOP_AFTER: [u64; 8] = [1, 2, 3, 4, 5, 26, 40, 300];

/// Stops a run after each of [`STOP_AFTER`] steps, then runs again: the rows end as after one
/// uninterrupted run on the same data, and the two runs together delete what the one run deleted
/// (nothing twice).
pub async fn interrupted_runs_resume(factory: &dyn RetentionFactory) {
    for stop_after in STOP_AFTER {
        interrupted_run_resumes(factory, stop_after).await;
    }
}

/// [`interrupted_runs_resume`] for one stop.
async fn interrupted_run_resumes(factory: &dyn RetentionFactory, stop_after: u64) {
    let interrupted = Harness::new(factory).await;
    let whole = Harness::new(factory).await;
    let (stored, _, _) = boundary_trace();
    for h in [&interrupted, &whole] {
        for mower in h.fleet.mowers {
            h.store_states(mower, &stored).await;
        }
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    // Each time the watermark moved, a `Mark` step finished a downsampling slice: those slices
    // are not planned again.
    let mut watermark = None;
    let mut marks = 0u64;
    let first = interrupted
        .retention()
        .run(
            RunOptions {
                dry_run: false,
                stop: Some(stop_rx),
            },
            &mut |progress| {
                if progress.steps_done > 0 && progress.downsampled_until != watermark {
                    marks += 1;
                }
                watermark = progress.downsampled_until;
                if progress.steps_done >= stop_after {
                    let _ = stop_tx.send(true);
                }
            },
        )
        .await
        .expect("first run");
    let RetentionOutcome::Interrupted(first) = first else {
        panic!("the first run was stopped: {first:?}");
    };
    assert_eq!(first.steps_done, stop_after);
    let second = interrupted.run(false).await;
    // The second run plans exactly what is left: the partitions not dropped yet and the slices
    // behind the watermark are planned again, the chunked expiry is (it is idempotent); the
    // dropped partitions and the marked slices (a step per chunk of mowers, and the mark) are
    // not.
    let chunks = interrupted.fleet.mowers.len().div_ceil(MOWERS_PER_CHUNK) as u64;
    assert_eq!(
        second.steps_planned,
        first.steps_planned - first.partitions_dropped.len() as u64 - marks * (chunks + 1),
        "the second run resumes behind the watermark (stopped after {stop_after}: {} \
         partitions dropped, {marks} slices marked)",
        first.partitions_dropped.len()
    );
    let reference = whole.run(false).await;

    assert_eq!(interrupted.rows().await, whole.rows().await, "no loss");
    assert_eq!(
        first.rows_deleted() + second.rows_deleted(),
        reference.rows_deleted(),
        "nothing deleted twice"
    );
    let names = |s: &RetentionSummary| -> Vec<String> {
        s.partitions_dropped
            .iter()
            .map(|(p, _)| p.name.clone())
            .collect()
    };
    let mut both = names(&first);
    both.extend(names(&second));
    assert_eq!(both, names(&reference), "every partition dropped once");
}

/// Two runs at once (two replicas): while one holds the lock the other skips; started together,
/// the work is done once.
pub async fn concurrent_runs_do_the_work_once(factory: &dyn RetentionFactory) {
    let h = Harness::new(factory).await;
    let (stored, positions, _) = boundary_trace();
    for mower in h.fleet.mowers {
        h.store_states(mower, &stored).await;
    }
    let replica = factory.replica(&h.store).await;

    // Held by the other replica: this run skips and changes nothing.
    let before = h.rows().await;
    let held = replica.try_lock().await.expect("lock").expect("free");
    let skipped = h
        .retention()
        .run(RunOptions::default(), &mut |_| {})
        .await
        .expect("run");
    assert_eq!(skipped, RetentionOutcome::Skipped);
    assert_eq!(h.rows().await, before);
    held.release().await.expect("release");

    // Both at once: the lock decides; the rows deleted add up to one run's.
    let mine = h.retention();
    let theirs = h.retention_on(replica);
    let (mut quiet_a, mut quiet_b) = (|_: &RetentionSummary| {}, |_: &RetentionSummary| {});
    let (a, b) = tokio::join!(
        mine.run(RunOptions::default(), &mut quiet_a),
        theirs.run(RunOptions::default(), &mut quiet_b)
    );
    let outcomes = [a.expect("run a"), b.expect("run b")];
    let summaries: Vec<&RetentionSummary> = outcomes
        .iter()
        .filter_map(|o| match o {
            RetentionOutcome::Completed(s) => Some(s),
            RetentionOutcome::Skipped => None,
            RetentionOutcome::Interrupted(_) => panic!("not stopped"),
        })
        .collect();
    assert!(!summaries.is_empty(), "one run did the work");
    let deleted: u64 = summaries.iter().map(|s| s.positions_downsampled).sum();
    assert_eq!(deleted, 3 * 6, "downsampled once");
    let dropped: Vec<&String> = summaries
        .iter()
        .flat_map(|s| s.partitions_dropped.iter().map(|(p, _)| &p.name))
        .collect();
    let unique: BTreeSet<&String> = dropped.iter().copied().collect();
    assert_eq!(dropped.len(), unique.len(), "no partition dropped twice");
    let rows = h.rows().await;
    for mower in h.fleet.mowers {
        assert_eq!(position_instants(&rows, mower), positions);
    }
}

/// A run whose task is dropped mid-way (aborted, never released) does not keep the lock.
pub async fn an_abandoned_run_releases_the_lock(factory: &dyn RetentionFactory) {
    let h = Harness::new(factory).await;
    let run = h
        .retention_store
        .try_lock()
        .await
        .expect("lock")
        .expect("free");
    assert!(
        h.retention_store.try_lock().await.expect("lock").is_none(),
        "held"
    );
    drop(run);
    // PostgreSQL ends the closed session's locks as soon as it notices; allow it a moment.
    for _ in 0..50 {
        if let Some(run) = h.retention_store.try_lock().await.expect("lock") {
            run.release().await.expect("release");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the lock of an abandoned run was never released");
}

/// A late state is merged only where retention cannot have removed one of its neighbours (docs/rules.md
/// §3, W4; decision 39): next to recent states it is merged, next to expired history it is
/// stored but counts nothing, and a redelivered expired state is not counted twice.
pub async fn late_states_after_retention(factory: &dyn RetentionFactory) {
    let h = Harness::new(factory).await;
    let c = cutoffs();
    let m1 = h.fleet.mowers[1];
    let hb = c.history_before;
    // A and B expire; C is the oldest history row kept (B→C, 2 minutes, was counted).
    let (a, b, cc) = (hb - s(120), hb - s(60), hb + s(60));
    let (d, e, f) = (c.now - s(180), c.now - s(120), c.now - s(60));
    h.store_states(m1, &[a, b, cc, d, e, f]).await;
    h.run(false).await;
    assert_eq!(history_instants(&h.rows().await, m1), vec![cc, d, e, f]);
    let health = || async { h.store.telemetry.health(m1).await.unwrap().unwrap() };
    let before = health().await;
    let docked = |t: DateTime<Utc>| {
        json!({
            "mower_id": m1.0,
            "account_id": h.fleet.account_of(m1).0,
            "observed_at": t.to_rfc3339_opts(SecondsFormat::Micros, true),
            "activity": "docked",
        })
    };
    let ingest = &h.ingest;
    let record = |reports: Vec<Value>| {
        let parsed = reports
            .iter()
            .map(|r| ingest.parse(r.to_string().as_bytes()))
            .collect();
        async move { ingest.record_counted(parsed).await.expect("stored").1 }
    };

    // Between A and B, and between B and C: a removed state could be (is) next to them.
    let counts = record(vec![docked(hb - s(90)), docked(hb + s(30))]).await;
    assert_eq!((counts.late_not_counted, counts.late_merged), (2, 0));
    assert_eq!(health().await, before, "nothing counted");
    // B again (its history row expired): stored again, not counted twice.
    let counts = record(vec![docked(b)]).await;
    assert_eq!((counts.late_not_counted, counts.duplicates), (1, 0));
    assert_eq!(health().await, before);

    // Between D and E (both kept): merged. D→L is 30 s of mowing, L→E (docked) none: D→E's
    // 60 s are taken back.
    let counts = record(vec![docked(d + s(30))]).await;
    assert_eq!(counts.late_merged, 1);
    let after = health().await;
    assert_eq!(after.mowing_ms, before.mowing_ms - 30_000);
    assert_eq!(after.counted_until, before.counted_until);
    let days = h.rows().await.days;
    let states: i64 = days
        .iter()
        .filter(|d| d.mower_id == m1)
        .map(|d| d.state_count)
        .sum();
    assert_eq!(states, 7, "six states, and the merged one");
}

/// W8's sessions outlive history (`SWATH_SESSIONS_KEEP_DAYS`, at least the history's days):
/// retention deletes the sessions that ended before their limit, never a mower's newest, and
/// keeps the others as they were folded, also once their states are gone; a late state whose
/// session window reaches below the history floor leaves them as they are (decisions 200, 201).
pub async fn sessions_outlive_history_and_are_never_refolded_from_what_is_left(
    factory: &dyn RetentionFactory,
) {
    let h = Harness::new(factory).await;
    let c = cutoffs();
    let (m0, m1) = (h.fleet.mowers[0], h.fleet.mowers[1]);
    let run = |m: MowerId, start: DateTime<Utc>| -> Vec<(MowerId, DateTime<Utc>, &'static str)> {
        vec![
            (m, start, "mowing"),
            (m, start + s(60), "mowing"),
            (m, start + s(120), "returning"),
            (m, start + s(180), "docked"),
        ]
    };
    let ancient = c.sessions_before - Duration::days(30);
    let old = c.history_before - Duration::days(30);
    let recent = c.now - Duration::days(1);
    let mut states = run(m0, ancient);
    states.extend(run(m0, old));
    states.extend(run(m0, recent));
    states.extend(run(m1, ancient));
    let reports: Vec<Value> = states
        .iter()
        .map(|(m, t, activity)| {
            json!({
                "mower_id": m.0,
                "account_id": h.fleet.account_of(*m).0,
                "observed_at": t.to_rfc3339_opts(SecondsFormat::Micros, true),
                "activity": activity,
                "blade_on": *activity == "mowing",
            })
        })
        .collect();
    let ingest = &h.ingest;
    let record = |reports: Vec<Value>| async move {
        let parsed = reports
            .iter()
            .map(|r| ingest.parse(r.to_string().as_bytes()))
            .collect();
        let outcomes = ingest.record_states(parsed).await.expect("stored");
        assert!(outcomes.iter().all(|o| *o == StateOutcome::Stored));
    };
    record(reports).await;
    let sessions = || async {
        h.rows()
            .await
            .sessions
            .into_iter()
            .map(|r| {
                (
                    r.session.mower_id,
                    r.session.started_at,
                    r.session.mowing_ms,
                )
            })
            .collect::<Vec<_>>()
    };
    let folded = sessions().await;
    assert_eq!(
        folded,
        vec![
            (m0, ancient, 120_000),
            (m0, old, 120_000),
            (m0, recent, 120_000),
            (m1, ancient, 120_000)
        ]
    );
    assert_eq!(h.run(true).await.sessions_expired, 1, "a dry run counts");
    assert_eq!(sessions().await, folded, "and deletes nothing");
    assert_eq!(h.run(false).await.sessions_expired, 1);
    let kept = sessions().await;
    assert_eq!(
        kept,
        vec![folded[1], folded[2], folded[3]],
        "the ancient one goes; m1's, as ancient, is its newest and stays"
    );
    assert!(
        history_instants(&h.rows().await, m0)
            .iter()
            .all(|t| *t >= c.history_before),
        "the old session's states are gone, the session stays"
    );
    // A late state inside the old session, whose states retention removed: its window begins
    // below the history floor, so the session is not folded again from what is left.
    let late = json!({
        "mower_id": m0.0,
        "account_id": h.fleet.account_of(m0).0,
        "observed_at": (old + s(90)).to_rfc3339_opts(SecondsFormat::Micros, true),
        "activity": "docked",
    });
    record(vec![late]).await;
    assert_eq!(sessions().await, kept, "no session changes");
}
