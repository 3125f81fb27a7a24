//! The edges of the write rules that the traces of the other tests do not reach: what a batch
//! reports (`BatchChanges::is_empty`, `StateCounts`), which states are late, W3 for a repeated
//! key, and which neighbour a merge uses when the same state is known twice or not at all.

use super::*;

#[test]
fn state_counts_add_up_field_by_field() {
    let mut total = StateCounts {
        in_order: 1,
        late_merged: 20,
        late_not_counted: 300,
        duplicates: 4000,
    };
    assert_eq!(total.new_states(), 321, "duplicates are not new");
    total.add(&StateCounts {
        in_order: 5,
        late_merged: 60,
        late_not_counted: 700,
        duplicates: 8000,
    });
    assert_eq!(
        total,
        StateCounts {
            in_order: 6,
            late_merged: 80,
            late_not_counted: 1000,
            duplicates: 12000,
        }
    );
    assert_eq!(total.new_states(), 1086);
}

#[test]
fn a_batch_is_empty_only_when_it_writes_no_row_of_any_table() {
    assert!(BatchChanges::default().is_empty());
    // A mower's first state writes a row to each of the five tables; any one of them alone
    // makes a batch that is not empty.
    let (_, full) = run(&[mowing(at(0), 52.0)]);
    let only = |pick: &dyn Fn(&mut BatchChanges, &BatchChanges)| {
        let mut changes = BatchChanges::default();
        pick(&mut changes, &full);
        changes
    };
    let singles = [
        only(&|c, f| c.history = f.history.clone()),
        only(&|c, f| c.positions = f.positions.clone()),
        only(&|c, f| c.latest = f.latest.clone()),
        only(&|c, f| c.health = f.health.clone()),
        only(&|c, f| c.days = f.days.clone()),
    ];
    for changes in singles {
        assert!(!changes.is_empty(), "{changes:?}");
    }
    // Events and counts are about rows written, not rows themselves.
    let mut counted = BatchChanges::default();
    counted.counts.duplicates = 1;
    assert!(counted.is_empty());
}

#[test]
fn late_states_are_the_valid_ones_older_than_counted_until() {
    let mut snaps = snapshots(chrono_tz::UTC, DEFAULT_BLADE_THRESHOLD_MS);
    snaps.get_mut(&MOWER).unwrap().health = Some(blank_health());
    let foreign = StateReport {
        account_id: OTHER_ACCOUNT,
        ..state(at(20), Activity::Idle)
    };
    let unknown = StateReport {
        mower_id: MowerId(Uuid::from_u128(99)),
        ..state(at(20), Activity::Idle)
    };
    let late = late_states(
        &snaps,
        &[
            state(at(100), Activity::Idle), // the newest counted state itself: not late
            state(at(50), Activity::Idle),
            foreign, // fails W0: no neighbours to read
            unknown,
            state(at(150), Activity::Idle), // newer: extends the fold
            state(at(30), Activity::Idle),
            state(at(50), Activity::Error), // the same key again
        ],
    );
    assert_eq!(late, vec![(MOWER, at(30)), (MOWER, at(50))]);
    // A mower without totals has no late state.
    let fresh = snapshots(chrono_tz::UTC, DEFAULT_BLADE_THRESHOLD_MS);
    assert!(late_states(&fresh, &[state(at(0), Activity::Idle)]).is_empty());
}

/// Totals counted from `at(0)` to `at(100)`, all zero.
fn blank_health() -> HealthTotals {
    HealthTotals {
        mower_id: MOWER,
        account_id: ACCOUNT,
        counted_from: at(0),
        counted_until: at(100),
        last_activity: Activity::Idle,
        last_blade_on: false,
        last_lat: None,
        last_lon: None,
        mowing_ms: 0,
        blade_ms: 0,
        distance_mm: 0,
        error_count: 0,
        charge_count: 0,
        blade_since_reset_ms: 0,
        blade_due_raised: false,
        blade_reset_until: None,
    }
}

#[test]
fn w3_a_later_state_of_the_latest_key_keeps_the_first_document() {
    let (_, changes) = run(&[
        state(at(10), Activity::Idle),
        state(at(10), Activity::Error),
    ]);
    assert_eq!(changes.latest.len(), 1);
    assert_eq!(changes.latest[0].state.activity, Activity::Idle);
}

#[test]
fn a_late_state_whose_predecessor_the_store_did_not_give_counts_nothing() {
    // Totals from 0 s to 100 s, and no stored neighbour read: the predecessor of a state at
    // 50 s is unknown, and a state at 0 s is the oldest counted one (a redelivery): merging
    // either would count an interval that may be counted already.
    for late in [at(50), at(0)] {
        let mut snaps = snapshots(chrono_tz::UTC, DEFAULT_BLADE_THRESHOLD_MS);
        snaps.get_mut(&MOWER).unwrap().health = Some(blank_health());
        let (outcomes, changes) = apply_states(&mut snaps, &[mowing(late, 52.0)], at(1000));
        assert_eq!(outcomes, vec![StateOutcome::Stored]);
        assert_eq!(changes.counts.late_not_counted, 1, "{late}");
        assert!(
            changes.health.is_empty() && changes.days.is_empty(),
            "{late}"
        );
        assert_eq!(snaps[&MOWER].health, Some(blank_health()));
    }
}

#[test]
fn the_newest_counted_state_read_as_a_neighbour_keeps_its_values() {
    // P, mowing with the blade off at 100 s, is the mower's only counted state; retention may
    // have removed history before 120 s (P's row is still there, but only the totals vouch for
    // it).
    let mut store = Store::default();
    store.ingest(&[at_lat(100, Activity::Mowing, false, 52.000)]);
    store.history_floor = Some(at(120));
    // In one batch: a state at 50 s (before P, which may be gone: not counted; the store reads
    // P as its neighbour), S docked at 200 s (extends from P) and L idle at 150 s, whose
    // predecessor is P, read from the store and passed by S. P is the totals' newest counted
    // state, so L merges: P→S (100 s of mowing, 0.002°) is taken back, P→L (50 s, 0.001°)
    // added, L→S (idle) counts nothing.
    let counts = store.ingest(&[
        state(at(50), Activity::Mowing),
        at_lat(200, Activity::Docked, false, 52.002),
        at_lat(150, Activity::Idle, false, 52.001),
    ]);
    assert_eq!(
        counts,
        StateCounts {
            in_order: 1,
            late_merged: 1,
            late_not_counted: 1,
            duplicates: 0,
        }
    );
    let h = store.health.clone().unwrap();
    assert_eq!(
        (h.mowing_ms, h.blade_ms, h.distance_mm),
        (50_000, 0, MILLI_DEGREE_MM)
    );
    assert_eq!((h.counted_from, h.counted_until), (at(100), at(200)));
}

#[test]
fn a_merge_next_to_the_newest_state_re_attributes_distance_below_the_positions_floor() {
    // P mowing at 0 s with a position, S mowing at 60 s without one (the newest counted state):
    // 60 s of mowing, no distance (S has no position).
    let mut store = Store::default();
    store.ingest(&[
        at_lat(0, Activity::Mowing, true, 52.000),
        state(at(60), Activity::Mowing),
    ]);
    assert_eq!(store.health.as_ref().unwrap().distance_mm, 0);
    // Positions before 90 s may be gone, but P still has its position and S is the totals'
    // newest state (which has none for certain): both ends are known. L at 30 s, 0.001° north:
    // P→L adds 111 195 mm; L→S has no closing position.
    store.positions_floor = Some(at(90));
    store.ingest(&[at_lat(30, Activity::Mowing, true, 52.001)]);
    let h = store.health.clone().unwrap();
    assert_eq!(
        (h.mowing_ms, h.blade_ms, h.distance_mm),
        (60_000, 60_000, MILLI_DEGREE_MM)
    );
}
