//! The watch row and the fold that advances it: [`apply_watch`] state by state, the offline
//! sweep's [`went_offline`], and the notifications of the ingest rules.

use super::alerts::{AlertChanges, AlertKind, ClearCause, ClearedAlert};
use super::events::{Event, EventDetail};
use super::geometry::{accuracy_of, Fence};
use super::session_end::{session_due, session_ended, watch_session, SessionWatch};
use super::{round_degrees, round_metres, BATTERY_LOW_BELOW, BATTERY_REARM_AT};
use crate::events::IngestEvent;
use crate::ids::{AccountId, MowerId};
use crate::report::{Activity, DropReason, StateReport};
use crate::rules::StateOutcome;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

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
    /// W8's pending session (open, or ended and still able to merge): what the watcher's fold
    /// needs of it to go on (decision 208); `None` when there is none.
    #[serde(default)]
    pub session: Option<SessionWatch>,
    /// When the pending session's merge gap will have passed, on the clock of `last_seen_at`:
    /// from then on the offline sweep raises its `session_ended` ([`sweep_watch`]). `None`
    /// while the session is open or when none is pending.
    #[serde(default)]
    pub session_due_at: Option<DateTime<Utc>>,
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
    /// Alerts the batch cleared without an event (the battery re-armed, the geofence gone), in
    /// the order they were cleared, each with how many of `events` were derived before it (so
    /// that both are published in the one order they were derived in): not stored as such
    /// (`alerts` clears them), published after the commit for the live streams.
    pub cleared_without_event: Vec<(usize, ClearedAlert)>,
}

impl WatchChanges {
    pub fn is_empty(&self) -> bool {
        self.watches.is_empty() && self.events.is_empty() && self.alerts.is_empty()
    }
}

/// The watcher's rules, state by state in arrival order (docs/rules.md §4). `fences` holds the parsed
/// current geofence of every mower whose snapshot names one (a missing entry counts as no
/// geofence). `received_at` is when the batch arrived; `merge_gap` is W8's
/// (`SWATH_SESSION_MERGE_GAP_SECONDS`).
///
/// Per state: the directory check (W0, as ingestion does); a state with `observed_at <=
/// watched_until` is skipped (acknowledged, changes nothing); otherwise, in this order:
/// `came_online` (if the mower was offline), `error_raised` / `error_cleared`, `mowing_finished`
/// / `mowing_started`, `geofence_left` / `geofence_returned`, `battery_low`, `session_ended` (W8,
/// [`super::session_end`]). A mower's first state
/// sets the baseline for activity changes (no `mowing_started` or `error_cleared` from it) but
/// raises what it finds wrong (an error, outside the geofence, a low battery).
pub fn apply_watch(
    snapshots: &mut BTreeMap<MowerId, WatchSnapshot>,
    fences: &BTreeMap<MowerId, GeofenceRef<'_>>,
    states: &[StateReport],
    received_at: DateTime<Utc>,
    merge_gap: Duration,
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
        watch_state(
            &mut snapshot.watch,
            fence,
            state,
            (received_at, merge_gap),
            &mut changes,
        );
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
    (received_at, merge_gap): (DateTime<Utc>, Duration),
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
        session: None,
        session_due_at: None,
    });
    let at = state.observed_at;
    let mut raise = |detail: EventDetail| -> Event {
        let event = Event::new(state.mower_id, state.account_id, at, detail);
        changes.events.push(event.clone());
        event
    };
    let mut alerts = AlertChanges::default();
    let mut silent = Vec::new();

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
                silent.push(cleared(
                    state,
                    AlertKind::Geofence,
                    ClearCause::GeofenceRemoved,
                ));
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
                silent.push(cleared(
                    state,
                    AlertKind::BatteryLow,
                    ClearCause::BatteryRecovered,
                ));
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

    if let Some(done) = watch_session(w, state, received_at, merge_gap) {
        changes.events.extend(session_ended(w, &done));
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
    // After the state's events: within one state no rule raises and clears the same kind.
    let derived = changes.events.len();
    changes
        .cleared_without_event
        .extend(silent.into_iter().map(|c| (derived, c)));
}

/// An alert of `state`'s mower cleared at its instant, without an event.
fn cleared(state: &StateReport, kind: AlertKind, cause: ClearCause) -> ClearedAlert {
    ClearedAlert {
        mower_id: state.mower_id,
        account_id: state.account_id,
        kind,
        cleared_at: state.observed_at,
        cause,
    }
}

/// The offline sweep's rules for one watch it found, at `now`: `session_ended` for a pending
/// session whose merge gap has passed ([`super::session_end`]), then, for a watch silent for
/// longer than `offline_after`, [`went_offline`]. Pushes the watch once, when either changed it.
pub fn sweep_watch(
    watch: &mut Watch,
    now: DateTime<Utc>,
    offline_after: Duration,
    changes: &mut WatchChanges,
) {
    let ended = session_due(watch, now);
    let changed = ended.is_some();
    changes.events.extend(ended);
    let silent = watch.last_seen_at < now - offline_after;
    if silent && went_offline(watch, offline_after, changes).is_some() {
        return;
    }
    if changed {
        changes.watches.push(watch.clone());
    }
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

/// What a telemetry batch stores of the notification side with its rows (W6): the events its
/// rules raised and the alerts they open.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngestNotifications {
    /// In the order raised; published after the commit.
    pub events: Vec<Event>,
    pub alerts: AlertChanges,
}

impl IngestNotifications {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.alerts.is_empty()
    }
}

/// The events and alerts of the ingest rules (W6): `blade_due` opens a blade alert. Derived once
/// per batch, by the ingest, which hands them to its unit of work's commit (the store writes
/// them with the rows) and publishes the events after it.
pub fn ingest_notifications(events: &[IngestEvent]) -> IngestNotifications {
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
    IngestNotifications { events, alerts }
}
