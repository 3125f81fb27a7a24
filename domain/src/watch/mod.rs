//! Notification rules (docs/rules.md §4): the watch row of a mower, the events its states derive and the
//! alerts those open and clear; virtual zones (W7, [`zones`]); the scheduler's busy check
//! ([`busy`]). Pure, like the write rules: stores read rows, these functions advance them in
//! memory, stores write what changed.
//!
//! # Determinism
//! A batch must give exactly what the same states watched one at a time give: the same events,
//! alerts and watch rows, in every store. So nothing here reads a clock or a random source: an
//! event's id is derived from what it is about ([`event_id`]: mower, kind, instant and, for zones,
//! the zone), an alert's id is the id of the event that raised it, and every instant is an
//! `observed_at` or a receipt time the caller passes in once per batch.
//!
//! # About the present
//! Unlike the totals (W4, W5), which merge a late state between its neighbours, the notification
//! rules only look forward: a state not newer than `watched_until` (a redelivery, a backfill, a
//! state overtaken by a newer one) derives no event, opens or clears no alert, and W7's zone
//! watch skips positions older than the ones it evaluated. An imported week of history never pages
//! anyone. The one event a late state can raise is W6's `blade_due`, because it follows the
//! (corrected) blade time of the totals.

pub mod busy;
pub mod geometry;
pub mod zones;

use crate::events::IngestEvent;
use crate::ids::{AccountId, MowerId};
use crate::report::{Activity, DropReason, StateReport};
use crate::rules::StateOutcome;
use chrono::{DateTime, Duration, Utc};
use geometry::{accuracy_of, Fence};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use uuid::Uuid;

pub use geometry::{GeoPolygon, InvalidPolygon, Placement};

/// `battery_low` is raised below this charge…
pub const BATTERY_LOW_BELOW: u8 = 20;
/// …and re-armed (its alert cleared) at this charge or above.
pub const BATTERY_REARM_AT: u8 = 30;
/// A mower silent for this long is offline, unless configured otherwise
/// (`SWATH_OFFLINE_AFTER_SECONDS`).
pub const DEFAULT_OFFLINE_AFTER: Duration = Duration::minutes(10);

/// What an event says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    ErrorRaised,
    ErrorCleared,
    GeofenceLeft,
    GeofenceReturned,
    BatteryLow,
    MowingStarted,
    MowingFinished,
    BladeDue,
    ZoneEntered,
    ZoneLeft,
    WentOffline,
    CameOnline,
}

impl EventKind {
    pub const ALL: [EventKind; 12] = [
        EventKind::ErrorRaised,
        EventKind::ErrorCleared,
        EventKind::GeofenceLeft,
        EventKind::GeofenceReturned,
        EventKind::BatteryLow,
        EventKind::MowingStarted,
        EventKind::MowingFinished,
        EventKind::BladeDue,
        EventKind::ZoneEntered,
        EventKind::ZoneLeft,
        EventKind::WentOffline,
        EventKind::CameOnline,
    ];

    /// The wire name, also the last token of the event's subject.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ErrorRaised => "error_raised",
            EventKind::ErrorCleared => "error_cleared",
            EventKind::GeofenceLeft => "geofence_left",
            EventKind::GeofenceReturned => "geofence_returned",
            EventKind::BatteryLow => "battery_low",
            EventKind::MowingStarted => "mowing_started",
            EventKind::MowingFinished => "mowing_finished",
            EventKind::BladeDue => "blade_due",
            EventKind::ZoneEntered => "zone_entered",
            EventKind::ZoneLeft => "zone_left",
            EventKind::WentOffline => "went_offline",
            EventKind::CameOnline => "came_online",
        }
    }

    pub fn parse(value: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an event carries besides its id, mower and instant. Serialised flat into the event, with
/// its `kind`. Coordinates are rounded to 1e-7° and distances to centimetres, so that every
/// number is a short decimal that survives any JSON store unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventDetail {
    ErrorRaised {
        error_code: Option<String>,
    },
    ErrorCleared {
        /// The code the error was raised with.
        error_code: Option<String>,
    },
    /// The theft alarm: clearly outside the geofence.
    GeofenceLeft {
        lat: f64,
        lon: f64,
        accuracy_m: Option<f64>,
        /// How far outside the fence, in metres.
        distance_m: f64,
        geofence_version: Uuid,
    },
    GeofenceReturned {
        lat: f64,
        lon: f64,
        geofence_version: Uuid,
    },
    BatteryLow {
        battery_percent: u8,
    },
    MowingStarted {},
    MowingFinished {},
    BladeDue {
        blade_since_reset_ms: i64,
        threshold_ms: i64,
    },
    ZoneEntered {
        zone_id: Uuid,
        zone_name: String,
    },
    ZoneLeft {
        zone_id: Uuid,
        zone_name: String,
    },
    WentOffline {
        /// When Swath last received a state of the mower.
        last_seen_at: DateTime<Utc>,
    },
    CameOnline {
        /// When Swath had last received a state before this one.
        silent_since: DateTime<Utc>,
    },
}

impl EventDetail {
    pub fn kind(&self) -> EventKind {
        match self {
            EventDetail::ErrorRaised { .. } => EventKind::ErrorRaised,
            EventDetail::ErrorCleared { .. } => EventKind::ErrorCleared,
            EventDetail::GeofenceLeft { .. } => EventKind::GeofenceLeft,
            EventDetail::GeofenceReturned { .. } => EventKind::GeofenceReturned,
            EventDetail::BatteryLow { .. } => EventKind::BatteryLow,
            EventDetail::MowingStarted {} => EventKind::MowingStarted,
            EventDetail::MowingFinished {} => EventKind::MowingFinished,
            EventDetail::BladeDue { .. } => EventKind::BladeDue,
            EventDetail::ZoneEntered { .. } => EventKind::ZoneEntered,
            EventDetail::ZoneLeft { .. } => EventKind::ZoneLeft,
            EventDetail::WentOffline { .. } => EventKind::WentOffline,
            EventDetail::CameOnline { .. } => EventKind::CameOnline,
        }
    }

    /// What makes two events of one mower, kind and instant different (the zone), for the id.
    fn discriminator(&self) -> Option<Uuid> {
        match self {
            EventDetail::ZoneEntered { zone_id, .. } | EventDetail::ZoneLeft { zone_id, .. } => {
                Some(*zone_id)
            }
            _ => None,
        }
    }
}

/// A derived event: stored in the events feed in the transaction that derived it, and published
/// after that commit on `notifications.mower.<mower_id>.<kind>` with its id as the
/// de-duplication id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// See [`event_id`]: the same event always gets the same id.
    pub id: Uuid,
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// The instant the event is about: the `observed_at` of the state that raised it; for
    /// `went_offline`, the instant the mower had been silent for the offline period.
    pub observed_at: DateTime<Utc>,
    #[serde(flatten)]
    pub detail: EventDetail,
}

impl Event {
    /// Builds an event with its derived id.
    pub fn new(
        mower_id: MowerId,
        account_id: AccountId,
        observed_at: DateTime<Utc>,
        detail: EventDetail,
    ) -> Event {
        Event {
            id: event_id(mower_id, detail.kind(), observed_at, detail.discriminator()),
            mower_id,
            account_id,
            observed_at,
            detail,
        }
    }

    pub fn kind(&self) -> EventKind {
        self.detail.kind()
    }
}

/// The id of an event, derived from what it is about, so that deriving the same event twice (a
/// batch and the same states one at a time, or a retried publish) gives the same id. The layout
/// is UUID version 8 (custom): the first 48 bits are the Unix milliseconds of `observed_at`, as in
/// version 7, so ids sort by time; the other 74 bits are the SHA-256 of
/// `(mower, kind, observed_at µs, discriminator)`.
pub fn event_id(
    mower_id: MowerId,
    kind: EventKind,
    observed_at: DateTime<Utc>,
    discriminator: Option<Uuid>,
) -> Uuid {
    let mut hash = Sha256::new();
    hash.update(mower_id.0.as_bytes());
    hash.update(kind.as_str().as_bytes());
    hash.update(observed_at.timestamp_micros().to_be_bytes());
    if let Some(d) = discriminator {
        hash.update(d.as_bytes());
    }
    let digest = hash.finalize();
    let millis = observed_at.timestamp_millis().clamp(0, (1 << 48) - 1) as u64;
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6..].copy_from_slice(&digest[..10]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// What an alert is about. One alert of a kind may be open per mower at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    Error,
    Geofence,
    BatteryLow,
    BladeDue,
    Offline,
}

impl AlertKind {
    pub const ALL: [AlertKind; 5] = [
        AlertKind::Error,
        AlertKind::Geofence,
        AlertKind::BatteryLow,
        AlertKind::BladeDue,
        AlertKind::Offline,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::Error => "error",
            AlertKind::Geofence => "geofence",
            AlertKind::BatteryLow => "battery_low",
            AlertKind::BladeDue => "blade_due",
            AlertKind::Offline => "offline",
        }
    }

    pub fn parse(value: &str) -> Option<AlertKind> {
        AlertKind::ALL.into_iter().find(|k| k.as_str() == value)
    }

    /// How urgent an alert of this kind is: a mower outside its geofence may be stolen.
    pub fn severity(self) -> Severity {
        match self {
            AlertKind::Geofence => Severity::Critical,
            AlertKind::Error | AlertKind::Offline => Severity::High,
            AlertKind::BatteryLow => Severity::Normal,
            AlertKind::BladeDue => Severity::Low,
        }
    }
}

/// How urgent an alert is; ordered from least to most urgent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Low,
    Normal,
    High,
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 4] = [
        Severity::Low,
        Severity::Normal,
        Severity::High,
        Severity::Critical,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Normal => "normal",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }

    pub fn parse(value: &str) -> Option<Severity> {
        Severity::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// 1 (low) to 4 (critical): what stores sort by.
    pub fn rank(self) -> i16 {
        self as i16 + 1
    }
}

/// An alert: open from the event that raised it until the event (or blade reset, or battery
/// recharge) that cleared it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// The id of the event that raised it.
    pub id: Uuid,
    pub mower_id: MowerId,
    pub account_id: AccountId,
    pub kind: AlertKind,
    pub severity: Severity,
    pub raised_at: DateTime<Utc>,
    pub cleared_at: Option<DateTime<Utc>>,
    /// The error code of an error alert.
    pub code: Option<String>,
}

/// An alert opened before this batch, cleared by it.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertClear {
    pub mower_id: MowerId,
    pub kind: AlertKind,
    pub cleared_at: DateTime<Utc>,
}

/// What a batch does to the alerts. Stores apply `clears` first (to the open alert of the mower
/// and kind, if any), then insert `raised` (an id stored already is left as it is).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AlertChanges {
    pub clears: Vec<AlertClear>,
    /// Alerts raised by the batch, in order; `cleared_at` is set when the batch cleared them too.
    pub raised: Vec<Alert>,
}

impl AlertChanges {
    pub fn is_empty(&self) -> bool {
        self.clears.is_empty() && self.raised.is_empty()
    }

    /// Opens an alert for `event`.
    pub fn open(&mut self, event: &Event, kind: AlertKind, code: Option<String>) {
        self.raised.push(Alert {
            id: event.id,
            mower_id: event.mower_id,
            account_id: event.account_id,
            kind,
            severity: kind.severity(),
            raised_at: event.observed_at,
            cleared_at: None,
            code,
        });
    }

    /// Clears the open alert of a mower and kind: one raised by this batch, or else one stored.
    pub fn clear(&mut self, mower_id: MowerId, kind: AlertKind, at: DateTime<Utc>) {
        let raised_here = self
            .raised
            .iter_mut()
            .rev()
            .find(|a| a.mower_id == mower_id && a.kind == kind);
        match raised_here {
            Some(alert) if alert.cleared_at.is_none() => alert.cleared_at = Some(at),
            // Raised and cleared within this batch already: nothing open to clear.
            Some(_) => {}
            None => self.clears.push(AlertClear {
                mower_id,
                kind,
                cleared_at: at,
            }),
        }
    }
}

/// The watcher's row of a mower: what its rules need to remember between states.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Watch {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// Every state up to this `observed_at` was watched; older and equal ones are skipped.
    pub watched_until: DateTime<Utc>,
    /// When the newest watched state was received (the offline sweep measures silence from it).
    pub last_seen_at: DateTime<Utc>,
    pub last_activity: Activity,
    /// The code of the open error (`last_activity` is `error`), as it was raised.
    pub error_code: Option<String>,
    pub outside_geofence: bool,
    pub battery_low: bool,
    pub offline: bool,
    /// The geofence version the last position was judged against.
    pub geofence_version: Option<Uuid>,
}

/// A mower's geofence as the watcher sees it: the version key and, once parsed, the fence.
#[derive(Clone, Debug)]
pub struct GeofenceRef<'a> {
    pub version: Uuid,
    pub fence: &'a Fence,
}

/// What a store reads for the watcher, per mower of the batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchSnapshot {
    /// The directory's account of the mower; `None`: not in the directory.
    pub account_id: Option<AccountId>,
    /// The current geofence version, if the mower has a geofence.
    pub geofence_version: Option<Uuid>,
    pub watch: Option<Watch>,
}

/// What a watcher batch writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchChanges {
    /// Changed watch rows, one per mower, in mower id order: replace the stored ones.
    pub watches: Vec<Watch>,
    /// Events in the order they were derived: stored, then published after the commit.
    pub events: Vec<Event>,
    pub alerts: AlertChanges,
}

impl WatchChanges {
    pub fn is_empty(&self) -> bool {
        self.watches.is_empty() && self.events.is_empty() && self.alerts.is_empty()
    }
}

/// The watcher's rules, state by state in arrival order (docs/rules.md §4). `fences` holds the parsed
/// current geofence of every mower whose snapshot names one (a missing entry counts as no
/// geofence). `received_at` is when the batch arrived.
///
/// Per state: the directory check (W0, as ingestion does); a state with `observed_at <=
/// watched_until` is skipped (acknowledged, changes nothing); otherwise, in this order:
/// `came_online` (if the mower was offline), `error_raised` / `error_cleared`, `mowing_finished`
/// / `mowing_started`, `geofence_left` / `geofence_returned`, `battery_low`. A mower's first state
/// sets the baseline for activity changes (no `mowing_started` or `error_cleared` from it) but
/// raises what it finds wrong (an error, outside the geofence, a low battery).
pub fn apply_watch(
    snapshots: &mut BTreeMap<MowerId, WatchSnapshot>,
    fences: &BTreeMap<MowerId, GeofenceRef<'_>>,
    states: &[StateReport],
    received_at: DateTime<Utc>,
) -> (Vec<StateOutcome>, WatchChanges) {
    let mut outcomes = Vec::with_capacity(states.len());
    let mut changes = WatchChanges::default();
    let mut touched: BTreeMap<MowerId, ()> = BTreeMap::new();
    for state in states {
        let snapshot = snapshots.entry(state.mower_id).or_default();
        match snapshot.account_id {
            None => {
                outcomes.push(StateOutcome::Dropped(DropReason::UnknownMower));
                continue;
            }
            Some(account)
                if account != state.account_id
                    || snapshot
                        .watch
                        .as_ref()
                        .is_some_and(|w| w.account_id != state.account_id) =>
            {
                outcomes.push(StateOutcome::Dropped(DropReason::AccountMismatch));
                continue;
            }
            Some(_) => {}
        }
        outcomes.push(StateOutcome::Stored);
        if snapshot
            .watch
            .as_ref()
            .is_some_and(|w| state.observed_at <= w.watched_until)
        {
            continue;
        }
        let fence = match (snapshot.geofence_version, fences.get(&state.mower_id)) {
            (Some(version), Some(f)) if f.version == version => Some(f),
            _ => None,
        };
        watch_state(&mut snapshot.watch, fence, state, received_at, &mut changes);
        touched.insert(state.mower_id, ());
    }
    changes.watches = touched
        .into_keys()
        .filter_map(|m| snapshots.get(&m).and_then(|s| s.watch.clone()))
        .collect();
    (outcomes, changes)
}

/// The rules for one state newer than everything watched.
fn watch_state(
    watch: &mut Option<Watch>,
    fence: Option<&GeofenceRef<'_>>,
    state: &StateReport,
    received_at: DateTime<Utc>,
    changes: &mut WatchChanges,
) {
    let first = watch.is_none();
    let w = watch.get_or_insert_with(|| Watch {
        mower_id: state.mower_id,
        account_id: state.account_id,
        watched_until: state.observed_at,
        last_seen_at: received_at,
        last_activity: state.activity,
        error_code: None,
        outside_geofence: false,
        battery_low: false,
        offline: false,
        geofence_version: None,
    });
    let at = state.observed_at;
    let mut raise = |detail: EventDetail| -> Event {
        let event = Event::new(state.mower_id, state.account_id, at, detail);
        changes.events.push(event.clone());
        event
    };
    let mut alerts = AlertChanges::default();

    if w.offline {
        w.offline = false;
        raise(EventDetail::CameOnline {
            silent_since: w.last_seen_at,
        });
        alerts.clear(state.mower_id, AlertKind::Offline, at);
    }

    // The previous activity: none for the first state, which sets the baseline.
    let previous = (!first).then_some(w.last_activity);
    let in_error = state.activity == Activity::Error;
    let was_in_error = previous == Some(Activity::Error);
    if in_error && !was_in_error {
        w.error_code = state.error_code.clone();
        let event = raise(EventDetail::ErrorRaised {
            error_code: state.error_code.clone(),
        });
        alerts.open(&event, AlertKind::Error, state.error_code.clone());
    } else if !in_error && was_in_error {
        raise(EventDetail::ErrorCleared {
            error_code: w.error_code.take(),
        });
        alerts.clear(state.mower_id, AlertKind::Error, at);
    }

    if let Some(previous) = previous {
        let mowing = state.activity == Activity::Mowing;
        let was_mowing = previous == Activity::Mowing;
        if was_mowing && !mowing {
            raise(EventDetail::MowingFinished {});
        } else if mowing && !was_mowing {
            raise(EventDetail::MowingStarted {});
        }
    }

    match fence {
        None => {
            // No geofence (any more): nothing to be outside of.
            if w.outside_geofence {
                w.outside_geofence = false;
                alerts.clear(state.mower_id, AlertKind::Geofence, at);
            }
            w.geofence_version = None;
        }
        Some(fence) => {
            if let Some(p) = &state.position {
                w.geofence_version = Some(fence.version);
                let accuracy = accuracy_of(p.accuracy_m);
                let placement = fence.fence.locate(p.lat, p.lon);
                // Hysteresis: the flag changes only on a position clearly on the other side, so
                // a fix wobbling across the fence within its accuracy raises nothing.
                if !w.outside_geofence && placement.clearly_outside(accuracy) {
                    w.outside_geofence = true;
                    let event = raise(EventDetail::GeofenceLeft {
                        lat: round_degrees(p.lat),
                        lon: round_degrees(p.lon),
                        accuracy_m: p.accuracy_m.map(round_metres),
                        distance_m: round_metres(placement.boundary_distance_m),
                        geofence_version: fence.version,
                    });
                    alerts.open(&event, AlertKind::Geofence, None);
                } else if w.outside_geofence && placement.clearly_inside(accuracy) {
                    w.outside_geofence = false;
                    raise(EventDetail::GeofenceReturned {
                        lat: round_degrees(p.lat),
                        lon: round_degrees(p.lon),
                        geofence_version: fence.version,
                    });
                    alerts.clear(state.mower_id, AlertKind::Geofence, at);
                }
            }
        }
    }

    if let Some(battery) = state.battery_percent {
        if w.battery_low {
            if battery >= BATTERY_REARM_AT {
                w.battery_low = false;
                alerts.clear(state.mower_id, AlertKind::BatteryLow, at);
            }
        } else if battery < BATTERY_LOW_BELOW
            && !matches!(state.activity, Activity::Charging | Activity::Docked)
        {
            w.battery_low = true;
            let event = raise(EventDetail::BatteryLow {
                battery_percent: battery,
            });
            alerts.open(&event, AlertKind::BatteryLow, None);
        }
    }

    w.watched_until = state.observed_at;
    w.last_seen_at = received_at;
    w.last_activity = state.activity;
    for clear in alerts.clears {
        changes
            .alerts
            .clear(clear.mower_id, clear.kind, clear.cleared_at);
    }
    changes.alerts.raised.extend(alerts.raised);
}

/// The offline sweep's rule for one watch not heard from since `last_seen_at`: marks it offline
/// and raises `went_offline` at `last_seen_at + offline_after` (so the event is the same whenever
/// the sweep runs). Returns `None` for a watch that is offline already.
pub fn went_offline(
    watch: &mut Watch,
    offline_after: Duration,
    changes: &mut WatchChanges,
) -> Option<Event> {
    if watch.offline {
        return None;
    }
    watch.offline = true;
    let event = Event::new(
        watch.mower_id,
        watch.account_id,
        watch.last_seen_at + offline_after,
        EventDetail::WentOffline {
            last_seen_at: watch.last_seen_at,
        },
    );
    changes.alerts.open(&event, AlertKind::Offline, None);
    changes.events.push(event.clone());
    changes.watches.push(watch.clone());
    Some(event)
}

/// The events and alerts of the ingest rules (W6): `blade_due` opens a blade alert. Ingestion
/// stores both in its own transaction.
pub fn ingest_notifications(events: &[IngestEvent]) -> (Vec<Event>, AlertChanges) {
    let mut alerts = AlertChanges::default();
    let events = events
        .iter()
        .map(|e| match e {
            IngestEvent::BladeDue {
                mower_id,
                account_id,
                observed_at,
                blade_since_reset_ms,
                threshold_ms,
            } => {
                let event = Event::new(
                    *mower_id,
                    *account_id,
                    *observed_at,
                    EventDetail::BladeDue {
                        blade_since_reset_ms: *blade_since_reset_ms,
                        threshold_ms: *threshold_ms,
                    },
                );
                alerts.open(&event, AlertKind::BladeDue, None);
                event
            }
        })
        .collect();
    (events, alerts)
}

/// Degrees rounded to 1e-7 (about a centimetre).
pub fn round_degrees(value: f64) -> f64 {
    (value * 1e7).round() / 1e7
}

/// Metres rounded to centimetres.
pub fn round_metres(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests;
