//! Notifications: a mower's geofence and virtual zones, blade resets, the events feed, open
//! alerts and the scheduler's busy check (docs/rules.md §3 W6/W7, §4).
//!
//! Every route that names a mower checks its visibility first, so a mower of another account
//! answers the `404` of an unknown id before any notification data is read, and keeps only rows
//! of the principal's account (`swath_application::MowerReads`). The feeds filter by the
//! principal's visible mowers inside the store's query, before the limit.
//!
//! One module per resource: [`geofence`], [`zones`], [`blade`], [`events`], [`alerts`] and
//! [`busy`]; their documents are in `crate::dto::notifications` (an event's details in
//! `crate::dto::event_details`), like every document of the API (decision 158). The feeds page
//! like every other list, through `crate::page`.

pub mod alerts;
pub mod blade;
pub mod busy;
pub mod events;
pub mod geofence;
pub mod zones;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "notifications";
