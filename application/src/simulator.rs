//! The simulated demo fleet: `cargo run` serves the whole product with mowers that mow, charge and
//! fail, publishing their states on the bus exactly like a gateway would (README).
//!
//! Three parts, from pure to wired:
//! - [`seed_demo_fleet`] writes a demo account ("Demo Gardens"), three sites in three time zones
//!   and `SWATH_SIM_MOWERS` mowers into the [`Directory`], so that ingest's W0 accepts their
//!   states.
//! - [`MowerSim`] is one mower's state machine. It is pure and deterministic: no clock, no I/O, its
//!   randomness comes from a seeded [`StdRng`]; the caller passes the time to [`MowerSim::step`].
//!   That is what lets the unit tests below run hours of simulated time in a moment.
//! - [`Simulator::spawn`] runs a task that steps every mower on a short tick and publishes each
//!   report as JSON on `telemetry.mower.<mower_id>` (see [`subjects::telemetry`]).
//!
//! The cycle of a mower: docked → leaving → mowing → returning (battery below 20 %) → charging →
//! docked → …; now and then, while mowing, error → paused → mowing again (or returning, if the
//! battery ran low meanwhile).
//!
//! A report is published when the state period elapsed since the previous one (periodic), and at
//! once when the activity changed, so that consumers never see a change late (README).

use crate::ports::{Account, Clock, Directory, DirectoryError, EventBus, Mower, Site};
use crate::subjects;
use bytes::Bytes;
use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;
use geo::{LineString, Polygon};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map};
use std::sync::Arc;
use std::time::Duration;
use swath_domain::rules::DEFAULT_BLADE_THRESHOLD_MS;
use swath_domain::{AccountId, Activity, MowerId, Position, SiteId, StateReport};
use tokio::sync::watch;
use tokio::task::JoinHandle;

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

/// What [`seed_demo_fleet`] wrote into the directory.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoFleet {
    pub account: Account,
    pub sites: Vec<Site>,
    pub mowers: Vec<Mower>,
}

/// The name of the demo account.
pub const DEMO_ACCOUNT_NAME: &str = "Demo Gardens";

/// The id of the demo account: fixed, so that a persistent store keeps one demo fleet.
pub const DEMO_ACCOUNT_ID: AccountId = AccountId(uuid::Uuid::from_u128(
    0x0190_0000_0000_7000_8000_00de_0000_0001,
));

/// A demo site: its name, time zone and where its lawns lie.
struct DemoSite {
    name: &'static str,
    time_zone: Tz,
    lat: f64,
    lon: f64,
}

/// Three sites in three time zones, so that the day totals (W5) visibly split at different
/// instants. The coordinates are real parks, so that a map shows the lawns somewhere plausible.
const DEMO_SITES: [DemoSite; 3] = [
    DemoSite {
        name: "Potsdam Orangery Gardens",
        time_zone: chrono_tz::Europe::Berlin,
        lat: 52.404_5,
        lon: 13.023_0,
    },
    DemoSite {
        name: "Richmond Riverside Lawns",
        time_zone: chrono_tz::Europe::London,
        lat: 51.456_0,
        lon: -0.307_0,
    },
    DemoSite {
        name: "Brooklyn Heights Commons",
        time_zone: chrono_tz::America::New_York,
        lat: 40.696_0,
        lon: -73.997_0,
    },
];

/// Demo models and the prefix of their serial numbers.
const DEMO_MODELS: [(&str, &str); 3] = [
    ("Greenline R40", "GR40"),
    ("Greenline R60 RTK", "GR60"),
    ("Meadowbot M2", "MB2"),
];

/// Writes the demo account, its three sites and `settings.mowers` mowers (spread round-robin over
/// the sites) into `directory`, and returns what it wrote. Ids are new UUID v7s, or, with
/// `settings.seed`, UUID v8s derived from the seed, so that a seeded demo lists the same ids on
/// every run (scripts and snapshot tests can name a mower).
///
/// What the directory already holds of the demo account is kept (a restart on a persistent store
/// carries on with its fleet), so two replicas or two starts against one database never add a
/// second demo fleet.
pub async fn seed_demo_fleet(
    directory: &dyn Directory,
    settings: &SimulatorSettings,
) -> Result<DemoFleet, DirectoryError> {
    // A fixed account id: on a persistent store (PostgreSQL) a restart finds the demo fleet it
    // created before and carries on with it, instead of adding another "Demo Gardens".
    let account = Account {
        id: DEMO_ACCOUNT_ID,
        name: DEMO_ACCOUNT_NAME.to_owned(),
    };
    if directory.account(account.id).await?.is_none() {
        directory.create_account(account.clone()).await?;
    }

    let mut sites = directory.sites(account.id).await?;
    for (i, demo) in DEMO_SITES.iter().enumerate().skip(sites.len()) {
        let site = Site {
            id: SiteId(demo_id(settings.seed, DemoIdKind::Site, i)),
            account_id: account.id,
            name: demo.name.to_owned(),
            time_zone: demo.time_zone,
            display_order: i as i32 + 1,
        };
        directory.create_site(site.clone()).await?;
        sites.push(site);
    }

    let mut mowers = directory.mowers(account.id).await?;
    for i in mowers.len()..settings.mowers {
        let (model, prefix) = DEMO_MODELS[i % DEMO_MODELS.len()];
        let mower = Mower {
            id: MowerId(demo_id(settings.seed, DemoIdKind::Mower, i)),
            account_id: account.id,
            site_id: sites[i % sites.len()].id,
            name: format!("Mower {:02}", i + 1),
            model: model.to_owned(),
            serial: format!("{prefix}-{:06}", 240_001 + i),
            display_order: i32::try_from(i + 1).unwrap_or(i32::MAX),
            blade_threshold_ms: DEFAULT_BLADE_THRESHOLD_MS,
        };
        directory.create_mower(mower.clone()).await?;
        mowers.push(mower);
    }
    // A store may hold more demo mowers than asked for this time: simulate only as many.
    mowers.truncate(settings.mowers);
    Ok(DemoFleet {
        account,
        sites,
        mowers,
    })
}

/// What a demo id names; part of the derivation, so that site 0 and mower 0 differ.
#[derive(Clone, Copy)]
enum DemoIdKind {
    Site = 1,
    Mower = 2,
}

/// The id of the `index`-th demo site or mower: a new UUID v7 without a seed; with one, a UUID v8
/// whose 122 free bits come from the seed, the kind and the index (SplitMix64, as the mowers'
/// behaviour), so that the same seed gives the same ids.
fn demo_id(seed: Option<u64>, kind: DemoIdKind, index: usize) -> uuid::Uuid {
    let Some(seed) = seed else {
        return uuid::Uuid::now_v7();
    };
    let stream = mix(seed, kind as u64);
    let high = mix(stream, 2 * index as u64);
    let low = mix(stream, 2 * index as u64 + 1);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Metres per degree of latitude (and of longitude at the equator). The lawns are a few dozen
/// metres wide, so a local flat (equirectangular) projection is far more precise than needed.
const METRES_PER_DEGREE: f64 = 111_320.0;
/// Mowing and driving speed.
const SPEED_M_PER_S: f64 = 0.5;
/// Distance between two mowing lanes (a little less than a cutting width, so lanes overlap).
const LANE_SPACING_M: f64 = 0.3;
/// The mower keeps this far from the lawn's edges while mowing.
const EDGE_MARGIN_M: f64 = 1.0;
/// The dock stands this far inside the lawn's edge (inside, so that every position, docked or
/// not, is inside the lawn and a geofence drawn along the lawn never fires spuriously).
const DOCK_INSET_M: f64 = 0.5;
/// Below this charge the mower stops mowing and drives home.
const RETURN_BELOW_PERCENT: f64 = 20.0;
/// Battery drain while idle in the field (error, paused), per second.
const IDLE_DRAIN_PERCENT_PER_S: f64 = 0.002;
/// Driving to and from the dock with the blade off drains less than mowing.
const TRAVEL_DRAIN_FACTOR: f64 = 0.6;
/// Mean mowing time between two errors. Drawn as a hazard per second, so that the error rate does
/// not depend on how often the mower is stepped.
const MEAN_MOWING_SECONDS_BETWEEN_ERRORS: f64 = 90.0 * 60.0;
/// Errors a mower may stop with.
const ERROR_CODES: [&str; 4] = ["E_LIFTED", "E_STUCK", "E_WHEEL_SLIP", "E_BLADE_BLOCKED"];
/// The longest stretch of time one sub-step simulates: keeps lane turns and battery thresholds
/// precise when the caller steps rarely.
const MAX_SUB_STEP_S: f64 = 1.0;
/// The most time one step catches up. If the task stalled longer (a suspended laptop), the mowers
/// do not replay the gap: they carry on from where they were.
const MAX_CATCH_UP_S: f64 = 10.0;

/// A rectangular lawn, turned by a bearing, with its dock inside one of its edges.
///
/// Positions are computed in a local frame in metres (`u` along the lanes, `v` across them, the
/// origin at the lawn's centre) and projected to WGS 84 by an affine map. An affine map keeps
/// "inside" inside, so a point of the local rectangle is inside [`Lawn::polygon`] exactly.
#[derive(Clone, Debug, PartialEq)]
pub struct Lawn {
    centre_lat: f64,
    centre_lon: f64,
    width_m: f64,
    depth_m: f64,
    /// Direction of the lanes (`u`), degrees clockwise from north.
    bearing_deg: f64,
    /// The dock's `u`; its `v` is just inside the `-v` edge.
    dock_u: f64,
}

impl Lawn {
    /// A lawn of `width_m` × `depth_m` (each at least 10 m) centred on `(lat, lon)`, its lanes
    /// along `bearing_deg`, the dock in the middle of the edge parallel to the lanes on the `-v`
    /// side.
    pub fn new(lat: f64, lon: f64, width_m: f64, depth_m: f64, bearing_deg: f64) -> Lawn {
        Lawn {
            centre_lat: lat,
            centre_lon: lon,
            width_m: width_m.max(10.0),
            depth_m: depth_m.max(10.0),
            bearing_deg,
            dock_u: 0.0,
        }
    }

    /// A lawn of 30–60 m a side in a random orientation around `(lat, lon)`, its dock somewhere
    /// along one edge.
    pub fn random(lat: f64, lon: f64, seed: u64) -> Lawn {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut lawn = Lawn::new(
            lat,
            lon,
            rng.gen_range(30.0..=60.0),
            rng.gen_range(30.0..=60.0),
            rng.gen_range(0.0..180.0),
        );
        lawn.dock_u = lawn.width_m * rng.gen_range(-0.3..=0.3);
        lawn
    }

    /// The lawn's outline in WGS 84 (`x` = longitude, `y` = latitude), closed.
    pub fn polygon(&self) -> Polygon<f64> {
        let (hw, hd) = (self.width_m / 2.0, self.depth_m / 2.0);
        let corners = [(-hw, -hd), (hw, -hd), (hw, hd), (-hw, hd), (-hw, -hd)];
        let ring: Vec<(f64, f64)> = corners
            .iter()
            .map(|&(u, v)| {
                let (lat, lon) = self.to_lat_lon(u, v);
                (lon, lat)
            })
            .collect();
        Polygon::new(LineString::from(ring), vec![])
    }

    /// The dock's position, `(lat, lon)`.
    pub fn dock_lat_lon(&self) -> (f64, f64) {
        let (u, v) = self.dock();
        self.to_lat_lon(u, v)
    }

    fn dock(&self) -> (f64, f64) {
        (self.dock_u, -self.depth_m / 2.0 + DOCK_INSET_M)
    }

    fn to_lat_lon(&self, u: f64, v: f64) -> (f64, f64) {
        let (east, north) = self.to_east_north(u, v);
        let lat = self.centre_lat + north / METRES_PER_DEGREE;
        let lon = self.centre_lon + east / (METRES_PER_DEGREE * self.centre_lat.to_radians().cos());
        (lat, lon)
    }

    /// Rotates a local vector into (east, north): `u` points along the bearing, `v` 90° clockwise
    /// of it.
    fn to_east_north(&self, u: f64, v: f64) -> (f64, f64) {
        let (sin, cos) = self.bearing_deg.to_radians().sin_cos();
        (u * sin + v * cos, u * cos - v * sin)
    }

    /// The compass heading (degrees clockwise from north, 0..360) of a local direction.
    fn heading_deg(&self, du: f64, dv: f64) -> f64 {
        let (east, north) = self.to_east_north(du, dv);
        east.atan2(north).to_degrees().rem_euclid(360.0)
    }

    /// `v` of lane `k` (lane 0 is nearest the dock's edge).
    fn lane_v(&self, lane: usize) -> f64 {
        -self.depth_m / 2.0 + EDGE_MARGIN_M + lane as f64 * LANE_SPACING_M
    }

    fn lane_count(&self) -> usize {
        ((self.depth_m - 2.0 * EDGE_MARGIN_M) / LANE_SPACING_M).floor() as usize + 1
    }

    /// `u` of the end of a lane driven in direction `dir` (+1 or -1).
    fn lane_end_u(&self, dir: f64) -> f64 {
        dir * (self.width_m / 2.0 - EDGE_MARGIN_M)
    }
}

/// What the mower is doing, with what the phase needs to know to end.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Docked { left_s: f64 },
    Leaving,
    Mowing,
    Returning,
    Charging,
    Error { code: &'static str, left_s: f64 },
    Paused { left_s: f64 },
}

impl Phase {
    fn activity(self) -> Activity {
        match self {
            Phase::Docked { .. } => Activity::Docked,
            Phase::Leaving => Activity::Leaving,
            Phase::Mowing => Activity::Mowing,
            Phase::Returning => Activity::Returning,
            Phase::Charging => Activity::Charging,
            Phase::Error { .. } => Activity::Error,
            Phase::Paused { .. } => Activity::Paused,
        }
    }

    /// The raw vendor state a gateway would pass through.
    fn vendor_state(self) -> &'static str {
        match self {
            Phase::Docked { .. } => "PARKED_TIMER",
            Phase::Leaving => "LEAVING_DOCK",
            Phase::Mowing => "CUTTING",
            Phase::Returning => "GOING_HOME",
            Phase::Charging => "CHARGING",
            Phase::Error { .. } => "FAULT",
            Phase::Paused { .. } => "PAUSED",
        }
    }
}

/// Where the mower is in its back-and-forth pattern. Kept while it is away charging, so that it
/// resumes where it stopped, as real mowers do.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pattern {
    lane: usize,
    /// +1 or -1: the direction along `u` of the current lane.
    dir: f64,
    /// +1 or -1: whether the next lane is the one above or below.
    lane_step: isize,
    /// True while moving from one lane to the next (across `v`).
    shifting: bool,
    /// The point the mower is driving to.
    target: (f64, f64),
    /// Where mowing stopped (or begins): `leaving` drives there first.
    resume_at: (f64, f64),
}

/// One simulated mower: a pure, deterministic state machine (see the module documentation).
#[derive(Clone, Debug)]
pub struct MowerSim {
    mower_id: MowerId,
    account_id: AccountId,
    lawn: Lawn,
    period: chrono::Duration,
    rng: StdRng,
    phase: Phase,
    /// Percent, 0..=100.
    battery: f64,
    /// Local position, metres.
    pos: (f64, f64),
    heading_deg: f64,
    pattern: Pattern,
    mowing_drain_per_s: f64,
    charge_per_s: f64,
    last_step: Option<DateTime<Utc>>,
    last_report: Option<(DateTime<Utc>, Activity)>,
}

impl MowerSim {
    /// A mower on `lawn` that reports at least every `period`. `seed` decides everything random:
    /// its battery's endurance, its starting phase (mowing, charging or docked, so that a fresh
    /// fleet does not move in lockstep), its errors.
    pub fn new(
        mower_id: MowerId,
        account_id: AccountId,
        lawn: Lawn,
        period: Duration,
        seed: u64,
    ) -> MowerSim {
        let mut rng = StdRng::seed_from_u64(seed);
        // 80 % of the battery lasts 60–90 min of mowing, and charges back in 40–60 min.
        let mowing_drain_per_s = 80.0 / rng.gen_range(3_600.0..=5_400.0);
        let charge_per_s = 80.0 / rng.gen_range(2_400.0..=3_600.0);
        let lanes = lawn.lane_count();
        let lane = rng.gen_range(0..lanes);
        let dir = if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
        let start_u = rng.gen_range(lawn.lane_end_u(-1.0)..=lawn.lane_end_u(1.0));
        let pattern = Pattern {
            lane,
            dir,
            lane_step: if lane + 1 < lanes { 1 } else { -1 },
            shifting: false,
            target: (lawn.lane_end_u(dir), lawn.lane_v(lane)),
            resume_at: (start_u, lawn.lane_v(lane)),
        };
        let dock = lawn.dock();
        let (phase, battery, pos) = match rng.gen_range(0..4) {
            0 | 1 => (Phase::Mowing, rng.gen_range(30.0..=95.0), pattern.resume_at),
            2 => (Phase::Charging, rng.gen_range(20.0..=90.0), dock),
            _ => (
                Phase::Docked {
                    left_s: rng.gen_range(0.0..=900.0),
                },
                100.0,
                dock,
            ),
        };
        let heading_deg = match phase {
            Phase::Mowing => lawn.heading_deg(dir, 0.0),
            _ => lawn.heading_deg(0.0, -1.0),
        };
        MowerSim {
            mower_id,
            account_id,
            lawn,
            period: chrono::Duration::from_std(period).unwrap_or(chrono::Duration::MAX),
            rng,
            phase,
            battery,
            pos,
            heading_deg,
            pattern,
            mowing_drain_per_s,
            charge_per_s,
            last_step: None,
            last_report: None,
        }
    }

    /// The mower this state machine reports for.
    pub fn mower_id(&self) -> MowerId {
        self.mower_id
    }

    /// The lawn every position of this mower lies on.
    pub fn lawn(&self) -> &Lawn {
        &self.lawn
    }

    /// The current activity (which the next report will carry).
    pub fn activity(&self) -> Activity {
        self.phase.activity()
    }

    /// Advances the mower to `now` and returns a report when one is due: on the first step, when
    /// the activity changed (at once), or when `period` elapsed since the previous report. A `now`
    /// not after the previous step's changes nothing and reports nothing.
    ///
    /// A step makes at most one activity change, so that every change gets its own report.
    pub fn step(&mut self, now: DateTime<Utc>) -> Option<StateReport> {
        let elapsed_s = match self.last_step {
            None => 0.0,
            Some(last) if now <= last => return None,
            Some(last) => (now - last)
                .num_microseconds()
                .map_or(MAX_CATCH_UP_S, |us| us as f64 / 1e6)
                .min(MAX_CATCH_UP_S),
        };
        self.last_step = Some(now);
        self.advance(elapsed_s);

        let activity = self.activity();
        let due = match self.last_report {
            None => true,
            Some((at, reported)) => reported != activity || now - at >= self.period,
        };
        if !due {
            return None;
        }
        self.last_report = Some((now, activity));
        Some(self.report(now))
    }

    /// Simulates `elapsed_s` seconds in sub-steps, stopping early at an activity change (the rest
    /// of the step is not simulated: at most a tick of progress lost, and no change goes
    /// unreported).
    fn advance(&mut self, elapsed_s: f64) {
        let mut left = elapsed_s;
        while left > 0.0 {
            let dt = left.min(MAX_SUB_STEP_S);
            left -= dt;
            let before = self.activity();
            self.advance_by(dt);
            if self.activity() != before {
                break;
            }
        }
    }

    fn advance_by(&mut self, dt: f64) {
        match self.phase {
            Phase::Docked { left_s } => {
                // On the charger: the battery is kept full.
                let left_s = left_s - dt;
                self.phase = if left_s <= 0.0 {
                    Phase::Leaving
                } else {
                    Phase::Docked { left_s }
                };
            }
            Phase::Leaving => {
                self.drain(self.mowing_drain_per_s * TRAVEL_DRAIN_FACTOR * dt);
                if self.drive_to(self.pattern.resume_at, SPEED_M_PER_S * dt) {
                    self.phase = Phase::Mowing;
                }
            }
            Phase::Mowing => {
                self.drain(self.mowing_drain_per_s * dt);
                let p_error = (dt / MEAN_MOWING_SECONDS_BETWEEN_ERRORS).min(1.0);
                if self.battery < RETURN_BELOW_PERCENT {
                    self.go_home();
                } else if self.rng.gen_bool(p_error) {
                    let code = ERROR_CODES[self.rng.gen_range(0..ERROR_CODES.len())];
                    let left_s = self.rng.gen_range(60.0..=300.0);
                    self.phase = Phase::Error { code, left_s };
                } else {
                    self.mow(SPEED_M_PER_S * dt);
                }
            }
            Phase::Returning => {
                self.drain(self.mowing_drain_per_s * TRAVEL_DRAIN_FACTOR * dt);
                if self.drive_to(self.lawn.dock(), SPEED_M_PER_S * dt) {
                    // Docking turns the mower to face the station.
                    self.heading_deg = self.lawn.heading_deg(0.0, -1.0);
                    self.phase = Phase::Charging;
                }
            }
            Phase::Charging => {
                self.battery = (self.battery + self.charge_per_s * dt).min(100.0);
                if self.battery >= 100.0 {
                    let left_s = self.rng.gen_range(600.0..=1_800.0);
                    self.phase = Phase::Docked { left_s };
                }
            }
            Phase::Error { code, left_s } => {
                // Someone sets the mower back on its wheels (or it frees itself) after a while; it
                // then waits paused before it carries on.
                self.drain(IDLE_DRAIN_PERCENT_PER_S * dt);
                let left_s = left_s - dt;
                self.phase = if left_s <= 0.0 {
                    Phase::Paused {
                        left_s: self.rng.gen_range(10.0..=40.0),
                    }
                } else {
                    Phase::Error { code, left_s }
                };
            }
            Phase::Paused { left_s } => {
                self.drain(IDLE_DRAIN_PERCENT_PER_S * dt);
                let left_s = left_s - dt;
                if left_s > 0.0 {
                    self.phase = Phase::Paused { left_s };
                } else if self.battery < RETURN_BELOW_PERCENT {
                    self.go_home();
                } else {
                    self.phase = Phase::Mowing;
                }
            }
        }
    }

    fn drain(&mut self, percent: f64) {
        self.battery = (self.battery - percent).max(0.0);
    }

    fn go_home(&mut self) {
        self.pattern.resume_at = self.pos;
        self.phase = Phase::Returning;
    }

    /// Drives straight towards `target` by at most `distance`; true once there. The lawn is
    /// convex, so a straight line between two points of it stays on it.
    fn drive_to(&mut self, target: (f64, f64), distance: f64) -> bool {
        let (du, dv) = (target.0 - self.pos.0, target.1 - self.pos.1);
        let gap = du.hypot(dv);
        if gap <= distance {
            if gap > 0.0 {
                self.heading_deg = self.lawn.heading_deg(du, dv);
            }
            self.pos = target;
            return true;
        }
        self.heading_deg = self.lawn.heading_deg(du, dv);
        self.pos = (
            self.pos.0 + du / gap * distance,
            self.pos.1 + dv / gap * distance,
        );
        false
    }

    /// Follows the back-and-forth pattern for `distance` metres: along a lane to its end, across
    /// to the next lane, back along it; at the last lane the pattern reverses.
    fn mow(&mut self, mut distance: f64) {
        // A sub-step covers at most half a metre and a leg is at least a lane spacing long, so a
        // few legs at most; the bound only guards against a degenerate lawn.
        for _ in 0..16 {
            let target = self.pattern.target;
            let before = self.pos;
            if !self.drive_to(target, distance) {
                return;
            }
            distance -= (target.0 - before.0).hypot(target.1 - before.1);
            self.next_leg();
            if distance <= 0.0 {
                return;
            }
        }
    }

    fn next_leg(&mut self) {
        let lanes = self.lawn.lane_count();
        let p = &mut self.pattern;
        if p.shifting {
            p.shifting = false;
            p.dir = -p.dir;
            p.target = (self.lawn.lane_end_u(p.dir), self.lawn.lane_v(p.lane));
        } else {
            let next = p.lane as isize + p.lane_step;
            if !(0..lanes as isize).contains(&next) {
                p.lane_step = -p.lane_step;
            }
            p.lane = (p.lane as isize + p.lane_step).clamp(0, lanes as isize - 1) as usize;
            p.shifting = true;
            p.target = (self.pos.0, self.lawn.lane_v(p.lane));
        }
    }

    fn report(&mut self, now: DateTime<Utc>) -> StateReport {
        let at_dock = matches!(self.phase, Phase::Docked { .. } | Phase::Charging);
        // RTK in the open; under the charging station's roof the fix degrades.
        let accuracy_m = if at_dock {
            self.rng.gen_range(0.3..=0.9)
        } else {
            self.rng.gen_range(0.02..=0.08)
        };
        let (lat, lon) = self.lawn.to_lat_lon(self.pos.0, self.pos.1);
        let error_code = match self.phase {
            Phase::Error { code, .. } => Some(code.to_owned()),
            _ => None,
        };
        let mut extra = Map::new();
        // Lets every consumer tell simulated data from a real fleet's.
        extra.insert("simulated".to_owned(), json!(true));
        StateReport {
            mower_id: self.mower_id,
            account_id: self.account_id,
            observed_at: now.trunc_subsecs(6),
            activity: self.activity(),
            battery_percent: Some(self.battery.round().clamp(0.0, 100.0) as u8),
            position: Some(Position {
                // ~1 cm and 0.1°: what a gateway sends, and far inside the 0.5 m edge margins.
                lat: round_to(lat, 1e7),
                lon: round_to(lon, 1e7),
                accuracy_m: Some(round_to(accuracy_m, 100.0)),
                heading_deg: Some(round_to(self.heading_deg, 10.0)),
            }),
            blade_on: self.phase == Phase::Mowing,
            error_code,
            vendor_state: Some(self.phase.vendor_state().to_owned()),
            extra: Some(extra),
            unknown: Map::new(),
        }
    }
}

fn round_to(value: f64, scale: f64) -> f64 {
    (value * scale).round() / scale
}

/// Runs the demo fleet: see [`Simulator::spawn`].
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
fn build_mowers(fleet: &DemoFleet, settings: &SimulatorSettings) -> Vec<MowerSim> {
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

/// Derives a mower's seed from the fleet's (SplitMix64), so that neighbours do not get related
/// random streams.
fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
                error = %e,
                "A simulated state of mower {mower_id} could not be published; the simulator \
                 carries on."
            );
        }
        Err(e) => {
            tracing::debug!(
                %mower_id,
                error = %e,
                "A simulated state of mower {mower_id} could not be published."
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{
        BatchHandler, BatchSettings, BusError, LiveOptions, LiveSubscription, ManualClock,
        Subscription,
    };
    use async_trait::async_trait;
    use chrono::TimeZone;
    use geo::{Contains, Distance, Haversine, Point};
    use std::collections::HashSet;
    use std::sync::Mutex;

    fn start() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 6, 1, 6, 0, 0).unwrap()
    }

    fn sim(seed: u64, period: Duration) -> MowerSim {
        let lawn = Lawn::random(52.4045, 13.023, seed);
        MowerSim::new(MowerId::new(), AccountId::new(), lawn, period, seed)
    }

    /// Steps `sim` every `step` for `hours` of simulated time; returns every report with the
    /// time of the step that produced it, and checks on the way that every activity change was
    /// reported at the step it happened.
    fn run(sim: &mut MowerSim, step: chrono::Duration, hours: i64) -> Vec<StateReport> {
        let mut reports = Vec::new();
        let end = start() + chrono::Duration::hours(hours);
        let mut now = start();
        let mut previous: Option<Activity> = None;
        while now <= end {
            let report = sim.step(now);
            if previous != Some(sim.activity()) {
                let report = report.as_ref().unwrap_or_else(|| {
                    panic!("the change to {} at {now} was not reported", sim.activity())
                });
                assert_eq!(report.activity, sim.activity());
                assert_eq!(report.observed_at, now);
            }
            previous = Some(sim.activity());
            reports.extend(report);
            now += step;
        }
        reports
    }

    /// The activities in order, consecutive repeats collapsed.
    fn activities(reports: &[StateReport]) -> Vec<Activity> {
        let mut out: Vec<Activity> = Vec::new();
        for r in reports {
            if out.last() != Some(&r.activity) {
                out.push(r.activity);
            }
        }
        out
    }

    #[test]
    fn a_mower_cycles_mowing_returning_charging_docked_within_its_lawn() {
        use Activity::*;
        let allowed: HashSet<(Activity, Activity)> = [
            (Docked, Leaving),
            (Leaving, Mowing),
            (Mowing, Returning),
            (Mowing, Error),
            (Error, Paused),
            (Paused, Mowing),
            (Paused, Returning),
            (Returning, Charging),
            (Charging, Docked),
        ]
        .into_iter()
        .collect();
        let step = chrono::Duration::milliseconds(200);
        let mut errors = 0;
        for seed in [1, 2, 3, 42] {
            let mut sim = sim(seed, Duration::from_secs(1));
            let lawn = sim.lawn().polygon();
            let reports = run(&mut sim, step, 10);
            assert!(
                reports.len() > 30_000,
                "seed {seed}: {} reports",
                reports.len()
            );

            let sequence = activities(&reports);
            for pair in sequence.windows(2) {
                assert!(
                    allowed.contains(&(pair[0], pair[1])),
                    "seed {seed}: {pair:?}"
                );
            }
            let cycles = sequence
                .windows(4)
                .filter(|w| *w == [Mowing, Returning, Charging, Docked])
                .count();
            assert!(cycles >= 2, "seed {seed}: {cycles} cycles in {sequence:?}");

            for (previous, r) in reports.iter().zip(reports.iter().skip(1)) {
                let p = r.position.as_ref().unwrap();
                let q = previous.position.as_ref().unwrap();
                let here = Point::new(p.lon, p.lat);
                assert!(lawn.contains(&here), "seed {seed}: {p:?} is off the lawn");
                // No jumps: never faster than the mower drives (plus a centimetre of rounding).
                let metres = Haversine::distance(Point::new(q.lon, q.lat), here);
                let seconds =
                    (r.observed_at - previous.observed_at).num_milliseconds() as f64 / 1e3;
                assert!(
                    metres <= SPEED_M_PER_S * seconds * 1.01 + 0.02,
                    "seed {seed}: {metres} m in {seconds} s"
                );

                assert_eq!(r.blade_on, r.activity == Mowing, "seed {seed}: {r:?}");
                assert!(r.battery_percent.unwrap() <= 100);
                assert_eq!(
                    r.error_code.is_some(),
                    r.activity == Error,
                    "seed {seed}: {r:?}"
                );
                assert!(r.vendor_state.is_some());
                assert!(p.accuracy_m.is_some() && p.heading_deg.is_some());
                let battery = r.battery_percent.unwrap();
                let before = previous.battery_percent.unwrap();
                match r.activity {
                    Mowing | Leaving | Returning if previous.activity == r.activity => {
                        assert!(
                            battery <= before,
                            "seed {seed}: battery rose while {}",
                            r.activity
                        )
                    }
                    Charging if previous.activity == Charging => assert!(battery >= before),
                    Returning if previous.activity != Returning => {
                        assert!(battery <= 20, "seed {seed}: went home at {battery} %")
                    }
                    Docked => assert_eq!(battery, 100),
                    _ => {}
                }
                let observed_at = r.observed_at;
                assert_eq!(r.clone().validate(observed_at).as_ref(), Ok(r));
            }
            errors += sequence.iter().filter(|a| **a == Error).count();
        }
        // About one error per 90 min of mowing: over 40 simulated hours, some must happen.
        assert!(errors >= 2, "{errors} errors");
    }

    #[test]
    fn periodic_reports_keep_the_period_and_changes_come_at_once() {
        let period = Duration::from_secs(5);
        let mut sim = sim(7, period);
        // An uneven step (130 ms) so that the period is not a multiple of it.
        let reports = run(&mut sim, chrono::Duration::milliseconds(130), 6);
        let period = chrono::Duration::from_std(period).unwrap();
        let step = chrono::Duration::milliseconds(130);
        let mut changes = 0;
        for (previous, r) in reports.iter().zip(reports.iter().skip(1)) {
            let gap = r.observed_at - previous.observed_at;
            if r.activity == previous.activity {
                assert!(
                    gap >= period,
                    "a periodic report {gap} after the previous one"
                );
                assert!(gap < period + step, "a periodic report late: {gap}");
            } else {
                changes += 1;
            }
        }
        assert!(changes >= 5, "{changes} changes");
    }

    #[test]
    fn the_same_seed_gives_the_same_reports_and_time_going_back_gives_none() {
        let mut a = sim(9, Duration::from_secs(1));
        let mut b = sim(9, Duration::from_secs(1));
        b.mower_id = a.mower_id;
        b.account_id = a.account_id;
        let step = chrono::Duration::milliseconds(250);
        assert_eq!(run(&mut a, step, 2), run(&mut b, step, 2));

        let mut sim = sim(3, Duration::from_secs(1));
        assert!(sim.step(start()).is_some(), "the first step reports");
        assert!(sim.step(start()).is_none());
        assert!(sim.step(start() - chrono::Duration::seconds(1)).is_none());
    }

    #[test]
    fn a_long_gap_is_not_replayed() {
        let mut sim = sim(5, Duration::from_secs(1));
        sim.step(start()).unwrap();
        let before = sim.pos;
        sim.step(start() + chrono::Duration::hours(3)).unwrap();
        let moved = (sim.pos.0 - before.0).hypot(sim.pos.1 - before.1);
        assert!(moved <= SPEED_M_PER_S * MAX_CATCH_UP_S + 1e-9, "{moved} m");
    }

    /// A directory that keeps its rows in vectors and checks the references, as the contract says.
    #[derive(Default)]
    struct VecDirectory {
        accounts: Mutex<Vec<Account>>,
        sites: Mutex<Vec<Site>>,
        mowers: Mutex<Vec<Mower>>,
    }

    #[async_trait]
    impl Directory for VecDirectory {
        async fn create_account(&self, account: Account) -> Result<(), DirectoryError> {
            let mut accounts = self.accounts.lock().unwrap();
            if accounts.iter().any(|a| a.id == account.id) {
                return Err(DirectoryError::Conflict(format!("account {}", account.id)));
            }
            accounts.push(account);
            Ok(())
        }

        async fn create_site(&self, site: Site) -> Result<(), DirectoryError> {
            if !self
                .accounts
                .lock()
                .unwrap()
                .iter()
                .any(|a| a.id == site.account_id)
            {
                return Err(DirectoryError::NotFound(format!(
                    "account {}",
                    site.account_id
                )));
            }
            self.sites.lock().unwrap().push(site);
            Ok(())
        }

        async fn create_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
            let sites = self.sites.lock().unwrap();
            if !sites
                .iter()
                .any(|s| s.id == mower.site_id && s.account_id == mower.account_id)
            {
                return Err(DirectoryError::NotFound(format!("site {}", mower.site_id)));
            }
            self.mowers.lock().unwrap().push(mower);
            Ok(())
        }

        async fn account(&self, id: AccountId) -> Result<Option<Account>, DirectoryError> {
            Ok(self
                .accounts
                .lock()
                .unwrap()
                .iter()
                .find(|a| a.id == id)
                .cloned())
        }

        async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError> {
            Ok(self
                .mowers
                .lock()
                .unwrap()
                .iter()
                .find(|m| m.id == id)
                .cloned())
        }

        async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError> {
            let sites = self.sites.lock().unwrap();
            Ok(sites
                .iter()
                .filter(|s| s.account_id == account)
                .cloned()
                .collect())
        }

        async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError> {
            let mowers = self.mowers.lock().unwrap();
            Ok(mowers
                .iter()
                .filter(|m| m.account_id == account)
                .cloned()
                .collect())
        }
    }

    #[tokio::test]
    async fn the_demo_fleet_is_written_to_the_directory() {
        let directory = VecDirectory::default();
        let settings = SimulatorSettings::default();
        let fleet = seed_demo_fleet(&directory, &settings).await.unwrap();

        assert_eq!(fleet.account.name, "Demo Gardens");
        assert_eq!(fleet.account.id, DEMO_ACCOUNT_ID);
        assert_eq!(
            directory.account(fleet.account.id).await.unwrap(),
            Some(fleet.account.clone())
        );
        assert_eq!(
            directory.sites(fleet.account.id).await.unwrap(),
            fleet.sites
        );
        assert_eq!(
            directory.mowers(fleet.account.id).await.unwrap(),
            fleet.mowers
        );

        let zones: HashSet<Tz> = fleet.sites.iter().map(|s| s.time_zone).collect();
        assert_eq!(fleet.sites.len(), 3);
        assert_eq!(zones.len(), 3, "three time zones");

        assert_eq!(fleet.mowers.len(), 20);
        assert_eq!(fleet.mowers[0].name, "Mower 01");
        assert_eq!(fleet.mowers[19].name, "Mower 20");
        let serials: HashSet<&str> = fleet.mowers.iter().map(|m| m.serial.as_str()).collect();
        assert_eq!(serials.len(), 20, "serials are unique");
        for site in &fleet.sites {
            let count = fleet.mowers.iter().filter(|m| m.site_id == site.id).count();
            assert!((6..=7).contains(&count), "{} has {count} mowers", site.name);
        }
        for mower in &fleet.mowers {
            assert_eq!(mower.id.0.get_version_num(), 7);
            assert_eq!(mower.account_id, fleet.account.id);
            assert_eq!(mower.blade_threshold_ms, DEFAULT_BLADE_THRESHOLD_MS);
            assert!(!mower.model.is_empty());
        }

        // Seeding again (a restart on a persistent store) reuses the fleet: the same rows, more
        // mowers when more are asked for, fewer simulated when fewer are.
        let again = seed_demo_fleet(&directory, &settings).await.unwrap();
        assert_eq!(again, fleet);
        let more = SimulatorSettings {
            mowers: 22,
            ..SimulatorSettings::default()
        };
        let grown = seed_demo_fleet(&directory, &more).await.unwrap();
        assert_eq!(grown.mowers.len(), 22);
        assert_eq!(grown.mowers[..20], fleet.mowers[..]);
        assert_eq!(directory.mowers(fleet.account.id).await.unwrap().len(), 22);
        let none = SimulatorSettings {
            mowers: 0,
            ..SimulatorSettings::default()
        };
        let empty = seed_demo_fleet(&directory, &none).await.unwrap();
        assert!(empty.mowers.is_empty());
        assert_eq!(directory.mowers(fleet.account.id).await.unwrap().len(), 22);
    }

    #[tokio::test]
    async fn a_replay_reports_every_mower_in_time_order_and_the_same_seed_replays_alike() {
        let settings = SimulatorSettings {
            mowers: 4,
            seed: Some(3),
            ..SimulatorSettings::default()
        };
        let fleet = seed_demo_fleet(&VecDirectory::default(), &settings)
            .await
            .unwrap();
        let to = start() + chrono::Duration::minutes(10);
        let mut reports = Vec::new();
        replay(&fleet, &settings, start(), to, |r| reports.push(r.clone()));
        // At least one report a second per mower (a period of 1 s), changes on top.
        assert!(reports.len() >= 4 * 600, "{} reports", reports.len());
        assert!(reports
            .windows(2)
            .all(|w| w[0].observed_at <= w[1].observed_at));
        assert!(reports
            .iter()
            .all(|r| r.observed_at >= start() && r.observed_at < to));
        let mowers: HashSet<MowerId> = reports.iter().map(|r| r.mower_id).collect();
        assert_eq!(mowers, fleet.mowers.iter().map(|m| m.id).collect());
        assert!(reports.iter().all(|r| r.clone().validate(to).is_ok()));
        let mut again = Vec::new();
        replay(&fleet, &settings, start(), to, |r| again.push(r.clone()));
        assert_eq!(again, reports);
    }

    #[tokio::test]
    async fn a_seed_gives_the_same_ids_on_every_run_and_another_seed_others() {
        let seeded = |seed| SimulatorSettings {
            seed: Some(seed),
            ..SimulatorSettings::default()
        };
        let ids = |fleet: &DemoFleet| {
            let sites: Vec<_> = fleet.sites.iter().map(|s| s.id.0).collect();
            let mowers: Vec<_> = fleet.mowers.iter().map(|m| m.id.0).collect();
            (sites, mowers)
        };
        // Two runs: two empty directories, as two starts of the memory store.
        let first = seed_demo_fleet(&VecDirectory::default(), &seeded(7))
            .await
            .unwrap();
        let second = seed_demo_fleet(&VecDirectory::default(), &seeded(7))
            .await
            .unwrap();
        assert_eq!(ids(&first), ids(&second));
        assert_eq!(first, second, "names, sites and serials too");
        let (sites, mowers) = ids(&first);
        let distinct: HashSet<_> = sites.iter().chain(&mowers).collect();
        assert_eq!(distinct.len(), 3 + 20, "no id is repeated");
        assert!(mowers.iter().all(|id| id.get_version_num() == 8));

        let other = seed_demo_fleet(&VecDirectory::default(), &seeded(8))
            .await
            .unwrap();
        assert!(ids(&other).1.iter().all(|id| !mowers.contains(id)));
        // Without a seed, fresh v7 ids every run.
        let unseeded = seed_demo_fleet(&VecDirectory::default(), &SimulatorSettings::default())
            .await
            .unwrap();
        assert!(ids(&unseeded).1.iter().all(|id| !mowers.contains(id)));
    }

    #[tokio::test]
    async fn each_lawn_lies_near_its_site_and_apart_from_the_others() {
        use geo::Intersects;
        let fleet = fleet(20).await;
        let settings = SimulatorSettings {
            seed: Some(5),
            ..SimulatorSettings::default()
        };
        let mowers = build_mowers(&fleet, &settings);
        let again = build_mowers(&fleet, &settings);
        assert_eq!(mowers.len(), 20);
        for (i, (sim, mower)) in mowers.iter().zip(&fleet.mowers).enumerate() {
            assert_eq!(sim.mower_id(), mower.id);
            assert_eq!(sim.lawn(), again[i].lawn(), "the same seed, the same lawns");
            let site = fleet.sites.iter().find(|s| s.id == mower.site_id).unwrap();
            let demo = DEMO_SITES.iter().find(|d| d.name == site.name).unwrap();
            let (lat, lon) = sim.lawn().dock_lat_lon();
            let from_site =
                Haversine::distance(Point::new(demo.lon, demo.lat), Point::new(lon, lat));
            assert!(
                from_site < 500.0,
                "{} is {from_site} m from its site",
                mower.name
            );
            assert!(
                sim.lawn().polygon().contains(&Point::new(lon, lat)),
                "the dock is on the lawn"
            );
            for other in &mowers[i + 1..] {
                assert!(!sim.lawn().polygon().intersects(&other.lawn().polygon()));
            }
        }
    }

    /// A bus that records what is published, or refuses everything.
    #[derive(Default)]
    struct RecordingBus {
        published: Mutex<Vec<(String, Bytes, Option<String>)>>,
        down: bool,
    }

    #[async_trait]
    impl EventBus for RecordingBus {
        async fn publish(
            &self,
            subject: &str,
            payload: Bytes,
            dedup_id: Option<String>,
        ) -> Result<(), BusError> {
            if self.down {
                return Err(BusError::Unavailable("down for the test".into()));
            }
            self.published
                .lock()
                .unwrap()
                .push((subject.to_owned(), payload, dedup_id));
            Ok(())
        }

        async fn subscribe_batch(
            &self,
            _subject: &str,
            _consumer: &str,
            _settings: BatchSettings,
            _handler: Arc<dyn BatchHandler>,
        ) -> Result<Subscription, BusError> {
            Err(BusError::Refused("not in this test".into()))
        }

        async fn subscribe(
            &self,
            _subject: &str,
            _options: LiveOptions,
        ) -> Result<LiveSubscription, BusError> {
            Err(BusError::Refused("not in this test".into()))
        }

        async fn ping(&self) -> Result<(), BusError> {
            Ok(())
        }
    }

    async fn fleet(mowers: usize) -> DemoFleet {
        let settings = SimulatorSettings {
            mowers,
            ..SimulatorSettings::default()
        };
        seed_demo_fleet(&VecDirectory::default(), &settings)
            .await
            .unwrap()
    }

    async fn wait_for(bus: &RecordingBus, count: usize) {
        for _ in 0..500 {
            if bus.published.lock().unwrap().len() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("fewer than {count} messages were published");
    }

    #[tokio::test]
    async fn the_simulator_publishes_every_mower_on_its_subject_until_stopped() {
        let fleet = fleet(4).await;
        let bus = Arc::new(RecordingBus::default());
        let clock = Arc::new(ManualClock::new(start()));
        let (stop_tx, stop) = watch::channel(false);
        let settings = SimulatorSettings {
            mowers: 4,
            state_period: Duration::from_millis(50),
            seed: Some(11),
        };
        let task = Simulator::spawn(bus.clone(), clock.clone(), &fleet, settings, stop);

        // The first tick reports every mower; the clock stands still, so nothing more is due.
        wait_for(&bus, 4).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(bus.published.lock().unwrap().len(), 4);
        clock.advance(chrono::Duration::seconds(1));
        wait_for(&bus, 8).await;

        stop_tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .unwrap()
            .unwrap();

        let published = bus.published.lock().unwrap();
        assert_eq!(published.len(), 8);
        let mut ids = HashSet::new();
        for (subject, payload, dedup_id) in published.iter() {
            let report = StateReport::parse(payload, clock.now()).unwrap();
            assert!(fleet
                .mowers
                .iter()
                .any(|m| m.id == report.mower_id && m.account_id == report.account_id));
            assert_eq!(subject, &subjects::telemetry(report.mower_id));
            let expected = format!(
                "{}.{}",
                report.mower_id,
                report.observed_at.timestamp_micros()
            );
            assert_eq!(dedup_id.as_deref(), Some(expected.as_str()));
            assert!(ids.insert(expected), "de-duplication ids are unique");
        }
    }

    #[tokio::test]
    async fn publish_failures_do_not_stop_the_simulator() {
        let fleet = fleet(2).await;
        let bus = Arc::new(RecordingBus {
            down: true,
            ..RecordingBus::default()
        });
        let clock = Arc::new(ManualClock::new(start()));
        let (stop_tx, stop) = watch::channel(false);
        let settings = SimulatorSettings {
            mowers: 2,
            state_period: Duration::from_millis(20),
            seed: Some(1),
        };
        let task = Simulator::spawn(bus, clock.clone(), &fleet, settings, stop);
        for _ in 0..5 {
            clock.advance(chrono::Duration::seconds(1));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        assert!(!task.is_finished(), "the simulator carries on");
        drop(stop_tx);
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .unwrap()
            .unwrap();
    }
}
