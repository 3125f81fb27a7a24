//! The load generator and verifier behind `swath-load` and the end-to-end tests.
//!
//! A [`Plan`] is everything a run publishes, derived from a seed: one account, one site, `M`
//! mowers with fixed ids, and `N` valid state reports. State `n` is mower `n % M`'s report number
//! `n / M`; each mower reports in turn, 1 s apart in observed time (a plan with
//! [`silences`](Plan::with_silences) adds a silence of minutes after every hundredth report), so a
//! mower's states are `M` messages apart on the bus. Activities, blade, battery, errors and positions vary with the
//! seed, so that every write rule has something to count (mowing time, blade time, distance,
//! errors, charges, day rows on two local days).
//!
//! [`Plan::reference`] is what storing the states one at a time, in publication order, gives: the
//! same states through [`Ingest`] on a [`MemoryStore`], one state per batch. [`Plan::expected`] is
//! the independent reference's answer ([`crate::reference`]: written from the rule text, no rule
//! code of the service), for the telemetry rows and for the watcher's, W6's and W7's rows when the
//! plan has fences ([`Plan::with_fences`]). [`compare`] reports every difference between telemetry
//! rows and what a store exported; [`reference::compare_watch`] does the same for the
//! notification rows.

use crate::reference::{self, BusyClock, Expected, MowerSetup, Rect};
use anyhow::Context;
use bytes::Bytes;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;
use swath_application::ports::{
    Directory, DirectoryError, GeofenceStore, ManualClock, TelemetryStore, ZoneStore,
};
use swath_application::{subjects, Ingest};
use swath_domain::watch::zones::Zone;
use swath_domain::watch::Geofence;
use swath_domain::{
    Account, AccountId, Mower, MowerId, Site, SiteId, StateOutcome, StateReport, TelemetryRows,
};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_nats::NatsBus;
use uuid::Uuid;

mod verify;
pub use verify::*;

/// The activities a plan draws from, with their weights out of 100.
const ACTIVITIES: [(&str, u64); 8] = [
    ("mowing", 70),
    ("returning", 5),
    ("docked", 5),
    ("charging", 6),
    ("paused", 4),
    ("idle", 3),
    ("leaving", 4),
    ("error", 3),
];

/// A plan with silences: each mower falls silent after every [`SILENCE_EVERY`]th report
/// (staggered between mowers), alternately for [`SHORT_SILENCE`] and [`LONG_SILENCE`].
pub const SILENCE_EVERY: u64 = 100;
/// Longer than W4's 5 minutes, so the stretch it follows ends `silent`; shorter than
/// [`E2E_MERGE_GAP`] by far, so the next stretch merges with it.
pub const SHORT_SILENCE: Duration = Duration::minutes(6);
/// Longer than [`E2E_MERGE_GAP`]: the session before it can no longer merge, and the first state
/// after it raises its `session_ended`.
pub const LONG_SILENCE: Duration = Duration::minutes(20);
/// The merge gap (`SWATH_SESSION_MERGE_GAP_SECONDS`) the end-to-end scenarios run their services
/// at and give their references (docs/e2e.md, "Sessions and `session_ended`"): between the
/// silences, and far longer than anything a watcher can lag on the wall clock.
pub const E2E_MERGE_GAP: Duration = Duration::minutes(15);

/// `report` of mower `i` at `tick` with its position when `positioned` and, in error, an error
/// code, both drawn from `r`.
fn with_position_and_error(
    mut report: Value,
    positioned: bool,
    i: usize,
    tick: u64,
    r: u64,
) -> Value {
    if positioned {
        report["position"] = json!({
            "lat": 52.0 + i as f64 * 1e-3 + tick as f64 * 1e-5,
            "lon": 13.0 + ((r >> 32) % 1000) as f64 * 1e-6,
            "accuracy_m": 0.5,
        });
    }
    if report["activity"] == "error" {
        report["error_code"] = json!(format!("E{}", (r >> 40) % 4));
    }
    report
}

/// An activity drawn from [`ACTIVITIES`] by the low bits of `r`.
fn pick_activity(r: u64) -> &'static str {
    let mut pick = r % 100;
    for (name, weight) in ACTIVITIES {
        if pick < weight {
            return name;
        }
        pick -= weight;
    }
    "mowing"
}

/// What one run publishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub seed: u64,
    pub mowers: usize,
    pub states: usize,
    /// When the first states were observed (see [`Plan::default_start`]).
    pub start: DateTime<Utc>,
    /// `false` (the default): every state draws its activity, battery and blade anew, so that
    /// the write and notification rules have as much to do as possible (the tests). `true`: a
    /// fleet as it usually is: each mower keeps its activity for 10-minute runs (staggered
    /// between mowers), its battery moves slowly, a mowing mower always reports a position.
    pub steady: bool,
    /// The mowers' blade threshold (W6): 1 h by default, so that long runs raise `blade_due`
    /// now and then; the end-to-end tests lower it so that every mower raises it.
    pub blade_threshold_ms: i64,
    /// `true`: [`Plan::seed_fences`] gives even mowers a geofence that their positions leave and
    /// re-enter, and two mowers in three two zones they drive in and out of (see
    /// [`Plan::geofence`], [`Plan::zones`]), so that the watcher and W7 have work to do.
    pub fences: bool,
    /// `true`: every mower falls silent after every [`SILENCE_EVERY`]th report (see
    /// [`Plan::observed_at`]), so that W8 has stretches ending `silent` and, with a merge gap
    /// between the two silences ([`E2E_MERGE_GAP`]), sessions that merge across a silence and
    /// sessions that can no longer merge (`session_ended`).
    pub silences: bool,
    /// W8's merge gap of the service that stores the plan (`SWATH_SESSION_MERGE_GAP_SECONDS`),
    /// which the references fold with: the default unless [`Plan::with_merge_gap`].
    pub merge_gap: Duration,
}

/// SplitMix64: a fixed, well-mixed function of its input (no dependency, the same everywhere).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Plan {
    pub fn new(seed: u64, mowers: usize, states: usize) -> Self {
        assert!(mowers > 0, "a plan needs at least one mower");
        Self {
            seed,
            mowers,
            states,
            start: Self::default_start(),
            steady: false,
            blade_threshold_ms: 3_600_000,
            fences: false,
            silences: false,
            merge_gap: swath_domain::sessions::DEFAULT_SESSION_MERGE_GAP,
        }
    }

    /// The same plan with silences (see [`Plan::silences`](Plan)).
    pub fn with_silences(mut self, silences: bool) -> Self {
        self.silences = silences;
        self
    }

    /// The same plan stored by a service with another merge gap (see
    /// [`Plan::merge_gap`](Plan)).
    pub fn with_merge_gap(mut self, gap: Duration) -> Self {
        self.merge_gap = gap;
        self
    }

    /// When mower `i`'s report number `tick` was observed: `tick` seconds after
    /// [`Plan::start`](Plan), plus, with silences, those before it. Mower `i` falls silent
    /// between its reports `t` and `t + 1` when `t + offset` is one short of a multiple of
    /// [`SILENCE_EVERY`] (`offset` drawn from the seed and `i`, so the mowers' silences are
    /// staggered); its `k`-th silence is [`LONG_SILENCE`] when `k + i` is even, else
    /// [`SHORT_SILENCE`], so that half the mowers' first silence is a long one.
    pub fn observed_at(&self, i: usize, tick: u64) -> DateTime<Utc> {
        let mut at = self.start + Duration::seconds(tick as i64);
        if self.silences {
            let offset = mix(self.seed ^ i as u64 ^ 0x5349_4c45_4e54) % SILENCE_EVERY;
            let silences = ((tick + offset) / SILENCE_EVERY) as i32;
            // Silences 1..=k: those with `k + i` even are long.
            let long = if i.is_multiple_of(2) {
                silences / 2
            } else {
                (silences + 1) / 2
            };
            at += LONG_SILENCE * long + SHORT_SILENCE * (silences - long);
        }
        at
    }

    /// When the plan's newest state was observed.
    pub fn last_observed_at(&self) -> DateTime<Utc> {
        (0..self.mowers.min(self.states))
            .map(|i| {
                let reports = (self.states - i).div_ceil(self.mowers) as u64;
                self.observed_at(i, reports - 1)
            })
            .max()
            .unwrap_or(self.start)
    }

    /// The same plan with another blade threshold (see [`Plan::blade_threshold_ms`](Plan)).
    pub fn with_blade_threshold_ms(mut self, threshold_ms: i64) -> Self {
        self.blade_threshold_ms = threshold_ms;
        self
    }

    /// The same plan with geofences and zones (see [`Plan::fences`](Plan)).
    pub fn with_fences(mut self, fences: bool) -> Self {
        self.fences = fences;
        self
    }

    /// The same plan with steady activities (see [`Plan::steady`](Plan)).
    pub fn with_steady(mut self, steady: bool) -> Self {
        self.steady = steady;
        self
    }

    /// Two days ago at 22:55 UTC: recent enough that no retention rule touches the rows
    /// (positions are downsampled after 30 days), far enough in the past that long runs stay
    /// before now, and five minutes before midnight in the site's time zone (Europe/Berlin) in
    /// winter, so that day rows of two local days are written. The same all day long: a
    /// publishing run and a verifying run on one day agree without `--start`.
    pub fn default_start() -> DateTime<Utc> {
        let day = Utc::now().date_naive() - Duration::days(2);
        Utc.from_utc_datetime(&day.and_hms_opt(22, 55, 0).expect("a valid time"))
    }

    /// A fixed UUID (version 8, "custom") of this seed: `kind` 0 account, 1 site, 2 mower.
    fn uuid(&self, kind: u8, i: u64) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&mix(self.seed).to_be_bytes());
        bytes[9] = kind;
        bytes[10..].copy_from_slice(&i.to_be_bytes()[2..]);
        uuid::Builder::from_custom_bytes(bytes).into_uuid()
    }

    pub fn account(&self) -> AccountId {
        AccountId(self.uuid(0, 0))
    }

    pub fn site(&self) -> SiteId {
        SiteId(self.uuid(1, 0))
    }

    pub fn mower(&self, i: usize) -> MowerId {
        MowerId(self.uuid(2, i as u64))
    }

    /// Every mower id, in index order.
    pub fn mower_ids(&self) -> Vec<MowerId> {
        (0..self.mowers).map(|i| self.mower(i)).collect()
    }

    /// State `n` as JSON: mower `n % M`, observed `n / M` seconds after [`Plan::start`](Plan).
    pub fn state(&self, n: usize) -> Value {
        if self.steady {
            return self.steady_state(n);
        }
        let i = n % self.mowers;
        let tick = (n / self.mowers) as u64;
        let r = mix(self.seed ^ mix((i as u64) << 32 ^ tick));
        let activity = pick_activity(r);
        let report = self.report(n, tick, activity, (r >> 8) % 101, r);
        let positioned = !(r >> 24).is_multiple_of(10);
        with_position_and_error(report, positioned, i, tick, r)
    }

    /// State `n`'s report but for its position and error: what both kinds of plan send alike,
    /// with the activity and battery each picks (`r`, the state's random bits, picks the blade).
    fn report(&self, n: usize, tick: u64, activity: &str, battery: u64, r: u64) -> Value {
        let observed_at = self.observed_at(n % self.mowers, tick);
        json!({
            "mower_id": self.mower(n % self.mowers),
            "account_id": self.account(),
            "observed_at": observed_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "activity": activity,
            "battery_percent": battery,
            "blade_on": activity == "mowing" && !(r >> 16).is_multiple_of(10),
            "vendor_state": activity.to_ascii_uppercase(),
            "load_seq": n,
        })
    }

    /// State `n` of a steady plan: runs of 600 reports (10 minutes) per activity.
    fn steady_state(&self, n: usize) -> Value {
        const RUN: u64 = 600;
        let i = n % self.mowers;
        let tick = (n / self.mowers) as u64;
        let shifted = tick + mix(self.seed ^ i as u64) % RUN;
        let (run, in_run) = (shifted / RUN, shifted % RUN);
        let r = mix(self.seed ^ mix((i as u64) << 32 ^ run ^ 0x5747_4541_4459));
        let activity = pick_activity(r);
        let report = self.report(n, tick, activity, 90 - in_run / 20, r);
        let positioned = matches!(activity, "mowing" | "leaving" | "returning");
        with_position_and_error(report, positioned, i, tick, r)
    }

    /// State `n` as published: subject, payload, de-duplication id.
    pub fn message(&self, n: usize) -> (String, Bytes, String) {
        let i = n % self.mowers;
        let payload = serde_json::to_vec(&self.state(n)).expect("a JSON value serialises");
        (
            subjects::telemetry(self.mower(i)),
            Bytes::from(payload),
            format!(
                "load-{:016x}-{}{}{}-{n}",
                self.seed,
                self.mowers,
                if self.steady { "s" } else { "" },
                if self.silences { "q" } else { "" }
            ),
        )
    }

    /// Creates the account, the site and the mowers; what exists already (a run before) is
    /// kept, so seeding twice is harmless.
    pub async fn seed_directory(&self, directory: &dyn Directory) -> anyhow::Result<()> {
        fn ok_if_exists(r: Result<(), DirectoryError>) -> anyhow::Result<()> {
            match r {
                Ok(()) | Err(DirectoryError::Conflict(_)) => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        ok_if_exists(
            directory
                .create_account(Account {
                    id: self.account(),
                    name: format!("Load {:x}", self.seed),
                })
                .await,
        )?;
        ok_if_exists(
            directory
                .create_site(Site {
                    id: self.site(),
                    account_id: self.account(),
                    name: "Load site".into(),
                    time_zone: chrono_tz::Europe::Berlin,
                    display_order: 0,
                })
                .await,
        )?;
        for i in 0..self.mowers {
            ok_if_exists(
                directory
                    .create_mower(Mower {
                        id: self.mower(i),
                        account_id: self.account(),
                        site_id: self.site(),
                        name: format!("Load mower {i:06}"),
                        model: "LOAD".into(),
                        serial: format!("L{i:06}"),
                        display_order: 0,
                        blade_threshold_ms: self.blade_threshold_ms,
                    })
                    .await,
            )
            .with_context(|| format!("seeding mower {i}"))?;
        }
        Ok(())
    }

    /// Mower `i`'s geofence when the plan has fences: even mowers only. Mower `i` drifts north
    /// 1e-5° (1.1 m) a second from 52° + `i` × 1e-3° and reports a longitude between 13° and
    /// 13.001° in steps of 1e-6° (7 cm); the fence ends 600.5 steps east and 150.5 s north of
    /// its start, so positions leave and re-enter it. Every boundary lies half a step between
    /// reported coordinates: no position is within 1 cm of "farther out than its accuracy"
    /// (0.5 m), so two correct computations of the distance never disagree on a side.
    pub fn geofence(&self, i: usize) -> Option<(Uuid, Rect)> {
        (self.fences && i.is_multiple_of(2)).then(|| {
            let base = 52.0 + i as f64 * 1e-3;
            (
                self.uuid(3, i as u64),
                Rect {
                    south: base - 5e-4,
                    west: 13.0 - 5e-4,
                    north: base + 150.5e-5,
                    east: 13.0 + 600.5e-6,
                },
            )
        })
    }

    /// Mower `i`'s zones when the plan has fences, in id order: none for every third mower, two
    /// strips of longitude for the others ("Strip": 200.5–400.5 steps, "East": 700.5–900.5).
    pub fn zones(&self, i: usize) -> Vec<(Uuid, String, Rect)> {
        if !self.fences || i % 3 == 2 {
            return Vec::new();
        }
        let base = 52.0 + i as f64 * 1e-3;
        let strip = |west: f64, east: f64| Rect {
            south: base - 5e-4,
            west: 13.0 + west * 1e-6,
            north: base + 1e-2,
            east: 13.0 + east * 1e-6,
        };
        vec![
            (
                self.uuid(4, 2 * i as u64),
                "Strip".into(),
                strip(200.5, 400.5),
            ),
            (
                self.uuid(4, 2 * i as u64 + 1),
                "East".into(),
                strip(700.5, 900.5),
            ),
        ]
    }

    /// Stores the geofences and zones of a plan with fences (nothing otherwise). Once per store:
    /// a zone stored already is refused.
    pub async fn seed_fences<S>(&self, store: &S) -> anyhow::Result<()>
    where
        S: GeofenceStore + ZoneStore,
    {
        let at = self.start;
        for i in 0..self.mowers {
            if let Some((version, rect)) = self.geofence(i) {
                store
                    .put_geofence(Geofence {
                        mower_id: self.mower(i),
                        account_id: self.account(),
                        version,
                        polygon: rect.polygon(),
                        updated_at: at,
                    })
                    .await?;
            }
            for (id, name, rect) in self.zones(i) {
                store
                    .create_zone(Zone {
                        id,
                        mower_id: self.mower(i),
                        account_id: self.account(),
                        name,
                        polygon: rect.polygon(),
                        created_at: at,
                        updated_at: at,
                    })
                    .await?;
            }
        }
        Ok(())
    }

    /// The directory, fences and zones as the independent reference sees them.
    pub fn setup(&self) -> BTreeMap<MowerId, MowerSetup> {
        (0..self.mowers)
            .map(|i| {
                (
                    self.mower(i),
                    MowerSetup {
                        account_id: self.account(),
                        time_zone: chrono_tz::Europe::Berlin,
                        blade_threshold_ms: self.blade_threshold_ms,
                        geofence: self.geofence(i),
                        zones: self.zones(i),
                        merge_gap: self.merge_gap,
                    },
                )
            })
            .collect()
    }

    /// States `0..states` as the service parses them, in publication order.
    pub fn parsed_states(&self) -> Vec<StateReport> {
        let now = Utc::now();
        (0..self.states)
            .map(|n| {
                StateReport::parse(&self.message(n).1, now).expect("the plan's states are valid")
            })
            .collect()
    }

    /// What the independent reference expects of states `0..states` received in publication
    /// order (see [`crate::reference`]).
    pub fn expected(&self, busy: BusyClock) -> Expected {
        reference::expect(&self.setup(), &self.parsed_states(), busy)
    }

    /// The rows of storing states `0..states` one at a time, in publication order.
    pub async fn reference(&self) -> anyhow::Result<TelemetryRows> {
        let store = Arc::new(MemoryStore::new(MemoryStoreSettings {
            history_per_mower: self.states / self.mowers + 2,
        }));
        self.seed_directory(store.as_ref()).await?;
        let ingest = Ingest::new(
            store.clone(),
            Arc::new(crate::support::RecordingBus::default()),
            Arc::new(ManualClock::new(Utc::now())),
        )
        .with_session_merge_gap(self.merge_gap);
        for n in 0..self.states {
            let (_, payload, _) = self.message(n);
            let outcome = ingest.record_states(vec![ingest.parse(&payload)]).await?;
            anyhow::ensure!(
                outcome == [StateOutcome::Stored],
                "the reference refused state {n}: {outcome:?}"
            );
        }
        Ok(store.export(&self.mower_ids()).await?)
    }

    /// Publishes states `range` in order on `bus`, each with its de-duplication id, at most
    /// `rate` per second (`None`: as fast as the stream acknowledges, with `window` publishes in
    /// flight, but never more than one state of a mower). A failed publish is retried from the
    /// first unacknowledged state (the ids make a repeat a no-op) until `retry_for` has passed
    /// without progress.
    ///
    /// Why one state of a mower at most: a publish that fails may not have been stored (a node
    /// of a cluster killed or paused with it in flight) while later ones in the window were; its
    /// retry then lands after them, and with two states of a mower in the window the stream would
    /// hold that mower's states out of the published order. Swath handles a mower's states in
    /// the order the stream holds them, so such a publisher, not Swath, would break the order
    /// the references assume (found by the three-node cluster scenario, decision 88). The plan
    /// cycles through its mowers, so `window` ≤ mowers keeps every mower's states in flight one
    /// at a time.
    pub async fn publish(
        &self,
        bus: &NatsBus,
        range: Range<usize>,
        rate: Option<f64>,
        window: usize,
        retry_for: std::time::Duration,
    ) -> anyhow::Result<PublishReport> {
        let window = window.clamp(1, self.mowers.max(1));
        let started = Instant::now();
        let mut next = range.start;
        let mut last_progress = Instant::now();
        let mut retries = 0;
        while next < range.end {
            let until = match rate {
                None => range.end,
                Some(rate) => {
                    // Sent so far on schedule: one tick's worth at a time.
                    let due =
                        range.start + (started.elapsed().as_secs_f64() * rate).floor() as usize + 1;
                    let until = due.min(range.end);
                    if until <= next {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        continue;
                    }
                    until
                }
            };
            let (acknowledged, failure) = bus
                .publish_pipelined((next..until).map(|n| self.message(n)), window)
                .await;
            if acknowledged > 0 {
                last_progress = Instant::now();
            }
            next += acknowledged;
            if let Some(e) = failure {
                anyhow::ensure!(
                    last_progress.elapsed() < retry_for,
                    "publishing state {next} failed for {retry_for:?}: {e}"
                );
                retries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
        Ok(PublishReport {
            states: range.len(),
            elapsed: started.elapsed(),
            retries,
        })
    }
}

/// What [`Plan::publish`] did.
#[derive(Clone, Copy, Debug)]
pub struct PublishReport {
    pub states: usize,
    pub elapsed: std::time::Duration,
    /// Publishes that failed and were made again.
    pub retries: usize,
}

impl PublishReport {
    pub fn per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

#[cfg(test)]
mod tests;
