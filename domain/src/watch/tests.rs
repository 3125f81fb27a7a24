//! The notification rules pinned with hand-made traces, and a property: any split of a trace into
//! batches derives what the trace watched one state at a time derives.

use super::busy::{busy_update, BusyStatus};
use super::geometry::Fence;
use super::zones::{apply_zones, ZoneFence, ZoneSnapshot, ZoneWatch};
use super::*;
use crate::events::IngestEvent;
use crate::ids::{AccountId, MowerId};
use crate::report::{Activity, DropReason, Position, StateReport};
use crate::rules::StateOutcome;
use crate::sessions::DEFAULT_SESSION_MERGE_GAP;
use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;
use uuid::Uuid;

const MOWER: MowerId = MowerId(Uuid::from_u128(1));
const ACCOUNT: AccountId = AccountId(Uuid::from_u128(0xa));
const FENCE_VERSION: Uuid = Uuid::from_u128(0xf1);

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 10, 0, 0).unwrap() + Duration::seconds(seconds)
}

/// Metres north or east of the square fence's south-west corner, in degrees at latitude 52.5.
fn lat_of(north_m: f64) -> f64 {
    52.5 + north_m / 111_195.08
}
fn lon_of(east_m: f64) -> f64 {
    13.4 + east_m / (111_195.08 * 52.5f64.to_radians().cos())
}

/// A 100 m × 100 m square.
fn square() -> GeoPolygon {
    GeoPolygon::from_geojson(&json!({
        "type": "Polygon",
        "coordinates": [[
            [lon_of(0.0), lat_of(0.0)], [lon_of(100.0), lat_of(0.0)],
            [lon_of(100.0), lat_of(100.0)], [lon_of(0.0), lat_of(100.0)],
            [lon_of(0.0), lat_of(0.0)]
        ]]
    }))
    .unwrap()
}

fn state(seconds: i64, activity: Activity) -> StateReport {
    StateReport::bare(MOWER, ACCOUNT, at(seconds), activity, Some(80))
}

fn at_position(mut s: StateReport, east_m: f64, accuracy_m: Option<f64>) -> StateReport {
    s.position = Some(Position {
        lat: lat_of(50.0),
        lon: lon_of(east_m),
        accuracy_m,
        heading_deg: None,
    });
    s
}

fn battery(mut s: StateReport, percent: u8) -> StateReport {
    s.battery_percent = Some(percent);
    s
}

struct Run {
    snapshots: BTreeMap<MowerId, WatchSnapshot>,
    fence: Option<Fence>,
    merge_gap: Duration,
}

impl Run {
    fn new(with_fence: bool) -> Run {
        Run {
            snapshots: BTreeMap::from([(
                MOWER,
                WatchSnapshot {
                    account_id: Some(ACCOUNT),
                    geofence_version: with_fence.then_some(FENCE_VERSION),
                    watch: None,
                },
            )]),
            fence: with_fence.then(|| square().fence()),
            merge_gap: DEFAULT_SESSION_MERGE_GAP,
        }
    }

    fn watch(&mut self, states: &[StateReport]) -> (Vec<StateOutcome>, WatchChanges) {
        let fences: BTreeMap<MowerId, GeofenceRef<'_>> = self
            .fence
            .iter()
            .map(|f| {
                (
                    MOWER,
                    GeofenceRef {
                        version: FENCE_VERSION,
                        fence: f,
                    },
                )
            })
            .collect();
        apply_watch(
            &mut self.snapshots,
            &fences,
            states,
            at(10_000),
            self.merge_gap,
        )
    }

    fn kinds(&mut self, states: &[StateReport]) -> Vec<EventKind> {
        self.watch(states)
            .1
            .events
            .iter()
            .map(Event::kind)
            .collect()
    }
}

use EventKind::*;

#[test]
fn errors_are_raised_and_cleared_with_their_alert() {
    let mut run = Run::new(false);
    let mut error = state(10, Activity::Error);
    error.error_code = Some("E_STUCK".into());
    let (_, changes) = run.watch(&[
        state(0, Activity::Docked),
        error.clone(),
        StateReport {
            error_code: Some("E_OTHER".into()),
            ..state(20, Activity::Error)
        },
        state(30, Activity::Paused),
    ]);
    assert_eq!(
        changes.events.iter().map(Event::kind).collect::<Vec<_>>(),
        vec![ErrorRaised, ErrorCleared]
    );
    assert_eq!(
        changes.events[1].detail,
        EventDetail::ErrorCleared {
            error_code: Some("E_STUCK".into())
        },
        "the cleared code is the one raised"
    );
    assert_eq!(changes.alerts.raised.len(), 1);
    let alert = &changes.alerts.raised[0];
    assert_eq!(alert.id, changes.events[0].id);
    assert_eq!(alert.severity, Severity::High);
    assert_eq!(alert.cleared_at, Some(at(30)));
    assert_eq!(alert.code.as_deref(), Some("E_STUCK"));
    assert!(changes.alerts.clears.is_empty());
}

#[test]
fn a_first_state_in_error_raises_but_sets_the_activity_baseline() {
    let mut run = Run::new(false);
    assert_eq!(run.kinds(&[state(0, Activity::Error)]), vec![ErrorRaised]);
    let mut run = Run::new(false);
    assert_eq!(
        run.kinds(&[state(0, Activity::Mowing)]),
        Vec::<EventKind>::new()
    );
    assert_eq!(
        run.kinds(&[state(10, Activity::Returning), state(20, Activity::Mowing)]),
        vec![MowingFinished, MowingStarted]
    );
}

#[test]
fn older_and_equal_states_are_skipped() {
    let mut run = Run::new(false);
    run.watch(&[state(10, Activity::Mowing)]);
    let (outcomes, changes) = run.watch(&[
        state(10, Activity::Error),
        state(5, Activity::Error),
        state(0, Activity::Docked),
    ]);
    assert_eq!(outcomes, vec![StateOutcome::Stored; 3]);
    assert!(changes.is_empty(), "{changes:?}");
}

#[test]
fn unknown_and_foreign_states_are_dropped() {
    let mut run = Run::new(false);
    let mut foreign = state(0, Activity::Mowing);
    foreign.account_id = AccountId(Uuid::from_u128(0xb));
    let mut unknown = state(0, Activity::Mowing);
    unknown.mower_id = MowerId(Uuid::from_u128(99));
    let (outcomes, changes) = run.watch(&[foreign, unknown]);
    assert_eq!(
        outcomes,
        vec![
            StateOutcome::Dropped(DropReason::AccountMismatch),
            StateOutcome::Dropped(DropReason::UnknownMower)
        ]
    );
    assert!(changes.is_empty());
}

#[test]
fn battery_low_is_raised_once_and_rearmed_at_thirty_percent() {
    let mut run = Run::new(false);
    let (_, changes) = run.watch(&[
        battery(state(0, Activity::Mowing), 25),
        battery(state(10, Activity::Mowing), 19),
        battery(state(20, Activity::Mowing), 12),
        battery(state(30, Activity::Charging), 25),
        battery(state(40, Activity::Mowing), 15),
        battery(state(50, Activity::Charging), 30),
        battery(state(60, Activity::Docked), 10),
        battery(state(70, Activity::Mowing), 19),
    ]);
    let lows: Vec<_> = changes
        .events
        .iter()
        .filter(|e| e.kind() == BatteryLow)
        .map(|e| e.observed_at)
        .collect();
    assert_eq!(
        lows,
        vec![at(10), at(70)],
        "not again below 30 %, re-armed at 30 %, never while docked"
    );
    assert_eq!(changes.alerts.raised[0].cleared_at, Some(at(50)));
    assert_eq!(changes.alerts.raised[1].cleared_at, None);
}

#[test]
fn the_geofence_alarm_needs_a_position_clearly_outside() {
    let mut run = Run::new(true);
    let mowing =
        |s: i64, east: f64, acc: Option<f64>| at_position(state(s, Activity::Mowing), east, acc);
    let (_, changes) = run.watch(&[
        mowing(0, 50.0, Some(1.0)),
        // 3 m outside, but the fix is only good to 5 m: no alarm.
        mowing(10, 103.0, Some(5.0)),
        // 2 m inside with 5 m accuracy: still nothing.
        mowing(20, 98.0, Some(5.0)),
        // 8 m outside with 5 m accuracy: the theft alarm.
        mowing(30, 108.0, Some(5.0)),
        // Back inside, but within the accuracy of the boundary: still outside.
        mowing(40, 97.0, Some(5.0)),
        mowing(50, 90.0, Some(5.0)),
    ]);
    assert_eq!(
        changes.events.iter().map(Event::kind).collect::<Vec<_>>(),
        vec![GeofenceLeft, GeofenceReturned]
    );
    match &changes.events[0].detail {
        EventDetail::GeofenceLeft {
            distance_m,
            geofence_version,
            ..
        } => {
            assert!((distance_m - 8.0).abs() < 0.05, "{distance_m}");
            assert_eq!(*geofence_version, FENCE_VERSION);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(changes.alerts.raised[0].severity, Severity::Critical);
    assert_eq!(changes.alerts.raised[0].cleared_at, Some(at(50)));
    assert_eq!(changes.watches[0].geofence_version, Some(FENCE_VERSION));
}

#[test]
fn the_offline_sweep_raises_once_and_the_next_state_comes_online() {
    let mut run = Run::new(false);
    let (_, changes) = run.watch(&[state(0, Activity::Docked)]);
    let mut watch = changes.watches[0].clone();
    let mut swept = WatchChanges::default();
    let event = went_offline(&mut watch, DEFAULT_OFFLINE_AFTER, &mut swept).unwrap();
    assert_eq!(event.observed_at, at(10_000) + DEFAULT_OFFLINE_AFTER);
    assert!(went_offline(&mut watch, DEFAULT_OFFLINE_AFTER, &mut swept).is_none());
    assert_eq!(swept.alerts.raised.len(), 1);
    run.snapshots.get_mut(&MOWER).unwrap().watch = Some(watch);
    let (_, changes) = run.watch(&[state(20, Activity::Docked)]);
    assert_eq!(
        changes.events.iter().map(Event::kind).collect::<Vec<_>>(),
        vec![CameOnline]
    );
    assert_eq!(changes.alerts.clears.len(), 1);
    assert!(!changes.watches[0].offline);
}

#[test]
fn event_ids_are_derived_and_sort_by_time() {
    let a = event_id(MOWER, ErrorRaised, at(0), None);
    assert_eq!(a, event_id(MOWER, ErrorRaised, at(0), None));
    assert_ne!(a, event_id(MOWER, ErrorCleared, at(0), None));
    assert_ne!(
        event_id(MOWER, ZoneEntered, at(0), Some(Uuid::from_u128(1))),
        event_id(MOWER, ZoneEntered, at(0), Some(Uuid::from_u128(2)))
    );
    assert!(a < event_id(MOWER, ErrorRaised, at(1), None));
    assert_eq!(a.get_version_num(), 8);
    let event = Event::new(
        MOWER,
        ACCOUNT,
        at(0),
        EventDetail::BatteryLow {
            battery_percent: 12,
        },
    );
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(value["kind"], "battery_low");
    assert_eq!(value["battery_percent"], 12);
    assert_eq!(serde_json::from_value::<Event>(value).unwrap(), event);
}

#[test]
fn polygons_are_validated() {
    let bad = [
        json!({"type": "Point", "coordinates": [0, 0]}),
        json!({"type": "Polygon", "coordinates": []}),
        json!({"type": "Polygon", "coordinates": [[[0, 0], [0, 0.001], [0.001, 0]]]}),
        json!({"type": "Polygon", "coordinates": [[[0, 0], [0, 0.001], [0.001, 0], [0, 0.0001]]]}),
        json!({"type": "Polygon", "coordinates": [[[0, 0], [0, 91], [1, 0], [0, 0]]]}),
        json!({"type": "Polygon", "coordinates": [[[0, 0], [0, 2], [2, 0], [0, 0]]]}),
        json!({"type": "Polygon", "coordinates": [[[0, 0], [0, 0.001], [0, 0.002], [0, 0]]]}),
    ];
    for value in bad {
        assert!(GeoPolygon::from_geojson(&value).is_err(), "{value}");
    }
    let square = square();
    let round: GeoPolygon = serde_json::from_value(square.to_geojson()).unwrap();
    assert_eq!(round, square);
}

#[test]
fn zones_are_entered_and_left_on_clear_positions() {
    let zone_id = Uuid::from_u128(0x20);
    let mut snapshots = BTreeMap::from([(
        MOWER,
        ZoneSnapshot {
            zones: vec![ZoneFence {
                id: zone_id,
                name: "Front lawn".into(),
                fence: square().fence(),
            }],
            watch: ZoneWatch::new(MOWER),
        },
    )]);
    let mowing = |s: i64, east: f64| at_position(state(s, Activity::Mowing), east, Some(2.0));
    let changes = apply_zones(
        &mut snapshots,
        &[
            mowing(0, 150.0),
            mowing(10, 99.0), // within the accuracy: not yet in
            mowing(20, 90.0),
            mowing(15, 200.0), // older than what was evaluated: skipped
            mowing(30, 101.0),
            mowing(40, 110.0),
        ],
    );
    assert_eq!(
        changes.events.iter().map(Event::kind).collect::<Vec<_>>(),
        vec![ZoneEntered, ZoneLeft]
    );
    assert_eq!(changes.events[0].observed_at, at(20));
    assert_eq!(changes.events[1].observed_at, at(40));
    assert_eq!(changes.watches[0].evaluated_until, Some(at(40)));
    assert!(changes.watches[0].occupancy.is_empty());
}

fn written(activity: Activity, observed: i64, written: i64, east_m: f64) -> BusyStatus {
    BusyStatus {
        mower_id: MOWER,
        account_id: ACCOUNT,
        activity,
        observed_at: at(observed),
        lat: Some(lat_of(50.0)),
        lon: Some(lon_of(east_m)),
        written_at: at(written),
    }
}

#[test]
fn the_busy_status_is_throttled() {
    let w = written(Activity::Mowing, 0, 0, 0.0);
    let report =
        |s: i64, activity: Activity, east: f64| at_position(state(s, activity), east, None);
    assert!(busy_update(Some(&w), &report(29, Activity::Mowing, 50.0), at(29)).is_none());
    assert!(busy_update(Some(&w), &report(30, Activity::Mowing, 50.0), at(30)).is_some());
    assert!(busy_update(Some(&w), &report(5, Activity::Mowing, 100.5), at(5)).is_some());
    assert!(busy_update(Some(&w), &report(5, Activity::Returning, 0.0), at(5)).is_some());
    assert!(
        busy_update(Some(&w), &report(0, Activity::Docked, 500.0), at(500)).is_none(),
        "not newer than what was written"
    );
    assert!(busy_update(None, &report(0, Activity::Docked, 0.0), at(0)).is_some());
}

/// One step of a random trace: seconds forward (or back), activity, battery, east of the fence.
fn step() -> impl Strategy<Value = (i64, usize, Option<u8>, Option<(f64, f64)>)> {
    (
        prop_oneof![8 => 1i64..120, 1 => -60i64..0, 1 => Just(0i64)],
        0usize..Activity::ALL.len(),
        proptest::option::weighted(0.8, 0u8..=100),
        proptest::option::weighted(0.8, (-20.0f64..120.0, 0.0f64..8.0)),
    )
}

/// The alert table a store keeps, written here as [`AlertChanges`] tells stores to apply a batch
/// (its clears close the open alert of their mower and kind, then its raised alerts are inserted,
/// an id already stored left as it is), so that the property below compares what a store would
/// hold without going through the production [`AlertChanges::clear`] on either side.
fn store_alerts(table: &mut Vec<Alert>, changes: &AlertChanges) {
    for clear in &changes.clears {
        let open = table.iter_mut().find(|a| {
            a.mower_id == clear.mower_id && a.kind == clear.kind && a.cleared_at.is_none()
        });
        if let Some(alert) = open {
            alert.cleared_at = Some(clear.cleared_at);
        }
    }
    for raised in &changes.raised {
        if !table.iter().any(|a| a.id == raised.id) {
            table.push(raised.clone());
        }
    }
}

proptest! {
    #[test]
    fn any_split_watches_like_one_at_a_time(
        steps in proptest::collection::vec(step(), 1..80),
        sizes in proptest::collection::vec(1usize..12, 1..20),
    ) {
        let mut clock = 0i64;
        let states: Vec<StateReport> = steps
            .iter()
            .map(|(dt, activity, battery, position)| {
                clock += dt;
                let mut s = state(clock, Activity::ALL[*activity]);
                s.battery_percent = *battery;
                if let Some((east, acc)) = position {
                    s = at_position(s, *east, Some(*acc));
                }
                s
            })
            .collect();
        let mut single = Run::new(true);
        let (mut events_one_by_one, mut alerts_one_by_one) = (Vec::new(), Vec::new());
        for s in &states {
            let (_, c) = single.watch(std::slice::from_ref(s));
            events_one_by_one.extend(c.events);
            store_alerts(&mut alerts_one_by_one, &c.alerts);
        }
        let mut batched = Run::new(true);
        let (mut events_in_batches, mut alerts_in_batches) = (Vec::new(), Vec::new());
        let mut rest = &states[..];
        let mut sizes = sizes.iter().cycle();
        while !rest.is_empty() {
            let n = (*sizes.next().unwrap()).min(rest.len());
            let (_, c) = batched.watch(&rest[..n]);
            events_in_batches.extend(c.events);
            store_alerts(&mut alerts_in_batches, &c.alerts);
            rest = &rest[n..];
        }
        prop_assert_eq!(&events_in_batches, &events_one_by_one);
        prop_assert_eq!(&alerts_in_batches, &alerts_one_by_one);
        prop_assert_eq!(&batched.snapshots, &single.snapshots);
    }
}

#[test]
fn only_simple_polygons_are_valid_and_the_refusal_names_the_problem() {
    let ring = |points: &[[f64; 2]]| {
        let mut ring: Vec<[f64; 2]> = points.iter().map(|p| [p[0] * 1e-3, p[1] * 1e-3]).collect();
        ring.push(ring[0]);
        ring
    };
    let polygon = |rings: Vec<Vec<[f64; 2]>>| json!({"type": "Polygon", "coordinates": rings});
    let square = ring(&[[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0]]);
    let cases = [
        // A bow tie whose two halves cancel: no area check catches it.
        (
            polygon(vec![ring(&[
                [0.0, 0.0],
                [10.0, 10.0],
                [10.0, 0.0],
                [0.0, 10.0],
            ])]),
            "crosses or touches itself",
        ),
        // A bow tie with unequal halves (its area does not cancel).
        (
            polygon(vec![ring(&[
                [0.0, 0.0],
                [10.0, 10.0],
                [10.0, 0.0],
                [0.0, 4.0],
            ])]),
            "crosses or touches itself",
        ),
        // A ring that touches itself at a vertex (a figure eight).
        (
            polygon(vec![ring(&[
                [0.0, 0.0],
                [5.0, 5.0],
                [10.0, 0.0],
                [10.0, 10.0],
                [5.0, 5.0],
                [0.0, 10.0],
            ])]),
            "crosses or touches itself",
        ),
        // A spike: a segment that runs back over the previous one.
        (
            polygon(vec![ring(&[
                [0.0, 0.0],
                [10.0, 0.0],
                [5.0, 0.0],
                [5.0, 5.0],
            ])]),
            "runs back over itself",
        ),
        // A hole outside the exterior ring.
        (
            polygon(vec![
                square.clone(),
                ring(&[[20.0, 20.0], [22.0, 20.0], [22.0, 22.0], [20.0, 22.0]]),
            ]),
            "is not inside the exterior ring",
        ),
        // A hole that crosses the exterior ring.
        (
            polygon(vec![
                square.clone(),
                ring(&[[8.0, 8.0], [12.0, 8.0], [12.0, 12.0], [8.0, 12.0]]),
            ]),
            "crosses or touches the exterior ring",
        ),
        // Two holes that cross.
        (
            polygon(vec![
                square.clone(),
                ring(&[[1.0, 1.0], [5.0, 1.0], [5.0, 5.0], [1.0, 5.0]]),
                ring(&[[3.0, 3.0], [7.0, 3.0], [7.0, 7.0], [3.0, 7.0]]),
            ]),
            "cross or touch each other",
        ),
        // A hole inside another hole.
        (
            polygon(vec![
                square.clone(),
                ring(&[[1.0, 1.0], [8.0, 1.0], [8.0, 8.0], [1.0, 8.0]]),
                ring(&[[3.0, 3.0], [4.0, 3.0], [4.0, 4.0], [3.0, 4.0]]),
            ]),
            "inside ring 1 (another hole)",
        ),
    ];
    for (value, problem) in cases {
        let err = GeoPolygon::from_geojson(&value).expect_err(&value.to_string());
        assert!(err.0.contains(problem), "{value}: {err}");
    }
    // Valid: a square with a hole inside, a concave ring, repeated positions.
    for value in [
        polygon(vec![
            square.clone(),
            ring(&[[2.0, 2.0], [4.0, 2.0], [4.0, 4.0], [2.0, 4.0]]),
            ring(&[[6.0, 6.0], [8.0, 6.0], [8.0, 8.0], [6.0, 8.0]]),
        ]),
        polygon(vec![ring(&[
            [0.0, 0.0],
            [10.0, 0.0],
            [10.0, 10.0],
            [5.0, 3.0],
            [0.0, 10.0],
        ])]),
        polygon(vec![ring(&[
            [0.0, 0.0],
            [10.0, 0.0],
            [10.0, 0.0],
            [10.0, 10.0],
            [0.0, 10.0],
        ])]),
    ] {
        assert!(GeoPolygon::from_geojson(&value).is_ok(), "{value}");
    }
}

mod alerts;
mod polygons;
mod sessions;
mod zones;
