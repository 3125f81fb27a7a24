//! W1–W6: the stored rows and the totals of one mower, recomputed from scratch.

use super::*;
use swath_domain::sessions::{SessionPoint, SessionRow};

/// W1–W6 for one mower's accepted states (arrival order).
pub(super) fn telemetry(
    m: &MowerSetup,
    states: &[&StateReport],
    out: &mut Expected,
    alerts: &mut Alerts,
) {
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
    // W8, over the same distinct states.
    let points: Vec<SessionPoint> = distinct
        .values()
        .map(|s| SessionPoint {
            observed_at: s.observed_at,
            activity: s.activity,
            blade_on: s.blade_on,
            battery_percent: s.battery_percent,
            error_code: s.error_code.clone(),
            lat: s.position.as_ref().map(|p| p.lat),
            lon: s.position.as_ref().map(|p| p.lon),
        })
        .collect();
    let found = sessions::sessions(last.mower_id, m.time_zone, m.merge_gap, &points);
    rows.sessions
        .extend(found.into_iter().map(|session| SessionRow {
            account_id: m.account_id,
            session,
        }));
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
pub(super) fn haversine_m(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (phi1, phi2) = (lat1.to_radians(), lat2.to_radians());
    let d_phi = (lat2 - lat1).to_radians();
    let d_lambda = (lon2 - lon1).to_radians();
    let a = (d_phi / 2.0).sin().powi(2) + phi1.cos() * phi2.cos() * (d_lambda / 2.0).sin().powi(2);
    EARTH_RADIUS_M * 2.0 * a.sqrt().asin()
}
