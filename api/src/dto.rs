//! The documents the API answers: typed DTOs built from domain rows, never the rows themselves.
//!
//! Keeping them apart lets the stores change their rows (integer milliseconds and millimetres,
//! columns added for the write rules) without changing the API, which speaks seconds and metres
//! (docs/rules.md §7). Every optional field is serialised as `null` rather than left out, so that every
//! document of a type has the same keys: simpler for generated SDKs and snapshot tests.
//!
//! Every request and answer type of the API is declared here (`ToSchema`, `IntoParams`), one
//! module per resource; the route modules hold the handlers and their `#[utoipa::path]`, which
//! name these types (decision 158).
//!
//! # Layout
//! - this module: mowers with their latest states and health totals, and `list_page!`, the
//!   declaration of every paged list.
//! - [`params`]: the parameters many operations share (paging, `If-None-Match`, a path's id).
//! - [`answers`]: the answers many operations share (refusals, `304`s), written once.
//! - [`directory`]: accounts, sites, mowers' requests, tokens.
//! - [`reads`]: history, track (JSON and GeoJSON), day totals, and their parameters.
//! - [`exports`]: the CSV rows (history, track, days, events) and the exports' parameters.
//! - [`ingest`]: `POST /v1/states`.
//! - [`imports`]: `POST /v1/imports` and the import's document.
//! - [`webhooks`]: webhook endpoints and their deliveries.
//! - [`notifications`]: alerts, events (their details in [`event_details`]), geofences, zones,
//!   busy statuses, and the feeds' parameters.
//! - [`assignments`]: the operator assignments of a mower.
//! - [`live_views`]: the live views (fleet dashboard, site wall, health wall).
//! - [`live_stream`]: the live stream's filters and events.
//! - [`operations`]: readiness and the OpenAPI document.

/// A page of one of the API's lists, the one way every list is declared: its `items`, then the
/// paging members. Three forms, their wording fixed by the published document: the directory's
/// lists (sites, mowers, tokens, imports, webhooks, deliveries) answer `items, limit, truncated,
/// next_cursor` with examples; the notification feeds (`feed`: events, alerts) answer `items,
/// truncated, limit, next_cursor` in words of their own; both are built from a cut by
/// [`crate::page::Cut::page`] through [`crate::page::Paged`]. The live views' lists (`window`)
/// have no cursor: `items, truncated, limit`, made by `$name::of` from the use case's window.
macro_rules! list_page {
    (
        $(#[$page:meta])*
        $name:ident: $item:ty,
        $(#[$items:meta])*
        items,
        $(#[$truncated:meta])*
        truncated
    ) => {
        $(#[$page])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        pub struct $name {
            $(#[$items])*
            pub items: Vec<$item>,
            /// The most items this page could have had (the request's `limit`).
            #[schema(example = 100)]
            pub limit: u32,
            $(#[$truncated])*
            #[schema(example = false)]
            pub truncated: bool,
            /// Pass it as `cursor` to get the next page; `null` on the last page.
            #[schema(required = true, example = json!(null))]
            pub next_cursor: Option<String>,
        }
        list_page!(@paged $name: $item);
    };
    (
        $(#[$page:meta])*
        feed $name:ident: $item:ty,
        $(#[$items:meta])*
        items,
        $(#[$truncated:meta])*
        truncated,
        $(#[$next:meta])*
        next_cursor
    ) => {
        $(#[$page])*
        #[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        pub struct $name {
            $(#[$items])*
            pub items: Vec<$item>,
            $(#[$truncated])*
            pub truncated: bool,
            /// The page size asked for.
            pub limit: u32,
            $(#[$next])*
            #[schema(required = true)]
            pub next_cursor: Option<String>,
        }
        list_page!(@paged $name: $item);
    };
    (
        $(#[$list:meta])*
        window $name:ident: $item:ty,
        $(#[$items:meta])*
        items,
        $(#[$truncated:meta])*
        truncated,
        $(#[$limit:meta])*
        limit
    ) => {
        $(#[$list])*
        #[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        pub struct $name {
            $(#[$items])*
            pub items: Vec<$item>,
            $(#[$truncated])*
            pub truncated: bool,
            $(#[$limit])*
            pub limit: u32,
        }

        impl $name {
            fn of<T>(
                window: swath_application::projections::Window<T>,
                item: impl FnMut(T) -> $item,
            ) -> Self {
                Self {
                    items: window.items.into_iter().map(item).collect(),
                    truncated: window.truncated,
                    limit: window.limit as u32,
                }
            }
        }
    };
    (@paged $name:ident: $item:ty) => {
        impl $crate::page::Paged for $name {
            type Item = $item;
            fn of(
                items: Vec<$item>,
                limit: usize,
                truncated: bool,
                next_cursor: Option<String>,
            ) -> Self {
                Self {
                    items,
                    limit: limit as u32,
                    truncated,
                    next_cursor,
                }
            }
        }
    };
}

pub mod answers;
pub mod assignments;
pub mod directory;
pub mod event_details;
pub mod exports;
pub mod imports;
pub mod ingest;
pub mod live_stream;
pub mod live_views;
pub mod notifications;
pub mod operations;
pub mod params;
pub mod reads;
pub mod sessions;
pub mod webhooks;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use swath_application::availability;
use swath_application::MowerView;
use swath_domain::{self as domain, HealthTotals, LatestRow, Mower};
use utoipa::ToSchema;
use uuid::Uuid;

/// What a mower is doing, as its gateway reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "mowing")]
pub enum Activity {
    Mowing,
    Leaving,
    Returning,
    Docked,
    Charging,
    Paused,
    Idle,
    Error,
}

impl From<domain::Activity> for Activity {
    fn from(a: domain::Activity) -> Self {
        match a {
            domain::Activity::Mowing => Activity::Mowing,
            domain::Activity::Leaving => Activity::Leaving,
            domain::Activity::Returning => Activity::Returning,
            domain::Activity::Docked => Activity::Docked,
            domain::Activity::Charging => Activity::Charging,
            domain::Activity::Paused => Activity::Paused,
            domain::Activity::Idle => Activity::Idle,
            domain::Activity::Error => Activity::Error,
        }
    }
}

/// The activity of Home Assistant's `lawn_mower` entity: leaving counts as mowing, charging as
/// docked, idle as paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "mowing")]
pub enum LawnMowerActivity {
    Mowing,
    Docked,
    Paused,
    Returning,
    Error,
}

impl From<domain::LawnMowerActivity> for LawnMowerActivity {
    fn from(a: domain::LawnMowerActivity) -> Self {
        match a {
            domain::LawnMowerActivity::Mowing => LawnMowerActivity::Mowing,
            domain::LawnMowerActivity::Docked => LawnMowerActivity::Docked,
            domain::LawnMowerActivity::Paused => LawnMowerActivity::Paused,
            domain::LawnMowerActivity::Returning => LawnMowerActivity::Returning,
            domain::LawnMowerActivity::Error => LawnMowerActivity::Error,
        }
    }
}

/// A WGS 84 position, as the mower reported it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Position {
    /// Latitude in degrees, -90 to 90.
    #[schema(example = 52.5163)]
    pub lat: f64,
    /// Longitude in degrees, -180 to 180.
    #[schema(example = 13.3777)]
    pub lon: f64,
    /// Radius of the 1-sigma accuracy circle in metres, if the mower knows it.
    #[schema(required = true, example = 0.4)]
    pub accuracy_m: Option<f64>,
    /// Heading in degrees clockwise from north, 0 to 360, if the mower knows it.
    #[schema(required = true, example = 270.0)]
    pub heading_deg: Option<f64>,
}

impl From<&domain::Position> for Position {
    fn from(p: &domain::Position) -> Self {
        Self {
            lat: p.lat,
            lon: p.lon,
            accuracy_m: p.accuracy_m,
            heading_deg: p.heading_deg,
        }
    }
}

/// The latest state of a mower: the newest state report Swath stored for it, as the gateway sent
/// it, plus when Swath received it and the Home Assistant activity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MowerState {
    /// The mower this state is of.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// When the mower observed this state (UTC, RFC 3339, microseconds).
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub observed_at: DateTime<Utc>,
    /// When Swath received this state (UTC, RFC 3339): `observed_at` plus the gateway's delay.
    /// It does not move while the mower is quiet.
    #[schema(example = "2026-06-01T12:00:00.250Z")]
    pub last_seen_at: DateTime<Utc>,
    /// What the mower is doing, as reported.
    pub activity: Activity,
    /// The same activity mapped onto Home Assistant's `lawn_mower` entity.
    pub lawn_mower_activity: LawnMowerActivity,
    /// Battery charge in percent, 0 to 100, if reported.
    #[schema(required = true, example = 87, minimum = 0, maximum = 100)]
    pub battery_percent: Option<u8>,
    /// Where the mower was, if reported.
    #[schema(required = true)]
    pub position: Option<Position>,
    /// Whether the blade was turning.
    #[schema(example = true)]
    pub blade_on: bool,
    /// The vendor's error code while the mower reports one (at most 64 characters).
    #[schema(required = true, example = "BLADE_BLOCKED")]
    pub error_code: Option<String>,
    /// The vendor's raw state name (at most 64 characters), if reported.
    #[schema(required = true, example = "MOWING_LANE")]
    pub vendor_state: Option<String>,
    /// The report's free-form `extra` object, if it had one.
    #[schema(required = true, value_type = Option<Extra>, example = json!({"zone": "front lawn"}))]
    pub extra: Option<Map<String, Value>>,
    /// Top-level fields of the report that Swath does not know, kept as they came (an empty
    /// object when there were none). Kept apart from the known fields so that no gateway field can
    /// shadow one of them.
    #[schema(value_type = UnknownFields)]
    pub unknown_fields: Map<String, Value>,
}

impl From<&LatestRow> for MowerState {
    fn from(row: &LatestRow) -> Self {
        let s = &row.state;
        Self {
            mower_id: row.mower_id.0,
            observed_at: row.observed_at,
            last_seen_at: row.last_seen_at,
            activity: s.activity.into(),
            lawn_mower_activity: s.activity.lawn_mower().into(),
            battery_percent: s.battery_percent,
            position: s.position.as_ref().map(Position::from),
            blade_on: s.blade_on,
            error_code: s.error_code.clone(),
            vendor_state: s.vendor_state.clone(),
            extra: s.extra.clone(),
            unknown_fields: s.unknown.clone(),
        }
    }
}

/// A mower of the principal's account, with its latest state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MowerSummary {
    /// The mower's id, the one its gateway reports with.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub id: Uuid,
    /// The site the mower works on.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-00000000a001")]
    pub site_id: Uuid,
    /// The mower's display name.
    #[schema(example = "Front lawn")]
    pub name: String,
    /// The vendor's model name.
    #[schema(example = "Automower 450X")]
    pub model: String,
    /// The vendor's serial number.
    #[schema(example = "SN-000042")]
    pub serial: String,
    /// Where the mower comes in lists; lists are ordered by display order, then name, then id.
    #[schema(example = 0)]
    pub display_order: i32,
    /// Blade time after which the blade is due for replacement, in seconds.
    #[schema(example = 360000.0)]
    pub blade_threshold_seconds: f64,
    /// The name of the mower's site.
    #[schema(example = "Park North")]
    pub site_name: String,
    /// Whether the mower is online: it has reported, and has not been silent for the offline
    /// period (`SWATH_OFFLINE_AFTER_SECONDS`, default 600 s; docs/rules.md §4). The same rule as
    /// the live views' `offline`.
    #[schema(example = false)]
    pub online: bool,
    /// When Swath last received a state of the mower (UTC, to the microsecond); `null` while it
    /// has not reported.
    #[schema(required = true, example = "2026-05-01T10:15:30.123456Z")]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Why the mower is not online: `never_reported`, or `silent` (no state for the offline
    /// period: its `offline` alert is open); `null` while online.
    #[schema(required = true)]
    pub offline_reason: Option<OfflineReason>,
    /// When the mower went offline (its `offline` alert was raised); `null` unless
    /// `offline_reason` is `silent`.
    #[schema(required = true, example = "2026-05-01T10:25:30.123456Z")]
    pub offline_since: Option<DateTime<Utc>>,
    /// The latest state, or `null` while the mower has not reported yet.
    #[schema(required = true)]
    pub state: Option<MowerState>,
}

/// Why a mower is not online.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OfflineReason {
    /// Silent for the offline period.
    Silent,
    /// No state was ever received.
    NeverReported,
}

impl From<&MowerView> for MowerSummary {
    /// A mower as every read shows it: its site's name, its availability and its latest state.
    fn from(view: &MowerView) -> Self {
        let (mower, availability) = (&view.mower, &view.availability);
        Self {
            id: mower.id.0,
            site_id: mower.site_id.0,
            site_name: view.site_name.clone(),
            online: availability.online,
            last_seen_at: availability.last_seen_at,
            offline_reason: availability.offline_reason.map(|r| match r {
                availability::OfflineReason::NeverReported => OfflineReason::NeverReported,
                availability::OfflineReason::Silent => OfflineReason::Silent,
            }),
            offline_since: availability.offline_since,
            name: mower.name.clone(),
            model: mower.model.clone(),
            serial: mower.serial.clone(),
            display_order: mower.display_order,
            blade_threshold_seconds: seconds(mower.blade_threshold_ms),
            state: view.latest.as_ref().map(MowerState::from),
        }
    }
}

list_page! {
    /// A page of the mowers the principal may see, each with its latest state.
    MowerList: MowerSummary,
    /// The mowers, ordered by display order, then name (byte by byte), then id.
    items,
    /// Whether more mowers follow this page.
    truncated
}

/// A mower's running health totals (docs/rules.md §3, W4): time and distance attributed to its states,
/// error and charge counts, and blade wear.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MowerHealth {
    /// The mower these totals are of.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// Time spent mowing, in seconds.
    #[schema(example = 5400.0)]
    pub mowing_seconds: f64,
    /// Time with the blade turning, in seconds.
    #[schema(example = 5100.5)]
    pub blade_seconds: f64,
    /// Distance driven while mowing, in metres.
    #[schema(example = 2140.125)]
    pub distance_m: f64,
    /// How many times the mower entered the `error` activity.
    #[schema(example = 2)]
    pub error_count: i64,
    /// How many times the mower entered the `charging` activity.
    #[schema(example = 3)]
    pub charge_count: i64,
    /// Blade time since the blade was last replaced, in seconds.
    #[schema(example = 5100.5)]
    pub blade_since_reset_seconds: f64,
    /// Blade time after which the blade is due, in seconds (the mower's threshold).
    #[schema(example = 360000.0)]
    pub blade_threshold_seconds: f64,
    /// Whether the blade time since the last reset has reached the threshold.
    #[schema(example = false)]
    pub blade_due: bool,
    /// Every interval up to this instant is counted (UTC, RFC 3339); `null` while the mower has
    /// not reported yet (then every total is zero).
    #[schema(required = true, example = "2026-06-01T12:00:00Z")]
    pub counted_until: Option<DateTime<Utc>>,
}

impl MowerHealth {
    pub fn new(mower: &Mower, totals: Option<&HealthTotals>) -> Self {
        let get = |f: fn(&HealthTotals) -> i64| totals.map(f).unwrap_or(0);
        let blade_since_reset_ms = get(|t| t.blade_since_reset_ms);
        Self {
            mower_id: mower.id.0,
            mowing_seconds: seconds(get(|t| t.mowing_ms)),
            blade_seconds: seconds(get(|t| t.blade_ms)),
            distance_m: get(|t| t.distance_mm) as f64 / 1000.0,
            error_count: get(|t| t.error_count),
            charge_count: get(|t| t.charge_count),
            blade_since_reset_seconds: seconds(blade_since_reset_ms),
            blade_threshold_seconds: seconds(mower.blade_threshold_ms),
            blade_due: totals.is_some_and(|t| t.blade_due(mower.blade_threshold_ms)),
            counted_until: totals.map(|t| t.counted_until),
        }
    }
}

/// The name `value` (a unit variant) has in the documents: its serde name.
fn wire_name(value: impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        _ => String::new(),
    }
}

/// The unit variant named `name` in the documents.
fn from_wire_name<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(Value::String(name.to_owned())).ok()
}

/// Milliseconds to seconds. Exact for every duration a mower can accumulate (f64 holds integers
/// up to 2^53 ms, some 285 000 years).
fn seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

// Only a schema: a named one, so that generated clients call its model `Extra` instead of a name
// made from where it appears (`MowerStateExtraType0`, decision 112).
/// A state report's free-form `extra` object, kept as it came.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object, example = json!({"zone": "front lawn"}))]
pub struct Extra(pub Map<String, Value>);

// Named for the same reason as `Extra` (otherwise `MowerStateUnknownFields`).
/// The top-level fields of a state report that Swath does not know, kept as they came.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object, example = json!({"firmware": "4.2.1"}))]
pub struct UnknownFields(pub Map<String, Value>);
