//! `POST /v1/states`: the reports a client sends and what became of each.

use super::Activity;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use swath_domain::DropReason as DomainReason;
use utoipa::ToSchema;
use uuid::Uuid;

/// A position in a state report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportedPosition {
    /// Latitude in degrees, -90 to 90.
    #[schema(example = 52.5163, minimum = -90.0, maximum = 90.0)]
    pub lat: f64,
    /// Longitude in degrees, -180 to 180.
    #[schema(example = 13.3777, minimum = -180.0, maximum = 180.0)]
    pub lon: f64,
    /// Radius of the 1-sigma accuracy circle in metres, 0 or more.
    #[schema(example = 0.4, minimum = 0.0)]
    pub accuracy_m: Option<f64>,
    /// Heading in degrees clockwise from north, 0 to 360.
    #[schema(example = 270.0, minimum = 0.0, maximum = 360.0)]
    pub heading_deg: Option<f64>,
}

/// A state report, exactly as a gateway publishes it on `telemetry.mower.<mower_id>` (docs/rules.md
/// §2). Fields Swath does not know are kept in the state document; the whole report may have at
/// most 16 KiB of JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StateReportIn {
    /// The mower, as the directory knows it.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// The mower's account: must be the token's account.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-0000000000a0")]
    pub account_id: Uuid,
    /// When the mower observed this state (RFC 3339); from 2000-01-01T00:00:00Z to 5 minutes
    /// after its receipt. Kept to the microsecond.
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub observed_at: DateTime<Utc>,
    /// What the mower is doing.
    pub activity: Activity,
    /// Battery charge in percent, 0 to 100.
    #[schema(example = 87, minimum = 0, maximum = 100)]
    pub battery_percent: Option<u8>,
    /// Where the mower is.
    pub position: Option<ReportedPosition>,
    /// Whether the blade is turning (default `false`).
    #[schema(example = true)]
    pub blade_on: Option<bool>,
    /// The vendor's error code, at most 64 characters.
    #[schema(example = "BLADE_BLOCKED", max_length = 64)]
    pub error_code: Option<String>,
    /// The vendor's raw state name, at most 64 characters.
    #[schema(example = "MOWING_LANE", max_length = 64)]
    pub vendor_state: Option<String>,
    /// Anything else, kept in the state document.
    #[schema(value_type = Option<super::Extra>, example = json!({"zone": "front lawn"}))]
    pub extra: Option<Map<String, Value>>,
}

/// Why a report was not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "future_observed_at")]
pub enum DropReason {
    /// Not an object, a required field missing or of the wrong type.
    Malformed,
    /// More than 16 KiB of JSON.
    TooLarge,
    /// `observed_at` more than 5 minutes after its receipt.
    FutureObservedAt,
    /// `battery_percent` outside 0 to 100.
    InvalidBattery,
    /// A latitude, longitude, accuracy or heading out of range.
    InvalidPosition,
    /// `error_code` or `vendor_state` longer than 64 characters.
    FieldTooLong,
    /// No such mower is visible to this token.
    UnknownMower,
    /// `account_id` is not the token's account.
    AccountMismatch,
    /// A string (`error_code`, `vendor_state`, a key or value of `extra` or of another field, at
    /// any depth) holds a NUL character (`\u0000`), which cannot be stored.
    InvalidText,
    /// `observed_at` before 2000-01-01T00:00:00Z.
    AncientObservedAt,
    /// The store refused this report, alone; the others were stored. Sending it again gives the
    /// same answer.
    RejectedByStore,
}

impl From<DomainReason> for DropReason {
    fn from(r: DomainReason) -> Self {
        match r {
            DomainReason::Malformed => DropReason::Malformed,
            DomainReason::TooLarge => DropReason::TooLarge,
            DomainReason::FutureObservedAt => DropReason::FutureObservedAt,
            DomainReason::InvalidBattery => DropReason::InvalidBattery,
            DomainReason::InvalidPosition => DropReason::InvalidPosition,
            DomainReason::FieldTooLong => DropReason::FieldTooLong,
            DomainReason::UnknownMower => DropReason::UnknownMower,
            DomainReason::AccountMismatch => DropReason::AccountMismatch,
            DomainReason::InvalidText => DropReason::InvalidText,
            DomainReason::AncientObservedAt => DropReason::AncientObservedAt,
            DomainReason::RejectedByStore => DropReason::RejectedByStore,
            // Only the bus has subjects; a report over HTTP is never refused for one.
            DomainReason::SubjectMismatch => DropReason::Malformed,
        }
    }
}

/// Stored or dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "stored")]
pub enum Outcome {
    /// Stored, or stored already (a report sent twice changes nothing the second time).
    Stored,
    /// Not stored, for `reason`; sending it again gives the same answer.
    Dropped,
}

/// What became of one report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReportOutcome {
    /// The report's position in the request's array, from 0.
    #[schema(example = 0)]
    pub index: u32,
    /// Stored or dropped.
    pub outcome: Outcome,
    /// Why it was dropped; `null` when stored.
    #[schema(required = true)]
    pub reason: Option<DropReason>,
    /// What was wrong, for people; `null` when stored.
    #[schema(required = true, example = json!(null))]
    pub detail: Option<String>,
}

/// What became of each report, in request order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct IngestResult {
    /// One outcome per report, in the order of the request.
    pub items: Vec<ReportOutcome>,
    /// How many reports were stored.
    #[schema(example = 1)]
    pub stored: u32,
    /// How many reports were dropped.
    #[schema(example = 0)]
    pub dropped: u32,
    /// `true`: the reports were stored, but their virtual zones could not be evaluated right
    /// after the commit. Nothing is lost and nothing needs resending: the ingest consumer
    /// evaluates them when it receives the published reports (each `zone_entered` and
    /// `zone_left` once); sending the same reports again completes them too. `false`: every step
    /// is done.
    #[schema(example = false)]
    pub zones_pending: bool,
}

impl From<swath_application::Submitted> for IngestResult {
    /// The answer of `POST /v1/states`: per report, in order, stored or dropped and why.
    fn from(submitted: swath_application::Submitted) -> Self {
        use swath_domain::StateOutcome;
        let swath_application::Submitted {
            outcomes,
            refused,
            zones_pending,
        } = submitted;
        let mut result = IngestResult {
            items: Vec::with_capacity(outcomes.len()),
            stored: 0,
            dropped: 0,
            zones_pending,
        };
        for (index, (outcome, refusal)) in outcomes.into_iter().zip(refused).enumerate() {
            // serde names the domain's private wire type in its messages; clients know it as a
            // report.
            let detail = refusal.map(|e| {
                e.detail
                    .replace("struct WireReport", "a state report object")
            });
            let item = match outcome {
                StateOutcome::Stored => {
                    result.stored += 1;
                    ReportOutcome {
                        index: index as u32,
                        outcome: Outcome::Stored,
                        reason: None,
                        detail: None,
                    }
                }
                StateOutcome::Dropped(reason) => {
                    result.dropped += 1;
                    let (reason, detail) = dropped(detail, reason);
                    ReportOutcome {
                        index: index as u32,
                        outcome: Outcome::Dropped,
                        reason: Some(reason),
                        detail: Some(detail),
                    }
                }
            };
            result.items.push(item);
        }
        result
    }
}

/// Why a report was dropped, in the answer's words. No detail: refused by the store (the use case
/// gives W0's refusals the detail of an unknown mower).
fn dropped(detail: Option<String>, reason: DomainReason) -> (DropReason, String) {
    match (detail, reason) {
        (Some(detail), reason) => (reason.into(), detail),
        (None, DomainReason::RejectedByStore) => (
            DropReason::RejectedByStore,
            "The store refused this report; sending it again gives the same answer.".to_owned(),
        ),
        (None, _) => (
            DropReason::UnknownMower,
            swath_application::visibility::MOWER_NOT_VISIBLE.to_owned(),
        ),
    }
}
