//! One simulated mower: its phases, its motion along a back-and-forth pattern, its battery and
//! errors, and the state reports it makes. Pure and deterministic (see the crate documentation).

use crate::lawn::Lawn;
use chrono::{DateTime, SubsecRound, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map};
use std::time::Duration;
use swath_domain::{AccountId, Activity, MowerId, Position, StateReport};

/// Mowing and driving speed.
pub(crate) const SPEED_M_PER_S: f64 = 0.5;
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
pub(crate) const MAX_CATCH_UP_S: f64 = 10.0;

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

/// One simulated mower: a pure, deterministic state machine (see the crate documentation).
#[derive(Clone, Debug)]
pub struct MowerSim {
    pub(crate) mower_id: MowerId,
    pub(crate) account_id: AccountId,
    lawn: Lawn,
    period: chrono::Duration,
    rng: StdRng,
    phase: Phase,
    /// Percent, 0..=100.
    battery: f64,
    /// Local position, metres.
    pub(crate) pos: (f64, f64),
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
