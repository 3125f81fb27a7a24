//! What an event carries, one schema per kind (decision 119): each has a `kind` that says which
//! (the event's own `kind` again, so that `details` can be read alone) and only the fields of
//! that kind, non-null where the kind always has them. The union is a `oneOf` with a
//! `discriminator` on `kind`; each schema's `kind` admits one value, so exactly one schema fits
//! any details, also for clients that ignore the discriminator.
//!
//! Durations are `_seconds`, lengths `_m`, angles `_deg` and shares `_percent`, as everywhere in
//! the API (decision 120).

use super::seconds;
use super::sessions::EndReasonDto;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::watch::EventDetail;
use utoipa::ToSchema;
use uuid::Uuid;

/// Declares the one-value `kind` of a details schema.
macro_rules! kind_tag {
    ($tag:ident, $variant:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $tag {
            $variant,
        }
    };
}

kind_tag!(ErrorRaisedTag, ErrorRaised, "Always `error_raised`.");
kind_tag!(ErrorClearedTag, ErrorCleared, "Always `error_cleared`.");
kind_tag!(GeofenceLeftTag, GeofenceLeft, "Always `geofence_left`.");
kind_tag!(
    GeofenceReturnedTag,
    GeofenceReturned,
    "Always `geofence_returned`."
);
kind_tag!(BatteryLowTag, BatteryLow, "Always `battery_low`.");
kind_tag!(MowingStartedTag, MowingStarted, "Always `mowing_started`.");
kind_tag!(
    MowingFinishedTag,
    MowingFinished,
    "Always `mowing_finished`."
);
kind_tag!(BladeDueTag, BladeDue, "Always `blade_due`.");
kind_tag!(ZoneEnteredTag, ZoneEntered, "Always `zone_entered`.");
kind_tag!(ZoneLeftTag, ZoneLeft, "Always `zone_left`.");
kind_tag!(WentOfflineTag, WentOffline, "Always `went_offline`.");
kind_tag!(CameOnlineTag, CameOnline, "Always `came_online`.");
kind_tag!(SessionEndedTag, SessionEnded, "Always `session_ended`.");

/// The details of an `error_raised` event: the mower reported an error code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorRaisedDetails {
    #[schema(inline)]
    pub kind: ErrorRaisedTag,
    /// The mower's error code; `null` when the mower reported the `error` activity without one.
    #[schema(required = true, example = "BLADE_BLOCKED")]
    pub error_code: Option<String>,
}

/// The details of an `error_cleared` event: the mower no longer reports the error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorClearedDetails {
    #[schema(inline)]
    pub kind: ErrorClearedTag,
    /// The code the error was raised with; `null` when it had none.
    #[schema(required = true, example = "BLADE_BLOCKED")]
    pub error_code: Option<String>,
}

/// The details of a `geofence_left` event (the theft alarm): the mower is clearly outside its
/// geofence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GeofenceLeftDetails {
    #[schema(inline)]
    pub kind: GeofenceLeftTag,
    /// The reported latitude, degrees.
    #[schema(example = 52.5163)]
    pub lat: f64,
    /// The reported longitude, degrees.
    #[schema(example = 13.3777)]
    pub lon: f64,
    /// The position's accuracy, metres; `null` when the mower did not report one.
    #[schema(required = true, example = 0.4)]
    pub accuracy_m: Option<f64>,
    /// How far outside the fence, metres.
    #[schema(example = 12.5)]
    pub distance_m: f64,
    /// The geofence version judged against.
    pub geofence_version: Uuid,
}

/// The details of a `geofence_returned` event: the mower is inside its geofence again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GeofenceReturnedDetails {
    #[schema(inline)]
    pub kind: GeofenceReturnedTag,
    /// The reported latitude, degrees.
    #[schema(example = 52.5163)]
    pub lat: f64,
    /// The reported longitude, degrees.
    #[schema(example = 13.3777)]
    pub lon: f64,
    /// The geofence version judged against.
    pub geofence_version: Uuid,
}

/// The details of a `battery_low` event: the charge fell below the low mark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatteryLowDetails {
    #[schema(inline)]
    pub kind: BatteryLowTag,
    /// The charge, percent.
    #[schema(example = 14, minimum = 0, maximum = 100)]
    pub battery_percent: u8,
}

/// The details of a `mowing_started` event: nothing but the kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MowingStartedDetails {
    #[schema(inline)]
    pub kind: MowingStartedTag,
}

/// The details of a `mowing_finished` event: nothing but the kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MowingFinishedDetails {
    #[schema(inline)]
    pub kind: MowingFinishedTag,
}

/// The details of a `blade_due` event: the blade has run past the mower's threshold since its
/// last reset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BladeDueDetails {
    #[schema(inline)]
    pub kind: BladeDueTag,
    /// Blade time since the last blade reset, seconds.
    #[schema(example = 360000.5)]
    pub blade_since_reset_seconds: f64,
    /// The mower's blade threshold, seconds.
    #[schema(example = 360000.0)]
    pub blade_threshold_seconds: f64,
}

/// The details of a `zone_entered` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ZoneEnteredDetails {
    #[schema(inline)]
    pub kind: ZoneEnteredTag,
    /// The zone.
    pub zone_id: Uuid,
    /// The zone's name when the event was raised.
    #[schema(example = "Roses")]
    pub zone_name: String,
}

/// The details of a `zone_left` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ZoneLeftDetails {
    #[schema(inline)]
    pub kind: ZoneLeftTag,
    /// The zone.
    pub zone_id: Uuid,
    /// The zone's name when the event was raised.
    #[schema(example = "Roses")]
    pub zone_name: String,
}

/// The details of a `went_offline` event: the mower has been silent for the offline period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WentOfflineDetails {
    #[schema(inline)]
    pub kind: WentOfflineTag,
    /// When Swath last received a state of the mower (UTC, RFC 3339).
    pub last_seen_at: DateTime<Utc>,
}

/// The details of a `came_online` event: a state arrived after the mower had gone offline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CameOnlineDetails {
    #[schema(inline)]
    pub kind: CameOnlineTag,
    /// When Swath had last received a state before this one (UTC, RFC 3339).
    pub last_seen_at: DateTime<Utc>,
}

/// The details of a `session_ended` event (W8): a mowing session that can no longer merge with
/// a later stretch (its merge gap passed with no new stretch, or at once when the gap is 0),
/// raised once per session. The figures are the watcher's fold of the states it watched, newer
/// than every state it had watched before: a state that arrived late is in the stored session
/// but not here, so the stored session (`GET /v1/mowers/{id}/sessions`) is authoritative. The
/// event's `observed_at` is `ended_at`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionEndedDetails {
    #[schema(inline)]
    pub kind: SessionEndedTag,
    /// The session's id, as the sessions routes answer it (derived from the mower and
    /// `started_at`).
    #[schema(example = "0190a2b4-5c3e-8d21-9f00-3b1d2c4e5f60")]
    pub session_id: Uuid,
    /// The first working state's `observed_at` (UTC, RFC 3339, microseconds).
    #[schema(example = "2026-06-01T08:00:00Z")]
    pub started_at: DateTime<Utc>,
    /// The closing state's `observed_at`.
    #[schema(example = "2026-06-01T10:30:00Z")]
    pub ended_at: DateTime<Utc>,
    /// Why it ended: its last stretch's end.
    pub end_reason: EndReasonDto,
    /// The closing state's error code when `end_reason` is `error`, else `null`.
    #[schema(required = true, example = json!(null))]
    pub error_code: Option<String>,
    /// How many stretches merged into this one (a resume after charging counts one).
    #[schema(example = 1)]
    pub breaks: i64,
    /// Time spent mowing in the session, seconds.
    #[schema(example = 8100.0)]
    pub mowing_seconds: f64,
    /// Time with the blade turning in the session, seconds.
    #[schema(example = 8050.5)]
    pub blade_seconds: f64,
    /// Distance driven while mowing in the session, metres.
    #[schema(example = 2140.125)]
    pub distance_m: f64,
}

/// What an event carries: one schema per kind, chosen by `kind` (the event's own kind).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(discriminator(
    property_name = "kind",
    mapping(
        ("error_raised" = "#/components/schemas/ErrorRaisedDetails"),
        ("error_cleared" = "#/components/schemas/ErrorClearedDetails"),
        ("geofence_left" = "#/components/schemas/GeofenceLeftDetails"),
        ("geofence_returned" = "#/components/schemas/GeofenceReturnedDetails"),
        ("battery_low" = "#/components/schemas/BatteryLowDetails"),
        ("mowing_started" = "#/components/schemas/MowingStartedDetails"),
        ("mowing_finished" = "#/components/schemas/MowingFinishedDetails"),
        ("blade_due" = "#/components/schemas/BladeDueDetails"),
        ("zone_entered" = "#/components/schemas/ZoneEnteredDetails"),
        ("zone_left" = "#/components/schemas/ZoneLeftDetails"),
        ("went_offline" = "#/components/schemas/WentOfflineDetails"),
        ("came_online" = "#/components/schemas/CameOnlineDetails"),
        ("session_ended" = "#/components/schemas/SessionEndedDetails"),
    )
))]
pub enum EventDetails {
    ErrorRaised(ErrorRaisedDetails),
    ErrorCleared(ErrorClearedDetails),
    GeofenceLeft(GeofenceLeftDetails),
    GeofenceReturned(GeofenceReturnedDetails),
    BatteryLow(BatteryLowDetails),
    MowingStarted(MowingStartedDetails),
    MowingFinished(MowingFinishedDetails),
    BladeDue(BladeDueDetails),
    ZoneEntered(ZoneEnteredDetails),
    ZoneLeft(ZoneLeftDetails),
    WentOffline(WentOfflineDetails),
    CameOnline(CameOnlineDetails),
    SessionEnded(SessionEndedDetails),
}

impl From<&EventDetail> for EventDetails {
    fn from(detail: &EventDetail) -> Self {
        match detail.clone() {
            EventDetail::ErrorRaised { error_code } => {
                EventDetails::ErrorRaised(ErrorRaisedDetails {
                    kind: ErrorRaisedTag::ErrorRaised,
                    error_code,
                })
            }
            EventDetail::ErrorCleared { error_code } => {
                EventDetails::ErrorCleared(ErrorClearedDetails {
                    kind: ErrorClearedTag::ErrorCleared,
                    error_code,
                })
            }
            EventDetail::GeofenceLeft {
                lat,
                lon,
                accuracy_m,
                distance_m,
                geofence_version,
            } => EventDetails::GeofenceLeft(GeofenceLeftDetails {
                kind: GeofenceLeftTag::GeofenceLeft,
                lat,
                lon,
                accuracy_m,
                distance_m,
                geofence_version,
            }),
            EventDetail::GeofenceReturned {
                lat,
                lon,
                geofence_version,
            } => EventDetails::GeofenceReturned(GeofenceReturnedDetails {
                kind: GeofenceReturnedTag::GeofenceReturned,
                lat,
                lon,
                geofence_version,
            }),
            EventDetail::BatteryLow { battery_percent } => {
                EventDetails::BatteryLow(BatteryLowDetails {
                    kind: BatteryLowTag::BatteryLow,
                    battery_percent,
                })
            }
            EventDetail::MowingStarted {} => EventDetails::MowingStarted(MowingStartedDetails {
                kind: MowingStartedTag::MowingStarted,
            }),
            EventDetail::MowingFinished {} => EventDetails::MowingFinished(MowingFinishedDetails {
                kind: MowingFinishedTag::MowingFinished,
            }),
            EventDetail::BladeDue {
                blade_since_reset_ms,
                threshold_ms,
            } => EventDetails::BladeDue(BladeDueDetails {
                kind: BladeDueTag::BladeDue,
                blade_since_reset_seconds: seconds(blade_since_reset_ms),
                blade_threshold_seconds: seconds(threshold_ms),
            }),
            EventDetail::ZoneEntered { zone_id, zone_name } => {
                EventDetails::ZoneEntered(ZoneEnteredDetails {
                    kind: ZoneEnteredTag::ZoneEntered,
                    zone_id,
                    zone_name,
                })
            }
            EventDetail::ZoneLeft { zone_id, zone_name } => {
                EventDetails::ZoneLeft(ZoneLeftDetails {
                    kind: ZoneLeftTag::ZoneLeft,
                    zone_id,
                    zone_name,
                })
            }
            EventDetail::WentOffline { last_seen_at } => {
                EventDetails::WentOffline(WentOfflineDetails {
                    kind: WentOfflineTag::WentOffline,
                    last_seen_at,
                })
            }
            EventDetail::CameOnline { silent_since } => {
                EventDetails::CameOnline(CameOnlineDetails {
                    kind: CameOnlineTag::CameOnline,
                    last_seen_at: silent_since,
                })
            }
            EventDetail::SessionEnded {
                session_id,
                started_at,
                ended_at,
                end_reason,
                error_code,
                breaks,
                mowing_seconds,
                blade_seconds,
                distance_m,
            } => EventDetails::SessionEnded(SessionEndedDetails {
                kind: SessionEndedTag::SessionEnded,
                session_id,
                started_at,
                ended_at,
                end_reason: end_reason.into(),
                error_code,
                breaks,
                mowing_seconds,
                blade_seconds,
                distance_m,
            }),
        }
    }
}
