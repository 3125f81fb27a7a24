//! Unit tests of the state report's parsing and validation.

use super::*;
use chrono::TimeZone;
use serde_json::json;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap()
}

fn valid() -> Value {
    json!({
        "mower_id": "0190a2b4-0000-7000-8000-000000000001",
        "account_id": "0190a2b4-0000-7000-8000-0000000000aa",
        "observed_at": "2026-06-01T11:59:59.1234567Z",
        "activity": "mowing",
        "battery_percent": 80,
        "position": {"lat": 52.5, "lon": 13.4, "accuracy_m": 0.5},
        "blade_on": true,
        "firmware": "4.2.1"
    })
}

fn reason(value: Value) -> DropReason {
    StateReport::from_value(value, now()).unwrap_err().reason
}

#[test]
fn a_valid_report_keeps_unknown_fields_and_is_truncated_to_microseconds() {
    let report = StateReport::parse(valid().to_string().as_bytes(), now()).unwrap();
    assert_eq!(report.unknown.get("firmware"), Some(&json!("4.2.1")));
    assert_eq!(report.observed_at.timestamp_subsec_nanos(), 123_456_000);
    let doc = serde_json::to_value(&report).unwrap();
    assert_eq!(doc["firmware"], json!("4.2.1"));
    assert_eq!(doc["blade_on"], json!(true));
}

#[test]
fn blade_on_defaults_to_false() {
    let mut v = valid();
    v.as_object_mut().unwrap().remove("blade_on");
    assert!(!StateReport::from_value(v, now()).unwrap().blade_on);
}

#[test]
fn each_rule_has_its_reason() {
    let mut v = valid();
    v["observed_at"] = json!("2026-06-01T12:05:00.000001Z");
    assert_eq!(reason(v), DropReason::FutureObservedAt);
    let mut v = valid();
    v["observed_at"] = json!("2026-06-01T12:05:00Z");
    assert!(
        StateReport::from_value(v, now()).is_ok(),
        "exactly 5 minutes is accepted"
    );
    let mut v = valid();
    v["battery_percent"] = json!(101);
    assert_eq!(reason(v), DropReason::InvalidBattery);
    let mut v = valid();
    v["battery_percent"] = json!(-1);
    assert_eq!(reason(v), DropReason::InvalidBattery);
    let mut v = valid();
    v["position"]["lat"] = json!(90.5);
    assert_eq!(reason(v), DropReason::InvalidPosition);
    let mut v = valid();
    v["position"]["lon"] = json!(-180.01);
    assert_eq!(reason(v), DropReason::InvalidPosition);
    let mut v = valid();
    v["error_code"] = json!("e".repeat(65));
    assert_eq!(reason(v), DropReason::FieldTooLong);
    let mut v = valid();
    v["vendor_state"] = json!("é".repeat(64));
    assert!(
        StateReport::from_value(v, now()).is_ok(),
        "64 characters are accepted"
    );
    let mut v = valid();
    v["extra"] = json!({"blob": "x".repeat(MAX_REPORT_BYTES)});
    assert_eq!(reason(v), DropReason::TooLarge);
    let mut v = valid();
    v["activity"] = json!("flying");
    assert_eq!(reason(v), DropReason::Malformed);
    let mut v = valid();
    v.as_object_mut().unwrap().remove("account_id");
    assert_eq!(reason(v), DropReason::Malformed);
}

#[test]
fn a_nul_in_any_string_is_invalid_text_and_ancient_instants_are_refused() {
    let nul = json!("a\u{0}b");
    type Set = fn(&mut Value, Value);
    let variants: [(&str, Set); 6] = [
        ("error_code", |v, n| v["error_code"] = n),
        ("vendor_state", |v, n| v["vendor_state"] = n),
        ("extra value", |v, n| v["extra"] = json!({"zone": n})),
        ("deep extra value", |v, n| {
            v["extra"] = json!({"deep": [{"x": n}]})
        }),
        ("unknown field", |v, n| v["firmware"] = n),
        ("deep unknown field", |v, n| {
            v["unknown"] = json!({"nested": [n]})
        }),
    ];
    for (what, set) in variants {
        let mut v = valid();
        set(&mut v, nul.clone());
        let err = StateReport::from_value(v.clone(), now()).unwrap_err();
        assert_eq!(
            err.reason,
            DropReason::InvalidText,
            "{what}: {}",
            err.detail
        );
        let err = StateReport::parse(v.to_string().as_bytes(), now()).unwrap_err();
        assert_eq!(err.reason, DropReason::InvalidText, "{what}");
    }
    for container in ["extra", "unknown"] {
        let mut v = valid();
        v[container] = json!({"k\u{0}": 1});
        assert_eq!(reason(v), DropReason::InvalidText, "a key of {container}");
    }
    let mut v = valid();
    v["observed_at"] = json!("1999-12-31T23:59:59.999999Z");
    assert_eq!(reason(v), DropReason::AncientObservedAt);
    let mut v = valid();
    v["observed_at"] = json!("0000-01-01T00:00:00Z");
    assert_eq!(reason(v), DropReason::AncientObservedAt);
    let mut v = valid();
    v["observed_at"] = json!(EARLIEST_OBSERVED_AT);
    assert!(
        StateReport::from_value(v, now()).is_ok(),
        "the bound itself is accepted"
    );
    assert_eq!(
        earliest_observed_at().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        EARLIEST_OBSERVED_AT
    );
}

#[test]
fn non_finite_positions_are_refused_when_built_in_code() {
    let mut report = StateReport::from_value(valid(), now()).unwrap();
    report.position = Some(Position {
        lat: f64::NAN,
        lon: 0.0,
        accuracy_m: None,
        heading_deg: None,
    });
    assert_eq!(
        report.validate(now()).unwrap_err().reason,
        DropReason::InvalidPosition
    );
}

#[test]
fn unparsable_bytes_still_name_the_mower_when_they_can() {
    let err = StateReport::parse(
        br#"{"mower_id": "0190a2b4-0000-7000-8000-000000000001", "observed_at": 5"#,
        now(),
    )
    .unwrap_err();
    assert_eq!(err.reason, DropReason::Malformed);
    assert_eq!(
        err.mower_id.unwrap().to_string(),
        "0190a2b4-0000-7000-8000-000000000001"
    );
    let err = StateReport::parse(&vec![b' '; MAX_REPORT_BYTES + 1], now()).unwrap_err();
    assert_eq!(err.reason, DropReason::TooLarge);
}

#[test]
fn home_assistant_mapping() {
    use LawnMowerActivity as L;
    let expected = [
        (Activity::Mowing, L::Mowing),
        (Activity::Leaving, L::Mowing),
        (Activity::Returning, L::Returning),
        (Activity::Docked, L::Docked),
        (Activity::Charging, L::Docked),
        (Activity::Paused, L::Paused),
        (Activity::Idle, L::Paused),
        (Activity::Error, L::Error),
    ];
    for (a, l) in expected {
        assert_eq!(a.lawn_mower(), l, "{a}");
        assert_eq!(Activity::parse(a.as_str()), Some(a));
    }
}
