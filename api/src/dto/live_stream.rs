//! The live stream's documents (`GET /v1/live/stream`): its filters, and the `data` of its
//! events `event` and `alert` (an event `state` carries a [`super::MowerState`]).

use super::notifications::{AlertKindDto, EventDto};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::watch::{ClearCause, ClearedAlert};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// The stream's filters, all optional; lists are comma-separated.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamParams {
    /// Only these mowers (ids, comma-separated); ids the token cannot see match nothing.
    pub mowers: Option<String>,
    /// Only mowers of these sites (ids, comma-separated); sites the token cannot see match
    /// nothing.
    pub sites: Option<String>,
    /// Only these kinds of items, comma-separated: `state`, `alert` (alerts cleared without an
    /// event), or event kinds (`went_offline`, `came_online`, `error_raised`, …, as in
    /// `GET /v1/events`).
    pub kinds: Option<String>,
    /// `true`: a mower's state is sent only when, against the last one this stream sent of it,
    /// its activity, error code, battery band (10 points), blade or availability changed, or it
    /// moved more than 10 m. Events are always sent.
    pub changes_only: Option<bool>,
}

/// What an event raises or clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertChangeKind {
    Raised,
    Cleared,
}

/// The alert an event raised or cleared.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct StreamAlert {
    /// The alert's kind (one is open per kind and mower until cleared).
    pub kind: AlertKindDto,
    /// Whether the event raised the alert or cleared it.
    pub change: AlertChangeKind,
}

/// The `data` of an SSE event `event`: the event as `GET /v1/events` lists it, and the alert it
/// raised or cleared.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct StreamEvent {
    #[serde(flatten)]
    pub event: EventDto,
    /// `null`: the event raises or clears no alert (`mowing_*`, `zone_*`).
    // Not inlined: generated clients would name the inline object `StreamEventAlertType1`.
    #[schema(required = true)]
    pub alert: Option<StreamAlert>,
}

/// Why an alert was cleared without an event of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertClearCause {
    /// The battery reached 30 % again after `battery_low`.
    BatteryRecovered,
    /// The mower's geofence was removed while it was outside it (told with its next state).
    GeofenceRemoved,
    /// The blade was reset (`POST /v1/mowers/{id}/blade-reset`).
    BladeReset,
}

/// The `data` of an SSE event `alert`: an alert cleared without an event of its own. Alerts
/// raised, and cleared by an event (`came_online`, `error_cleared`, `geofence_returned`), come
/// as events `event` with their `alert`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct StreamAlertCleared {
    /// The mower whose alert was cleared.
    pub mower_id: Uuid,
    /// The alert's kind: `battery_low`, `geofence` or `blade_due`.
    pub kind: AlertKindDto,
    /// Always `cleared`.
    pub change: AlertChangeKind,
    /// When it was cleared: the `observed_at` of the state that cleared it, or the instant of
    /// the blade reset. From then on `GET /v1/alerts` no longer lists the alert.
    pub cleared_at: DateTime<Utc>,
    /// Why it was cleared.
    pub cause: AlertClearCause,
}

impl From<&ClearedAlert> for StreamAlertCleared {
    fn from(c: &ClearedAlert) -> Self {
        Self {
            mower_id: c.mower_id.0,
            kind: AlertKindDto::of(c.kind),
            change: AlertChangeKind::Cleared,
            cleared_at: c.cleared_at,
            cause: match c.cause {
                ClearCause::BatteryRecovered => AlertClearCause::BatteryRecovered,
                ClearCause::GeofenceRemoved => AlertClearCause::GeofenceRemoved,
                ClearCause::BladeReset => AlertClearCause::BladeReset,
            },
        }
    }
}
