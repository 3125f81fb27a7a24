//! Property scenarios that compare what a store ends with against the independent
//! [`reference`](crate::reference), for every adapter: random traces, in random batches and
//! orders, through the use cases as production runs them. The batched-versus-one-at-a-time
//! comparisons (`telemetry_contract`, `watch_contract`) stay: they catch what the reference
//! cannot see (a batch path that differs from the single path in a way the rules allow); these
//! catch a rule that is wrong on both paths alike.

use crate::load::{compare, Checked};
use crate::reference::{self, BusyClock, MowerSetup, Rect};
use crate::support::{Fleet, StoreFactory};
use crate::telemetry_contract::Harness;
use crate::traces::{
    arrival, build_distinct_trace, build_trace, ingest_clock, split, DistinctStep, Step,
};
use crate::watch_contract::{lawn_rectangle, WatchFactory, WatchHarness};
use serde_json::Value;
use std::collections::BTreeMap;
use swath_domain::watch::{ClearedAlert, Event, EventKind};
use swath_domain::{MowerId, StateReport};
use uuid::Uuid;

/// The blade threshold of these scenarios: 10 minutes, so that W6 fires in most traces.
const THRESHOLD_MS: i64 = 600_000;

/// The reference's view of the [`Fleet`]'s directory (`Fleet::seed`): mowers 0 and 1 of account
/// A in Berlin and Auckland, mower 2 of account B in New York; no fences.
pub fn fleet_setup(fleet: &Fleet, blade_threshold_ms: i64) -> BTreeMap<MowerId, MowerSetup> {
    let zones = [
        chrono_tz::Europe::Berlin,
        chrono_tz::Pacific::Auckland,
        chrono_tz::America::New_York,
    ];
    fleet
        .mowers
        .iter()
        .zip(zones)
        .map(|(m, time_zone)| {
            (
                *m,
                MowerSetup {
                    account_id: fleet.account_of(*m),
                    time_zone,
                    blade_threshold_ms,
                    geofence: None,
                    zones: Vec::new(),
                    merge_gap: swath_domain::sessions::DEFAULT_SESSION_MERGE_GAP,
                },
            )
        })
        .collect()
}

/// A rectangle of the traces' lawn, in `build_trace` offsets (1e-5 degrees from 52.5 N 13.4 E),
/// as [`lawn_rectangle`] draws it.
fn lawn(from: (i32, i32), to: (i32, i32)) -> Rect {
    let lat = |d: i32| 52.5 + f64::from(d) * 1e-5;
    let lon = |d: i32| 13.4 + f64::from(d) * 1e-5;
    Rect {
        south: lat(from.0),
        west: lon(from.1),
        north: lat(to.0),
        east: lon(to.1),
    }
}

/// The reports the service parses (the invalid ones are refused before any rule).
fn parsed(reports: &[Value]) -> Vec<StateReport> {
    reports
        .iter()
        .filter_map(|r| StateReport::parse(r.to_string().as_bytes(), ingest_clock()).ok())
        .collect()
}

/// What a use case published as events, in order.
pub fn published_events(bus: &crate::support::RecordingBus) -> Vec<Event> {
    published(bus, "notifications.mower.")
}

/// What a use case published on subjects that begin with `prefix`, parsed, in order.
fn published<T: serde::de::DeserializeOwned>(
    bus: &crate::support::RecordingBus,
    prefix: &str,
) -> Vec<T> {
    bus.published()
        .iter()
        .filter(|(subject, _, _)| subject.starts_with(prefix))
        .map(|(subject, payload, _)| {
            serde_json::from_slice(payload).unwrap_or_else(|e| panic!("{subject}: {e}"))
        })
        .collect()
}

/// The reference's `blade_due` events (the telemetry harness runs no watcher).
fn blade_due(expected: &reference::Expected) -> Vec<Event> {
    expected
        .watch
        .events
        .iter()
        .filter(|e| e.kind() == EventKind::BladeDue)
        .cloned()
        .collect()
}

/// A random trace (redeliveries, late and future states, unknown mowers, account mismatches,
/// invalid reports) in random batches ends with the reference's rows, and publishes the
/// reference's `blade_due` events, each once.
pub async fn telemetry_matches_the_reference(
    factory: &dyn StoreFactory,
    steps: &[Step],
    sizes: &[usize],
) {
    let h = Harness::new(factory, THRESHOLD_MS).await;
    let reports = build_trace(&h.fleet, steps);
    for batch in split(&reports, sizes) {
        h.ingest(&batch).await;
    }
    ends_like_the_reference(&h, &reports).await;
}

/// The harness's rows equal the reference's for `arrival` (the reports in the order the store
/// received them), and it published the reference's `blade_due` events, each once.
async fn ends_like_the_reference(h: &Harness, arrival: &[Value]) {
    let expected = reference::expect(
        &fleet_setup(&h.fleet, THRESHOLD_MS),
        &parsed(arrival),
        BusyClock::Wall,
    );
    let differences = compare(&expected.telemetry, &h.rows().await, Checked::Everything);
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    let mut published = published_events(&h.bus);
    published.sort_by_key(|e| e.id);
    assert_eq!(published, blade_due(&expected), "blade_due events");
}

/// Any permutation of distinct states (with identical redeliveries) in any batches ends with the
/// reference's rows: the totals are those of the set of states (W4, W5, decision 39), and
/// `blade_due` is raised by the arriving state that brings blade time to the threshold.
pub async fn any_order_matches_the_reference(
    factory: &dyn StoreFactory,
    steps: &[DistinctStep],
    redeliveries: &[usize],
    order: &[usize],
    sizes: &[usize],
) {
    let h = Harness::new(factory, THRESHOLD_MS).await;
    let reports = build_distinct_trace(&h.fleet, steps);
    let arrival = arrival(&reports, redeliveries, order);
    for batch in split(&arrival, sizes) {
        h.ingest(&batch).await;
    }
    ends_like_the_reference(&h, &arrival).await;
}

/// Geofences and zones over the traces' lawn, in the store and in the reference alike.
async fn furnish(h: &WatchHarness, setup: &mut BTreeMap<MowerId, MowerSetup>) {
    let fences = [(0, (100, 100), (400, 400)), (2, (0, 0), (250, 500))];
    for (mower, from, to) in fences {
        let version = h.put_geofence(mower, lawn_rectangle(from, to)).await;
        setup.get_mut(&h.fleet.mowers[mower]).unwrap().geofence = Some((version, lawn(from, to)));
    }
    let zones = [
        (0, 0x21, "Roses", (0, 0), (200, 200)),
        (0, 0x22, "Pond", (150, 150), (300, 300)),
        (1, 0x23, "Back", (250, 0), (500, 500)),
    ];
    for (mower, id, name, from, to) in zones {
        h.add_zone(mower, id, name, lawn_rectangle(from, to)).await;
        let zones = &mut setup.get_mut(&h.fleet.mowers[mower]).unwrap().zones;
        zones.push((Uuid::from_u128(id), name.into(), lawn(from, to)));
        zones.sort_by_key(|z| z.0);
    }
}

/// A random trace in random batches, ingested (W1–W7) then watched (§4, the busy check) as the
/// two consumers do, ends with the reference's rows, events, open and closed alerts, watch rows,
/// zone watches and busy statuses (the clock stands still, so the busy check's 30 s refresh never
/// happens and the statuses are exact); the watcher publishes the reference's events.
pub async fn watch_matches_the_reference(
    factory: &dyn WatchFactory,
    steps: &[Step],
    sizes: &[usize],
) {
    let h = WatchHarness::new(factory, THRESHOLD_MS).await;
    let mut setup = fleet_setup(&h.fleet, THRESHOLD_MS);
    furnish(&h, &mut setup).await;
    let reports = build_trace(&h.fleet, steps);
    for batch in split(&reports, sizes) {
        h.both(&batch).await;
    }
    let expected = reference::expect(&setup, &parsed(&reports), BusyClock::Fixed(ingest_clock()));
    let (telemetry, watch) = h.rows().await;
    let mut differences = compare(&expected.telemetry, &telemetry, Checked::Everything);
    differences.extend(reference::compare_watch(&expected.watch, &watch));
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // What was published is what was stored, each once (offline events aside: there are none).
    let mut published: Vec<Uuid> = published_events(&h.bus).iter().map(|e| e.id).collect();
    published.sort_unstable();
    let stored: Vec<Uuid> = watch
        .events
        .iter()
        .filter(|e| !matches!(e.kind(), EventKind::WentOffline | EventKind::CameOnline))
        .map(|e| e.id)
        .collect();
    assert_eq!(published, stored, "published events");
    // And the alerts cleared without an event, each once, as the reference clears them.
    let mut cleared: Vec<ClearedAlert> = self::published(&h.bus, "notifications.alert.");
    cleared.sort_by_key(|c| (c.mower_id, c.cleared_at));
    assert_eq!(
        cleared, expected.cleared_without_event,
        "alerts cleared without an event"
    );
    assert_eq!(
        h.bus.published().len(),
        stored.len() + cleared.len(),
        "nothing else was published"
    );
}
