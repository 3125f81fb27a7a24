//! Late states merged between their neighbours (the module documentation of `rules/mod.rs`),
//! pinned by hand against the store of the parent module, which reads neighbours as the adapters
//! do.

use super::*;

#[test]
fn a_late_state_between_two_stored_states_is_merged_by_hand() {
    let mut store = Store::default();
    // P mowing with the blade on at 0 s, S docked at 120 s: 120 s of mowing and blade, 0.002°.
    let p = mowing(at(0), 52.000);
    let s = with_position(state(at(120), Activity::Docked), 52.002);
    store.ingest(&[p, s]);
    let h = store.health.clone().unwrap();
    assert_eq!((h.mowing_ms, h.blade_ms), (120_000, 120_000));
    assert_eq!(h.distance_mm, 222_390); // 0.002° in one interval, rounded once
    assert_eq!(h.error_count, 0);

    // L, in error with the blade off at 45 s, 0.001° from P. Taken back: P→S (120 s, 222 390
    // mm). Added: P→L (45 s of mowing and blade, 111 195 mm) and L→S (75 s opened by an error
    // state: nothing). L enters error (after mowing): +1. S is docked: still no entry.
    let l = with_position(state(at(45), Activity::Error), 52.001);
    let counts = store.ingest(std::slice::from_ref(&l));
    assert_eq!(counts.late_merged, 1);
    let h = store.health.clone().unwrap();
    assert_eq!((h.mowing_ms, h.blade_ms), (45_000, 45_000));
    assert_eq!(h.blade_since_reset_ms, 45_000);
    assert_eq!(h.distance_mm, MILLI_DEGREE_MM);
    assert_eq!((h.error_count, h.charge_count), (1, 0));
    assert_eq!((h.counted_from, h.counted_until), (at(0), at(120)));
    assert_eq!(
        h.last_activity,
        Activity::Docked,
        "the newest state stays the newest"
    );
    let day = store.days()[0].clone();
    assert_eq!(
        (
            day.mowing_ms,
            day.blade_ms,
            day.distance_mm,
            day.error_count,
            day.state_count
        ),
        (45_000, 45_000, MILLI_DEGREE_MM, 1, 3)
    );

    // The same three states in time order, one at a time, give the same rows.
    let mut ordered = Store::default();
    for st in [
        mowing(at(0), 52.000),
        l,
        with_position(state(at(120), Activity::Docked), 52.002),
    ] {
        ordered.ingest(&[st]);
    }
    assert_eq!(ordered.health, store.health);
    assert_eq!(ordered.days(), store.days());

    // A redelivery of L changes nothing.
    let before = (store.health.clone(), store.days());
    let counts = store.ingest(&[with_position(state(at(45), Activity::Error), 52.001)]);
    assert_eq!((counts.duplicates, counts.late_merged), (1, 0));
    assert_eq!((store.health.clone(), store.days()), before);
}

#[test]
fn a_late_state_moves_intervals_between_the_days_of_its_neighbours() {
    // Berlin (UTC+2 in June): P at 23:58 on 1 June, S at 00:02 on 2 June, L at 23:59:30.
    let p_at = Utc.with_ymd_and_hms(2026, 6, 1, 21, 58, 0).unwrap();
    let l_at = p_at + Duration::seconds(90);
    let s_at = p_at + Duration::seconds(240);
    let berlin = chrono_tz::Europe::Berlin;
    let mut store = Store::default();
    store.ingest_in(
        berlin,
        DEFAULT_BLADE_THRESHOLD_MS,
        &[mowing(p_at, 52.0), state(s_at, Activity::Charging)],
    );
    let june = |d| NaiveDate::from_ymd_opt(2026, 6, d).unwrap();
    let days = store.days();
    assert_eq!(
        (days[0].day, days[0].mowing_ms, days[0].state_count),
        (june(1), 0, 1)
    );
    assert_eq!(
        (days[1].day, days[1].mowing_ms, days[1].charge_count),
        (june(2), 240_000, 1)
    );
    // L is idle: P→L (90 s, mowing) goes to 1 June; L→S (150 s, opened by idle) counts nothing;
    // 2 June loses P→S. S still enters charging (after idle).
    store.ingest_in(
        berlin,
        DEFAULT_BLADE_THRESHOLD_MS,
        &[state(l_at, Activity::Idle)],
    );
    let days = store.days();
    assert_eq!(
        (days[0].mowing_ms, days[0].blade_ms, days[0].state_count),
        (90_000, 90_000, 2)
    );
    assert_eq!(
        (
            days[1].mowing_ms,
            days[1].blade_ms,
            days[1].charge_count,
            days[1].state_count
        ),
        (0, 0, 1, 1)
    );
    let h = store.health.clone().unwrap();
    assert_eq!((h.mowing_ms, h.charge_count), (90_000, 1));
}

#[test]
fn entering_counts_of_the_late_state_and_its_successor_are_re_decided() {
    use Activity::*;
    // error, error: one entry. A mowing state between them makes the second an entry again.
    let mut store = Store::default();
    store.ingest(&[state(at(0), Error), state(at(60), Error)]);
    assert_eq!(store.health.as_ref().unwrap().error_count, 1);
    store.ingest(&[state(at(30), Mowing)]);
    assert_eq!(store.health.as_ref().unwrap().error_count, 2);
    // charging, mowing: one charge; a charging state between them is no entry (after charging),
    // and one before the first state is one, which makes the former first no entry.
    let mut store = Store::default();
    store.ingest(&[state(at(100), Charging), state(at(160), Mowing)]);
    store.ingest(&[state(at(130), Charging)]);
    assert_eq!(store.health.as_ref().unwrap().charge_count, 1);
    store.ingest(&[state(at(50), Charging)]);
    let h = store.health.clone().unwrap();
    assert_eq!((h.charge_count, h.counted_from), (1, at(50)));
    assert_eq!(store.days()[0].charge_count, 1);
    assert_eq!(store.days()[0].state_count, 4);
}

#[test]
fn several_late_states_of_one_batch_and_states_before_the_first() {
    let trace: Vec<StateReport> = (0..12)
        .map(|i| {
            let s = if i % 4 == 3 {
                state(at(i * 40), Activity::Error)
            } else {
                mowing(at(i * 40), 52.0 + i as f64 * 0.001)
            };
            StateReport {
                blade_on: i % 3 != 0,
                ..s
            }
        })
        .collect();
    let mut ordered = Store::default();
    for s in &trace {
        ordered.ingest(std::slice::from_ref(s));
    }
    // The newest first, then a batch of late states out of order (among them the oldest), then
    // the rest with a redelivery.
    let mut shuffled = Store::default();
    shuffled.ingest(&[trace[11].clone(), trace[6].clone()]);
    let counts = shuffled.ingest(&[
        trace[3].clone(),
        trace[9].clone(),
        trace[0].clone(),
        trace[4].clone(),
    ]);
    assert_eq!((counts.late_merged, counts.in_order), (4, 0));
    shuffled.ingest(&[
        trace[5].clone(),
        trace[1].clone(),
        trace[10].clone(),
        trace[2].clone(),
        trace[7].clone(),
        trace[8].clone(),
        trace[1].clone(),
    ]);
    assert_eq!(shuffled.health, ordered.health);
    assert_eq!(shuffled.days(), ordered.days());
    assert!(ordered.health.as_ref().unwrap().mowing_ms > 0);
}

#[test]
fn blade_due_follows_the_corrected_blade_time_and_is_raised_once() {
    // Threshold 150 s. Blade on at 0 s, docked at 60 s, a gap, blade on at 400 s, docked at
    // 460 s: 60 + 60 s of blade time.
    let blade = |t| mowing(at(t), 52.0);
    let off = |t| state(at(t), Activity::Docked);
    let threshold = 150_000;
    let mut store = Store::default();
    store.ingest_in(
        chrono_tz::UTC,
        threshold,
        &[blade(0), off(60), blade(400), off(460)],
    );
    assert_eq!(store.health.as_ref().unwrap().blade_since_reset_ms, 120_000);
    // A blade-on state at 30 s changes nothing (0→30→60 is still 60 s of blade time).
    store.ingest_in(chrono_tz::UTC, threshold, &[blade(30)]);
    assert!(store.events.is_empty());
    // One at 340 s adds 340→400 (60→340 is over 5 minutes): 180 s, over the threshold. Raised
    // once, by the late state.
    store.ingest_in(chrono_tz::UTC, threshold, &[blade(340)]);
    assert_eq!(store.events.len(), 1);
    assert!(matches!(
        store.events[0],
        IngestEvent::BladeDue { observed_at, blade_since_reset_ms: 180_000, .. } if observed_at == at(340)
    ));
    // More late blade time, and redeliveries, raise nothing more.
    store.ingest_in(
        chrono_tz::UTC,
        threshold,
        &[blade(370), blade(340), blade(30)],
    );
    assert_eq!(store.events.len(), 1);
    assert!(store.health.as_ref().unwrap().blade_due_raised);
}

#[test]
fn a_late_state_from_before_a_blade_reset_moves_blade_time_not_blade_time_since_the_reset() {
    let mut store = Store::default();
    store.ingest(&[mowing(at(0), 52.0), state(at(120), Activity::Docked)]);
    store.health.as_mut().unwrap().reset_blade();
    store.ingest(&[mowing(at(180), 52.0), mowing(at(240), 52.0)]);
    let h = store.health.clone().unwrap();
    assert_eq!((h.blade_ms, h.blade_since_reset_ms), (180_000, 60_000));
    // Docked at 60 s, before the reset: 60 s less blade time, none less since the reset.
    store.ingest(&[state(at(60), Activity::Docked)]);
    let h = store.health.clone().unwrap();
    assert_eq!((h.blade_ms, h.blade_since_reset_ms), (120_000, 60_000));
    // A blade-on state at 150 s, after the reset's mark (120 s): 150→180 counts since the reset.
    store.ingest(&[mowing(at(150), 52.0)]);
    let h = store.health.clone().unwrap();
    assert_eq!((h.blade_ms, h.blade_since_reset_ms), (150_000, 90_000));
}

#[test]
fn a_late_state_whose_neighbours_retention_may_have_removed_counts_nothing() {
    let mut store = Store::default();
    store.ingest(&[
        mowing(at(0), 52.0),
        mowing(at(60), 52.001),
        mowing(at(120), 52.002),
    ]);
    let before = (store.health.clone(), store.days());
    store.history_floor = Some(at(30));
    // Its predecessor (0 s) is older than the floor: a removed state could lie between them.
    let counts = store.ingest(&[mowing(at(20), 52.0)]);
    assert_eq!((counts.late_not_counted, counts.late_merged), (1, 0));
    assert_eq!((store.health.clone(), store.days()), before);
    // One with a predecessor at or after the floor merges.
    let counts = store.ingest(&[state(at(90), Activity::Idle)]);
    assert_eq!(counts.late_merged, 1);
    assert_eq!(store.health.as_ref().unwrap().mowing_ms, 90_000);
    // Before every counted state, while the first one is kept: merged (a backfill).
    store.history_floor = Some(at(-60));
    let counts = store.ingest(&[mowing(at(-30), 51.999)]);
    assert_eq!(counts.late_merged, 1);
    let h = store.health.clone().unwrap();
    assert_eq!((h.counted_from, h.mowing_ms), (at(-30), 120_000));
    // 0→60, and -30→0 (added without a floor check: a merge before the first state only adds);
    // 60→120 went with the idle state (no position, not mowing).
    assert_eq!(h.distance_mm, 2 * MILLI_DEGREE_MM);
}

#[test]
fn a_neighbour_without_a_position_older_than_the_positions_floor_leaves_distance_alone() {
    let mut store = Store::default();
    store.ingest(&[mowing(at(0), 52.0), mowing(at(60), 52.001)]);
    assert_eq!(store.health.as_ref().unwrap().distance_mm, MILLI_DEGREE_MM);
    // Retention may have removed the position at 0 s: as the store would read it now.
    store.states.get_mut(&at(0)).unwrap().lat = None;
    store.states.get_mut(&at(0)).unwrap().lon = None;
    store.positions_floor = Some(at(10));
    store.ingest(&[mowing(at(30), 52.0005)]);
    let h = store.health.clone().unwrap();
    assert_eq!(h.mowing_ms, 60_000, "time is merged");
    assert_eq!(
        h.distance_mm, MILLI_DEGREE_MM,
        "distance is left as counted"
    );
}
