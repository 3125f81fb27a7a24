//! Notifications: a mower's geofence and virtual zones, blade resets, the events feed, open
//! alerts and the scheduler's busy check (docs/rules.md §3 W6/W7, §4).
//!
//! Every route that names a mower checks its visibility first, so a mower of another account
//! answers the `404` of an unknown id before any notification data is read, and keeps only rows
//! of the principal's account (`swath_application::MowerData`). The feeds filter by the
//! principal's visible mowers inside the store's query, before the limit.
//!
//! One module per resource, each with its DTOs: [`geofence`], [`zones`], [`blade`], [`events`]
//! (its details in [`event_details`]), [`alerts`] and [`busy`]. The feeds page like every other
//! list, through `crate::page`.

pub mod alerts;
pub mod blade;
pub mod busy;
pub mod event_details;
pub mod events;
pub mod geofence;
pub mod zones;

pub use alerts::{AlertDto, AlertKindDto, AlertPage, AlertParams, SeverityDto};
pub use busy::BusyDto;
pub use event_details::EventDetails;
pub use events::{EventDto, EventKindDto, EventPage, EventParams};
pub use geofence::{GeofenceDto, PolygonGeometry};
pub use zones::{ZoneBody, ZoneDto, ZoneList, ZonePath};

use crate::error::ApiError;
use crate::state::{AppState, NotificationPorts};
use swath_application::ports::{chain, WatchError};

/// The OpenAPI tag of these routes.
pub const TAG: &str = "notifications";

impl From<WatchError> for ApiError {
    fn from(e: WatchError) -> Self {
        match e {
            WatchError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            WatchError::Corrupt(_) => ApiError::Internal(chain(&e).to_string()),
            WatchError::Limit(detail) => ApiError::Conflict(detail),
        }
    }
}

/// The notification side's ports, or `503` when the service was started without them.
fn ports(state: &AppState) -> Result<&NotificationPorts, ApiError> {
    state
        .notifications
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no notification store is configured".into()))
}
