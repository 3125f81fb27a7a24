//! PostgreSQL ingest, in process: states/s through `Ingest::record_states` batched (64 per
//! batch) against one state per transaction, in the same run, with commits per state; the same
//! batched states with 10 % and 50 % of them arriving late (merged into the totals, docs/rules.md §3
//! W4); and the physical limit: the same history and position rows written by a raw `COPY`.
//!
//! Run: `SWATH_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!       cargo bench -p swath-tests --bench ingest_postgres` (optional args: states per run, runs, batch size).
//! Each run uses a fresh database.

use chrono::Duration;
use sqlx::Row;
use std::sync::Arc;
use std::time::Instant;
use swath_application::ports::ManualClock;
use swath_application::Ingest;
use swath_tests::postgres::{database_url_from_env, PostgresFactory};
use swath_tests::support::{seed_account_with_mowers, trace_start, RecordingBus};
use swath_tests::traces::ingest_clock;

mod common;
mod stats;
use stats::median;

mod args;
use args::Args;

const MOWERS: usize = 200;
/// The default batch size (`SWATH_TELEMETRY_INGEST_BATCH_MAX`).
const BATCH: usize = 64;

/// The arrival order of `states` states when `late_percent` of them arrive late: those are held
/// back by 400 states (two reports of every mower), so that their mower has newer states stored
/// by then, and are merged between their neighbours. The others keep their order.
fn arrival(states: usize, late_percent: usize) -> Vec<usize> {
    let delay = 2 * MOWERS;
    let mut keyed: Vec<(usize, usize)> = (0..states)
        .map(|i| {
            // A fixed pseudo-random choice (Fibonacci hashing of the index), spread over every
            // mower and tick: a mower's next states are held back or not independently.
            let late = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 100 < late_percent;
            if late {
                (2 * (i + delay) + 1, i)
            } else {
                (2 * i, i)
            }
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

struct Figures {
    states_per_s: f64,
    commits_per_state: f64,
    statements_per_batch: f64,
    /// Sum of every mower's mowing time: the same whatever the order (a check, not a figure).
    mowing_ms: i64,
    late_merged: u64,
}

async fn run_ingest(
    factory: &PostgresFactory,
    states: usize,
    batch: usize,
    late_percent: usize,
) -> Figures {
    let store = factory.fresh_store().await;
    let (account, mowers) = seed_account_with_mowers(&store, MOWERS, i64::MAX).await;
    let mut payloads = common::mowing_payloads(account, &mowers, states);
    if late_percent > 0 {
        let mut slots: Vec<Option<Vec<u8>>> = payloads.into_iter().map(Some).collect();
        payloads = arrival(states, late_percent)
            .into_iter()
            .map(|i| slots[i].take().unwrap())
            .collect();
    }
    let ingest = Ingest::new(
        Arc::new(store.clone()),
        Arc::new(RecordingBus::default()),
        Arc::new(ManualClock::new(ingest_clock())),
    );
    let commits = store.counters().commits();
    let statements = store.counters().statements();
    let mut late_merged = 0u64;
    let start = Instant::now();
    for chunk in payloads.chunks(batch) {
        let parsed = chunk.iter().map(|p| ingest.parse(p)).collect();
        let (_, counts) = ingest.record_counted(parsed).await.unwrap();
        late_merged += counts.late_merged;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let stored: i64 = sqlx::query("SELECT count(*) FROM state_history")
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored as usize, states, "every state stored");
    let mowing_ms: i64 = sqlx::query("SELECT sum(mowing_ms)::int8 FROM health_totals")
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get(0);
    let batches = states.div_ceil(batch) as f64;
    Figures {
        states_per_s: states as f64 / elapsed,
        commits_per_state: (store.counters().commits() - commits) as f64 / states as f64,
        statements_per_batch: (store.counters().statements() - statements) as f64 / batches,
        mowing_ms,
        late_merged,
    }
}

/// The same history and position rows, written by `COPY ... FROM STDIN` in one transaction.
async fn run_copy(factory: &PostgresFactory, states: usize) -> f64 {
    let store = factory.fresh_store().await;
    let (_, mowers) = seed_account_with_mowers(&store, MOWERS, i64::MAX).await;
    let mut history = String::new();
    let mut positions = String::new();
    for i in 0..states {
        let tick = (i / MOWERS) as i64;
        let at = (trace_start() + Duration::seconds(tick)).to_rfc3339();
        let mower = mowers[i % MOWERS];
        history.push_str(&format!("{mower}\t{at}\tmowing\t80\t\\N\tt\n"));
        positions.push_str(&format!(
            "{mower}\t{at}\t{}\t13.4\t0.3\t\\N\n",
            52.5 + tick as f64 * 1e-6
        ));
    }
    let start = Instant::now();
    let mut tx = store.pool().begin().await.unwrap();
    for (sql, data) in [
        ("COPY state_history (mower_id, observed_at, activity, battery_percent, error_code, blade_on) FROM STDIN", &history),
        ("COPY positions (mower_id, observed_at, lat, lon, accuracy_m, heading_deg) FROM STDIN", &positions),
    ] {
        let mut copy = tx.copy_in_raw(sql).await.unwrap();
        copy.send(data.as_bytes()).await.unwrap();
        copy.finish().await.unwrap();
    }
    tx.commit().await.unwrap();
    states as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let Some(url) = database_url_from_env() else {
        eprintln!("SWATH_TEST_DATABASE_URL is not set: nothing to measure.");
        return;
    };
    let args = Args::new(|a| !a.starts_with('-'));
    let states: usize = args.get(0, 64_000);
    let runs: usize = args.get(1, 3);
    let batch: usize = args.get(2, BATCH);
    let single_states = (states / 16).max(MOWERS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let factory = PostgresFactory::new(url);
    let (mut batched, mut single, mut copy, mut commits) = (vec![], vec![], vec![], vec![]);
    let (mut late10, mut late50, mut statements) = (vec![], vec![], [vec![], vec![], vec![]]);
    for _ in 0..runs {
        // The three orders side by side, in every run.
        let mut mowing = Vec::new();
        for (k, (late, into)) in [(0, &mut batched), (10, &mut late10), (50, &mut late50)]
            .into_iter()
            .enumerate()
        {
            let f = rt.block_on(run_ingest(&factory, states, batch, late));
            into.push(f.states_per_s);
            statements[k].push(f.statements_per_batch);
            mowing.push(f.mowing_ms);
            // A few held-back states are not late: their mower's next states were held back too.
            let expected = states * late / 100;
            assert!(
                f.late_merged as usize * 100 >= expected * 90,
                "{late} %: {} states merged late",
                f.late_merged
            );
            if late == 0 {
                commits.push(f.commits_per_state);
            }
        }
        assert!(
            mowing.iter().all(|m| *m == mowing[0]),
            "the same totals whatever the order: {mowing:?}"
        );
        single.push(
            rt.block_on(run_ingest(&factory, single_states, 1, 0))
                .states_per_s,
        );
        copy.push(rt.block_on(run_copy(&factory, states)));
    }
    let (batched, single, copy, commits) = (
        median(batched),
        median(single),
        median(copy),
        median(commits),
    );
    let (late10, late50) = (median(late10), median(late50));
    let [s0, s10, s50] = statements.map(median);
    println!("PostgreSQL, {MOWERS} mowers, median of {runs} runs ({states} states batched, {single_states} one per transaction)");
    println!(
        "batched ({batch}/batch)          : {batched:>10.0} states/s, {commits:.4} commits/state, {s0:.2} statements/batch"
    );
    println!(
        "batched, 10 % late         : {late10:>10.0} states/s ({:.2}x in order), {s10:.2} statements/batch",
        late10 / batched
    );
    println!(
        "batched, 50 % late         : {late50:>10.0} states/s ({:.2}x in order), {s50:.2} statements/batch",
        late50 / batched
    );
    println!("one state per transaction  : {single:>10.0} states/s");
    println!("raw COPY of the same rows  : {copy:>10.0} states/s");
    println!("batched / one per txn      : {:>10.1}x", batched / single);
    println!(
        "batched / raw COPY         : {:>10.1}%",
        100.0 * batched / copy
    );
    drop(factory);
}
