//! The events the notification rules derive: their kinds, what each says, and their ids, derived
//! from what they are about (see the module's "Determinism").

use crate::ids::{AccountId, MowerId};
use crate::sessions::EndReason;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use uuid::Uuid;

/// What an event says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    ErrorRaised,
    ErrorCleared,
    GeofenceLeft,
    GeofenceReturned,
    BatteryLow,
    MowingStarted,
    MowingFinished,
    BladeDue,
    ZoneEntered,
    ZoneLeft,
    WentOffline,
    CameOnline,
    SessionEnded,
}

impl EventKind {
    pub const ALL: [EventKind; 13] = [
        EventKind::ErrorRaised,
        EventKind::ErrorCleared,
        EventKind::GeofenceLeft,
        EventKind::GeofenceReturned,
        EventKind::BatteryLow,
        EventKind::MowingStarted,
        EventKind::MowingFinished,
        EventKind::BladeDue,
        EventKind::ZoneEntered,
        EventKind::ZoneLeft,
        EventKind::WentOffline,
        EventKind::CameOnline,
        EventKind::SessionEnded,
    ];

    /// The wire name, also the last token of the event's subject.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ErrorRaised => "error_raised",
            EventKind::ErrorCleared => "error_cleared",
            EventKind::GeofenceLeft => "geofence_left",
            EventKind::GeofenceReturned => "geofence_returned",
            EventKind::BatteryLow => "battery_low",
            EventKind::MowingStarted => "mowing_started",
            EventKind::MowingFinished => "mowing_finished",
            EventKind::BladeDue => "blade_due",
            EventKind::ZoneEntered => "zone_entered",
            EventKind::ZoneLeft => "zone_left",
            EventKind::WentOffline => "went_offline",
            EventKind::CameOnline => "came_online",
            EventKind::SessionEnded => "session_ended",
        }
    }

    pub fn parse(value: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an event carries besides its id, mower and instant. Serialised flat into the event, with
/// its `kind`. Coordinates are rounded to 1e-7° and distances to centimetres, so that every
/// number is a short decimal that survives any JSON store unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventDetail {
    ErrorRaised {
        error_code: Option<String>,
    },
    ErrorCleared {
        /// The code the error was raised with.
        error_code: Option<String>,
    },
    /// The theft alarm: clearly outside the geofence.
    GeofenceLeft {
        lat: f64,
        lon: f64,
        accuracy_m: Option<f64>,
        /// How far outside the fence, in metres.
        distance_m: f64,
        geofence_version: Uuid,
    },
    GeofenceReturned {
        lat: f64,
        lon: f64,
        geofence_version: Uuid,
    },
    BatteryLow {
        battery_percent: u8,
    },
    MowingStarted {},
    MowingFinished {},
    BladeDue {
        blade_since_reset_ms: i64,
        threshold_ms: i64,
    },
    ZoneEntered {
        zone_id: Uuid,
        zone_name: String,
    },
    ZoneLeft {
        zone_id: Uuid,
        zone_name: String,
    },
    WentOffline {
        /// When Swath last received a state of the mower.
        last_seen_at: DateTime<Utc>,
    },
    CameOnline {
        /// When Swath had last received a state before this one.
        silent_since: DateTime<Utc>,
    },
    /// W8: a mowing session that can no longer merge with a later stretch, as the watcher folded
    /// it (decision 203; the stored session is authoritative). Durations in seconds and the
    /// distance in metres (milliseconds and millimetres / 1000): the names every form of the
    /// event carries, the published one included.
    SessionEnded {
        /// The stored session's id (derived from the mower and `started_at`).
        session_id: Uuid,
        started_at: DateTime<Utc>,
        ended_at: DateTime<Utc>,
        end_reason: EndReason,
        /// The closing state's error code when `end_reason` is `error`.
        error_code: Option<String>,
        breaks: i64,
        mowing_seconds: f64,
        blade_seconds: f64,
        distance_m: f64,
    },
}

impl EventDetail {
    pub fn kind(&self) -> EventKind {
        match self {
            EventDetail::ErrorRaised { .. } => EventKind::ErrorRaised,
            EventDetail::ErrorCleared { .. } => EventKind::ErrorCleared,
            EventDetail::GeofenceLeft { .. } => EventKind::GeofenceLeft,
            EventDetail::GeofenceReturned { .. } => EventKind::GeofenceReturned,
            EventDetail::BatteryLow { .. } => EventKind::BatteryLow,
            EventDetail::MowingStarted {} => EventKind::MowingStarted,
            EventDetail::MowingFinished {} => EventKind::MowingFinished,
            EventDetail::BladeDue { .. } => EventKind::BladeDue,
            EventDetail::ZoneEntered { .. } => EventKind::ZoneEntered,
            EventDetail::ZoneLeft { .. } => EventKind::ZoneLeft,
            EventDetail::WentOffline { .. } => EventKind::WentOffline,
            EventDetail::CameOnline { .. } => EventKind::CameOnline,
            EventDetail::SessionEnded { .. } => EventKind::SessionEnded,
        }
    }

    /// What makes two events of one mower, kind and instant different (the zone), for the id.
    fn discriminator(&self) -> Option<Uuid> {
        match self {
            EventDetail::ZoneEntered { zone_id, .. } | EventDetail::ZoneLeft { zone_id, .. } => {
                Some(*zone_id)
            }
            _ => None,
        }
    }
}

/// A derived event: stored in the events feed in the transaction that derived it, and published
/// after that commit on `notifications.mower.<mower_id>.<kind>` with its id as the
/// de-duplication id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// See [`event_id`]: the same event always gets the same id.
    pub id: Uuid,
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// The instant the event is about: the `observed_at` of the state that raised it; for
    /// `went_offline`, the instant the mower had been silent for the offline period; for
    /// `session_ended`, the session's end.
    pub observed_at: DateTime<Utc>,
    #[serde(flatten)]
    pub detail: EventDetail,
}

impl Event {
    /// Builds an event with its derived id.
    pub fn new(
        mower_id: MowerId,
        account_id: AccountId,
        observed_at: DateTime<Utc>,
        detail: EventDetail,
    ) -> Event {
        Event {
            id: event_id(mower_id, detail.kind(), observed_at, detail.discriminator()),
            mower_id,
            account_id,
            observed_at,
            detail,
        }
    }

    pub fn kind(&self) -> EventKind {
        self.detail.kind()
    }
}

/// The id of an event, derived from what it is about, so that deriving the same event twice (a
/// batch and the same states one at a time, or a retried publish) gives the same id. The layout
/// is UUID version 8 (custom): the first 48 bits are the Unix milliseconds of `observed_at`, as in
/// version 7, so ids sort by time; the other 74 bits are the SHA-256 of
/// `(mower, kind, observed_at µs, discriminator)`.
pub fn event_id(
    mower_id: MowerId,
    kind: EventKind,
    observed_at: DateTime<Utc>,
    discriminator: Option<Uuid>,
) -> Uuid {
    let mut hash = Sha256::new();
    hash.update(mower_id.0.as_bytes());
    hash.update(kind.as_str().as_bytes());
    hash.update(observed_at.timestamp_micros().to_be_bytes());
    if let Some(d) = discriminator {
        hash.update(d.as_bytes());
    }
    let digest = hash.finalize();
    let millis = observed_at.timestamp_millis().clamp(0, (1 << 48) - 1) as u64;
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6..].copy_from_slice(&digest[..10]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}
