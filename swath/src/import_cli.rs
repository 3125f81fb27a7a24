//! `swath import` and `swath simulate`: state reports as NDJSON, into the store through the
//! ingest path, or out of the simulated demo fleet.

use crate::config::{ImportArgs, SimulateArgs, StoreKind};
use anyhow::Context;
use std::sync::Arc;
use swath_application::import_lines::import_ndjson;
use swath_application::ports::{Clock, EventBus, SystemClock};
use swath_application::Ingest;
use swath_memory::{MemoryBus, MemoryBusSettings};
use swath_simulator::{seed_demo_fleet, SimulatorSettings};

/// `swath import FILE`: the file's reports through the ingest path, 200 per transaction. Fails
/// when no state of the file is stored, and with `--strict` when any line was refused.
pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    if args.store.store == StoreKind::Memory && !args.into_memory {
        anyhow::bail!(
            "swath import would store into the memory store, which keeps nothing once the command \
             ends: set SWATH_STORE=postgres and SWATH_DATABASE_URL (or pass --into-memory for a \
             dry run)"
        );
    }
    let merge_gap = crate::serve::session_merge_gap(&args.store);
    let stores = args.store.open().await?;
    // Derived events (blade due) go to an in-process bus: an import of history must not page
    // anyone about the past.
    let bus: Arc<dyn EventBus> = Arc::new(MemoryBus::new(MemoryBusSettings::default()));
    let ingest =
        Ingest::new(stores.telemetry, bus, Arc::new(SystemClock)).with_session_merge_gap(merge_gap);
    let file = tokio::fs::File::open(&args.file)
        .await
        .with_context(|| format!("could not open {}", args.file.display()))?;
    let size = file.metadata().await.map(|m| m.len()).unwrap_or(0);
    let bar = indicatif::ProgressBar::new(size).with_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .context("progress bar template")?,
    );
    let summary = import_ndjson(&ingest, tokio::io::BufReader::new(file), |bytes| {
        bar.set_position(bytes)
    })
    .await;
    bar.finish_and_clear();
    let summary =
        summary.with_context(|| format!("the import of {} stopped", args.file.display()))?;
    let c = &summary.counts;
    let refused = summary.refused_count();
    println!(
        "Imported {}: {} reports: {} new ({} late, merged into the totals; {} late past \
         retention, not counted), {} already stored, {} refused.",
        args.file.display(),
        summary.reports,
        c.new_states(),
        c.late_merged,
        c.late_not_counted,
        c.duplicates,
        refused,
    );
    for (reason, count) in &summary.dropped {
        println!("  refused {count:>8}  {reason}");
    }
    for line in &summary.refused {
        match &line.detail {
            Some(detail) => println!("  line {}: {} ({detail})", line.line, line.reason),
            None => println!("  line {}: {}", line.line, line.reason),
        }
    }
    if refused > summary.refused.len() as u64 {
        println!(
            "  … and {} more refused lines.",
            refused - summary.refused.len() as u64
        );
    }
    if summary.stored == 0 {
        anyhow::bail!(
            "no state of {} is stored: {} reports, {} refused",
            args.file.display(),
            summary.reports,
            refused
        );
    }
    if args.strict && refused > 0 {
        anyhow::bail!(
            "--strict: {refused} refused in {}; the other {} states are stored",
            args.file.display(),
            summary.stored
        );
    }
    Ok(())
}

/// `swath simulate`: the demo fleet's history as NDJSON on stdout.
pub async fn simulate(args: SimulateArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let stores = args.store.open().await?;
    let settings = SimulatorSettings {
        mowers: args.sim_mowers as usize,
        seed: args.sim_seed,
        ..SimulatorSettings::default()
    };
    let fleet = seed_demo_fleet(stores.directory.as_ref(), &settings)
        .await
        .context("could not read or create the demo fleet")?;
    let to = SystemClock.now();
    let span = chrono::Duration::milliseconds((args.hours * 3_600_000.0) as i64);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = None;
    swath_simulator::replay(&fleet, &settings, to - span, to, |report| {
        if failed.is_none() {
            let line = serde_json::to_writer(&mut out, report)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"));
            failed = line.err();
        }
    });
    if let Some(e) = failed {
        return Err(e).context("could not write the states to stdout");
    }
    out.flush()
        .context("could not write the states to stdout")?;
    Ok(())
}
