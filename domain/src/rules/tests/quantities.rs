//! Hand-computed cases in which every quantity of W4/W5 takes its own value, so that a rule that
//! counts one quantity under another's condition (blade time for mowing, distance without the
//! mowing guard, a charge for an error) gives a wrong number somewhere. The expected rows are
//! written out from docs/rules.md §3, never computed by the rules.

use super::*;

/// The stored health totals' error and charge counts, blade and mowing time and distance.
fn counts_and_times(store: &Store) -> (i64, i64, i64, i64, i64) {
    let h = store.health.clone().unwrap();
    (
        h.error_count,
        h.charge_count,
        h.blade_ms,
        h.mowing_ms,
        h.distance_mm,
    )
}

fn june_1() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 6, 1).unwrap()
}

/// The day row of [`MOWER`] on 1 June with these values.
fn day(mowing_ms: i64, blade_ms: i64, distance_mm: i64, counts: [i64; 3]) -> DayTotals {
    let [error_count, charge_count, state_count] = counts;
    DayTotals {
        mower_id: MOWER,
        day: june_1(),
        mowing_ms,
        blade_ms,
        distance_mm,
        error_count,
        charge_count,
        state_count,
    }
}

#[test]
fn blade_time_mowing_time_and_distance_have_separate_conditions() {
    let (outcomes, changes) = run(&[
        // 0→40 s: leaving with the blade on: 40 s of blade time, no mowing, and no distance
        // although both ends have a position (0.001° apart).
        at_lat(0, Activity::Leaving, true, 52.000),
        // 40→100 s: mowing with the blade off: 60 s of mowing, 0.002° (222 390 mm).
        at_lat(40, Activity::Mowing, false, 52.001),
        // 100→130 s: mowing with the blade on: 30 s of both, 0.001° (111 195 mm).
        at_lat(100, Activity::Mowing, true, 52.003),
        // 130→200 s: returning, blade off, positions at both ends (0.006° apart): nothing.
        at_lat(130, Activity::Returning, false, 52.004),
        // The newest state: docked with the blade on (it opens no interval yet).
        at_lat(200, Activity::Docked, true, 52.010),
    ]);
    assert_eq!(outcomes, vec![StateOutcome::Stored; 5]);
    let distance = 222_390 + MILLI_DEGREE_MM;
    assert_eq!(
        changes.health,
        vec![HealthTotals {
            mower_id: MOWER,
            account_id: ACCOUNT,
            counted_from: at(0),
            counted_until: at(200),
            last_activity: Activity::Docked,
            last_blade_on: true,
            last_lat: Some(52.010),
            last_lon: Some(13.0),
            mowing_ms: 90_000,
            blade_ms: 70_000,
            distance_mm: distance,
            error_count: 0,
            charge_count: 0,
            blade_since_reset_ms: 70_000,
            blade_due_raised: false,
            blade_reset_until: None,
        }]
    );
    assert_eq!(changes.days, vec![day(90_000, 70_000, distance, [0, 0, 5])]);
}

#[test]
fn errors_and_charges_are_entered_from_any_other_activity() {
    use Activity::*;
    // Entering error: at 0 s (the first state), 40 s (from charging) and 80 s (from idle).
    // Entering charging: at 10 s (from error) and 60 s (from docked). Never from itself.
    let acts = [
        Error, Charging, Charging, Docked, Error, Error, Charging, Idle, Error,
    ];
    let (_, changes) = run(&every_ten_seconds(&acts));
    let h = &changes.health[0];
    assert_eq!((h.error_count, h.charge_count), (3, 2));
    assert_eq!(changes.days, vec![day(0, 0, 0, [3, 2, 9])]);
}

#[test]
fn a_merge_moves_each_quantity_by_its_own_amount() {
    let mut store = Store::default();
    // P leaving with the blade on at 0 s, S docked at 100 s, positions at both ends (0.002°):
    // 100 s of blade time, no mowing, no distance.
    store.ingest(&[
        at_lat(0, Activity::Leaving, true, 52.000),
        at_lat(100, Activity::Docked, false, 52.002),
    ]);
    let h = store.health.clone().unwrap();
    assert_eq!((h.mowing_ms, h.blade_ms, h.distance_mm), (0, 100_000, 0));

    // L mowing with the blade off at 30 s, 0.001° from both. Taken back: P→S (100 s of blade).
    // Added: P→L (30 s of blade, no distance: P was not mowing) and L→S (70 s of mowing,
    // 111 195 mm, no blade).
    let counts = store.ingest(&[at_lat(30, Activity::Mowing, false, 52.001)]);
    assert_eq!(counts.late_merged, 1);
    let h = store.health.clone().unwrap();
    assert_eq!(
        (
            h.mowing_ms,
            h.blade_ms,
            h.distance_mm,
            h.blade_since_reset_ms
        ),
        (70_000, 30_000, MILLI_DEGREE_MM, 30_000)
    );
    assert_eq!(
        store.days(),
        vec![day(70_000, 30_000, MILLI_DEGREE_MM, [0, 0, 3])]
    );
}

#[test]
fn a_merge_takes_back_distance_and_re_decides_charging_entered_from_error() {
    use Activity::*;
    let mut store = Store::default();
    // P in error at 0 s (an error entered), S charging at 100 s (a charge entered from error),
    // both with positions; P→S counts nothing else.
    store.ingest(&[
        at_lat(0, Error, false, 52.000),
        at_lat(100, Charging, false, 52.002),
    ]);
    let h = store.health.clone().unwrap();
    assert_eq!((h.error_count, h.charge_count), (1, 1));

    // L charging at 40 s with the blade on: it enters charging (after the error) and S no longer
    // does (after charging): still one charge. P→L and L→S: 60 s of blade time.
    store.ingest(&[at_lat(40, Charging, true, 52.001)]);
    let h = store.health.clone().unwrap();
    assert_eq!(
        (h.error_count, h.charge_count, h.blade_ms, h.mowing_ms),
        (1, 1, 60_000, 0)
    );

    // M mowing with the blade off at 70 s: it splits L→S. L→M keeps 30 s of blade time; M→S is
    // 30 s of mowing with 0.001° (52.001 at M… 52.002 at S); S enters charging again (after
    // mowing): two charges.
    store.ingest(&[at_lat(70, Mowing, false, 52.001)]);
    assert_eq!(
        counts_and_times(&store),
        (1, 2, 30_000, 30_000, MILLI_DEGREE_MM)
    );

    // N idle at 85 s, without a position: M→N is 15 s of mowing and no distance (N has no
    // position), so M→S's distance is taken back; N→S counts nothing. S enters charging after
    // idle: still two charges.
    store.ingest(&[state(at(85), Idle)]);
    assert_eq!(counts_and_times(&store), (1, 2, 30_000, 15_000, 0));
    assert_eq!(store.days(), vec![day(15_000, 30_000, 0, [1, 2, 5])]);
}

#[test]
fn the_default_blade_threshold_is_one_hundred_hours() {
    assert_eq!(DEFAULT_BLADE_THRESHOLD_MS, 360_000_000);
    assert_eq!(MAX_ATTRIBUTED_INTERVAL, Duration::seconds(300));
}
