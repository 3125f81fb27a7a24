//! Each write rule pinned with hand-computed values.

use super::*;
use crate::events::IngestEvent;
use crate::ids::AccountId;
use crate::report::{Activity, Position};
use crate::rows::{HealthTotals, StoredState};
use chrono::TimeZone;
use chrono_tz::Tz;
use std::ops::Bound;
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
    StateReport::bare(MOWER, ACCOUNT, observed_at, activity, Some(50))
}

/// One state of each activity, ten seconds apart from `t0`.
fn every_ten_seconds(activities: &[Activity]) -> Vec<StateReport> {
    (0..)
        .zip(activities)
        .map(|(i, a)| state(at(i * 10), *a))
        .collect()
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
            ..MowerSnapshot::default()
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
            blade_on: true,
            ..state(at(90), Activity::Returning)
        },
        state(at(150), Activity::Docked),
    ]);
    let h = &changes.health[0];
    // 0→60 and 60→90 were opened by mowing states with the blade on; 90→150 by `returning`
    // with the blade on: blade time, not mowing time.
    assert_eq!(h.mowing_ms, 90_000);
    assert_eq!(h.blade_ms, 150_000);
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
    // The first interval is mowing with the blade off; the gap is opened with the blade on.
    let blade_off = StateReport {
        blade_on: false,
        ..mowing(at(0), 52.000)
    };
    let (_, changes) = run(&[
        blade_off,
        mowing(at(300), 52.001),
        mowing(at(600) + Duration::milliseconds(1), 52.002),
    ]);
    let h = &changes.health[0];
    assert_eq!(h.mowing_ms, 300_000, "exactly five minutes counts");
    assert_eq!(h.blade_ms, 0, "the gap counts no blade time either");
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
    let (_, changes) = run(&every_ten_seconds(&acts));
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
    let third = Utc.with_ymd_and_hms(2026, 6, 1, 22, 2, 0).unwrap();
    let mut snaps = snapshots(chrono_tz::Europe::Berlin, DEFAULT_BLADE_THRESHOLD_MS);
    // Mowing with the blade off across midnight (120 s, 0.001°), then leaving with the blade on
    // (60 s of blade time; not mowing, so no distance between its two positions).
    let (_, changes) = apply_states(
        &mut snaps,
        &[
            StateReport {
                blade_on: false,
                ..mowing(first, 52.0)
            },
            StateReport {
                activity: Activity::Leaving,
                ..mowing(second, 52.001)
            },
            with_position(state(third, Activity::Docked), 52.002),
        ],
        third,
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
    assert_eq!(changes.days[1].blade_ms, 60_000);
    assert_eq!(changes.days[1].distance_mm, MILLI_DEGREE_MM);
    assert_eq!(changes.days[1].state_count, 2);
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
fn duplicates_write_nothing_and_a_late_state_in_the_batch_is_merged() {
    let (outcomes, changes) = run(&[
        mowing(at(60), 52.0),
        state(at(60), Activity::Error), // same key: nothing
        mowing(at(30), 52.0),           // late: merged before the first state
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
    // 30→60 (merged, opened by a mowing state) and 60→90; the duplicate's error counts nothing.
    assert_eq!((h.mowing_ms, h.error_count), (60_000, 0));
    assert_eq!((h.counted_from, h.counted_until), (at(30), at(90)));
    assert_eq!(changes.days[0].state_count, 3);
    assert_eq!(
        changes.counts,
        StateCounts {
            in_order: 2,
            late_merged: 1,
            late_not_counted: 0,
            duplicates: 1
        }
    );
}

#[test]
fn a_later_state_of_a_key_adds_no_position() {
    let (_, changes) = run(&[state(at(10), Activity::Idle), mowing(at(10), 52.0)]);
    assert_eq!(changes.history.len(), 1);
    assert_eq!(changes.history[0].activity, Activity::Idle);
    assert!(
        changes.positions.is_empty(),
        "the key is the first state's, position included"
    );
}

/// A store in a few lines, as the adapters behave: every distinct state kept (history and
/// position), the totals and day rows, and a batch that reads the neighbours of its late states.
#[derive(Default)]
struct Store {
    states: BTreeMap<DateTime<Utc>, StoredState>,
    health: Option<HealthTotals>,
    days: BTreeMap<NaiveDate, DayTotals>,
    events: Vec<IngestEvent>,
    history_floor: Option<DateTime<Utc>>,
    positions_floor: Option<DateTime<Utc>>,
}

impl Store {
    fn ingest_in(&mut self, tz: Tz, threshold_ms: i64, batch: &[StateReport]) -> StateCounts {
        let mut snaps = snapshots(tz, threshold_ms);
        let snap = snaps.get_mut(&MOWER).unwrap();
        snap.health = self.health.clone();
        snap.latest = self.health.as_ref().map(|h| LatestKey {
            account_id: h.account_id,
            observed_at: h.counted_until,
        });
        for (_, at) in late_states(&snaps, batch) {
            let near = &mut snaps.get_mut(&MOWER).unwrap().neighbourhood;
            let before = self.states.range(..=at).next_back();
            let after = self
                .states
                .range((Bound::Excluded(at), Bound::Unbounded))
                .next();
            for (_, s) in before.into_iter().chain(after) {
                near.insert_stored(*s);
            }
            if let Some(f) = self.history_floor {
                near.raise_history_floor(f);
            }
            if let Some(f) = self.positions_floor {
                near.raise_positions_floor(f);
            }
        }
        let (_, changes) = apply_states(&mut snaps, batch, at(10_000));
        for row in &changes.history {
            let position = changes
                .positions
                .iter()
                .find(|p| p.observed_at == row.observed_at);
            self.states.entry(row.observed_at).or_insert(StoredState {
                observed_at: row.observed_at,
                activity: row.activity,
                blade_on: row.blade_on,
                lat: position.map(|p| p.lat),
                lon: position.map(|p| p.lon),
            });
        }
        if let Some(h) = changes.health.first() {
            self.health = Some(h.clone());
        }
        for d in &changes.days {
            self.days
                .entry(d.day)
                .and_modify(|row| row.add(d))
                .or_insert(d.clone());
        }
        self.events.extend(changes.events);
        changes.counts
    }

    fn ingest(&mut self, batch: &[StateReport]) -> StateCounts {
        self.ingest_in(chrono_tz::UTC, DEFAULT_BLADE_THRESHOLD_MS, batch)
    }

    fn days(&self) -> Vec<DayTotals> {
        self.days.values().cloned().collect()
    }
}

fn with_position(mut s: StateReport, lat: f64) -> StateReport {
    s.position = Some(Position {
        lat,
        lon: 13.0,
        accuracy_m: None,
        heading_deg: None,
    });
    s
}

/// A state with its blade and position given explicitly (`lat` on the meridian 13° E).
fn at_lat(observed: i64, activity: Activity, blade_on: bool, lat: f64) -> StateReport {
    StateReport {
        blade_on,
        ..with_position(state(at(observed), activity), lat)
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Distinct states of one mower: steps of 1–90 s, gaps over 5 minutes, jumps over local
    /// midnight, every activity, positions missing.
    fn distinct_states() -> impl Strategy<Value = Vec<StateReport>> {
        proptest::collection::vec(
            (
                prop_oneof![6 => 1_000i64..90_000, 1 => 299_000i64..301_000, 1 => 3_600_000i64..20_000_000],
                0usize..Activity::ALL.len(),
                any::<bool>(),
                proptest::option::weighted(0.8, 0i32..500),
            ),
            1..40,
        )
        .prop_map(|steps| {
            let mut t = Utc.with_ymd_and_hms(2026, 6, 1, 18, 0, 0).unwrap();
            steps
                .into_iter()
                .map(|(dt, activity, blade_on, lat)| {
                    t += Duration::milliseconds(dt);
                    let mut s = state(t, Activity::ALL[activity]);
                    s.blade_on = blade_on;
                    s.position = lat.map(|l| Position {
                        lat: 52.0 + f64::from(l) * 1e-5,
                        lon: 13.0,
                        accuracy_m: None,
                        heading_deg: None,
                    });
                    s
                })
                .collect()
        })
    }

    fn arrival() -> impl Strategy<Value = (Vec<StateReport>, Vec<StateReport>, Vec<usize>)> {
        distinct_states()
            .prop_flat_map(|states| {
                let n = states.len();
                (
                    Just(states),
                    proptest::collection::vec(0..n, 0..8),
                    proptest::collection::vec(1usize..8, 1..10),
                )
            })
            .prop_flat_map(|(states, duplicates, sizes)| {
                let mut arrival = states.clone();
                arrival.extend(duplicates.iter().map(|i| states[*i].clone()));
                (Just(states), Just(arrival).prop_shuffle(), Just(sizes))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Any order and batching of the states (with redeliveries) ends with the totals and
        /// day rows of the states stored one at a time in time order.
        #[test]
        fn totals_do_not_depend_on_arrival_order((states, arrival, sizes) in arrival()) {
            let berlin = chrono_tz::Europe::Berlin;
            let mut ordered = Store::default();
            for s in &states {
                ordered.ingest_in(berlin, DEFAULT_BLADE_THRESHOLD_MS, std::slice::from_ref(s));
            }
            let mut shuffled = Store::default();
            let mut rest = &arrival[..];
            let mut sizes = sizes.iter().cycle();
            while !rest.is_empty() {
                let n = (*sizes.next().unwrap()).min(rest.len());
                shuffled.ingest_in(berlin, DEFAULT_BLADE_THRESHOLD_MS, &rest[..n]);
                rest = &rest[n..];
            }
            prop_assert_eq!(&shuffled.health, &ordered.health);
            prop_assert_eq!(shuffled.days(), ordered.days());
        }
    }
}

mod edges;
mod merge;
mod quantities;
