//! Comparing what a store holds with the reference, and what holds whatever the order.

use super::*;

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

/// Events the reference derives that `actual` lacks, and events `actual` holds beyond them, by
/// id (an event's id is derived from what raised it, so a second copy of one is an extra id or a
/// second row of one id), `went_offline` / `came_online` left out as in [`compare_watch`].
pub fn events_lost_and_extra(expected: &WatchRows, actual: &WatchRows) -> (usize, usize) {
    let offline = |k: EventKind| matches!(k, EventKind::WentOffline | EventKind::CameOnline);
    let ids = |rows: &WatchRows| -> Vec<Uuid> {
        rows.events
            .iter()
            .filter(|e| !offline(e.kind()))
            .map(|e| e.id)
            .collect()
    };
    let (expected, actual) = (ids(expected), ids(actual));
    let wanted: std::collections::BTreeSet<Uuid> = expected.iter().copied().collect();
    let held: std::collections::BTreeSet<Uuid> = actual.iter().copied().collect();
    let lost = wanted.difference(&held).count();
    // Ids held but not wanted, and every second row of one id.
    let extra = held.difference(&wanted).count() + (actual.len() - held.len());
    (lost, extra)
}

/// Every difference between the reference's notification rows and stored ones, as lines for
/// people; empty when they agree. Left out (see the module's doc): `went_offline` /
/// `came_online` events and `offline` alerts, a watch's `last_seen_at`, `offline` and what it
/// keeps of W8 (`session`, `session_due_at`: the `session_ended` events are compared); zone
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
                w.session = None;
                w.session_due_at = None;
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

/// The event kinds a plan with fences, zones, a blade threshold, silences and a merge gap between
/// them gives work to (`crate::e2e::scenario::plan`): every kind the reference derives (the
/// offline sweep's are left out, see the module documentation). Tests assert each appears in the
/// [`census`], so that a comparison has something to compare.
pub const DERIVED_EVENT_KINDS: [&str; 11] = [
    "error_raised",
    "error_cleared",
    "mowing_started",
    "mowing_finished",
    "geofence_left",
    "geofence_returned",
    "battery_low",
    "blade_due",
    "zone_entered",
    "zone_left",
    "session_ended",
];

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
