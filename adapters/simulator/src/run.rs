//! The fleet at work: its mowers laid out on their sites, stepped on a tick and published on the
//! bus like a gateway would ([`Simulator::spawn`]), or replayed without a clock or a bus
//! ([`replay`]).

use crate::lawn::{Lawn, METRES_PER_DEGREE};
use crate::seed::DEMO_SITES;
use crate::{mix, DemoFleet, MowerSim, SimulatorSettings};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::{chain, Clock, EventBus};
use swath_application::subjects;
use swath_domain::{Mower, StateReport};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug)]
pub struct Simulator;

impl Simulator {
    /// Spawns a task that steps every mower of `fleet` on a short tick (the state period, at most
    /// 250 ms) at `clock`'s time and publishes each report as JSON on
    /// [`subjects::telemetry`]`(mower_id)`, with the de-duplication id
    /// `"<mower_id>.<observed_at in microseconds since the epoch>"`. A failed publish is logged
    /// and skipped: the next report carries the mower's state anyway. The task ends when `stop`
    /// turns `true` (or its sender is dropped). Must be called inside a Tokio runtime.
    ///
    /// Each mower's lawn lies near its site (demo sites by name; other sites get a demo location
    /// in turn). With `settings.seed` set, the fleet behaves the same on every run.
    pub fn spawn(
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
        fleet: &DemoFleet,
        settings: SimulatorSettings,
        mut stop: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        let mut mowers = build_mowers(fleet, &settings);
        let tick = tick_of(settings.state_period);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(tick);
            // After a stall, do not burst: the mowers step by the clock's time anyway.
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            // Per mower, whether its last publish failed: a bus outage logs once per mower, not
            // once per report.
            let mut failing = vec![false; mowers.len()];
            tracing::info!(mowers = mowers.len(), "The simulated fleet is running.");
            loop {
                if *stop.borrow_and_update() {
                    break;
                }
                tokio::select! {
                    _ = ticker.tick() => {}
                    changed = stop.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        continue;
                    }
                }
                let now = clock.now();
                for (mower, failing) in mowers.iter_mut().zip(failing.iter_mut()) {
                    let Some(report) = mower.step(now) else {
                        continue;
                    };
                    publish(bus.as_ref(), &report, failing).await;
                }
            }
            tracing::info!("The simulated fleet stopped.");
        })
    }
}

/// One [`MowerSim`] per mower of the fleet, its lawn laid out on a grid around its site (100 m
/// apart, so no two lawns overlap).
pub(crate) fn build_mowers(fleet: &DemoFleet, settings: &SimulatorSettings) -> Vec<MowerSim> {
    let seed = settings.seed.unwrap_or_else(rand::random);
    let anchors: Vec<(f64, f64)> = fleet
        .sites
        .iter()
        .enumerate()
        .map(|(i, site)| {
            let demo = DEMO_SITES
                .iter()
                .find(|d| d.name == site.name)
                .unwrap_or(&DEMO_SITES[i % DEMO_SITES.len()]);
            (demo.lat, demo.lon)
        })
        .collect();
    // Slot `sites.len()` holds the mowers of a site the fleet does not list.
    let slot_of = |mower: &Mower| {
        fleet
            .sites
            .iter()
            .position(|s| s.id == mower.site_id)
            .unwrap_or(fleet.sites.len())
    };
    let mut per_slot = vec![0usize; fleet.sites.len() + 1];
    for mower in &fleet.mowers {
        per_slot[slot_of(mower)] += 1;
    }
    let mut placed = vec![0usize; fleet.sites.len() + 1];
    fleet
        .mowers
        .iter()
        .enumerate()
        .map(|(i, mower)| {
            let slot = slot_of(mower);
            let (lat, lon) = anchors
                .get(slot)
                .copied()
                .unwrap_or((DEMO_SITES[0].lat, DEMO_SITES[0].lon));
            let columns = (per_slot[slot] as f64).sqrt().ceil().max(1.0) as usize;
            let j = placed[slot];
            placed[slot] += 1;
            let east = (j % columns) as f64 * 100.0;
            let north = (j / columns) as f64 * 100.0;
            let centre_lat = lat + north / METRES_PER_DEGREE;
            let centre_lon = lon + east / (METRES_PER_DEGREE * lat.to_radians().cos());
            let mower_seed = mix(seed, i as u64);
            MowerSim::new(
                mower.id,
                mower.account_id,
                Lawn::random(centre_lat, centre_lon, mower_seed),
                settings.state_period,
                mower_seed.rotate_left(17),
            )
        })
        .collect()
}

/// How often the mowers are stepped. A tick shorter than the period keeps the periodic reports
/// close to their due time and the changes close to when they happen; 10 ms at least, so that a
/// zero period cannot spin.
fn tick_of(state_period: Duration) -> Duration {
    state_period
        .min(Duration::from_millis(250))
        .max(Duration::from_millis(10))
}

/// The reports the demo fleet would have published over `[from, to)`, handed to `emit` in time
/// order, without a clock or a bus: the history `swath simulate` writes as NDJSON for
/// `swath import` (a backfill to try). The same fleet and settings give the same reports.
pub fn replay(
    fleet: &DemoFleet,
    settings: &SimulatorSettings,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    mut emit: impl FnMut(&StateReport),
) {
    let mut mowers = build_mowers(fleet, settings);
    let tick = chrono::Duration::from_std(tick_of(settings.state_period))
        .unwrap_or_else(|_| chrono::Duration::milliseconds(250));
    let mut now = from;
    while now < to {
        for mower in &mut mowers {
            if let Some(report) = mower.step(now) {
                emit(&report);
            }
        }
        now += tick;
    }
}

async fn publish(bus: &dyn EventBus, report: &StateReport, failing: &mut bool) {
    let mower_id = report.mower_id;
    let payload = match serde_json::to_vec(report) {
        Ok(bytes) => Bytes::from(bytes),
        Err(e) => {
            tracing::error!(
                %mower_id,
                error = %e,
                "A simulated state of mower {mower_id} could not be serialised."
            );
            return;
        }
    };
    let dedup_id = format!("{mower_id}.{}", report.observed_at.timestamp_micros());
    match bus
        .publish(&subjects::telemetry(mower_id), payload, Some(dedup_id))
        .await
    {
        Ok(()) => {
            if std::mem::take(failing) {
                tracing::info!(
                    %mower_id,
                    "The simulated states of mower {mower_id} are published again."
                );
            }
        }
        Err(e) if !*failing => {
            *failing = true;
            tracing::warn!(
                %mower_id,
                error = %chain(&e),
                "A simulated state of mower {mower_id} could not be published; the simulator \
                 carries on."
            );
        }
        Err(e) => {
            tracing::debug!(
                %mower_id,
                error = %chain(&e),
                "A simulated state of mower {mower_id} could not be published."
            );
        }
    }
}
