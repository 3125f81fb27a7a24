//! Events raised by the write rules. They are published after the commit that produced them.

use crate::ids::{AccountId, MowerId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An event raised while ingesting states (W6; W7 comes with virtual zones).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IngestEvent {
    /// Blade time since the last blade reset reached the mower's threshold. Raised once per reset.
    BladeDue {
        mower_id: MowerId,
        account_id: AccountId,
        observed_at: DateTime<Utc>,
        blade_since_reset_ms: i64,
        threshold_ms: i64,
    },
}

impl IngestEvent {
    /// The event kind, as used in subjects (`notifications.mower.<id>.<kind>`).
    pub fn kind(&self) -> &'static str {
        match self {
            IngestEvent::BladeDue { .. } => "blade_due",
        }
    }

    /// The mower the event is about.
    pub fn mower_id(&self) -> MowerId {
        match self {
            IngestEvent::BladeDue { mower_id, .. } => *mower_id,
        }
    }

    /// A de-duplication id that is the same every time the same event is derived, so a publish
    /// retried after a crash is recognised by the bus.
    pub fn dedup_id(&self) -> String {
        match self {
            IngestEvent::BladeDue {
                mower_id,
                observed_at,
                ..
            } => format!("blade_due.{mower_id}.{}", observed_at.timestamp_micros()),
        }
    }
}
