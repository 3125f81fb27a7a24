//! Batched in-memory ingest, in process: states/s through `Ingest::record_states` on the memory
//! store, batched (64 per batch, the default) and one state per batch, from parsed reports and
//! from JSON bytes. Prints medians of several runs and the batched / one-at-a-time ratio.
//!
//! Run: `cargo bench -p swath-tests --bench ingest_memory` (optional args: states per run, runs).

use std::sync::Arc;
use std::time::Instant;
use swath_application::ports::ManualClock;
use swath_application::Ingest;
use swath_domain::{InvalidReport, StateReport};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_tests::support::{seed_account_with_mowers, RecordingBus};
use swath_tests::traces::ingest_clock;

mod common;
mod stats;
use stats::median;

mod args;
use args::Args;

const MOWERS: usize = 200;
const BATCH: usize = 64;

struct Bench {
    ingest: Ingest,
    payloads: Vec<Vec<u8>>,
}

async fn setup(states: usize) -> Bench {
    let store = Arc::new(MemoryStore::new(MemoryStoreSettings {
        history_per_mower: states / MOWERS + 1,
    }));
    let (account, mowers) = seed_account_with_mowers(store.as_ref(), MOWERS, i64::MAX).await;
    let payloads = common::mowing_payloads(account, &mowers, states);
    let bus = Arc::new(RecordingBus::default());
    let clock = Arc::new(ManualClock::new(ingest_clock()));
    Bench {
        ingest: Ingest::new(store, bus, clock),
        payloads,
    }
}

/// States/s storing pre-parsed reports in batches of `batch`.
async fn run_parsed(states: usize, batch: usize) -> f64 {
    let bench = setup(states).await;
    let mut batches: Vec<Vec<Result<StateReport, InvalidReport>>> = bench
        .payloads
        .chunks(batch)
        .map(|c| c.iter().map(|p| bench.ingest.parse(p)).collect())
        .collect();
    let start = Instant::now();
    for b in batches.drain(..) {
        bench.ingest.record_states(b).await.unwrap();
    }
    states as f64 / start.elapsed().as_secs_f64()
}

/// States/s from JSON bytes: parsing and validation included.
async fn run_bytes(states: usize, batch: usize) -> f64 {
    let bench = setup(states).await;
    let start = Instant::now();
    for chunk in bench.payloads.chunks(batch) {
        let b = chunk.iter().map(|p| bench.ingest.parse(p)).collect();
        bench.ingest.record_states(b).await.unwrap();
    }
    states as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let args = Args::new(|a| !a.starts_with('-'));
    let states: usize = args.get(0, 400_000);
    let runs: usize = args.get(1, 5);
    let rt = swath_tests::support::current_thread_runtime();

    let mut parsed = Vec::new();
    let mut bytes = Vec::new();
    let mut single = Vec::new();
    // Runs interleave the variants so that noise from the shared machine hits them alike.
    for _ in 0..runs {
        parsed.push(rt.block_on(run_parsed(states, BATCH)));
        bytes.push(rt.block_on(run_bytes(states, BATCH)));
        single.push(rt.block_on(run_parsed(states / 4, 1)));
    }
    let (parsed, bytes, single) = (median(parsed), median(bytes), median(single));
    println!("memory store, {MOWERS} mowers, {states} states per run, median of {runs} runs");
    println!("batched ({BATCH}/batch), parsed reports : {parsed:>12.0} states/s");
    println!("batched ({BATCH}/batch), from JSON bytes: {bytes:>12.0} states/s");
    println!("one state per batch, parsed reports : {single:>12.0} states/s");
    println!(
        "batched / one at a time             : {:>12.1}x",
        parsed / single
    );
}
