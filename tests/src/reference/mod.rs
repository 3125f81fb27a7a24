//! An independent reference: the rows, events and alerts the rules ask for, computed by a slow,
//! plain fold written from the rule text (docs/rules.md §3 W0–W7 and §4; the choices of
//! docs/decisions.md 8, 9, 13 and 39), not by the code under test.
//!
//! It shares no rule code with `swath-domain` or `swath-application`: only the data types (the
//! state report, parsed and validated by its own `StateReport::parse`; the row, event and alert
//! structs; `Event::new`, which derives an event's id from what it is about). Everything else is
//! re-derived here, the obvious way:
//! - **Totals (W4, W5)** are recomputed from scratch from the set of a mower's distinct states,
//!   sorted by `observed_at`, pair by pair: no incremental state, no merge. That is the order-free
//!   rule itself (decision 39).
//! - **Sessions (W8)** ([`sessions::sessions`]): over the whole sorted sequence, the stretches
//!   first, then their merges, then each session's values from the states in its span (decision
//!   190); the domain's fold is incremental instead. [`expect`] gives them at each mower's
//!   [`MowerSetup::merge_gap`], the gap of the service it is compared with.
//! - **Blade due (W6)** recomputes the mower's blade time from scratch after every new state, in
//!   arrival order, and raises once when it reaches the threshold (no blade resets here).
//! - **The watcher (§4), zones (W7) and the busy check** are transitions in arrival order, one
//!   mower at a time, kept in plain variables. `session_ended` (decision 203) is this reference's
//!   own W8 sessions of the states the watcher watched (each newer than all before it): those
//!   ended at least the merge gap before the newest watched state.
//! - Geometry: fences and zones are rectangles ([`Rect`]); inside and the distance to the
//!   boundary are computed on a local plane in metres by hand (no `geo`).
//!
//! **Left out**, because a fold over observed times cannot reproduce them: the offline sweep
//! (`went_offline` / `came_online` and the `offline` alert depend on the wall clock between
//! receipts), `last_seen_at` (a receipt time), what a watch row keeps of W8 (the pending
//! session and when its gap passes on the receiving clock: the events say what it did) and, unless the clock is fixed ([`BusyClock`]),
//! which unchanged-activity reports the busy check refreshed after 30 s on the writer's clock.
//! [`compare_watch`] leaves exactly these out, and says so.

mod compare;
pub mod sessions;
mod telemetry;
mod watcher;

pub use compare::{
    census, check_busy, check_final_state, compare_watch, events_lost_and_extra, WatchChecked,
    DERIVED_EVENT_KINDS,
};

use crate::load::diff_table;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use serde_json::json;
use std::collections::BTreeMap;
use swath_application::ports::WatchRows;
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Occupancy, ZoneWatch};
use swath_domain::watch::{
    Alert, AlertKind, ClearCause, ClearedAlert, Event, EventDetail, EventKind, GeoPolygon,
    Severity, Watch,
};
use swath_domain::{
    AccountId, Activity, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, PositionRow,
    StateReport, TelemetryRows,
};
use telemetry::telemetry;
use uuid::Uuid;
use watcher::{busy, sessions_ended, watcher, zones};

/// docs/rules.md §3, W4: an interval longer than this counts nothing.
const LONGEST_COUNTED: Duration = Duration::minutes(5);
/// The mean Earth radius of the haversine distance, in metres.
const EARTH_RADIUS_M: f64 = 6_371_008.8;
/// §4: `battery_low` below 20 %, re-armed at 30 %.
const BATTERY_LOW: u8 = 20;
const BATTERY_OK: u8 = 30;
/// §4, decision 13: the busy check's throttle.
const BUSY_REFRESH: Duration = Duration::seconds(30);
const BUSY_MOVE_M: f64 = 100.0;

/// A rectangle in degrees: the shape of every fence and zone the reference knows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub south: f64,
    pub west: f64,
    pub north: f64,
    pub east: f64,
}

impl Rect {
    /// The same rectangle as the GeoJSON polygon the stores keep.
    pub fn polygon(&self) -> GeoPolygon {
        let (s, w, n, e) = (self.south, self.west, self.north, self.east);
        GeoPolygon::from_geojson(&json!({
            "type": "Polygon",
            "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]
        }))
        .expect("a rectangle is a valid polygon")
    }

    /// Whether `(lat, lon)` is strictly inside, and its distance to the boundary in metres, on a
    /// plane around the rectangle's centre (metres per degree of longitude shrink with the
    /// cosine of the latitude).
    pub fn placement(&self, lat: f64, lon: f64) -> (bool, f64) {
        let per_degree = EARTH_RADIUS_M * std::f64::consts::PI / 180.0;
        let per_degree_lon = per_degree * ((self.south + self.north) / 2.0).to_radians().cos();
        let x = (lon - self.west) * per_degree_lon;
        let width = (self.east - self.west) * per_degree_lon;
        let y = (lat - self.south) * per_degree;
        let height = (self.north - self.south) * per_degree;
        let inside = x > 0.0 && x < width && y > 0.0 && y < height;
        let distance = if inside {
            x.min(width - x).min(y).min(height - y)
        } else {
            let dx = (-x).max(x - width).max(0.0);
            let dy = (-y).max(y - height).max(0.0);
            dx.hypot(dy)
        };
        (inside, distance)
    }
}

/// What the reference knows of a mower: its directory entry, geofence and zones.
#[derive(Clone, Debug)]
pub struct MowerSetup {
    pub account_id: AccountId,
    pub time_zone: Tz,
    pub blade_threshold_ms: i64,
    /// Version and shape.
    pub geofence: Option<(Uuid, Rect)>,
    /// Id, name and shape.
    pub zones: Vec<(Uuid, String, Rect)>,
    /// W8's merge gap of the service that stores and watches it
    /// (`SWATH_SESSION_MERGE_GAP_SECONDS`): its sessions and their `session_ended` are folded
    /// with it.
    pub merge_gap: Duration,
}

/// How the busy check's clock runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyClock {
    /// Every batch at this instant (the tests' manual clock): the 30 s refresh never happens, so
    /// the statuses are exactly predictable.
    Fixed(DateTime<Utc>),
    /// The wall clock: the statuses are not predicted ([`check_busy`] checks what holds anyway).
    Wall,
}

/// What the rules ask for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expected {
    /// Latest rows carry `last_seen_at` = the Unix epoch: a receipt time is not predicted.
    pub telemetry: TelemetryRows,
    /// Watches carry `last_seen_at` = the Unix epoch; no offline event or alert; `busy` is empty
    /// unless the clock was [`BusyClock::Fixed`].
    pub watch: WatchRows,
    /// The alerts cleared without an event (decision 130), what the watcher publishes beside
    /// its events, by mower and instant.
    pub cleared_without_event: Vec<ClearedAlert>,
}

/// The reference for `arrivals`: valid state reports in the order the service received them
/// (a redelivery appears again). Mowers missing from `setup` are not in the directory.
pub fn expect(
    setup: &BTreeMap<MowerId, MowerSetup>,
    arrivals: &[StateReport],
    busy_clock: BusyClock,
) -> Expected {
    // W0: the mower is in the directory and the report names its account.
    let accepted: Vec<&StateReport> = arrivals
        .iter()
        .filter(|s| {
            setup
                .get(&s.mower_id)
                .is_some_and(|m| m.account_id == s.account_id)
        })
        .collect();
    let mut per_mower: BTreeMap<MowerId, Vec<&StateReport>> = BTreeMap::new();
    for s in &accepted {
        per_mower.entry(s.mower_id).or_default().push(s);
    }

    let mut out = Expected::default();
    let mut alerts = Alerts::default();
    for (mower, states) in &per_mower {
        let m = &setup[mower];
        telemetry(m, states, &mut out, &mut alerts);
        watcher(m, states, &mut out, &mut alerts);
        sessions_ended(*mower, m, states, &mut out);
        zones(m, states, &mut out);
        if let BusyClock::Fixed(now) = busy_clock {
            if let Some(b) = busy(states, now) {
                out.watch.busy.push(b);
            }
        }
    }
    out.watch.events.sort_by_key(|e| e.id);
    out.cleared_without_event
        .sort_by_key(|c| (c.mower_id, c.cleared_at));
    out.watch.alerts = alerts.all;
    out.watch.alerts.sort_by_key(|a| a.id);
    out
}

/// The alerts: at most one open per mower and kind, until cleared (§4, decision 9).
#[derive(Default)]
struct Alerts {
    all: Vec<Alert>,
    open: BTreeMap<(MowerId, AlertKind), usize>,
}

impl Alerts {
    fn open(&mut self, event: &Event, kind: AlertKind, code: Option<String>) {
        assert!(
            !self.open.contains_key(&(event.mower_id, kind)),
            "the reference opened a second {kind:?} alert"
        );
        self.open.insert((event.mower_id, kind), self.all.len());
        self.all.push(Alert {
            id: event.id,
            mower_id: event.mower_id,
            account_id: event.account_id,
            kind,
            severity: severity(kind),
            raised_at: event.observed_at,
            cleared_at: None,
            code,
        });
    }

    fn clear(&mut self, mower: MowerId, kind: AlertKind, at: DateTime<Utc>) {
        if let Some(i) = self.open.remove(&(mower, kind)) {
            self.all[i].cleared_at = Some(at);
        }
    }
}

/// Decision 9: a mower outside its geofence may be stolen.
fn severity(kind: AlertKind) -> Severity {
    match kind {
        AlertKind::Geofence => Severity::Critical,
        AlertKind::Error | AlertKind::Offline => Severity::High,
        AlertKind::BatteryLow => Severity::Normal,
        AlertKind::BladeDue => Severity::Low,
    }
}

/// An accuracy as the rules use it: unknown (or nonsense) is exact.
fn accuracy(p: &swath_domain::Position) -> f64 {
    p.accuracy_m
        .filter(|a| a.is_finite() && *a > 0.0)
        .unwrap_or(0.0)
}

fn round_7(degrees: f64) -> f64 {
    (degrees * 1e7).round() / 1e7
}

fn round_cm(metres: f64) -> f64 {
    (metres * 100.0).round() / 100.0
}
