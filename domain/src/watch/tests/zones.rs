//! W7 with several zones (docs/rules.md §3) and the scheduler's busy check (§4), case by case.

use super::*;
use crate::watch::busy::is_busy;
use crate::watch::zones::{Occupancy, ZoneChanges};

const ZONE_A: Uuid = Uuid::from_u128(0x2a);
const ZONE_B: Uuid = Uuid::from_u128(0x2b);

/// A zone `width_m` wide from `west_m` east of the square fence's west edge, 0–100 m north.
fn zone(id: Uuid, name: &str, west_m: f64, width_m: f64) -> ZoneFence {
    let (w, e) = (lon_of(west_m), lon_of(west_m + width_m));
    let polygon = GeoPolygon::from_geojson(&json!({
        "type": "Polygon",
        "coordinates": [[
            [w, lat_of(0.0)], [e, lat_of(0.0)], [e, lat_of(100.0)], [w, lat_of(100.0)],
            [w, lat_of(0.0)]
        ]]
    }))
    .unwrap();
    ZoneFence {
        id,
        name: name.into(),
        fence: polygon.fence(),
    }
}

fn zone_snapshots(zones: Vec<ZoneFence>) -> BTreeMap<MowerId, ZoneSnapshot> {
    BTreeMap::from([(
        MOWER,
        ZoneSnapshot {
            zones,
            watch: ZoneWatch::new(MOWER),
        },
    )])
}

fn mowing_at(seconds: i64, east_m: f64) -> StateReport {
    at_position(state(seconds, Activity::Mowing), east_m, Some(2.0))
}

fn zone_events(changes: &ZoneChanges) -> Vec<(EventKind, Uuid, DateTime<Utc>)> {
    changes
        .events
        .iter()
        .map(|e| match &e.detail {
            EventDetail::ZoneEntered { zone_id, .. } | EventDetail::ZoneLeft { zone_id, .. } => {
                (e.kind(), *zone_id, e.observed_at)
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn overlapping_zones_are_entered_and_left_each_on_its_own() {
    // A: 0–100 m east; B: 50–150 m east (they overlap from 50 to 100 m).
    let mut snapshots = zone_snapshots(vec![
        zone(ZONE_A, "Front", 0.0, 100.0),
        zone(ZONE_B, "Back", 50.0, 100.0),
    ]);
    let occupancy = |snapshots: &BTreeMap<MowerId, ZoneSnapshot>| {
        snapshots[&MOWER]
            .watch
            .occupancy
            .iter()
            .map(|o| (o.zone_id, o.since))
            .collect::<Vec<_>>()
    };
    // 25 m: in A only. 75 m: in both. 125 m: left A, still in B.
    let changes = apply_zones(&mut snapshots, &[mowing_at(0, 25.0), mowing_at(10, 75.0)]);
    assert_eq!(
        zone_events(&changes),
        vec![(ZoneEntered, ZONE_A, at(0)), (ZoneEntered, ZONE_B, at(10))]
    );
    assert_eq!(
        occupancy(&snapshots),
        vec![(ZONE_A, at(0)), (ZONE_B, at(10))]
    );
    assert_eq!(
        changes.events[1].detail,
        EventDetail::ZoneEntered {
            zone_id: ZONE_B,
            zone_name: "Back".into()
        }
    );
    let changes = apply_zones(&mut snapshots, &[mowing_at(20, 125.0)]);
    assert_eq!(zone_events(&changes), vec![(ZoneLeft, ZONE_A, at(20))]);
    assert_eq!(occupancy(&snapshots), vec![(ZONE_B, at(10))]);
    assert_eq!(
        changes.watches[0].occupancy,
        snapshots[&MOWER].watch.occupancy
    );
    // A jump from B straight into A: B is left before A is entered.
    let changes = apply_zones(&mut snapshots, &[mowing_at(30, 25.0)]);
    assert_eq!(
        zone_events(&changes),
        vec![(ZoneLeft, ZONE_B, at(30)), (ZoneEntered, ZONE_A, at(30))]
    );
    assert_eq!(occupancy(&snapshots), vec![(ZONE_A, at(30))]);
    // B entered (leaving A), then A again: the occupancy is kept in zone id order, not in the
    // order the zones were entered.
    apply_zones(&mut snapshots, &[mowing_at(40, 125.0), mowing_at(50, 75.0)]);
    assert_eq!(
        occupancy(&snapshots),
        vec![(ZONE_A, at(50)), (ZONE_B, at(40))]
    );
}

#[test]
fn a_deleted_zone_leaves_the_occupancy_without_an_event() {
    // The mower was in A and B; A has been deleted since.
    let mut snapshots = zone_snapshots(vec![zone(ZONE_B, "Back", 50.0, 100.0)]);
    let watch = &mut snapshots.get_mut(&MOWER).unwrap().watch;
    watch.evaluated_until = Some(at(0));
    watch.occupancy = vec![
        Occupancy {
            zone_id: ZONE_A,
            since: at(0),
        },
        Occupancy {
            zone_id: ZONE_B,
            since: at(0),
        },
    ];
    // Still in B (75 m): nothing to say, but A is gone from the occupancy.
    let changes = apply_zones(&mut snapshots, &[mowing_at(10, 75.0)]);
    assert!(changes.events.is_empty(), "{:?}", changes.events);
    assert_eq!(
        changes.watches,
        vec![ZoneWatch {
            mower_id: MOWER,
            evaluated_until: Some(at(10)),
            occupancy: vec![Occupancy {
                zone_id: ZONE_B,
                since: at(0),
            }],
        }]
    );
}

#[test]
fn states_without_a_position_or_zones_are_not_evaluated() {
    let mut snapshots = zone_snapshots(vec![zone(ZONE_A, "Front", 0.0, 100.0)]);
    let elsewhere = StateReport {
        mower_id: MowerId(Uuid::from_u128(99)),
        ..mowing_at(5, 25.0)
    };
    let changes = apply_zones(&mut snapshots, &[state(0, Activity::Mowing), elsewhere]);
    assert_eq!(changes, ZoneChanges::default());
    assert_eq!(snapshots[&MOWER].watch.evaluated_until, None);
}

#[test]
fn busy_means_on_a_run_or_stuck_in_an_error() {
    use Activity::*;
    let busy: Vec<Activity> = Activity::ALL.into_iter().filter(|a| is_busy(*a)).collect();
    assert_eq!(busy, vec![Mowing, Leaving, Returning, Paused, Error]);
    assert!(written(Activity::Paused, 0, 0, 0.0).busy());
    assert!(!written(Activity::Charging, 0, 0, 0.0).busy());
}

#[test]
fn the_busy_status_is_rewritten_for_a_first_position_or_a_long_move_only() {
    let report = |east: f64| at_position(state(5, Activity::Mowing), east, None);
    let w = written(Activity::Mowing, 0, 0, 0.0);
    // 50.5 m is short of 100 m, whatever its fraction of a metre.
    assert!(busy_update(Some(&w), &report(50.5), at(5)).is_none());
    // 200 m is far enough.
    let next = busy_update(Some(&w), &report(200.0), at(5)).unwrap();
    assert_eq!(
        next,
        BusyStatus {
            lat: Some(lat_of(50.0)),
            lon: Some(lon_of(200.0)),
            observed_at: at(5),
            written_at: at(5),
            ..w.clone()
        }
    );
    // Written without a position: the first position is news; losing it again is not.
    let blind = BusyStatus {
        lat: None,
        lon: None,
        ..w.clone()
    };
    assert!(busy_update(Some(&blind), &report(0.0), at(5)).is_some());
    assert!(busy_update(Some(&w), &state(5, Activity::Mowing), at(5)).is_none());
    assert!(busy_update(Some(&blind), &state(5, Activity::Mowing), at(5)).is_none());
}
