//! Notification rules (docs/rules.md §4): the watch row of a mower, the events its states derive and the
//! alerts those open and clear; virtual zones (W7, [`zones`]); the scheduler's busy check
//! ([`busy`]). Pure, like the write rules: stores read rows, these functions advance them in
//! memory, stores write what changed.
//!
//! # Determinism
//! A batch must give exactly what the same states watched one at a time give: the same events,
//! alerts and watch rows, in every store. So nothing here reads a clock or a random source: an
//! event's id is derived from what it is about ([`event_id`]: mower, kind, instant and, for zones,
//! the zone), an alert's id is the id of the event that raised it, and every instant is an
//! `observed_at` or a receipt time the caller passes in once per batch.
//!
//! # About the present
//! Unlike the totals (W4, W5), which merge a late state between its neighbours, the notification
//! rules only look forward: a state not newer than `watched_until` (a redelivery, a backfill, a
//! state overtaken by a newer one) derives no event, opens or clears no alert, and W7's zone
//! watch skips positions older than the ones it evaluated. An imported week of history never pages
//! anyone. The one event a late state can raise is W6's `blade_due`, because it follows the
//! (corrected) blade time of the totals. Likewise `session_ended` (W8) follows the watcher's own
//! fold of the states it watched, not the stored sessions, which also merge late states.
//!
//! # Layout
//! - `events`: [`Event`], its kinds and details, and [`event_id`].
//! - `alerts`: [`Alert`], [`AlertKind`], [`Severity`] and the [`AlertChanges`] of a batch.
//! - `fold`: the [`Watch`] row, [`apply_watch`], [`went_offline`] and [`ingest_notifications`]
//!   (W6's [`IngestNotifications`]).
//! - `geofence`: a mower's stored [`Geofence`] (the polygon and its version).
//! - `session_end`: W8's `session_ended` and what the watch row keeps for it ([`SessionWatch`]).
//! - [`geometry`], [`zones`], [`busy`]: polygons and fences, W7, the scheduler's busy check.
//!
//! Everything is re-exported here, so callers name `swath_domain::watch::…` whatever the file.

pub mod busy;
pub mod geometry;
pub mod zones;

mod alerts;
mod events;
mod fold;
mod geofence;
mod session_end;

pub use alerts::{Alert, AlertChanges, AlertClear, AlertKind, ClearCause, ClearedAlert, Severity};
pub use events::{event_id, Event, EventDetail, EventKind};
pub use fold::{
    apply_watch, ingest_notifications, sweep_watch, went_offline, GeofenceRef, IngestNotifications,
    Watch, WatchChanges, WatchSnapshot,
};
pub use geofence::Geofence;
pub use geometry::{GeoPolygon, InvalidPolygon, Placement};
pub use session_end::{session_ended, SessionWatch};

use chrono::Duration;

/// `battery_low` is raised below this charge…
pub const BATTERY_LOW_BELOW: u8 = 20;
/// …and re-armed (its alert cleared) at this charge or above.
pub const BATTERY_REARM_AT: u8 = 30;
/// A mower silent for this long is offline, unless configured otherwise
/// (`SWATH_OFFLINE_AFTER_SECONDS`).
pub const DEFAULT_OFFLINE_AFTER: Duration = Duration::minutes(10);

/// Degrees rounded to 1e-7 (about a centimetre).
pub fn round_degrees(value: f64) -> f64 {
    (value * 1e7).round() / 1e7
}

/// Metres rounded to centimetres.
pub fn round_metres(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests;
