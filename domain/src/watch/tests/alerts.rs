//! The watcher's bookkeeping pinned case by case (docs/rules.md §4): what a batch reports as
//! changed, how alerts are opened and cleared, W6's `blade_due` as an event and an alert, the
//! geofence version a position is judged against, and the names and ranks stores and the API use.

use super::*;

const OTHER_MOWER: MowerId = MowerId(Uuid::from_u128(2));

fn event(kind_at: i64, detail: EventDetail) -> Event {
    Event::new(MOWER, ACCOUNT, at(kind_at), detail)
}

#[test]
fn names_parse_back_and_severities_rank_from_low_to_critical() {
    for kind in EventKind::ALL {
        assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        assert_eq!(kind.to_string(), kind.as_str());
    }
    assert_eq!(EventKind::parse("blade_due"), Some(BladeDue));
    assert_eq!(EventKind::parse("Blade_Due"), None);
    for kind in AlertKind::ALL {
        assert_eq!(AlertKind::parse(kind.as_str()), Some(kind));
    }
    assert_eq!(AlertKind::parse("battery_low"), Some(AlertKind::BatteryLow));
    assert_eq!(AlertKind::parse("zone"), None);
    for severity in Severity::ALL {
        assert_eq!(Severity::parse(severity.as_str()), Some(severity));
    }
    assert_eq!(Severity::parse("urgent"), None);
    let ranks: Vec<(Severity, i16)> = Severity::ALL.iter().map(|s| (*s, s.rank())).collect();
    assert_eq!(
        ranks,
        vec![
            (Severity::Low, 1),
            (Severity::Normal, 2),
            (Severity::High, 3),
            (Severity::Critical, 4)
        ]
    );
    let severities: Vec<Severity> = AlertKind::ALL.iter().map(|k| k.severity()).collect();
    assert_eq!(
        severities,
        vec![
            Severity::High,     // error
            Severity::Critical, // geofence: the theft alarm
            Severity::Normal,   // battery_low
            Severity::Low,      // blade_due
            Severity::High,     // offline
        ]
    );
}

#[test]
fn a_batch_of_changes_is_empty_only_without_any_watch_event_or_alert() {
    assert!(WatchChanges::default().is_empty());
    assert!(AlertChanges::default().is_empty());
    let low = event(
        0,
        EventDetail::BatteryLow {
            battery_percent: 12,
        },
    );
    let mut raised = AlertChanges::default();
    raised.open(&low, AlertKind::BatteryLow, None);
    let mut cleared = AlertChanges::default();
    cleared.clear(MOWER, AlertKind::Error, at(5));
    assert!(!raised.is_empty() && !cleared.is_empty());

    let (_, first) = Run::new(false).watch(&[state(0, Activity::Docked)]);
    let singles = [
        WatchChanges {
            watches: first.watches.clone(),
            ..WatchChanges::default()
        },
        WatchChanges {
            events: vec![low.clone()],
            ..WatchChanges::default()
        },
        WatchChanges {
            alerts: raised,
            ..WatchChanges::default()
        },
        WatchChanges {
            alerts: cleared,
            ..WatchChanges::default()
        },
    ];
    for changes in singles {
        assert!(!changes.is_empty(), "{changes:?}");
    }
}

#[test]
fn clearing_closes_the_newest_open_alert_of_the_mower_and_kind_once() {
    let mut alerts = AlertChanges::default();
    let first = event(0, EventDetail::ErrorRaised { error_code: None });
    alerts.open(&first, AlertKind::Error, Some("E1".into()));
    // Another mower's alert and another kind are not this one.
    let other_mower = Event::new(
        OTHER_MOWER,
        ACCOUNT,
        at(1),
        EventDetail::ErrorRaised { error_code: None },
    );
    alerts.open(&other_mower, AlertKind::Error, None);
    let low = event(
        2,
        EventDetail::BatteryLow {
            battery_percent: 10,
        },
    );
    alerts.open(&low, AlertKind::BatteryLow, None);

    alerts.clear(MOWER, AlertKind::Error, at(10));
    assert_eq!(alerts.raised[0].cleared_at, Some(at(10)));
    assert_eq!(alerts.raised[1].cleared_at, None, "another mower's");
    assert_eq!(alerts.raised[2].cleared_at, None, "another kind");
    assert!(
        alerts.clears.is_empty(),
        "raised here: nothing stored to clear"
    );

    // Cleared already: a second clear changes nothing, here or in the store.
    alerts.clear(MOWER, AlertKind::Error, at(20));
    assert_eq!(alerts.raised[0].cleared_at, Some(at(10)));
    assert!(alerts.clears.is_empty());

    // Raised again: the clear goes to the newest one.
    let second = event(30, EventDetail::ErrorRaised { error_code: None });
    alerts.open(&second, AlertKind::Error, None);
    alerts.clear(MOWER, AlertKind::Error, at(40));
    assert_eq!(alerts.raised[0].cleared_at, Some(at(10)));
    assert_eq!(alerts.raised[3].cleared_at, Some(at(40)));

    // Not raised in this batch: the store's open alert is cleared.
    alerts.clear(MOWER, AlertKind::Geofence, at(50));
    assert_eq!(
        alerts.clears,
        vec![AlertClear {
            mower_id: MOWER,
            kind: AlertKind::Geofence,
            cleared_at: at(50),
        }]
    );
}

#[test]
fn w6_blade_due_becomes_an_event_and_a_low_severity_alert() {
    assert_eq!(ingest_notifications(&[]), IngestNotifications::default());
    assert!(ingest_notifications(&[]).is_empty());
    let due = IngestEvent::BladeDue {
        mower_id: MOWER,
        account_id: ACCOUNT,
        observed_at: at(120),
        blade_since_reset_ms: 360_000_000,
        threshold_ms: 360_000_000,
    };
    let IngestNotifications { events, alerts } = ingest_notifications(&[due]);
    let expected = Event {
        id: event_id(MOWER, BladeDue, at(120), None),
        mower_id: MOWER,
        account_id: ACCOUNT,
        observed_at: at(120),
        detail: EventDetail::BladeDue {
            blade_since_reset_ms: 360_000_000,
            threshold_ms: 360_000_000,
        },
    };
    assert_eq!(events, vec![expected.clone()]);
    assert_eq!(
        alerts,
        AlertChanges {
            clears: vec![],
            raised: vec![Alert {
                id: expected.id,
                mower_id: MOWER,
                account_id: ACCOUNT,
                kind: AlertKind::BladeDue,
                severity: Severity::Low,
                raised_at: at(120),
                cleared_at: None,
                code: None,
            }],
        }
    );
}

#[test]
fn a_fence_parsed_for_another_version_is_no_fence() {
    // The snapshot names version 0xf1; the parsed fence handed over is of version 0xf2 (the
    // geofence changed between the two reads): the position is judged against no fence.
    let fence = square().fence();
    let fences = BTreeMap::from([(
        MOWER,
        GeofenceRef {
            version: Uuid::from_u128(0xf2),
            fence: &fence,
        },
    )]);
    let mut snapshots = Run::new(true).snapshots;
    let far_outside = at_position(state(0, Activity::Mowing), 300.0, Some(1.0));
    let (_, changes) = apply_watch(
        &mut snapshots,
        &fences,
        &[far_outside],
        at(10_000),
        DEFAULT_SESSION_MERGE_GAP,
    );
    assert!(changes.events.is_empty(), "{:?}", changes.events);
    assert_eq!(changes.watches[0].geofence_version, None);
    assert!(!changes.watches[0].outside_geofence);
}

#[test]
fn a_removed_geofence_clears_the_alarm_without_an_event() {
    let mut run = Run::new(true);
    let (_, changes) = run.watch(&[at_position(state(0, Activity::Mowing), 300.0, None)]);
    assert_eq!(changes.events[0].kind(), GeofenceLeft);
    // The geofence is deleted: the next state (without a position) is outside of nothing.
    run.snapshots.get_mut(&MOWER).unwrap().geofence_version = None;
    let (_, changes) = run.watch(&[state(10, Activity::Mowing)]);
    assert!(changes.events.is_empty());
    assert_eq!(
        changes.alerts.clears,
        vec![AlertClear {
            mower_id: MOWER,
            kind: AlertKind::Geofence,
            cleared_at: at(10),
        }]
    );
    assert_eq!(
        changes.cleared_without_event,
        vec![(
            0,
            ClearedAlert {
                mower_id: MOWER,
                account_id: ACCOUNT,
                kind: AlertKind::Geofence,
                cleared_at: at(10),
                cause: ClearCause::GeofenceRemoved,
            }
        )]
    );
    let watch = &changes.watches[0];
    assert_eq!(
        (watch.outside_geofence, watch.geofence_version),
        (false, None)
    );
    // Nothing more to clear on the state after.
    let (_, changes) = run.watch(&[state(20, Activity::Mowing)]);
    assert!(changes.alerts.is_empty());
    assert!(changes.cleared_without_event.is_empty());
}

#[test]
fn a_battery_back_at_thirty_percent_clears_its_alert_without_an_event() {
    let mut run = Run::new(false);
    // Raised and re-armed in one batch: the alert is stored cleared, and the clear is still told.
    let (_, changes) = run.watch(&[
        battery(state(0, Activity::Returning), 15),
        battery(state(10, Activity::Charging), 30),
    ]);
    assert_eq!(changes.events.len(), 1);
    assert_eq!(changes.alerts.raised[0].cleared_at, Some(at(10)));
    let recovered = |seconds| ClearedAlert {
        mower_id: MOWER,
        account_id: ACCOUNT,
        kind: AlertKind::BatteryLow,
        cleared_at: at(seconds),
        cause: ClearCause::BatteryRecovered,
    };
    // After the one event derived before it.
    assert_eq!(changes.cleared_without_event, vec![(1, recovered(10))]);
    // Raised in one batch, re-armed in a later one: a clear of the stored alert, told once.
    let (_, changes) = run.watch(&[battery(state(20, Activity::Mowing), 12)]);
    assert!(changes.cleared_without_event.is_empty());
    let (_, changes) = run.watch(&[
        battery(state(30, Activity::Mowing), 29),
        battery(state(40, Activity::Mowing), 31),
        battery(state(50, Activity::Mowing), 80),
    ]);
    assert!(changes.events.is_empty());
    assert_eq!(
        changes.alerts.clears,
        vec![AlertClear {
            mower_id: MOWER,
            kind: AlertKind::BatteryLow,
            cleared_at: at(40),
        }]
    );
    assert_eq!(changes.cleared_without_event, vec![(0, recovered(40))]);
    assert_eq!(
        recovered(40).dedup_id(),
        format!(
            "alert-cleared:{MOWER}:battery_low:{}",
            at(40).timestamp_micros()
        )
    );
}

#[test]
fn battery_low_is_strictly_below_twenty_and_never_while_charging() {
    let mut run = Run::new(false);
    let (_, changes) = run.watch(&[
        battery(state(0, Activity::Returning), 20),
        battery(state(10, Activity::Charging), 5),
        battery(state(20, Activity::Docked), 5),
        battery(state(30, Activity::Returning), 19),
    ]);
    let lows: Vec<_> = changes
        .events
        .iter()
        .map(|e| (e.observed_at, e.detail.clone()))
        .collect();
    assert_eq!(
        lows,
        vec![(
            at(30),
            EventDetail::BatteryLow {
                battery_percent: 19
            }
        )]
    );
    // 29 % does not re-arm it; a state without a battery changes nothing.
    let (_, changes) = run.watch(&[
        battery(state(40, Activity::Mowing), 29),
        StateReport {
            battery_percent: None,
            ..state(50, Activity::Mowing)
        },
    ]);
    assert!(changes.alerts.is_empty());
    assert!(changes.watches[0].battery_low);
}

#[test]
fn going_offline_and_coming_back_carry_the_instants_of_the_silence() {
    let mut run = Run::new(false);
    let (_, changes) = run.watch(&[state(0, Activity::Docked)]);
    let mut watch = changes.watches[0].clone();
    // The batch arrived at 10 000 s: silent since then, offline 10 minutes later.
    let mut swept = WatchChanges::default();
    let event = went_offline(&mut watch, Duration::minutes(10), &mut swept).unwrap();
    assert_eq!(
        event,
        Event::new(
            MOWER,
            ACCOUNT,
            at(10_600),
            EventDetail::WentOffline {
                last_seen_at: at(10_000)
            }
        )
    );
    assert_eq!(swept.events, vec![event.clone()]);
    assert_eq!(swept.watches, vec![watch.clone()]);
    assert!(watch.offline);
    assert_eq!(swept.alerts.raised[0].kind, AlertKind::Offline);
    assert_eq!(swept.alerts.raised[0].id, event.id);

    run.snapshots.get_mut(&MOWER).unwrap().watch = Some(watch);
    let (_, changes) = run.watch(&[state(20, Activity::Docked)]);
    assert_eq!(
        changes.events[0].detail,
        EventDetail::CameOnline {
            silent_since: at(10_000)
        }
    );
    assert_eq!(changes.alerts.clears[0].kind, AlertKind::Offline);
}

#[test]
fn detail_values_are_rounded_to_short_decimals() {
    assert_eq!(round_degrees(52.123_456_789), 52.123_456_8);
    assert_eq!(round_degrees(-13.000_000_04), -13.0);
    assert_eq!(round_metres(8.004_9), 8.0);
    assert_eq!(round_metres(8.005_1), 8.01);
}

#[test]
fn zone_events_of_one_instant_differ_by_their_zone() {
    let (a, b) = (Uuid::from_u128(0x21), Uuid::from_u128(0x22));
    let entered = |zone_id| {
        event(
            5,
            EventDetail::ZoneEntered {
                zone_id,
                zone_name: "Lawn".into(),
            },
        )
    };
    assert_eq!(entered(a).id, event_id(MOWER, ZoneEntered, at(5), Some(a)));
    assert_ne!(entered(a).id, entered(b).id);
    let left = event(
        5,
        EventDetail::ZoneLeft {
            zone_id: a,
            zone_name: "Lawn".into(),
        },
    );
    assert_eq!(left.id, event_id(MOWER, ZoneLeft, at(5), Some(a)));
    // Other kinds have nothing but the mower, kind and instant to tell them apart.
    let low = event(5, EventDetail::BatteryLow { battery_percent: 3 });
    assert_eq!(low.id, event_id(MOWER, BatteryLow, at(5), None));
}
