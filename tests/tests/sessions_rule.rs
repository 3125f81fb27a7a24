//! W8 mowing sessions (docs/rules.md §3, W8): the domain's fold against the independent reference
//! on random sequences, and one scenario per clause of the rule, each checked on both.

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use std::collections::BTreeMap;
use swath_domain::rules::{apply_states, DirectoryEntry, MowerSnapshot};
use swath_domain::sessions::{sessions_of, EndReason, Session, SessionFold, SessionPoint};
use swath_domain::{AccountId, Activity, MowerId, Position, StateReport};
use swath_tests::reference::sessions as reference;
use uuid::Uuid;

const ZONE: Tz = chrono_tz::Europe::Berlin;
const MOWER: MowerId = MowerId(Uuid::from_u128(0x5e55_1085));
const TWO_HOURS: Duration = Duration::hours(2);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 21, 30, 0).unwrap()
}

fn point(at: DateTime<Utc>, activity: Activity) -> SessionPoint {
    SessionPoint {
        observed_at: at,
        activity,
        blade_on: false,
        battery_percent: None,
        error_code: None,
        lat: None,
        lon: None,
    }
}

/// A sequence given as (minutes after [`t0`], activity).
fn seq(steps: &[(i64, Activity)]) -> Vec<SessionPoint> {
    steps
        .iter()
        .map(|&(m, a)| point(t0() + Duration::minutes(m), a))
        .collect()
}

/// The sessions of `points` by the domain's fold and by the reference, which must agree.
fn both(points: &[SessionPoint], gap: Duration) -> Vec<Session> {
    let domain = sessions_of(MOWER, ZONE, gap, points.iter().cloned());
    let expected = reference::sessions(MOWER, ZONE, gap, points);
    assert_eq!(domain, expected, "the fold and the reference disagree");
    domain
}

fn at(minutes: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(minutes)
}

use Activity::*;

#[test]
fn a_stretch_closed_by_a_dock_within_the_merge_gap_merges_and_counts_a_break() {
    // Docked at 10, back out at 130: exactly the two hours after the end.
    let s = both(
        &seq(&[
            (0, Mowing),
            (5, Returning),
            (10, Docked),
            (130, Leaving),
            (133, Charging),
        ]),
        TWO_HOURS,
    );
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].breaks, 1);
    assert_eq!(s[0].started_at, at(0));
    assert_eq!(s[0].ended_at, Some(at(133)));
    assert_eq!(
        s[0].states, 5,
        "the rest between the stretches is the session's"
    );
    // One second later it is a new session.
    let mut late = seq(&[(0, Mowing), (5, Returning), (10, Docked), (133, Charging)]);
    late.insert(3, point(at(130) + Duration::seconds(1), Leaving));
    let s = both(&late, TWO_HOURS);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].ended_at, Some(at(10)));
    assert_eq!(s[1].breaks, 0);
}

#[test]
fn more_than_five_minutes_of_silence_ends_a_stretch_at_its_last_state() {
    let steps = [(0, Mowing), (4, Mowing), (10, Mowing), (12, Docked)];
    let s = both(&seq(&steps), Duration::zero());
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].end_reason, Some(EndReason::Silent));
    assert_eq!(s[0].ended_at, Some(at(4)));
    assert_eq!(s[0].states, 2);
    assert_eq!(
        s[0].mowing_ms,
        Duration::minutes(4).num_milliseconds(),
        "the silent interval counts nothing"
    );
    // Exactly five minutes is no silence.
    let s = both(
        &seq(&[(0, Mowing), (5, Mowing), (7, Docked)]),
        Duration::zero(),
    );
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].end_reason, Some(EndReason::Docked));
}

#[test]
fn each_closing_activity_gives_its_end_reason() {
    for (closing, reason) in [
        (Docked, EndReason::Docked),
        (Charging, EndReason::Docked),
        (Idle, EndReason::Stopped),
        (Error, EndReason::Error),
    ] {
        let mut points = seq(&[(0, Leaving), (1, Mowing), (3, closing)]);
        points[2].error_code = Some("E42".into());
        let s = both(&points, TWO_HOURS);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].end_reason, Some(reason), "closed by {closing}");
        assert_eq!(s[0].ended_at, Some(at(3)));
        assert_eq!(s[0].states, 3, "the closing state is the session's");
        let code = (reason == EndReason::Error).then(|| "E42".to_string());
        assert_eq!(s[0].error_code, code, "closed by {closing}");
    }
}

#[test]
fn a_stretch_whose_last_state_is_the_newest_is_open() {
    let s = both(&seq(&[(0, Docked), (1, Leaving), (2, Paused)]), TWO_HOURS);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].ended_at, None);
    assert_eq!(s[0].end_reason, None);
    assert_eq!(s[0].started_at, at(1));
    // A merged session whose last stretch is open is open; its earlier end is forgotten.
    let s = both(&seq(&[(0, Mowing), (1, Error), (30, Mowing)]), TWO_HOURS);
    assert_eq!(s.len(), 1);
    assert!(s[0].is_open());
    assert_eq!(s[0].error_code, None);
}

#[test]
fn breaks_count_the_merged_stretches_minus_one() {
    let s = both(
        &seq(&[
            (0, Mowing),
            (2, Charging),
            (60, Mowing),
            (62, Idle),
            (70, Mowing),
            (72, Error),
        ]),
        TWO_HOURS,
    );
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].breaks, 2);
    assert_eq!(s[0].end_reason, Some(EndReason::Error));
    assert_eq!(s[0].states, 6);
}

#[test]
fn a_session_has_its_first_and_last_known_position_and_battery_and_its_local_date() {
    let mut points = seq(&[
        (0, Mowing),
        (1, Mowing),
        (2, Mowing),
        (3, Docked),
        (4, Docked),
    ]);
    points[1].lat = Some(52.0);
    points[1].lon = Some(13.0);
    points[1].battery_percent = Some(80);
    points[3].lat = Some(52.001);
    points[3].lon = Some(13.0);
    points[2].battery_percent = Some(79);
    points[4].battery_percent = Some(99);
    let s = both(&points, TWO_HOURS);
    assert_eq!((s[0].first_lat, s[0].last_lat), (Some(52.0), Some(52.001)));
    assert_eq!(
        (s[0].first_battery_percent, s[0].last_battery_percent),
        (Some(80), Some(79)),
        "a state after the closing one is not the session's"
    );
    // 21:30 UTC on 1 June is 23:30 in Berlin; the session started that local day.
    assert_eq!(
        s[0].local_date,
        NaiveDate::from_ymd_opt(2026, 6, 1).unwrap()
    );
    let later = seq(&[(31, Mowing)]);
    assert_eq!(
        both(&later, TWO_HOURS)[0].local_date,
        NaiveDate::from_ymd_opt(2026, 6, 2).unwrap()
    );
}

#[test]
fn an_id_is_derived_from_the_mower_and_the_start() {
    let a = both(&seq(&[(0, Mowing), (1, Docked)]), TWO_HOURS);
    let b = both(&seq(&[(0, Mowing), (3, Idle)]), TWO_HOURS);
    let c = both(&seq(&[(1, Mowing)]), TWO_HOURS);
    assert_eq!(a[0].id, b[0].id);
    assert_ne!(a[0].id, c[0].id);
}

// Random sequences.

fn activity() -> impl Strategy<Value = Activity> {
    prop::sample::select(Activity::ALL.to_vec())
}

/// Gaps mostly within five minutes, some just past it, some of hours.
fn gap() -> impl Strategy<Value = Duration> {
    prop_oneof![
        8 => (1i64..=300_000).prop_map(Duration::milliseconds),
        1 => (300_000i64..=300_001).prop_map(Duration::milliseconds),
        2 => (300_001i64..=9_000_000).prop_map(Duration::milliseconds),
    ]
}

fn merge_gap() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::zero()),
        Just(Duration::minutes(5)),
        Just(TWO_HOURS),
        (0i64..=9_000).prop_map(Duration::seconds),
    ]
}

prop_compose! {
    fn step()(
        gap in gap(),
        activity in activity(),
        blade_on in any::<bool>(),
        position in prop::option::of((51.0f64..51.01, 7.0f64..7.01)),
        battery in prop::option::of(0u8..=100),
        code in prop::option::of(prop::sample::select(vec!["E1", "E2"])),
    ) -> (Duration, SessionPoint) {
        (gap, SessionPoint {
            observed_at: DateTime::<Utc>::UNIX_EPOCH,
            activity,
            blade_on,
            battery_percent: battery,
            error_code: code.map(str::to_string),
            lat: position.map(|p| p.0),
            lon: position.map(|p| p.1),
        })
    }
}

fn sequence(max: usize) -> impl Strategy<Value = Vec<SessionPoint>> {
    prop::collection::vec(step(), 0..max).prop_map(|steps| {
        let mut now = t0();
        steps
            .into_iter()
            .map(|(gap, mut p)| {
                now += gap;
                p.observed_at = now;
                p
            })
            .collect()
    })
}

/// W4's totals of the same states, by the domain's write rules.
fn health(points: &[SessionPoint]) -> (i64, i64) {
    let account = AccountId(Uuid::from_u128(7));
    let mut snapshots = BTreeMap::from([(
        MOWER,
        MowerSnapshot {
            directory: Some(DirectoryEntry {
                mower_id: MOWER,
                account_id: account,
                time_zone: ZONE,
                blade_threshold_ms: i64::MAX,
            }),
            ..MowerSnapshot::default()
        },
    )]);
    let states: Vec<StateReport> = points
        .iter()
        .map(|p| StateReport {
            mower_id: MOWER,
            account_id: account,
            observed_at: p.observed_at,
            activity: p.activity,
            battery_percent: p.battery_percent,
            position: p.lat.zip(p.lon).map(|(lat, lon)| Position {
                lat,
                lon,
                accuracy_m: None,
                heading_deg: None,
            }),
            blade_on: p.blade_on,
            error_code: p.error_code.clone(),
            vendor_state: None,
            extra: None,
            unknown: Default::default(),
        })
        .collect();
    let (_, changes) = apply_states(&mut snapshots, &states, t0());
    changes
        .health
        .first()
        .map_or((0, 0), |h| (h.mowing_ms, h.distance_mm))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The domain's fold equals the reference on random sequences and merge gaps.
    #[test]
    fn the_fold_equals_the_reference(points in sequence(60), gap in merge_gap()) {
        both(&points, gap);
    }

    /// The sessions' mowing time and distance add up to W4's health totals: every mowing state
    /// is in a session, and each interval is attributed to at most one.
    #[test]
    fn mowing_time_and_distance_add_up_to_the_health_totals(
        points in sequence(60),
        gap in merge_gap(),
    ) {
        let s = both(&points, gap);
        let mowing: i64 = s.iter().map(|s| s.mowing_ms).sum();
        let distance: i64 = s.iter().map(|s| s.distance_mm).sum();
        prop_assert_eq!((mowing, distance), health(&points));
    }

    /// A fold resumed from what a store keeps (the newest session, the rest, the previous state)
    /// ends where the uninterrupted fold does: the in-order path of a store.
    #[test]
    fn a_resumed_fold_equals_the_whole_fold(
        points in sequence(60),
        gap in merge_gap(),
        cut in any::<prop::sample::Index>(),
    ) {
        let cut = if points.is_empty() { 0 } else { cut.index(points.len() + 1) };
        let mut first = SessionFold::new(MOWER, ZONE, gap);
        let mut written = Vec::new();
        for p in &points[..cut] {
            first.push(p.clone());
        }
        written.extend(first.take_closed());
        let mut resumed = SessionFold::resume(
            MOWER, ZONE, gap, first.current.clone(), first.rest.clone(), first.last.clone(),
        );
        for p in &points[cut..] {
            resumed.push(p.clone());
        }
        written.extend(resumed.sessions());
        prop_assert_eq!(written, sessions_of(MOWER, ZONE, gap, points.iter().cloned()));
    }
}
