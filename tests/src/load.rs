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
use sqlx::PgPool;
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

/// History rows of these mowers in PostgreSQL (one per stored state).
pub async fn stored_count(pool: &PgPool, mowers: &[MowerId]) -> anyhow::Result<usize> {
    let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM state_history WHERE mower_id = ANY($1)")
            .bind(&ids)
            .fetch_one(pool)
            .await?;
    Ok(count as usize)
}

/// History rows of the plan's mowers outside the instants its states are observed at: rows of
/// another run of the same seed (a plan starts two days before the day it runs), which a
/// verification would count as differences.
pub async fn rows_outside(pool: &PgPool, plan: &Plan) -> anyhow::Result<usize> {
    let ids: Vec<Uuid> = plan.mower_ids().iter().map(|m| m.0).collect();
    let count: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM state_history WHERE mower_id = ANY($1) \
         AND (observed_at < $2 OR observed_at >= $3)",
    )
    .bind(&ids)
    .bind(plan.start)
    .bind(plan.last_observed_at() + Duration::seconds(1))
    .fetch_one(pool)
    .await?;
    Ok(count as usize)
}

/// Waits until PostgreSQL holds `expected` history rows of the plan's mowers, printing progress
/// every `report_every` when given. Fails after `timeout` without progress.
pub async fn wait_stored(
    pool: &PgPool,
    plan: &Plan,
    expected: usize,
    timeout: std::time::Duration,
    report_every: Option<std::time::Duration>,
) -> anyhow::Result<std::time::Duration> {
    let mowers = plan.mower_ids();
    let started = Instant::now();
    let mut last = (0, Instant::now());
    let mut reported = Instant::now();
    loop {
        // A database restart makes a count fail for a while: that is not a verdict.
        let count = stored_count(pool, &mowers).await.unwrap_or(last.0);
        if count >= expected {
            anyhow::ensure!(
                count == expected,
                "{count} history rows, more than the {expected} states published"
            );
            return Ok(started.elapsed());
        }
        if count != last.0 {
            last = (count, Instant::now());
        }
        anyhow::ensure!(
            last.1.elapsed() < timeout,
            "stuck at {} of {expected} stored states for {timeout:?}",
            last.0
        );
        if let Some(every) = report_every {
            if reported.elapsed() >= every {
                eprintln!(
                    "  stored {count:>9} of {expected} ({:.0} s)",
                    started.elapsed().as_secs_f64()
                );
                reported = Instant::now();
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Waits until PostgreSQL holds at least `count` history rows of the plan's mowers. Fails after
/// `stall` without progress.
pub async fn wait_at_least(
    pool: &PgPool,
    plan: &Plan,
    count: usize,
    stall: std::time::Duration,
) -> anyhow::Result<()> {
    let mowers = plan.mower_ids();
    let mut last = (0, Instant::now());
    loop {
        let stored = stored_count(pool, &mowers).await.unwrap_or(last.0);
        if stored >= count {
            return Ok(());
        }
        if stored != last.0 {
            last = (stored, Instant::now());
        }
        anyhow::ensure!(
            last.1.elapsed() < stall,
            "stuck at {stored} stored states (waiting for {count}) for {stall:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Which tables [`compare`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// History, positions, latest (all but `last_seen_at`), health and day totals, sessions.
    Everything,
    /// History, positions, latest and sessions only: the rows that do not depend on the order in
    /// which a mower's states were stored (W8's sessions are a function of the set of states).
    OrderFree,
}

/// Every difference between `expected` (the reference) and `actual`, as lines for people; empty
/// when they are equal. `last_seen_at` (when the state was received) is never compared: the
/// reference received its states at another time.
pub fn compare(expected: &TelemetryRows, actual: &TelemetryRows, checked: Checked) -> Vec<String> {
    let mut out = Vec::new();
    diff_table(
        "history",
        &expected.history,
        &actual.history,
        |r| (r.mower_id, r.observed_at),
        &mut out,
    );
    diff_table(
        "positions",
        &expected.positions,
        &actual.positions,
        |r| (r.mower_id, r.observed_at),
        &mut out,
    );
    let without_seen = |rows: &[swath_domain::LatestRow]| -> Vec<swath_domain::LatestRow> {
        rows.iter()
            .cloned()
            .map(|mut r| {
                r.last_seen_at = DateTime::<Utc>::UNIX_EPOCH;
                r
            })
            .collect()
    };
    diff_table(
        "latest",
        &without_seen(&expected.latest),
        &without_seen(&actual.latest),
        |r| r.mower_id,
        &mut out,
    );
    diff_table(
        "sessions",
        &expected.sessions,
        &actual.sessions,
        |r| (r.session.mower_id, r.session.started_at),
        &mut out,
    );
    if checked == Checked::Everything {
        diff_table(
            "health",
            &expected.health,
            &actual.health,
            |r| r.mower_id,
            &mut out,
        );
        diff_table(
            "days",
            &expected.days,
            &actual.days,
            |r| (r.mower_id, r.day),
            &mut out,
        );
    }
    out
}

/// Compares two tables in key order: missing rows, extra rows, differing rows (the first few of
/// each shown, all counted).
pub fn diff_table<T: PartialEq + std::fmt::Debug, K: Ord + std::fmt::Debug>(
    name: &str,
    expected: &[T],
    actual: &[T],
    key: impl Fn(&T) -> K,
    out: &mut Vec<String>,
) {
    const SHOWN: usize = 5;
    let (mut missing, mut extra, mut differing) = (0usize, 0usize, 0usize);
    let mut shown = 0;
    let (mut e, mut a) = (expected.iter().peekable(), actual.iter().peekable());
    loop {
        let line = match (e.peek(), a.peek()) {
            (None, None) => break,
            (Some(x), None) => {
                missing += 1;
                let line = format!("{name}: missing {:?}", key(x));
                e.next();
                line
            }
            (None, Some(y)) => {
                extra += 1;
                let line = format!("{name}: extra {:?}", key(y));
                a.next();
                line
            }
            (Some(x), Some(y)) => match key(x).cmp(&key(y)) {
                std::cmp::Ordering::Less => {
                    missing += 1;
                    let line = format!("{name}: missing {:?}", key(x));
                    e.next();
                    line
                }
                std::cmp::Ordering::Greater => {
                    extra += 1;
                    let line = format!("{name}: extra {:?}", key(y));
                    a.next();
                    line
                }
                std::cmp::Ordering::Equal => {
                    let same = x == y;
                    let line = format!("{name}: differs\n    expected {x:?}\n    stored   {y:?}");
                    e.next();
                    a.next();
                    if same {
                        continue;
                    }
                    differing += 1;
                    line
                }
            },
        };
        if shown < SHOWN {
            out.push(line);
            shown += 1;
        }
    }
    if missing + extra + differing > 0 {
        out.push(format!(
            "{name}: {missing} missing, {extra} extra, {differing} differing (of {} expected rows)",
            expected.len()
        ));
    }
}

/// A one-line summary of a set of rows.
pub fn summary(rows: &TelemetryRows) -> String {
    format!(
        "{} history, {} positions, {} latest, {} health, {} day rows, {} sessions ({} ended, {} with breaks)",
        rows.history.len(),
        rows.positions.len(),
        rows.latest.len(),
        rows.health.len(),
        rows.days.len(),
        rows.sessions.len(),
        rows.sessions.iter().filter(|r| !r.session.is_open()).count(),
        rows.sessions.iter().filter(|r| r.session.breaks > 0).count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_fixed_by_its_seed() {
        let (a, b) = (Plan::new(1, 50, 500), Plan::new(1, 50, 500));
        assert_eq!(a.mower_ids(), b.mower_ids());
        assert_eq!(a.state(123), b.state(123));
        assert_eq!(a.message(7), b.message(7));
        let mut ids = a.mower_ids();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 50, "mower ids are distinct");
        let other = Plan::new(2, 50, 500);
        assert!(other.mower_ids().iter().all(|m| !a.mower_ids().contains(m)));
        assert_ne!(other.account(), a.account());
    }

    #[test]
    fn each_mower_reports_in_turn_one_second_apart() {
        let plan = Plan::new(3, 4, 12);
        let at = |n| plan.state(n)["observed_at"].as_str().unwrap().to_owned();
        assert_eq!(plan.state(1)["mower_id"], json!(plan.mower(1)));
        assert_eq!(plan.state(5)["mower_id"], json!(plan.mower(1)));
        assert_eq!(at(0), at(3));
        let (t0, t1): (DateTime<Utc>, DateTime<Utc>) =
            (at(1).parse().unwrap(), at(5).parse().unwrap());
        assert_eq!(t1 - t0, Duration::seconds(1));
    }

    #[test]
    fn a_steady_plan_keeps_activities_for_runs() {
        let plan = Plan::new(4, 10, 10 * 1200).with_steady(true);
        let changes = (10..plan.states)
            .filter(|n| plan.state(*n)["activity"] != plan.state(n - 10)["activity"])
            .count();
        // Ten mowers, 1 200 reports each: about two run boundaries per mower.
        assert!(changes <= 30, "{changes} activity changes");
        let volatile = Plan::new(4, 10, 10 * 1200);
        let churn = (10..volatile.states)
            .filter(|n| volatile.state(*n)["activity"] != volatile.state(n - 10)["activity"])
            .count();
        assert!(churn > 1000, "{churn}");
    }

    /// The end-to-end plans give every rule of the watcher, W6, W7 and W8 work: the independent
    /// reference derives many events of each kind (`session_ended` included), open and closed
    /// alerts, occupied zones. (The end-to-end verifier asserts the same on its own plans.)
    #[test]
    fn a_plan_with_fences_gives_every_rule_work() {
        let plan = crate::e2e::scenario::plan(7, 20, 20 * 200);
        let expected = plan.expected(BusyClock::Fixed(Utc::now()));
        let census = reference::census(&expected.watch);
        eprintln!("{census:?}");
        let alerts = [
            "closed error alerts",
            "closed geofence alerts",
            "closed battery_low alerts",
            "open blade_due alerts",
        ];
        for kind in reference::DERIVED_EVENT_KINDS.into_iter().chain(alerts) {
            let n = census.get(kind).copied().unwrap_or(0);
            assert!(n >= plan.mowers / 4, "{n} {kind}: {census:?}");
        }
        assert!(census["zone occupancies"] > 0, "{census:?}");
        assert_eq!(census["watch rows"], 20);
        assert_eq!(census["busy statuses"], 20);
        // Without fences: no geofence or zone event at all; without silences, at the default
        // gap, no session ends for good.
        let bare = Plan::new(7, 20, 20 * 200).expected(BusyClock::Wall);
        let bare = reference::census(&bare.watch);
        assert!(!bare.contains_key("geofence_left") && !bare.contains_key("zone_entered"));
        assert!(!bare.contains_key("session_ended"), "{bare:?}");
    }

    /// With silences and the end-to-end merge gap, W8 has every case: stretches ending `silent`,
    /// sessions merged across a short silence and across short rests, sessions that can no
    /// longer merge once a long silence passed (their `session_ended` raised by the next state).
    #[test]
    fn silences_end_sessions_for_good_or_merge_across_them() {
        let plan = crate::e2e::scenario::plan(11, 20, 20 * 300);
        let expected = plan.expected(BusyClock::Wall);
        let sessions: Vec<_> = expected
            .telemetry
            .sessions
            .iter()
            .map(|r| &r.session)
            .collect();
        let silent = sessions
            .iter()
            .filter(|s| s.end_reason == Some(swath_domain::sessions::EndReason::Silent))
            .count();
        assert!(silent >= plan.mowers / 4, "{silent} sessions end silent");
        // A session whose span holds a short silence merged across it.
        let across = sessions
            .iter()
            .filter(|s| {
                s.ended_at.is_some_and(|end| {
                    end - s.started_at >= SHORT_SILENCE && end - s.started_at < LONG_SILENCE
                })
            })
            .count();
        assert!(
            across >= plan.mowers / 4,
            "{across} sessions across a silence"
        );
        // Every session that ended at least the gap before its mower's newest state has its
        // event, and no other.
        let ended = reference::census(&expected.watch)["session_ended"];
        let newest: BTreeMap<MowerId, DateTime<Utc>> = expected
            .telemetry
            .latest
            .iter()
            .map(|l| (l.mower_id, l.observed_at))
            .collect();
        let final_ = sessions
            .iter()
            .filter(|s| {
                s.ended_at
                    .is_some_and(|end| newest[&s.mower_id] - end >= plan.merge_gap)
            })
            .count();
        assert_eq!(ended, final_);
        assert!(ended >= plan.mowers, "{ended} session_ended");
        assert!(plan.last_observed_at() < Utc::now());
    }

    /// docs/e2e.md's argument that the sweep cannot end a session early in a scenario: while a
    /// session that a later stretch will join is pending, and after a mower's last state, at
    /// least 8 minutes of its merge gap are left, on the mower's clock, which the sweep
    /// translates one to one onto the wall clock (decision 203). A watcher would have to lag
    /// that long behind its backlog, or the verdict come that late after the run.
    #[test]
    fn a_mergeable_session_keeps_most_of_its_gap_at_every_state() {
        let plan = crate::e2e::scenario::plan(13, 200, 200 * 500);
        let least = least_gap_left(&plan);
        assert!(least >= Duration::minutes(8), "{least}");
        assert!(least < plan.merge_gap, "the plan merges across something");
    }

    /// The least that is left of the merge gap after a watched state, over every state between a
    /// stretch's end and the start of a later stretch that joins its session, and over each
    /// mower's last state when its last stretch ended less than the gap before it (the sweep
    /// raises that session after the run).
    fn least_gap_left(plan: &Plan) -> Duration {
        use swath_domain::Activity;
        let working = |a: Activity| {
            matches!(
                a,
                Activity::Leaving | Activity::Mowing | Activity::Returning | Activity::Paused
            )
        };
        let mut per_mower: BTreeMap<MowerId, Vec<StateReport>> = BTreeMap::new();
        for s in plan.parsed_states() {
            per_mower.entry(s.mower_id).or_default().push(s);
        }
        let mut least = plan.merge_gap;
        for states in per_mower.values() {
            let mut end: Option<DateTime<Utc>> = None;
            for pair in states.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                let far = b.observed_at - a.observed_at > Duration::minutes(5);
                if working(a.activity) && (far || !working(b.activity)) {
                    end = Some(if far { a.observed_at } else { b.observed_at });
                }
                if working(b.activity) && (far || !working(a.activity)) {
                    if let Some(e) = end.take() {
                        if b.observed_at - e <= plan.merge_gap {
                            least = least.min(e + plan.merge_gap - a.observed_at);
                        }
                    }
                }
            }
            let last = states.last().expect("a state").observed_at;
            if let Some(e) = end.filter(|e| last - *e < plan.merge_gap) {
                least = least.min(e + plan.merge_gap - last);
            }
        }
        least
    }

    /// The two references agree on a plan (with late-free, in-order states both are exact), at
    /// the default merge gap and with silences at the end-to-end one.
    #[tokio::test]
    async fn the_independent_reference_agrees_with_the_one_pass_one() {
        let plain = Plan::new(9, 7, 7 * 300).with_blade_threshold_ms(60_000);
        let silent = plain.with_silences(true).with_merge_gap(E2E_MERGE_GAP);
        for plan in [plain, silent] {
            let one_pass = plan.reference().await.unwrap();
            let independent = plan.expected(BusyClock::Wall);
            let differences = compare(&independent.telemetry, &one_pass, Checked::Everything);
            assert!(differences.is_empty(), "{}", differences.join("\n"));
            assert!(one_pass.health.iter().all(|h| h.blade_due_raised));
            assert!(
                one_pass.sessions.len() >= plan.mowers,
                "{}",
                summary(&one_pass)
            );
        }
        // The gap and the silences change the sessions (not the other tables).
        let (a, b) = (
            plain.reference().await.unwrap(),
            silent.reference().await.unwrap(),
        );
        assert_ne!(
            a.sessions.len(),
            b.sessions.len(),
            "{} / {}",
            summary(&a),
            summary(&b)
        );
    }

    #[tokio::test]
    async fn the_reference_stores_every_state_and_compare_finds_differences() {
        let plan = Plan::new(5, 3, 90);
        let reference = plan.reference().await.unwrap();
        assert_eq!(reference.history.len(), 90);
        assert_eq!(reference.latest.len(), 3);
        assert!(compare(&reference, &reference, Checked::Everything).is_empty());

        let mut changed = reference.clone();
        changed.history.remove(10);
        changed.health[0].mowing_ms += 1;
        changed.latest[1].last_seen_at = Utc::now();
        let found = compare(&reference, &changed, Checked::Everything);
        assert!(
            found.iter().any(|l| l.starts_with("history: missing")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|l| l.starts_with("health: differs")),
            "{found:?}"
        );
        assert!(
            !found.iter().any(|l| l.starts_with("latest")),
            "last_seen_at is not compared"
        );
        let order_free = compare(&reference, &changed, Checked::OrderFree);
        assert!(
            !order_free.iter().any(|l| l.starts_with("health")),
            "{order_free:?}"
        );
    }

    /// A session row that differs in one value, or is missing, is a difference in both modes
    /// (sessions do not depend on the order states were stored in).
    #[tokio::test]
    async fn compare_finds_a_wrong_session() {
        let plan = Plan::new(5, 3, 90);
        let reference = plan.reference().await.unwrap();
        assert!(!reference.sessions.is_empty(), "{}", summary(&reference));
        for checked in [Checked::Everything, Checked::OrderFree] {
            let mut changed = reference.clone();
            changed.sessions[0].session.distance_mm += 1;
            let found = compare(&reference, &changed, checked);
            assert!(
                found.iter().any(|l| l.starts_with("sessions: differs")),
                "{checked:?}: {found:?}"
            );
            let mut changed = reference.clone();
            changed.sessions.pop();
            let found = compare(&reference, &changed, checked);
            assert!(
                found.iter().any(|l| l.starts_with("sessions: missing")),
                "{checked:?}: {found:?}"
            );
        }
    }
}
