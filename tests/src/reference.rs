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
//! - **Blade due (W6)** recomputes the mower's blade time from scratch after every new state, in
//!   arrival order, and raises once when it reaches the threshold (no blade resets here).
//! - **The watcher (§4), zones (W7) and the busy check** are transitions in arrival order, one
//!   mower at a time, kept in plain variables.
//! - Geometry: fences and zones are rectangles ([`Rect`]); inside and the distance to the
//!   boundary are computed on a local plane in metres by hand (no `geo`).
//!
//! **Left out**, because a fold over observed times cannot reproduce them: the offline sweep
//! (`went_offline` / `came_online` and the `offline` alert depend on the wall clock between
//! receipts), `last_seen_at` (a receipt time) and, unless the clock is fixed ([`BusyClock`]),
//! which unchanged-activity reports the busy check refreshed after 30 s on the writer's clock.
//! [`compare_watch`] leaves exactly these out, and says so.

use crate::load::diff_table;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use serde_json::json;
use std::collections::BTreeMap;
use swath_application::ports::WatchRows;
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Occupancy, ZoneWatch};
use swath_domain::watch::{
    Alert, AlertKind, Event, EventDetail, EventKind, GeoPolygon, Severity, Watch,
};
use swath_domain::{
    AccountId, Activity, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, PositionRow,
    StateReport, TelemetryRows,
};
use uuid::Uuid;

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
        zones(m, states, &mut out);
        if let BusyClock::Fixed(now) = busy_clock {
            if let Some(b) = busy(states, now) {
                out.watch.busy.push(b);
            }
        }
    }
    out.watch.events.sort_by_key(|e| e.id);
    out.watch.alerts = alerts.all;
    out.watch.alerts.sort_by_key(|a| a.id);
    out
}

/// W1–W6 for one mower's accepted states (arrival order).
fn telemetry(m: &MowerSetup, states: &[&StateReport], out: &mut Expected, alerts: &mut Alerts) {
    // W1: the first state of each key is the one stored; later ones of the key write nothing.
    let mut distinct: BTreeMap<DateTime<Utc>, &StateReport> = BTreeMap::new();
    let mut blade_due_raised = false;
    for s in states {
        if distinct.contains_key(&s.observed_at) {
            continue;
        }
        distinct.insert(s.observed_at, s);
        // W6, once (no blade reset here): blade time recomputed over the states so far.
        if !blade_due_raised {
            let blade = blade_ms(&distinct);
            if blade >= m.blade_threshold_ms {
                blade_due_raised = true;
                let event = Event::new(
                    s.mower_id,
                    s.account_id,
                    s.observed_at,
                    EventDetail::BladeDue {
                        blade_since_reset_ms: blade,
                        threshold_ms: m.blade_threshold_ms,
                    },
                );
                alerts.open(&event, AlertKind::BladeDue, None);
                out.watch.events.push(event);
            }
        }
    }
    let rows = &mut out.telemetry;
    for s in distinct.values() {
        rows.history.push(HistoryRow {
            mower_id: s.mower_id,
            observed_at: s.observed_at,
            activity: s.activity,
            battery_percent: s.battery_percent,
            error_code: s.error_code.clone(),
            blade_on: s.blade_on,
        });
        // W2.
        if let Some(p) = &s.position {
            rows.positions.push(PositionRow {
                mower_id: s.mower_id,
                observed_at: s.observed_at,
                lat: p.lat,
                lon: p.lon,
                accuracy_m: p.accuracy_m,
                heading_deg: p.heading_deg,
            });
        }
    }
    let (Some(first), Some(last)) = (distinct.values().next(), distinct.values().next_back())
    else {
        return;
    };
    // W3: the newest state.
    rows.latest.push(LatestRow {
        mower_id: last.mower_id,
        account_id: last.account_id,
        observed_at: last.observed_at,
        last_seen_at: DateTime::<Utc>::UNIX_EPOCH,
        state: (*last).clone(),
    });
    // W4, W5.
    let (sum, days) = totals(m, &distinct);
    rows.health.push(HealthTotals {
        mower_id: last.mower_id,
        account_id: last.account_id,
        counted_from: first.observed_at,
        counted_until: last.observed_at,
        last_activity: last.activity,
        last_blade_on: last.blade_on,
        last_lat: last.position.as_ref().map(|p| p.lat),
        last_lon: last.position.as_ref().map(|p| p.lon),
        mowing_ms: sum.mowing_ms,
        blade_ms: sum.blade_ms,
        distance_mm: sum.distance_mm,
        error_count: sum.error_count,
        charge_count: sum.charge_count,
        blade_since_reset_ms: sum.blade_ms,
        blade_due_raised,
        blade_reset_until: None,
    });
    rows.days.extend(days.into_values());
}

/// W4 and W5 from scratch: the distinct states in `observed_at` order, each consecutive pair's
/// interval attributed to the earlier state (when at most 5 minutes long) and added to the day of
/// the later one; "entering" error or charging counted on the entering state's day; each state
/// counted on its own day. Returns the sums and the day rows.
fn totals(
    m: &MowerSetup,
    distinct: &BTreeMap<DateTime<Utc>, &StateReport>,
) -> (DayTotals, BTreeMap<NaiveDate, DayTotals>) {
    let states: Vec<&StateReport> = distinct.values().copied().collect();
    let mower = states[0].mower_id;
    let mut days: BTreeMap<NaiveDate, DayTotals> = BTreeMap::new();
    for (i, s) in states.iter().enumerate() {
        let day = s.observed_at.with_timezone(&m.time_zone).date_naive();
        let row = days
            .entry(day)
            .or_insert_with(|| DayTotals::zero(mower, day));
        row.state_count += 1;
        let previous = i.checked_sub(1).map(|j| states[j]);
        let entering =
            |activity| s.activity == activity && previous.is_none_or(|p| p.activity != activity);
        if entering(Activity::Error) {
            row.error_count += 1;
        }
        if entering(Activity::Charging) {
            row.charge_count += 1;
        }
        let Some(p) = previous else { continue };
        let interval = s.observed_at - p.observed_at;
        if interval > LONGEST_COUNTED {
            continue;
        }
        let ms = interval.num_milliseconds();
        if p.activity == Activity::Mowing {
            row.mowing_ms += ms;
            if let (Some(a), Some(b)) = (&p.position, &s.position) {
                row.distance_mm +=
                    (haversine_m(a.lat, a.lon, b.lat, b.lon) * 1000.0).round() as i64;
            }
        }
        if p.blade_on {
            row.blade_ms += ms;
        }
    }
    let mut sum = DayTotals::zero(mower, NaiveDate::MIN);
    for d in days.values() {
        sum.mowing_ms += d.mowing_ms;
        sum.blade_ms += d.blade_ms;
        sum.distance_mm += d.distance_mm;
        sum.error_count += d.error_count;
        sum.charge_count += d.charge_count;
        sum.state_count += d.state_count;
    }
    (sum, days)
}

/// W4's blade time alone (W6 recomputes it after every state: the full [`totals`] would be
/// needlessly slow): the intervals of at most 5 minutes opened by a state with its blade on.
fn blade_ms(distinct: &BTreeMap<DateTime<Utc>, &StateReport>) -> i64 {
    let states: Vec<&StateReport> = distinct.values().copied().collect();
    states
        .windows(2)
        .filter(|pair| {
            pair[0].blade_on && pair[1].observed_at - pair[0].observed_at <= LONGEST_COUNTED
        })
        .map(|pair| (pair[1].observed_at - pair[0].observed_at).num_milliseconds())
        .sum()
}

/// The great-circle distance in metres (the haversine formula).
fn haversine_m(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (phi1, phi2) = (lat1.to_radians(), lat2.to_radians());
    let d_phi = (lat2 - lat1).to_radians();
    let d_lambda = (lon2 - lon1).to_radians();
    let a = (d_phi / 2.0).sin().powi(2) + phi1.cos() * phi2.cos() * (d_lambda / 2.0).sin().powi(2);
    EARTH_RADIUS_M * 2.0 * a.sqrt().asin()
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

/// §4 and decision 8 for one mower's accepted states, in arrival order.
fn watcher(m: &MowerSetup, states: &[&StateReport], out: &mut Expected, alerts: &mut Alerts) {
    let mut watch: Option<Watch> = None;
    for s in states {
        // About the present: a state not newer than every watched one is skipped.
        if watch
            .as_ref()
            .is_some_and(|w| s.observed_at <= w.watched_until)
        {
            continue;
        }
        let previous = watch.as_ref().map(|w| w.last_activity);
        let w = watch.get_or_insert(Watch {
            mower_id: s.mower_id,
            account_id: s.account_id,
            watched_until: s.observed_at,
            last_seen_at: DateTime::<Utc>::UNIX_EPOCH,
            last_activity: s.activity,
            error_code: None,
            outside_geofence: false,
            battery_low: false,
            offline: false,
            geofence_version: None,
        });
        let at = s.observed_at;
        let mut raise = |detail: EventDetail| {
            let event = Event::new(s.mower_id, s.account_id, at, detail);
            out.watch.events.push(event.clone());
            event
        };

        // Errors: entering `error` raises (with its code), leaving it clears (with that code).
        let (in_error, was_in_error) = (
            s.activity == Activity::Error,
            previous == Some(Activity::Error),
        );
        if in_error && !was_in_error {
            w.error_code = s.error_code.clone();
            let event = raise(EventDetail::ErrorRaised {
                error_code: s.error_code.clone(),
            });
            alerts.open(&event, AlertKind::Error, s.error_code.clone());
        }
        if !in_error && was_in_error {
            raise(EventDetail::ErrorCleared {
                error_code: w.error_code.take(),
            });
            alerts.clear(s.mower_id, AlertKind::Error, at);
        }

        // Mowing: only changes after the first state (the baseline).
        if let Some(previous) = previous {
            let (mowing, was_mowing) =
                (s.activity == Activity::Mowing, previous == Activity::Mowing);
            if mowing && !was_mowing {
                raise(EventDetail::MowingStarted {});
            }
            if was_mowing && !mowing {
                raise(EventDetail::MowingFinished {});
            }
        }

        // Geofence, with hysteresis on the accuracy.
        match (&m.geofence, &s.position) {
            (None, _) => {
                w.geofence_version = None;
                if w.outside_geofence {
                    w.outside_geofence = false;
                    alerts.clear(s.mower_id, AlertKind::Geofence, at);
                }
            }
            (Some(_), None) => {}
            (Some((version, rect)), Some(p)) => {
                w.geofence_version = Some(*version);
                let (inside, distance) = rect.placement(p.lat, p.lon);
                let clear = distance > accuracy(p);
                if !w.outside_geofence && !inside && clear {
                    w.outside_geofence = true;
                    let event = raise(EventDetail::GeofenceLeft {
                        lat: round_7(p.lat),
                        lon: round_7(p.lon),
                        accuracy_m: p.accuracy_m.map(round_cm),
                        distance_m: round_cm(distance),
                        geofence_version: *version,
                    });
                    alerts.open(&event, AlertKind::Geofence, None);
                } else if w.outside_geofence && inside && clear {
                    w.outside_geofence = false;
                    raise(EventDetail::GeofenceReturned {
                        lat: round_7(p.lat),
                        lon: round_7(p.lon),
                        geofence_version: *version,
                    });
                    alerts.clear(s.mower_id, AlertKind::Geofence, at);
                }
            }
        }

        // Battery: low below 20 % unless charging or docked; re-armed at 30 %, without an event.
        if let Some(battery) = s.battery_percent {
            if w.battery_low && battery >= BATTERY_OK {
                w.battery_low = false;
                alerts.clear(s.mower_id, AlertKind::BatteryLow, at);
            } else if !w.battery_low
                && battery < BATTERY_LOW
                && !matches!(s.activity, Activity::Charging | Activity::Docked)
            {
                w.battery_low = true;
                let event = raise(EventDetail::BatteryLow {
                    battery_percent: battery,
                });
                alerts.open(&event, AlertKind::BatteryLow, None);
            }
        }

        w.watched_until = at;
        w.last_activity = s.activity;
    }
    out.watch.watches.extend(watch);
}

/// W7 for one mower's accepted states with a position, in arrival order: each zone is entered
/// on a position clearly inside it and left on one clearly outside; a position not newer than
/// the newest evaluated one is skipped.
fn zones(m: &MowerSetup, states: &[&StateReport], out: &mut Expected) {
    if m.zones.is_empty() {
        return;
    }
    let mut evaluated_until: Option<DateTime<Utc>> = None;
    let mut occupancy: BTreeMap<Uuid, DateTime<Utc>> = BTreeMap::new();
    for s in states {
        let Some(p) = &s.position else { continue };
        if evaluated_until.is_some_and(|until| s.observed_at <= until) {
            continue;
        }
        for (id, name, rect) in &m.zones {
            let (inside, distance) = rect.placement(p.lat, p.lon);
            let clear = distance > accuracy(p);
            let was_in = occupancy.contains_key(id);
            let detail = if was_in && !inside && clear {
                occupancy.remove(id);
                EventDetail::ZoneLeft {
                    zone_id: *id,
                    zone_name: name.clone(),
                }
            } else if !was_in && inside && clear {
                occupancy.insert(*id, s.observed_at);
                EventDetail::ZoneEntered {
                    zone_id: *id,
                    zone_name: name.clone(),
                }
            } else {
                continue;
            };
            out.watch
                .events
                .push(Event::new(s.mower_id, s.account_id, s.observed_at, detail));
        }
        evaluated_until = Some(s.observed_at);
    }
    if evaluated_until.is_some() {
        out.watch.zone_watches.push(ZoneWatch {
            mower_id: states[0].mower_id,
            evaluated_until,
            occupancy: occupancy
                .into_iter()
                .map(|(zone_id, since)| Occupancy { zone_id, since })
                .collect(),
        });
    }
}

/// The busy check (§4, decision 13) on a fixed clock: the first report is written; a later one
/// only when newer than the written one and its activity changed, or 30 s passed on the clock
/// (never, here), or it moved 100 m (a first position counts as a move).
fn busy(states: &[&StateReport], now: DateTime<Utc>) -> Option<BusyStatus> {
    let mut written: Option<BusyStatus> = None;
    for s in states {
        let (lat, lon) = (
            s.position.as_ref().map(|p| p.lat),
            s.position.as_ref().map(|p| p.lon),
        );
        let write = match &written {
            None => true,
            Some(w) if s.observed_at <= w.observed_at => false,
            Some(w) => {
                let moved = match (w.lat, w.lon, lat, lon) {
                    (Some(a), Some(b), Some(c), Some(d)) => haversine_m(a, b, c, d) >= BUSY_MOVE_M,
                    (None, _, Some(_), _) => true,
                    _ => false,
                };
                w.activity != s.activity || now - w.written_at >= BUSY_REFRESH || moved
            }
        };
        if write {
            written = Some(BusyStatus {
                mower_id: s.mower_id,
                account_id: s.account_id,
                activity: s.activity,
                observed_at: s.observed_at,
                lat,
                lon,
                written_at: now,
            });
        }
    }
    written
}

/// Whether the notification rows must be equal, or only what any order of the states ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchChecked {
    /// Every event, alert, watch row and zone watch equals the reference (the states were
    /// watched in publication order, as the service keeps it with one replica).
    Everything,
    /// Several replicas keep no per-mower order (decision 31): only what every order ends with
    /// is checked ([`check_final_state`]).
    FinalState,
}

/// Every difference between the reference's notification rows and stored ones, as lines for
/// people; empty when they agree. Left out (see the module's doc): `went_offline` /
/// `came_online` events and `offline` alerts, a watch's `last_seen_at` and `offline`; zone
/// watches that evaluated nothing (a store may keep an empty row per mower); the busy statuses
/// when the reference has none (a wall clock: see [`check_busy`]). A `geofence_left` event's
/// `distance_m` may differ by 5 cm (two computations of one distance, each rounded to cm).
pub fn compare_watch(expected: &WatchRows, actual: &WatchRows) -> Vec<String> {
    let mut out = Vec::new();
    let watches = |rows: &WatchRows| -> Vec<Watch> {
        rows.watches
            .iter()
            .cloned()
            .map(|mut w| {
                w.last_seen_at = DateTime::<Utc>::UNIX_EPOCH;
                w.offline = false;
                w
            })
            .collect()
    };
    diff_table(
        "watches",
        &watches(expected),
        &watches(actual),
        |w| w.mower_id,
        &mut out,
    );
    let offline = |k: EventKind| matches!(k, EventKind::WentOffline | EventKind::CameOnline);
    let events = |rows: &WatchRows| -> Vec<Event> {
        rows.events
            .iter()
            .filter(|e| !offline(e.kind()))
            .cloned()
            .map(|mut e| {
                if let EventDetail::GeofenceLeft { distance_m, .. } = &mut e.detail {
                    *distance_m = 0.0;
                }
                e
            })
            .collect()
    };
    diff_table(
        "events",
        &events(expected),
        &events(actual),
        |e| e.id,
        &mut out,
    );
    let distances = |rows: &WatchRows| -> BTreeMap<Uuid, f64> {
        rows.events
            .iter()
            .filter_map(|e| match e.detail {
                EventDetail::GeofenceLeft { distance_m, .. } => Some((e.id, distance_m)),
                _ => None,
            })
            .collect()
    };
    let actual_distances = distances(actual);
    for (id, d) in distances(expected) {
        if let Some(a) = actual_distances.get(&id) {
            if (a - d).abs() > 0.05 {
                out.push(format!(
                    "events: geofence_left {id} is {a} m outside, expected {d} m"
                ));
            }
        }
    }
    let alerts = |rows: &WatchRows| -> Vec<Alert> {
        rows.alerts
            .iter()
            .filter(|a| a.kind != AlertKind::Offline)
            .cloned()
            .collect()
    };
    diff_table(
        "alerts",
        &alerts(expected),
        &alerts(actual),
        |a| a.id,
        &mut out,
    );
    let zone_watches = |rows: &WatchRows| -> Vec<ZoneWatch> {
        rows.zone_watches
            .iter()
            .filter(|z| z.evaluated_until.is_some() || !z.occupancy.is_empty())
            .cloned()
            .collect()
    };
    diff_table(
        "zone watches",
        &zone_watches(expected),
        &zone_watches(actual),
        |z| z.mower_id,
        &mut out,
    );
    if !expected.busy.is_empty() {
        diff_table(
            "busy",
            &expected.busy,
            &actual.busy,
            |b| b.mower_id,
            &mut out,
        );
    }
    out
}

/// The busy statuses on a wall clock, where the 30 s refresh makes the written report depend on
/// timing: each mower's status has its newest state's activity, was written from a state of the
/// final run of that activity (an activity change is written at once), with that state's
/// position. `states` are the accepted states in arrival order.
pub fn check_busy(states: &[StateReport], actual: &[BusyStatus]) -> Vec<String> {
    let mut per_mower: BTreeMap<MowerId, BTreeMap<DateTime<Utc>, &StateReport>> = BTreeMap::new();
    for s in states {
        per_mower
            .entry(s.mower_id)
            .or_default()
            .entry(s.observed_at)
            .or_insert(s);
    }
    let actual: BTreeMap<MowerId, &BusyStatus> = actual.iter().map(|b| (b.mower_id, b)).collect();
    let mut out = Vec::new();
    for (mower, by_time) in &per_mower {
        let Some(b) = actual.get(mower) else {
            out.push(format!("busy: missing {mower}"));
            continue;
        };
        let newest = by_time.values().next_back().expect("a state");
        let run_start = by_time
            .values()
            .rev()
            .take_while(|s| s.activity == newest.activity)
            .last()
            .expect("the newest state at least")
            .observed_at;
        let written = by_time.get(&b.observed_at);
        let consistent = b.activity == newest.activity
            && b.observed_at >= run_start
            && written
                .is_some_and(|s| s.position.as_ref().map(|p| (p.lat, p.lon)) == b.lat.zip(b.lon));
        if !consistent {
            out.push(format!(
                "busy: {mower} has {:?} of {}, expected {:?} written from a state in {run_start}..={}",
                b.activity, b.observed_at, newest.activity, newest.observed_at
            ));
        }
    }
    if actual.len() != per_mower.len() {
        out.push(format!(
            "busy: {} statuses for {} mowers",
            actual.len(),
            per_mower.len()
        ));
    }
    out
}

/// What every order of watching the same states ends with (several replicas): each mower's
/// watch row has watched its newest state (`watched_until`, the activity), its zone watch
/// evaluated its newest position, its busy status has its newest activity; at most one alert of
/// a kind is open per mower. `states` are the accepted states, in any order.
pub fn check_final_state(
    setup: &BTreeMap<MowerId, MowerSetup>,
    states: &[StateReport],
    actual: &WatchRows,
) -> Vec<String> {
    let mut newest: BTreeMap<MowerId, &StateReport> = BTreeMap::new();
    let mut newest_position: BTreeMap<MowerId, DateTime<Utc>> = BTreeMap::new();
    for s in states {
        let n = newest.entry(s.mower_id).or_insert(s);
        if s.observed_at > n.observed_at {
            *n = s;
        }
        if s.position.is_some() {
            let p = newest_position.entry(s.mower_id).or_insert(s.observed_at);
            *p = (*p).max(s.observed_at);
        }
    }
    let mut out = Vec::new();
    let watches: BTreeMap<MowerId, &Watch> =
        actual.watches.iter().map(|w| (w.mower_id, w)).collect();
    let zones: BTreeMap<MowerId, &ZoneWatch> = actual
        .zone_watches
        .iter()
        .map(|z| (z.mower_id, z))
        .collect();
    let busy: BTreeMap<MowerId, &BusyStatus> =
        actual.busy.iter().map(|b| (b.mower_id, b)).collect();
    for (mower, s) in &newest {
        match watches.get(mower) {
            Some(w) if w.watched_until == s.observed_at && w.last_activity == s.activity => {}
            other => out.push(format!(
                "watches: {mower} ends with {:?}, expected its newest state {} ({:?})",
                other.map(|w| (w.watched_until, w.last_activity)),
                s.observed_at,
                s.activity
            )),
        }
        if busy.get(mower).is_none_or(|b| b.activity != s.activity) {
            out.push(format!("busy: {mower} does not end with {:?}", s.activity));
        }
        if !setup[mower].zones.is_empty() {
            let evaluated = zones.get(mower).and_then(|z| z.evaluated_until);
            if evaluated != newest_position.get(mower).copied() {
                out.push(format!(
                    "zone watches: {mower} evaluated until {evaluated:?}, expected {:?}",
                    newest_position.get(mower)
                ));
            }
        }
    }
    let mut open: BTreeMap<(MowerId, AlertKind), usize> = BTreeMap::new();
    for a in actual.alerts.iter().filter(|a| a.cleared_at.is_none()) {
        *open.entry((a.mower_id, a.kind)).or_default() += 1;
    }
    for ((mower, kind), n) in open {
        if n > 1 {
            out.push(format!("alerts: {n} open {kind:?} alerts of {mower}"));
        }
    }
    out
}

/// How many of each event kind, and of open and closed alerts: to show (and assert) that a
/// comparison had something to compare.
pub fn census(rows: &WatchRows) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for e in &rows.events {
        *counts.entry(e.kind().as_str().to_owned()).or_default() += 1;
    }
    for a in &rows.alerts {
        let state = if a.cleared_at.is_some() {
            "closed"
        } else {
            "open"
        };
        *counts
            .entry(format!("{state} {} alerts", a.kind.as_str()))
            .or_default() += 1;
    }
    let occupied: usize = rows.zone_watches.iter().map(|z| z.occupancy.len()).sum();
    counts.insert("zone occupancies".into(), occupied);
    counts.insert("watch rows".into(), rows.watches.len());
    counts.insert("busy statuses".into(), rows.busy.len());
    counts
}
