//! The alerts events open and clear: their kinds, severities, and the changes a batch writes.

use super::events::Event;
use crate::ids::{AccountId, MowerId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What an alert is about. One alert of a kind may be open per mower at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    Error,
    Geofence,
    BatteryLow,
    BladeDue,
    Offline,
}

impl AlertKind {
    pub const ALL: [AlertKind; 5] = [
        AlertKind::Error,
        AlertKind::Geofence,
        AlertKind::BatteryLow,
        AlertKind::BladeDue,
        AlertKind::Offline,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::Error => "error",
            AlertKind::Geofence => "geofence",
            AlertKind::BatteryLow => "battery_low",
            AlertKind::BladeDue => "blade_due",
            AlertKind::Offline => "offline",
        }
    }

    pub fn parse(value: &str) -> Option<AlertKind> {
        AlertKind::ALL.into_iter().find(|k| k.as_str() == value)
    }

    /// How urgent an alert of this kind is: a mower outside its geofence may be stolen.
    pub fn severity(self) -> Severity {
        match self {
            AlertKind::Geofence => Severity::Critical,
            AlertKind::Error | AlertKind::Offline => Severity::High,
            AlertKind::BatteryLow => Severity::Normal,
            AlertKind::BladeDue => Severity::Low,
        }
    }
}

/// How urgent an alert is; ordered from least to most urgent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Low,
    Normal,
    High,
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 4] = [
        Severity::Low,
        Severity::Normal,
        Severity::High,
        Severity::Critical,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Normal => "normal",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }

    pub fn parse(value: &str) -> Option<Severity> {
        Severity::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// 1 (low) to 4 (critical): what stores sort by.
    pub fn rank(self) -> i16 {
        self as i16 + 1
    }
}

/// An alert: open from the event that raised it until the event (or blade reset, or battery
/// recharge) that cleared it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// The id of the event that raised it.
    pub id: Uuid,
    pub mower_id: MowerId,
    pub account_id: AccountId,
    pub kind: AlertKind,
    pub severity: Severity,
    pub raised_at: DateTime<Utc>,
    pub cleared_at: Option<DateTime<Utc>>,
    /// The error code of an error alert.
    pub code: Option<String>,
}

/// Why an alert was cleared without an event of its own: the events that clear alerts
/// (`came_online`, `error_cleared`, `geofence_returned`) say so themselves, these three do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClearCause {
    /// The battery reached the re-arm level (30 %) after `battery_low`.
    BatteryRecovered,
    /// The mower's geofence was removed while it was outside it (told with its next state).
    GeofenceRemoved,
    /// The blade was reset (`POST /v1/mowers/{id}/blade-reset`).
    BladeReset,
}

impl ClearCause {
    pub fn as_str(self) -> &'static str {
        match self {
            ClearCause::BatteryRecovered => "battery_recovered",
            ClearCause::GeofenceRemoved => "geofence_removed",
            ClearCause::BladeReset => "blade_reset",
        }
    }
}

/// An alert cleared without an event (decision 130): published on the bus after its commit, so
/// that a live stream shows every clear, not only those an event tells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClearedAlert {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    pub kind: AlertKind,
    pub cleared_at: DateTime<Utc>,
    pub cause: ClearCause,
}

impl ClearedAlert {
    /// The bus's de-duplication id: the same clear published twice is one message.
    pub fn dedup_id(&self) -> String {
        format!(
            "alert-cleared:{}:{}:{}",
            self.mower_id,
            self.kind.as_str(),
            self.cleared_at.timestamp_micros()
        )
    }
}

/// An alert opened before this batch, cleared by it.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertClear {
    pub mower_id: MowerId,
    pub kind: AlertKind,
    pub cleared_at: DateTime<Utc>,
}

/// What a batch does to the alerts. Stores apply `clears` first (to the open alert of the mower
/// and kind, if any), then insert `raised` (an id stored already is left as it is).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AlertChanges {
    pub clears: Vec<AlertClear>,
    /// Alerts raised by the batch, in order; `cleared_at` is set when the batch cleared them too.
    pub raised: Vec<Alert>,
}

impl AlertChanges {
    pub fn is_empty(&self) -> bool {
        self.clears.is_empty() && self.raised.is_empty()
    }

    /// Opens an alert for `event`.
    pub fn open(&mut self, event: &Event, kind: AlertKind, code: Option<String>) {
        self.raised.push(Alert {
            id: event.id,
            mower_id: event.mower_id,
            account_id: event.account_id,
            kind,
            severity: kind.severity(),
            raised_at: event.observed_at,
            cleared_at: None,
            code,
        });
    }

    /// Clears the open alert of a mower and kind: one raised by this batch, or else one stored.
    pub fn clear(&mut self, mower_id: MowerId, kind: AlertKind, at: DateTime<Utc>) {
        let raised_here = self
            .raised
            .iter_mut()
            .rev()
            .find(|a| a.mower_id == mower_id && a.kind == kind);
        match raised_here {
            Some(alert) if alert.cleared_at.is_none() => alert.cleared_at = Some(at),
            // Raised and cleared within this batch already: nothing open to clear.
            Some(_) => {}
            None => self.clears.push(AlertClear {
                mower_id,
                kind,
                cleared_at: at,
            }),
        }
    }
}
