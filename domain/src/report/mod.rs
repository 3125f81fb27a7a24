//! The state report a mower's gateway publishes on `telemetry.mower.<mower_id>` (docs/rules.md §2), and
//! its validation. A report that fails validation is dropped alone, with a [`DropReason`].
//!
//! Layout: this file holds the report, its wire form and its validation; `activity` what a mower
//! is doing ([`Activity`], [`LawnMowerActivity`]); `drop_reason` why a state was not stored
//! ([`DropReason`], [`InvalidReport`]); `tests` the unit tests.

mod activity;
mod drop_reason;
#[cfg(test)]
mod tests;

pub use activity::{Activity, LawnMowerActivity};
pub use drop_reason::{DropReason, InvalidReport};

use crate::ids::{AccountId, MowerId};
use crate::text;
use chrono::{DateTime, Duration, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

#[cfg(test)]
impl StateReport {
    /// A report for the tests: `activity` at `observed_at` with `battery_percent`; blade off, and
    /// no position, error, vendor state or other field.
    pub(crate) fn bare(
        mower_id: MowerId,
        account_id: AccountId,
        observed_at: DateTime<Utc>,
        activity: Activity,
        battery_percent: Option<u8>,
    ) -> Self {
        Self {
            mower_id,
            account_id,
            observed_at,
            activity,
            battery_percent,
            position: None,
            blade_on: false,
            error_code: None,
            vendor_state: None,
            extra: None,
            unknown: Map::new(),
        }
    }
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
