//! Each write rule pinned with hand-computed values.

use super::*;
use crate::report::Position;
use chrono::TimeZone;
use serde_json::Map;
use uuid::Uuid;

const MOWER: MowerId = MowerId(Uuid::from_u128(1));
const ACCOUNT: AccountId = AccountId(Uuid::from_u128(0xa));
const OTHER_ACCOUNT: AccountId = AccountId(Uuid::from_u128(0xb));

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 10, 0, 0).unwrap()
}

fn at(seconds: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(seconds)
}

fn state(observed_at: DateTime<Utc>, activity: Activity) -> StateReport {
    StateReport {
        mower_id: MOWER,
        account_id: ACCOUNT,
        observed_at,
        activity,
        battery_percent: Some(50),
        position: None,
        blade_on: false,
        error_code: None,
        vendor_state: None,
        extra: None,
        unknown: Map::new(),
    }
}

fn mowing(observed_at: DateTime<Utc>, lat: f64) -> StateReport {
    StateReport {
        blade_on: true,
        position: Some(Position {
            lat,
            lon: 13.0,
            accuracy_m: None,
            heading_deg: None,
        }),
        ..state(observed_at, Activity::Mowing)
    }
}

fn snapshots(tz: Tz, threshold_ms: i64) -> BTreeMap<MowerId, MowerSnapshot> {
    BTreeMap::from([(
        MOWER,
        MowerSnapshot {
            directory: Some(DirectoryEntry {
                mower_id: MOWER,
                account_id: ACCOUNT,
                time_zone: tz,
                blade_threshold_ms: threshold_ms,
            }),
            latest: None,
            health: None,
        },
    )])
}

fn run(states: &[StateReport]) -> (Vec<StateOutcome>, BatchChanges) {
    apply_states(
        &mut snapshots(chrono_tz::UTC, DEFAULT_BLADE_THRESHOLD_MS),
        states,
        at(1000),
    )
}

/// 0.001° of latitude on the mean Earth radius (6 371 008.8 m): 111.195 08 m.
const MILLI_DEGREE_MM: i64 = 111_195;

#[test]
fn intervals_are_attributed_to_the_state_that_opened_them() {
    let (_, changes) = run(&[
        mowing(at(0), 52.000),
        mowing(at(60), 52.001),
        StateReport {
            position: Some(Position {
                lat: 52.002,
                lon: 13.0,
                accuracy_m: None,
                heading_deg: None,
            }),
            ..state(at(90), Activity::Returning)
        },
        state(at(150), Activity::Docked),
    ]);
    let h = &changes.health[0];
    // 0→60 and 60→90 were opened by mowing states with the blade on; 90→150 by `returning`.
    assert_eq!(h.mowing_ms, 90_000);
    assert_eq!(h.blade_ms, 90_000);
    // Two mowing intervals with positions at both ends; the third has no closing position.
    assert_eq!(h.distance_mm, 2 * MILLI_DEGREE_MM);
    assert_eq!(h.counted_until, at(150));
    assert_eq!(h.last_activity, Activity::Docked);
    assert_eq!(
        h.last_lat, None,
        "the position advances to the closing state's (none)"
    );
}

#[test]
fn an_interval_longer_than_five_minutes_counts_nothing() {
    let (_, changes) = run(&[
        mowing(at(0), 52.000),
        mowing(at(300), 52.001),
        mowing(at(600) + Duration::milliseconds(1), 52.002),
    ]);
    let h = &changes.health[0];
    assert_eq!(h.mowing_ms, 300_000, "exactly five minutes counts");
    assert_eq!(h.blade_ms, 300_000);
    assert_eq!(h.distance_mm, MILLI_DEGREE_MM);
    assert_eq!(
        changes.days[0].state_count, 3,
        "the gap's closing state still counts as a state"
    );
}

#[test]
fn entering_error_and_charging_are_counted_once_per_entry() {
    use Activity::*;
    let acts = [
        Error, Error, Idle, Error, Returning, Charging, Charging, Docked, Charging,
    ];
    let states: Vec<_> = acts
        .iter()
        .enumerate()
        .map(|(i, a)| state(at(i as i64 * 10), *a))
        .collect();
    let (_, changes) = run(&states);
    assert_eq!(
        changes.health[0].error_count, 2,
        "the first state entering error counts too"
    );
    assert_eq!(changes.health[0].charge_count, 2);
    assert_eq!(changes.days[0].error_count, 2);
    assert_eq!(changes.days[0].charge_count, 2);
}

#[test]
fn day_rows_follow_the_closing_state_in_the_site_time_zone() {
    // Berlin is UTC+2 in June: 21:59Z is 23:59 on 1 June, 22:01Z is 00:01 on 2 June.
    let first = Utc.with_ymd_and_hms(2026, 6, 1, 21, 59, 0).unwrap();
    let second = Utc.with_ymd_and_hms(2026, 6, 1, 22, 1, 0).unwrap();
    let mut snaps = snapshots(chrono_tz::Europe::Berlin, DEFAULT_BLADE_THRESHOLD_MS);
    let (_, changes) = apply_states(
        &mut snaps,
        &[mowing(first, 52.0), mowing(second, 52.001)],
        second,
    );
    let june = |d| NaiveDate::from_ymd_opt(2026, 6, d).unwrap();
    assert_eq!(changes.days.len(), 2);
    assert_eq!(changes.days[0].day, june(1));
    assert_eq!(
        (changes.days[0].mowing_ms, changes.days[0].state_count),
        (0, 1)
    );
    assert_eq!(changes.days[1].day, june(2));
    assert_eq!(changes.days[1].mowing_ms, 120_000);
    assert_eq!(changes.days[1].blade_ms, 120_000);
    assert_eq!(changes.days[1].distance_mm, MILLI_DEGREE_MM);
    assert_eq!(changes.days[1].state_count, 1);
}

#[test]
fn blade_due_is_raised_exactly_once_per_reset() {
    let mut snaps = snapshots(chrono_tz::UTC, 120_000);
    let states: Vec<_> = (0..6).map(|i| mowing(at(i * 60), 52.0)).collect();
    let (_, changes) = apply_states(&mut snaps, &states, at(400));
    assert_eq!(changes.events.len(), 1);
    assert_eq!(
        changes.events[0],
        IngestEvent::BladeDue {
            mower_id: MOWER,
            account_id: ACCOUNT,
            observed_at: at(120),
            blade_since_reset_ms: 120_000,
            threshold_ms: 120_000,
        }
    );
    // Nothing more until the blade is reset; after the reset (counted until 480 s), once more when
    // 120 s of blade time have passed again: at 600 s.
    let later: Vec<_> = (6..9).map(|i| mowing(at(i * 60), 52.0)).collect();
    let (_, changes) = apply_states(&mut snaps, &later, at(600));
    assert!(changes.events.is_empty());
    snaps
        .get_mut(&MOWER)
        .unwrap()
        .health
        .as_mut()
        .unwrap()
        .reset_blade();
    let after_reset: Vec<_> = (9..13).map(|i| mowing(at(i * 60), 52.0)).collect();
    let (_, changes) = apply_states(&mut snaps, &after_reset, at(800));
    assert_eq!(changes.events.len(), 1);
    assert_eq!(changes.events[0].mower_id(), MOWER);
    assert!(
        matches!(changes.events[0], IngestEvent::BladeDue { observed_at, .. } if observed_at == at(600))
    );
}

#[test]
fn w0_drops_unknown_mowers_and_account_mismatches_alone() {
    let unknown = StateReport {
        mower_id: MowerId(Uuid::from_u128(99)),
        ..state(at(0), Activity::Idle)
    };
    let foreign = StateReport {
        account_id: OTHER_ACCOUNT,
        ..state(at(1), Activity::Idle)
    };
    let (outcomes, changes) = run(&[unknown, foreign, state(at(2), Activity::Idle)]);
    assert_eq!(
        outcomes,
        vec![
            StateOutcome::Dropped(DropReason::UnknownMower),
            StateOutcome::Dropped(DropReason::AccountMismatch),
            StateOutcome::Stored,
        ]
    );
    assert_eq!(changes.history.len(), 1);

    // Stored rows of another account also refuse the state, even if the directory agrees.
    let mut snaps = snapshots(chrono_tz::UTC, DEFAULT_BLADE_THRESHOLD_MS);
    snaps.get_mut(&MOWER).unwrap().latest = Some(LatestKey {
        account_id: OTHER_ACCOUNT,
        observed_at: at(0),
    });
    let (outcomes, changes) = apply_states(&mut snaps, &[state(at(5), Activity::Idle)], at(5));
    assert_eq!(
        outcomes,
        vec![StateOutcome::Dropped(DropReason::AccountMismatch)]
    );
    assert!(changes.is_empty());
}

#[test]
fn duplicates_and_late_states_write_history_once_and_count_nothing() {
    let (outcomes, changes) = run(&[
        mowing(at(60), 52.0),
        state(at(60), Activity::Error), // same key: nothing
        mowing(at(30), 52.0),           // late: history and position, no totals
        state(at(90), Activity::Docked),
    ]);
    assert!(outcomes.iter().all(|o| *o == StateOutcome::Stored));
    let keys: Vec<_> = changes
        .history
        .iter()
        .map(|h| (h.observed_at, h.activity))
        .collect();
    assert_eq!(
        keys,
        vec![
            (at(60), Activity::Mowing),
            (at(30), Activity::Mowing),
            (at(90), Activity::Docked)
        ]
    );
    assert_eq!(changes.positions.len(), 2);
    assert_eq!(changes.latest.len(), 1);
    assert_eq!(changes.latest[0].observed_at, at(90));
    assert_eq!(changes.latest[0].last_seen_at, at(1000));
    let h = &changes.health[0];
    assert_eq!((h.mowing_ms, h.error_count), (30_000, 0));
    assert_eq!(changes.days[0].state_count, 2);
}

#[test]
fn a_key_without_a_position_gets_one_from_a_later_duplicate() {
    let (_, changes) = run(&[state(at(10), Activity::Idle), mowing(at(10), 52.0)]);
    assert_eq!(changes.history.len(), 1);
    assert_eq!(changes.history[0].activity, Activity::Idle);
    assert_eq!(changes.positions.len(), 1);
}
