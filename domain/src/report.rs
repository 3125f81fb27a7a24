//! The state report a mower's gateway publishes on `telemetry.mower.<mower_id>` (docs/rules.md §2), and
//! its validation. A report that fails validation is dropped alone, with a [`DropReason`].

use crate::ids::{AccountId, MowerId};
use crate::text;
use chrono::{DateTime, Duration, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// The largest report accepted, in bytes of JSON.
pub const MAX_REPORT_BYTES: usize = 16 * 1024;
/// The longest `error_code` or `vendor_state`, in characters.
pub const MAX_TEXT_CHARS: usize = 64;
/// How far in the future of its receipt a report's `observed_at` may be.
pub const MAX_CLOCK_SKEW: Duration = Duration::minutes(5);
/// The earliest `observed_at` accepted, as RFC 3339: a clock that was never set (1970, year 0)
/// is refused rather than stored in a month no query looks at.
pub const EARLIEST_OBSERVED_AT: &str = "2000-01-01T00:00:00Z";

/// [`EARLIEST_OBSERVED_AT`] as an instant.
pub fn earliest_observed_at() -> DateTime<Utc> {
    DateTime::from_timestamp(946_684_800, 0).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// What a mower is doing, as its gateway reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    Mowing,
    Leaving,
    Returning,
    Docked,
    Charging,
    Paused,
    Idle,
    Error,
}

impl Activity {
    /// Every activity, in declaration order.
    pub const ALL: [Activity; 8] = [
        Activity::Mowing,
        Activity::Leaving,
        Activity::Returning,
        Activity::Docked,
        Activity::Charging,
        Activity::Paused,
        Activity::Idle,
        Activity::Error,
    ];

    /// The wire name (`mowing`, `docked`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Mowing => "mowing",
            Activity::Leaving => "leaving",
            Activity::Returning => "returning",
            Activity::Docked => "docked",
            Activity::Charging => "charging",
            Activity::Paused => "paused",
            Activity::Idle => "idle",
            Activity::Error => "error",
        }
    }

    /// Parses a wire name.
    pub fn parse(value: &str) -> Option<Activity> {
        Activity::ALL.into_iter().find(|a| a.as_str() == value)
    }

    /// The Home Assistant `lawn_mower` activity: leaving → mowing, charging → docked, idle → paused.
    pub fn lawn_mower(self) -> LawnMowerActivity {
        match self {
            Activity::Mowing | Activity::Leaving => LawnMowerActivity::Mowing,
            Activity::Returning => LawnMowerActivity::Returning,
            Activity::Docked | Activity::Charging => LawnMowerActivity::Docked,
            Activity::Paused | Activity::Idle => LawnMowerActivity::Paused,
            Activity::Error => LawnMowerActivity::Error,
        }
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The activity of Home Assistant's `lawn_mower` entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LawnMowerActivity {
    Mowing,
    Docked,
    Paused,
    Returning,
    Error,
}

/// A WGS 84 position with its accuracy and heading, as the mower reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// Latitude in degrees, -90..=90.
    pub lat: f64,
    /// Longitude in degrees, -180..=180.
    pub lon: f64,
    /// Radius of the 1-sigma accuracy circle in metres, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_m: Option<f64>,
    /// Heading in degrees clockwise from north, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heading_deg: Option<f64>,
}

/// A validated state report. Construct one with [`StateReport::parse`] or
/// [`StateReport::from_value`], or build it and call [`StateReport::validate`].
///
/// `observed_at` is truncated to microseconds, the precision every store keeps, so that all stores
/// end with the same rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateReport {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    pub observed_at: DateTime<Utc>,
    pub activity: Activity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_percent: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    #[serde(default)]
    pub blade_on: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
    /// Fields Swath does not know: kept in the state document as they came.
    #[serde(flatten)]
    pub unknown: Map<String, Value>,
}

/// Why a state was not stored. The snake_case code is the metric label and the API's `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Not JSON, not an object, a required field missing or of the wrong type.
    Malformed,
    /// More than 16 KiB.
    TooLarge,
    /// `observed_at` more than 5 minutes in the future of its receipt.
    FutureObservedAt,
    /// `battery_percent` outside 0..=100.
    InvalidBattery,
    /// A latitude, longitude, accuracy or heading out of range or not finite.
    InvalidPosition,
    /// `error_code` or `vendor_state` longer than 64 characters.
    FieldTooLong,
    /// The mower is not in the directory (W0).
    UnknownMower,
    /// The report names another account than the directory or the stored rows (W0).
    AccountMismatch,
    /// A string of the report (`error_code`, `vendor_state`, a key or value of `extra` or of an
    /// unknown field, at any depth) holds a NUL character, which no store can keep.
    InvalidText,
    /// `observed_at` before [`EARLIEST_OBSERVED_AT`].
    AncientObservedAt,
    /// The bus subject names another mower than the report's `mower_id`, or is not a telemetry
    /// subject of a mower: the subject is the gateway's identity.
    SubjectMismatch,
    /// The store refused this state every time it was tried, alone (a batch that kept failing
    /// was split to isolate it); the other states of its batch were stored.
    RejectedByStore,
}

impl DropReason {
    /// Every reason, for metrics that should show zeroes too.
    pub const ALL: [DropReason; 12] = [
        DropReason::Malformed,
        DropReason::TooLarge,
        DropReason::FutureObservedAt,
        DropReason::InvalidBattery,
        DropReason::InvalidPosition,
        DropReason::FieldTooLong,
        DropReason::UnknownMower,
        DropReason::AccountMismatch,
        DropReason::InvalidText,
        DropReason::AncientObservedAt,
        DropReason::SubjectMismatch,
        DropReason::RejectedByStore,
    ];

    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::TooLarge => "too_large",
            DropReason::FutureObservedAt => "future_observed_at",
            DropReason::InvalidBattery => "invalid_battery",
            DropReason::InvalidPosition => "invalid_position",
            DropReason::FieldTooLong => "field_too_long",
            DropReason::UnknownMower => "unknown_mower",
            DropReason::AccountMismatch => "account_mismatch",
            DropReason::InvalidText => "invalid_text",
            DropReason::AncientObservedAt => "ancient_observed_at",
            DropReason::SubjectMismatch => "subject_mismatch",
            DropReason::RejectedByStore => "rejected_by_store",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A report that failed validation: the reason, a sentence for people, and the mower if it could be
/// read (so the log can name it).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct InvalidReport {
    pub reason: DropReason,
    pub detail: String,
    pub mower_id: Option<MowerId>,
}

impl InvalidReport {
    /// A report refused for `reason`, with a sentence for people.
    pub fn new(reason: DropReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
            mower_id: None,
        }
    }
}

/// The wire form: lenient types so that a range error gets its own reason instead of `malformed`.
#[derive(Deserialize)]
struct WireReport {
    mower_id: MowerId,
    account_id: AccountId,
    observed_at: DateTime<Utc>,
    activity: Activity,
    #[serde(default)]
    battery_percent: Option<i64>,
    #[serde(default)]
    position: Option<Position>,
    #[serde(default)]
    blade_on: Option<bool>,
    #[serde(default)]
    error_code: Option<String>,
    #[serde(default)]
    vendor_state: Option<String>,
    #[serde(default)]
    extra: Option<Map<String, Value>>,
    #[serde(flatten)]
    unknown: Map<String, Value>,
}

impl StateReport {
    /// Parses and validates a report from its JSON bytes, received at `received_at`.
    pub fn parse(bytes: &[u8], received_at: DateTime<Utc>) -> Result<StateReport, InvalidReport> {
        if bytes.len() > MAX_REPORT_BYTES {
            return Err(InvalidReport {
                mower_id: sniff_mower_id(bytes),
                ..InvalidReport::new(
                    DropReason::TooLarge,
                    format!(
                        "the report has {} bytes, more than the {MAX_REPORT_BYTES} allowed",
                        bytes.len()
                    ),
                )
            });
        }
        let wire: WireReport = serde_json::from_slice(bytes).map_err(|e| InvalidReport {
            mower_id: sniff_mower_id(bytes),
            ..InvalidReport::new(DropReason::Malformed, e.to_string())
        })?;
        Self::from_wire(wire, received_at)
    }

    /// Validates a report given as a JSON value (one element of `POST /v1/states`).
    pub fn from_value(
        value: Value,
        received_at: DateTime<Utc>,
    ) -> Result<StateReport, InvalidReport> {
        let size = serde_json::to_vec(&value)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        let mower_id = value
            .get("mower_id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .map(MowerId);
        if size > MAX_REPORT_BYTES {
            return Err(InvalidReport {
                mower_id,
                ..InvalidReport::new(
                    DropReason::TooLarge,
                    format!(
                        "the report has {size} bytes, more than the {MAX_REPORT_BYTES} allowed"
                    ),
                )
            });
        }
        let wire: WireReport = serde_json::from_value(value).map_err(|e| InvalidReport {
            mower_id,
            ..InvalidReport::new(DropReason::Malformed, e.to_string())
        })?;
        Self::from_wire(wire, received_at)
    }

    fn from_wire(
        wire: WireReport,
        received_at: DateTime<Utc>,
    ) -> Result<StateReport, InvalidReport> {
        let mower_id = wire.mower_id;
        let battery_percent = match wire.battery_percent {
            None => None,
            Some(b @ 0..=100) => Some(b as u8),
            Some(b) => {
                return Err(InvalidReport {
                    mower_id: Some(mower_id),
                    ..InvalidReport::new(
                        DropReason::InvalidBattery,
                        format!("battery_percent is {b}, expected 0..=100"),
                    )
                })
            }
        };
        let report = StateReport {
            mower_id,
            account_id: wire.account_id,
            observed_at: wire.observed_at,
            activity: wire.activity,
            battery_percent,
            position: wire.position,
            blade_on: wire.blade_on.unwrap_or(false),
            error_code: wire.error_code,
            vendor_state: wire.vendor_state,
            extra: wire.extra,
            unknown: wire.unknown,
        };
        // The size was checked on the bytes (or value) already: skip re-serialising.
        report.check(received_at)
    }

    /// Checks every rule of docs/rules.md §2 that the types do not already enforce, including the size
    /// of the serialised report, and normalises `observed_at` to microseconds. For reports built in
    /// code; [`StateReport::parse`] and [`StateReport::from_value`] validate already.
    pub fn validate(self, received_at: DateTime<Utc>) -> Result<StateReport, InvalidReport> {
        let size = serde_json::to_vec(&self)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_REPORT_BYTES {
            return Err(InvalidReport {
                mower_id: Some(self.mower_id),
                ..InvalidReport::new(
                    DropReason::TooLarge,
                    format!(
                        "the report has {size} bytes, more than the {MAX_REPORT_BYTES} allowed"
                    ),
                )
            });
        }
        self.check(received_at)
    }

    fn check(mut self, received_at: DateTime<Utc>) -> Result<StateReport, InvalidReport> {
        let fail = |reason, detail: String| InvalidReport {
            reason,
            detail,
            mower_id: Some(self.mower_id),
        };
        if self.observed_at > received_at + MAX_CLOCK_SKEW {
            return Err(fail(
                DropReason::FutureObservedAt,
                format!(
                    "observed_at {} is more than 5 minutes after its receipt at {}",
                    self.observed_at.to_rfc3339(),
                    received_at.to_rfc3339()
                ),
            ));
        }
        if self.observed_at < earliest_observed_at() {
            return Err(fail(
                DropReason::AncientObservedAt,
                format!(
                    "observed_at {} is before {EARLIEST_OBSERVED_AT}",
                    self.observed_at.to_rfc3339()
                ),
            ));
        }
        if let Some(b) = self.battery_percent {
            if b > 100 {
                return Err(fail(
                    DropReason::InvalidBattery,
                    format!("battery_percent is {b}, expected 0..=100"),
                ));
            }
        }
        if let Some(p) = &self.position {
            if let Some(problem) = position_problem(p) {
                return Err(fail(DropReason::InvalidPosition, problem));
            }
        }
        for (name, value) in [
            ("error_code", &self.error_code),
            ("vendor_state", &self.vendor_state),
        ] {
            if let Some(v) = value {
                let chars = v.chars().count();
                if chars > MAX_TEXT_CHARS {
                    return Err(fail(
                        DropReason::FieldTooLong,
                        format!("{name} has {chars} characters, at most {MAX_TEXT_CHARS} allowed"),
                    ));
                }
            }
        }
        if let Some(field) = self.nul_field() {
            return Err(fail(
                DropReason::InvalidText,
                format!("{field} holds a NUL character (\\u0000), which cannot be stored"),
            ));
        }
        self.observed_at = self.observed_at.trunc_subsecs(6);
        Ok(self)
    }

    /// The first string field that holds a NUL character, named for people.
    fn nul_field(&self) -> Option<String> {
        for (name, value) in [
            ("error_code", &self.error_code),
            ("vendor_state", &self.vendor_state),
        ] {
            if value.as_deref().is_some_and(text::has_nul) {
                return Some(format!("`{name}`"));
            }
        }
        let in_map = |map: &Map<String, Value>, prefix: &str| {
            map.iter().find_map(|(key, value)| {
                let key_text = key.replace('\0', "\\u0000");
                if text::has_nul(key) {
                    return Some(format!("the key `{prefix}{key_text}`"));
                }
                text::nul_in_value(value).map(|path| format!("`{prefix}{key_text}{path}`"))
            })
        };
        if let Some(extra) = &self.extra {
            if let Some(found) = in_map(extra, "extra/") {
                return Some(found);
            }
        }
        in_map(&self.unknown, "")
    }
}

fn position_problem(p: &Position) -> Option<String> {
    if !p.lat.is_finite() || !(-90.0..=90.0).contains(&p.lat) {
        return Some(format!(
            "lat is {}, expected a finite number in -90..=90",
            p.lat
        ));
    }
    if !p.lon.is_finite() || !(-180.0..=180.0).contains(&p.lon) {
        return Some(format!(
            "lon is {}, expected a finite number in -180..=180",
            p.lon
        ));
    }
    if let Some(a) = p.accuracy_m {
        if !a.is_finite() || a < 0.0 {
            return Some(format!("accuracy_m is {a}, expected a finite number >= 0"));
        }
    }
    if let Some(h) = p.heading_deg {
        if !h.is_finite() || !(0.0..=360.0).contains(&h) {
            return Some(format!(
                "heading_deg is {h}, expected a finite number in 0..=360"
            ));
        }
    }
    None
}

/// Best effort: the mower id of a report that could not be parsed, so the log line can name it.
fn sniff_mower_id(bytes: &[u8]) -> Option<MowerId> {
    let text = std::str::from_utf8(bytes.get(..bytes.len().min(MAX_REPORT_BYTES))?).ok()?;
    let start = text.find("\"mower_id\"")? + "\"mower_id\"".len();
    let rest = text[start..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    rest.get(..36)?.parse().ok().map(MowerId)
}

#[cfg(test)]
mod tests {
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
}
