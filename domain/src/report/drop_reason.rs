//! Why a state was not stored: the reasons (the metric label and the API's `reason`) and a
//! report refused by validation.

use crate::ids::MowerId;
use serde::{Deserialize, Serialize};
use std::fmt;

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
    /// `observed_at` before [`EARLIEST_OBSERVED_AT`](super::EARLIEST_OBSERVED_AT).
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
