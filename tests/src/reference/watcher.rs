//! §4 and W7: the watcher's transitions, the zones and the busy check of one mower, in arrival
//! order.

use super::telemetry::haversine_m;
use super::*;
use swath_domain::sessions::SessionPoint;

/// §4 and decision 8 for one mower's accepted states, in arrival order.
pub(super) fn watcher(
    m: &MowerSetup,
    states: &[&StateReport],
    out: &mut Expected,
    alerts: &mut Alerts,
) {
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
            session: None,
            session_due_at: None,
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
                    out.cleared_without_event.push(ClearedAlert {
                        mower_id: s.mower_id,
                        account_id: s.account_id,
                        kind: AlertKind::Geofence,
                        cleared_at: at,
                        cause: ClearCause::GeofenceRemoved,
                    });
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
                out.cleared_without_event.push(ClearedAlert {
                    mower_id: s.mower_id,
                    account_id: s.account_id,
                    kind: AlertKind::BatteryLow,
                    cleared_at: at,
                    cause: ClearCause::BatteryRecovered,
                });
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

/// W8's `session_ended` for one mower's accepted states, in arrival order: the states the
/// watcher watches are those newer than every state before them; of this reference's sessions
/// of those states, each that ended at least the merge gap before the newest has its event.
pub(super) fn sessions_ended(
    mower: MowerId,
    m: &MowerSetup,
    states: &[&StateReport],
    out: &mut Expected,
) {
    let mut watched: Vec<SessionPoint> = Vec::new();
    for s in states {
        if watched.last().is_none_or(|w| s.observed_at > w.observed_at) {
            watched.push(SessionPoint::of(s));
        }
    }
    let Some(newest) = watched.last().map(|p| p.observed_at) else {
        return;
    };
    for session in super::sessions::sessions(mower, m.time_zone, m.merge_gap, &watched) {
        let (Some(end), Some(reason)) = (session.ended_at, session.end_reason) else {
            continue;
        };
        if newest - end < m.merge_gap {
            continue;
        }
        out.watch.events.push(Event::new(
            mower,
            m.account_id,
            end,
            EventDetail::SessionEnded {
                session_id: session.id,
                started_at: session.started_at,
                ended_at: end,
                end_reason: reason,
                error_code: session.error_code,
                breaks: session.breaks,
                mowing_seconds: session.mowing_ms as f64 / 1000.0,
                blade_seconds: session.blade_ms as f64 / 1000.0,
                distance_m: session.distance_mm as f64 / 1000.0,
            },
        ));
    }
}

/// W7 for one mower's accepted states with a position, in arrival order: each zone is entered
/// on a position clearly inside it and left on one clearly outside; a position not newer than
/// the newest evaluated one is skipped.
pub(super) fn zones(m: &MowerSetup, states: &[&StateReport], out: &mut Expected) {
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
pub(super) fn busy(states: &[&StateReport], now: DateTime<Utc>) -> Option<BusyStatus> {
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
