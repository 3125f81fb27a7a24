//! What a day of the demo costs the memory store: the resident memory of the default demo fleet
//! (`SWATH_SIM_MOWERS` 20 mowers, one state a second) after 24 simulated hours stored in a
//! `MemoryStore` with the default bound (`SWATH_MEMORY_HISTORY_PER_MOWER`, decision 52).
//!
//! The states are the demo's own: `simulator::replay` of a seeded demo fleet, the history
//! `swath simulate` writes, through `Ingest::record_states` in batches of 64 (the default), as the
//! bus consumer stores them. The replay runs on a thread of its own and hands the reports over a
//! small bounded channel, so that only the store's rows grow, not a day of reports waiting.
//!
//! Prints VmRSS (`/proc/self/status`) before and after, the rows kept, and the bytes per state.
//! RSS includes the allocator's slack, which is what an operator pays.
//!
//! Run: `cargo bench -p swath-tests --bench memory_day` (optional args: hours, mowers).

use chrono::Duration;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use swath_application::ports::{ManualClock, TelemetryStore};
use swath_application::Ingest;
use swath_domain::StateReport;
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_simulator::{replay, seed_demo_fleet, SimulatorSettings};
use swath_tests::support::{trace_start, RecordingBus};
use swath_tests::traces::ingest_clock;

mod args;
use args::Args;

const BATCH: usize = 64;

/// The resident set of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let args = Args::new(|a| !a.starts_with('-'));
    let hours: i64 = args.get(0, 24);
    let mowers: usize = args.get(1, 20);
    let rt = swath_tests::support::current_thread_runtime();

    let store = Arc::new(MemoryStore::new(MemoryStoreSettings::default()));
    let settings = SimulatorSettings {
        mowers,
        seed: Some(1),
        ..SimulatorSettings::default()
    };
    let fleet = rt
        .block_on(seed_demo_fleet(store.as_ref(), &settings))
        .expect("the demo fleet");
    let bus = Arc::new(RecordingBus::default());
    // The day ends at the ingest clock: no state is in its future.
    let clock = Arc::new(ManualClock::new(ingest_clock()));
    let ingest = Ingest::new(store.clone(), bus, clock);
    let (from, to) = (trace_start(), trace_start() + Duration::hours(hours));

    let before = rss_kib();
    let (send, receive) = sync_channel::<StateReport>(4 * BATCH);
    let replayer = {
        let (fleet, settings) = (fleet.clone(), settings.clone());
        std::thread::spawn(move || {
            replay(&fleet, &settings, from, to, |report| {
                send.send(report.clone()).expect("the bench receives");
            })
        })
    };
    let mut states = 0usize;
    let mut batch = Vec::with_capacity(BATCH);
    for report in receive {
        batch.push(Ok(report));
        if batch.len() == BATCH {
            states += batch.len();
            rt.block_on(ingest.record_states(std::mem::take(&mut batch)))
                .expect("the memory store accepts the batch");
        }
    }
    states += batch.len();
    rt.block_on(ingest.record_states(batch))
        .expect("the memory store accepts the batch");
    replayer.join().expect("the replay");
    let after = rss_kib();

    // Counted after the measure: the export copies every row.
    let ids: Vec<_> = fleet.mowers.iter().map(|m| m.id).collect();
    let rows = rt.block_on(store.export(&ids)).expect("export");
    let grown = after.saturating_sub(before);
    println!(
        "memory store, default bound ({} rows per mower), demo fleet of {mowers} mowers, {hours} h \
         simulated at one state a second",
        MemoryStoreSettings::default().history_per_mower
    );
    println!("states stored          : {states:>12}");
    println!("history rows kept      : {:>12}", rows.history.len());
    println!("position rows kept     : {:>12}", rows.positions.len());
    println!("VmRSS before           : {:>12.1} MiB", mib(before));
    println!("VmRSS after            : {:>12.1} MiB", mib(after));
    println!("grown                  : {:>12.1} MiB", mib(grown));
    println!(
        "per state kept         : {:>12.0} bytes",
        (grown * 1024) as f64 / rows.history.len().max(1) as f64
    );
}
