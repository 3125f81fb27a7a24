//! The simulated demo fleet: `cargo run` serves the whole product with mowers that mow, charge and
//! fail, publishing their states on the bus exactly like a gateway would (README).
//!
//! A driving adapter, not a use case: like a gateway it only drives the application through its
//! ports (it writes the demo fleet through [`Directory`] and publishes on the [`EventBus`]), and no
//! use case depends on it, so it lives in a crate of its own (docs/decisions.md 85).
//!
//! Three parts, from pure to wired:
//! - [`seed_demo_fleet`] writes a demo account ("Demo Gardens"), three sites in three time zones
//!   and `SWATH_SIM_MOWERS` mowers into the [`Directory`], so that ingest's W0 accepts their
//!   states.
//! - [`MowerSim`] is one mower's state machine. It is pure and deterministic: no clock, no I/O, its
//!   randomness comes from a seeded [`StdRng`](rand::rngs::StdRng); the caller passes the time to
//!   [`MowerSim::step`]. That is what lets the unit tests run hours of simulated time in a moment.
//! - [`Simulator::spawn`] runs a task that steps every mower on a short tick and publishes each
//!   report as JSON on `telemetry.mower.<mower_id>` (see [`subjects::telemetry`]).
//!
//! The cycle of a mower: docked → leaving → mowing → returning (battery below 20 %) → charging →
//! docked → …; now and then, while mowing, error → paused → mowing again (or returning, if the
//! battery ran low meanwhile).
//!
//! A report is published when the state period elapsed since the previous one (periodic), and at
//! once when the activity changed, so that consumers never see a change late (README).
//!
//! # Layout
//! - `seed`: the demo account, sites and mowers, and their (seeded) ids: [`seed_demo_fleet`].
//! - `lawn`: a mower's [`Lawn`], its local frame in metres and its projection to WGS 84.
//! - `mower`: [`MowerSim`], one mower's motion, battery and errors, and its reports.
//! - `run`: the fleet laid out on its sites, stepped on a tick and published
//!   ([`Simulator::spawn`]) or replayed without a clock or a bus ([`replay`]).

mod lawn;
mod mower;
mod run;
mod seed;
#[cfg(test)]
mod tests;

pub use lawn::Lawn;
pub use mower::MowerSim;
pub use run::{replay, Simulator};
pub use seed::{seed_demo_fleet, DemoFleet, DEMO_ACCOUNT_ID, DEMO_ACCOUNT_NAME};

use std::time::Duration;
#[cfg(doc)]
use swath_application::{
    ports::{Directory, EventBus},
    subjects,
};

/// How the simulated fleet behaves. The `swath` binary fills it from the environment.
#[derive(Clone, Debug, PartialEq)]
pub struct SimulatorSettings {
    /// How many mowers the demo fleet has (`SWATH_SIM_MOWERS`, default 20).
    pub mowers: usize,
    /// How often a mower reports while its activity does not change
    /// (`SWATH_SIM_STATE_PERIOD_SECONDS`, default 1 s). Changes are reported at once regardless.
    pub state_period: Duration,
    /// Makes the mowers' behaviour reproducible (lawns, timings, errors). `None`: a new fleet
    /// behaviour on every start.
    pub seed: Option<u64>,
}

impl Default for SimulatorSettings {
    fn default() -> Self {
        Self {
            mowers: 20,
            state_period: Duration::from_secs(1),
            seed: None,
        }
    }
}

/// Derives a mower's seed from the fleet's (SplitMix64), so that neighbours do not get related
/// random streams.
fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
