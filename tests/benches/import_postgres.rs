//! PostgreSQL history import (issue 34's import target): `swath import` of a day of the demo
//! fleet's history into an empty store, against the same import into a store that already holds
//! the next day, side by side in every run. Next to the stored day every imported state is late
//! (its mower has newer states stored), so each batch reads its states' stored neighbours before
//! it writes: this is what the bench puts a price on.
//!
//! A bench of its own rather than a fourth case of `ingest_postgres`: that one measures the live
//! path (`Ingest::record_counted`, 64 per batch) on synthetic states and takes a count of states;
//! this one measures the import use case (`import_ndjson`, 200 per transaction) on the demo
//! fleet's own history and takes hours, and the import's before/after is judged on it alone.
//!
//! The states are the ones `swath simulate --sim-seed 34` writes: [`replay`] of a seeded demo
//! fleet (20 mowers unless asked, one state a second and one at each change), serialised to NDJSON
//! in memory and read back by [`import_ndjson`], parsing included, as `swath import` reads a file.
//! Day D starts at midnight UTC; "the next day" is the same hours 24 h later, replayed on its own
//! (as a second `swath simulate` would give it). A whole day (24 h, 1.7 million states a case for
//! 20 mowers) takes minutes a case on a small machine, so the hours are an argument; the default
//! keeps a case under a minute on 2 shared cores. With fewer than 24 hours the next day is not
//! adjacent, which changes what the neighbour reads find, not how many there are.
//!
//! Each run, on fresh databases (the fleet's directory seeded, nothing else):
//! 1. *into empty*: day D imported, timed; then the next day imported after it, not timed, which
//!    gives the totals of both days stored in order;
//! 2. *next to a stored day*: the next day imported, not timed; then day D imported, timed.
//!
//! Checks: every state stored, none refused; in (1) every state of D in order, in (2) every one
//! merged late; both stores end with both days' history rows, and with the same day and health
//! totals, mower by mower (the write rules fold a mower's states in `observed_at` order whatever
//! order they arrive in, docs/rules.md §3). The two cases swap order from one run to the next, so
//! that a machine getting busier does not weigh on one of them only.
//!
//! Run: `SWATH_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!       cargo bench -p swath-tests --bench import_postgres` (optional args: hours, runs, mowers).

use chrono::{DateTime, Duration, TimeZone, Utc};
use sqlx::Row;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use swath_application::import_lines::{import_ndjson, ImportSummary, IMPORT_BATCH};
use swath_application::ports::ManualClock;
use swath_application::Ingest;
use swath_memory::{MemoryBus, MemoryBusSettings};
use swath_postgres::PostgresStore;
use swath_simulator::{replay, seed_demo_fleet, DemoFleet, SimulatorSettings};
use swath_tests::postgres::{database_url_from_env, PostgresFactory};

mod args;
use args::Args;
mod stats;
use stats::median;

/// Day D's first instant. June: the months the migrations partition (as the other benches' states).
fn day_d() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap()
}

/// A day's states as `swath simulate` writes them.
struct History {
    ndjson: Vec<u8>,
    states: u64,
}

fn history(
    fleet: &DemoFleet,
    settings: &SimulatorSettings,
    from: DateTime<Utc>,
    hours: f64,
) -> History {
    let to = from + Duration::milliseconds((hours * 3_600_000.0) as i64);
    let (mut ndjson, mut states) = (Vec::new(), 0);
    replay(fleet, settings, from, to, |report| {
        serde_json::to_writer(&mut ndjson, report).unwrap();
        ndjson.push(b'\n');
        states += 1;
    });
    History { ndjson, states }
}

/// A fresh store with the demo fleet's directory, and the fleet (the same ids every time: seeded).
async fn fleet_store(
    factory: &PostgresFactory,
    settings: &SimulatorSettings,
) -> (PostgresStore, DemoFleet) {
    let store = factory.fresh_store().await;
    let fleet = seed_demo_fleet(&store, settings).await.unwrap();
    (store, fleet)
}

/// One import, as `swath import` wires it: an in-process bus (derived events page no one), and a
/// clock past both days, so that no state is in its future.
async fn import(store: &PostgresStore, history: &History) -> Timed {
    let ingest = Ingest::new(
        Arc::new(store.clone()),
        Arc::new(MemoryBus::new(MemoryBusSettings::default())),
        Arc::new(ManualClock::new(day_d() + Duration::days(3))),
    );
    let statements = store.counters().statements();
    let commits = store.counters().commits();
    let start = Instant::now();
    let summary = import_ndjson(&ingest, &history.ndjson[..], |_| {})
        .await
        .unwrap();
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(summary.reports, history.states, "every line read");
    assert_eq!(summary.stored, history.states, "every state stored");
    assert_eq!(summary.refused_count(), 0, "nothing refused");
    let batches = history.states.div_ceil(IMPORT_BATCH as u64) as f64;
    Timed {
        states_per_s: history.states as f64 / elapsed,
        statements_per_batch: (store.counters().statements() - statements) as f64 / batches,
        commits_per_batch: (store.counters().commits() - commits) as f64 / batches,
        summary,
    }
}

struct Timed {
    states_per_s: f64,
    statements_per_batch: f64,
    commits_per_batch: f64,
    summary: ImportSummary,
}

/// What a store ends with, to compare two stores: history rows, then every mower's day rows and
/// health totals.
#[derive(Debug, PartialEq)]
struct Totals {
    history_rows: i64,
    days: BTreeMap<(uuid::Uuid, chrono::NaiveDate), [i64; 6]>,
    health: BTreeMap<uuid::Uuid, [i64; 5]>,
}

async fn totals(store: &PostgresStore) -> Totals {
    let pool = store.pool();
    let history_rows: i64 = sqlx::query("SELECT count(*) FROM state_history")
        .fetch_one(pool)
        .await
        .unwrap()
        .get(0);
    let days = sqlx::query(
        "SELECT mower_id, day, mowing_ms, blade_ms, distance_mm, error_count, charge_count, \
         state_count FROM day_totals",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .iter()
    .map(|r| {
        (
            (r.get(0), r.get(1)),
            [r.get(2), r.get(3), r.get(4), r.get(5), r.get(6), r.get(7)],
        )
    })
    .collect();
    let health = sqlx::query(
        "SELECT mower_id, mowing_ms, blade_ms, distance_mm, error_count, charge_count \
         FROM health_totals",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), [r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)]))
    .collect();
    Totals {
        history_rows,
        days,
        health,
    }
}

/// Case 1: day D into an empty store (timed), then the next day after it.
async fn into_empty(
    factory: &PostgresFactory,
    settings: &SimulatorSettings,
    d: &History,
    next: &History,
) -> (Timed, Totals) {
    let (store, _) = fleet_store(factory, settings).await;
    let timed = import(&store, d).await;
    assert_eq!(
        timed.summary.counts.in_order, d.states,
        "into empty: in order"
    );
    import(&store, next).await;
    (timed, totals(&store).await)
}

/// Case 2: the next day first, then day D (timed).
async fn next_to_stored(
    factory: &PostgresFactory,
    settings: &SimulatorSettings,
    d: &History,
    next: &History,
) -> (Timed, Totals) {
    let (store, _) = fleet_store(factory, settings).await;
    import(&store, next).await;
    let timed = import(&store, d).await;
    assert_eq!(
        timed.summary.counts.late_merged, d.states,
        "next to a stored day: every state merged late"
    );
    (timed, totals(&store).await)
}

fn main() {
    let Some(url) = database_url_from_env() else {
        eprintln!("SWATH_TEST_DATABASE_URL is not set: nothing to measure.");
        return;
    };
    let args = Args::new(|a| !a.starts_with('-'));
    let hours: f64 = args.get(0, 2.0);
    let runs: usize = args.get(1, 3);
    let mowers: usize = args.get(2, 20);
    let settings = SimulatorSettings {
        mowers,
        seed: Some(34),
        ..SimulatorSettings::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let factory = PostgresFactory::new(url);
    // The fleet's ids come from the seed: one replay serves every store.
    let (_, fleet) = rt.block_on(fleet_store(&factory, &settings));
    let d = history(&fleet, &settings, day_d(), hours);
    let next = history(&fleet, &settings, day_d() + Duration::days(1), hours);

    let (mut empty, mut stored) = (vec![], vec![]);
    let (mut empty_statements, mut stored_statements) = (vec![], vec![]);
    let mut commits = vec![];
    for run in 0..runs {
        let cases = if run % 2 == 0 { [1, 2] } else { [2, 1] };
        let (mut a, mut b) = (None, None);
        for case in cases {
            match case {
                1 => a = Some(rt.block_on(into_empty(&factory, &settings, &d, &next))),
                _ => b = Some(rt.block_on(next_to_stored(&factory, &settings, &d, &next))),
            }
        }
        let ((a, a_totals), (b, b_totals)) = (a.unwrap(), b.unwrap());
        assert_eq!(
            a_totals.history_rows as u64,
            d.states + next.states,
            "both days' history rows"
        );
        assert!(
            a_totals == b_totals,
            "the same totals whatever the order of the days"
        );
        println!(
            "run {}: into empty {:.0} states/s, next to a stored day {:.0} states/s ({:.2}x)",
            run + 1,
            a.states_per_s,
            b.states_per_s,
            b.states_per_s / a.states_per_s
        );
        empty.push(a.states_per_s);
        stored.push(b.states_per_s);
        empty_statements.push(a.statements_per_batch);
        stored_statements.push(b.statements_per_batch);
        commits.push(a.commits_per_batch.max(b.commits_per_batch));
    }
    let ratios: Vec<f64> = stored.iter().zip(&empty).map(|(s, e)| s / e).collect();
    let (empty, stored, ratio) = (median(empty), median(stored), median(ratios));
    let (s1, s2) = (median(empty_statements), median(stored_statements));
    println!(
        "PostgreSQL import ({IMPORT_BATCH}/transaction), demo fleet of {mowers} mowers, {hours} h \
         of day D ({} states; the next day {}), median of {runs} runs",
        d.states, next.states
    );
    println!("into empty                 : {empty:>10.0} states/s, {s1:.2} statements/batch");
    println!("next to a stored day       : {stored:>10.0} states/s, {s2:.2} statements/batch");
    println!(
        "next to stored / empty     : {:>10.2}x (median of the runs' ratios; target >= 0.80)",
        ratio
    );
    println!(
        "commits per batch (max)    : {:>10.2}",
        commits.iter().copied().fold(0.0, f64::max)
    );
    drop(factory);
}
