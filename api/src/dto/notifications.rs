//! The notification side's documents: alerts, events (their details by kind in
//! [`super::event_details`]), geofences, zones and busy statuses, and the feeds' parameters.

use super::event_details::EventDetails;
use crate::error::ApiError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::watch::busy::{is_busy, BusyStatus};
use swath_domain::watch::{self as rules, AlertKind, EventKind, GeoPolygon, Geofence};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// What an alert is about. One alert of a kind may be open per mower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = AlertKind)]
pub enum AlertKindDto {
    Error,
    Geofence,
    BatteryLow,
    BladeDue,
    Offline,
}

impl AlertKindDto {
    pub(crate) fn domain(self) -> AlertKind {
        match self {
            AlertKindDto::Error => AlertKind::Error,
            AlertKindDto::Geofence => AlertKind::Geofence,
            AlertKindDto::BatteryLow => AlertKind::BatteryLow,
            AlertKindDto::BladeDue => AlertKind::BladeDue,
            AlertKindDto::Offline => AlertKind::Offline,
        }
    }

    /// The document's kind of a domain alert kind (every view of alerts names them so).
    pub(crate) fn of(kind: AlertKind) -> Self {
        match kind {
            AlertKind::Error => AlertKindDto::Error,
            AlertKind::Geofence => AlertKindDto::Geofence,
            AlertKind::BatteryLow => AlertKindDto::BatteryLow,
            AlertKind::BladeDue => AlertKindDto::BladeDue,
            AlertKind::Offline => AlertKindDto::Offline,
        }
    }
}

/// How urgent an alert is: `critical` (outside the geofence: theft), `high` (error, offline),
/// `normal` (battery low), `low` (blade due).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = Severity)]
pub enum SeverityDto {
    Critical,
    High,
    Normal,
    Low,
}

impl SeverityDto {
    /// The document's severity of a domain severity.
    pub(crate) fn of(severity: rules::Severity) -> Self {
        match severity {
            rules::Severity::Critical => SeverityDto::Critical,
            rules::Severity::High => SeverityDto::High,
            rules::Severity::Normal => SeverityDto::Normal,
            rules::Severity::Low => SeverityDto::Low,
        }
    }
}

/// An open alert: raised by an event, open until the condition clears.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Alert)]
pub struct AlertDto {
    /// The id of the event that raised it.
    pub id: Uuid,
    /// What it is about.
    pub kind: AlertKindDto,
    /// How urgent it is.
    pub severity: SeverityDto,
    /// The mower.
    pub mower_id: Uuid,
    /// When it was raised (the raising event's `observed_at`).
    pub raised_at: DateTime<Utc>,
    /// The error code of an `error` alert.
    #[schema(required = true)]
    pub code: Option<String>,
}

impl From<rules::Alert> for AlertDto {
    fn from(a: rules::Alert) -> Self {
        Self {
            id: a.id,
            kind: AlertKindDto::of(a.kind),
            severity: SeverityDto::of(a.severity),
            mower_id: a.mower_id.0,
            raised_at: a.raised_at,
            code: a.code,
        }
    }
}

list_page! {
    /// A page of open alerts: most severe first, then newest.
    feed AlertPage: AlertDto,
    /// The open alerts of this page, ordered by severity (critical first), then `raised_at` and
    /// id, newest first.
    items,
    /// Whether more open alerts exist after this page.
    truncated,
    /// Pass as `cursor` for the next page; `null` on the last page.
    next_cursor
}

/// Filters and paging of the open alerts.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AlertParams {
    /// Only alerts of this mower.
    pub mower_id: Option<Uuid>,
    /// Only alerts of this kind.
    pub kind: Option<AlertKindDto>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged. Absent (or
    /// empty) for the first page.
    pub cursor: Option<String>,
}

/// Declares an enum with a variant per kind of derived event (named as the domain names them,
/// in the documents' order), then `$more`: the one list of the event kinds, which the events
/// feed's `EventKind` and the webhooks' `WebhookKind` both name.
macro_rules! event_kinds {
    ($(#[$meta:meta])* $name:ident { $($more:ident),* }) => {
        $(#[$meta])*
        pub enum $name {
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
            $($more,)*
        }
    };
}
pub(crate) use event_kinds;

event_kinds! {
    /// What an event is about. `error_*`, `geofence_*`, `battery_low`, `mowing_*` and `*_online`
    /// come from the watcher; `blade_due` and `zone_*` from ingestion; `went_offline` from the
    /// offline sweep; `session_ended` from the watcher, or from the offline sweep for a mower
    /// that stopped reporting after its session ended.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    #[schema(as = EventKind)]
    EventKindDto {}
}

impl EventKindDto {
    pub(crate) fn domain(self) -> EventKind {
        EventKind::parse(&super::wire_name(self)).unwrap_or(EventKind::ErrorRaised)
    }

    pub(crate) fn of(kind: EventKind) -> Self {
        super::from_wire_name(kind.as_str()).unwrap_or(EventKindDto::ErrorRaised)
    }
}

/// A derived event, as the feed answers it and the live stream sends it. (Each is also published
/// on `notifications.mower.<id>.<kind>`, in the service's internal form, not this document.)
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Event)]
pub struct EventDto {
    /// The event's id (also the bus de-duplication id); ids sort by `observed_at`.
    pub id: Uuid,
    /// What happened.
    pub kind: EventKindDto,
    /// The mower it happened to.
    pub mower_id: Uuid,
    /// The `observed_at` of the state that raised it; for `went_offline`, the moment the mower had
    /// been silent for the offline period; for `session_ended`, the session's end.
    pub observed_at: DateTime<Utc>,
    /// What the event carries: the fields of its kind, with the kind again.
    pub details: EventDetails,
}

impl From<rules::Event> for EventDto {
    fn from(e: rules::Event) -> Self {
        Self {
            id: e.id,
            kind: EventKindDto::of(e.kind()),
            mower_id: e.mower_id.0,
            observed_at: e.observed_at,
            details: EventDetails::from(&e.detail),
        }
    }
}

list_page! {
    /// A page of the events feed, newest first.
    feed EventPage: EventDto,
    /// The events of this page, newest first (by id).
    items,
    /// Whether more events exist after this page.
    truncated,
    /// Pass as `cursor` for the next (older) page; `null` on the last page.
    next_cursor
}

/// Filters and paging of the events feed.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventParams {
    /// Only events of this mower.
    pub mower_id: Option<Uuid>,
    /// Only events of this kind.
    pub kind: Option<EventKindDto>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged. Absent (or
    /// empty) for the first page.
    pub cursor: Option<String>,
}

/// A GeoJSON Polygon (RFC 7946 §3.1.6): `[lon, lat]` positions in degrees, each ring closed. It
/// must be a simple polygon: no ring crosses or touches itself, every hole lies inside the
/// exterior ring, holes neither cross each other nor lie inside each other; a `422` names what is
/// wrong.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"type": "Polygon", "coordinates": [[[13.4, 52.5], [13.401, 52.5], [13.401, 52.501], [13.4, 52.501], [13.4, 52.5]]]}))]
pub struct PolygonGeometry {
    /// Always `Polygon`.
    #[serde(rename = "type")]
    #[schema(example = "Polygon")]
    pub type_: String,
    /// The exterior ring, then any holes (the rules: [`polygon_coordinates`], its schema).
    #[schema(schema_with = polygon_coordinates)]
    pub coordinates: Vec<Vec<Vec<f64>>>,
}

/// The schema of [`PolygonGeometry::coordinates`]: utoipa's derive bounds only the outer array,
/// and every level of a request's arrays has its `maxItems` (issue 42).
fn polygon_coordinates() -> utoipa::openapi::schema::Array {
    use swath_domain::watch::geometry::MAX_VERTICES;
    use utoipa::openapi::schema::{ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
    let number = ObjectBuilder::new()
        .schema_type(Type::Number)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Double)));
    let position = ArrayBuilder::new().items(number).max_items(Some(3));
    let ring = ArrayBuilder::new()
        .items(position)
        .max_items(Some(MAX_VERTICES));
    ArrayBuilder::new()
        .items(ring)
        // A ring has at least four positions.
        .max_items(Some(MAX_VERTICES / 4))
        .description(Some(
            "The exterior ring, then any holes; each ring at least four `[lon, lat]` positions, \
             the last equal to the first. At most 1000 positions, spanning at most one degree (so \
             at most 250 rings; a position has at most three numbers, the third an altitude that \
             is ignored).",
        ))
        .build()
}

impl PolygonGeometry {
    /// The DTO of a stored polygon (zones share it).
    pub(crate) fn of(polygon: &GeoPolygon) -> Self {
        serde_json::from_value(polygon.to_geojson()).unwrap_or(PolygonGeometry {
            type_: "Polygon".into(),
            coordinates: Vec::new(),
        })
    }

    /// The domain polygon, or the `422` that says what is wrong with it, pointing at `pointer`
    /// (where the polygon is in the body).
    pub(crate) fn validate(&self, pointer: &str) -> Result<GeoPolygon, ApiError> {
        let value = serde_json::to_value(self).map_err(|e| ApiError::Internal(e.to_string()))?;
        GeoPolygon::from_geojson(&value).map_err(|e| ApiError::invalid(pointer, e.to_string()))
    }
}

/// A mower's geofence: leaving it (clearly, beyond the position's accuracy) raises the theft
/// alarm `geofence_left`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Geofence)]
pub struct GeofenceDto {
    /// The mower the geofence is of.
    pub mower_id: Uuid,
    /// Changes every time the geofence is replaced.
    pub version: Uuid,
    /// The fence.
    pub polygon: PolygonGeometry,
    /// When it was last replaced.
    pub updated_at: DateTime<Utc>,
}

impl From<Geofence> for GeofenceDto {
    fn from(g: Geofence) -> Self {
        Self {
            mower_id: g.mower_id.0,
            version: g.version,
            polygon: PolygonGeometry::of(&g.polygon),
            updated_at: g.updated_at,
        }
    }
}

/// A virtual zone: entering and leaving it raise `zone_entered` and `zone_left`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Zone)]
pub struct ZoneDto {
    /// The zone's id.
    pub id: Uuid,
    /// The mower the zone is of.
    pub mower_id: Uuid,
    /// Its name, shown in events.
    #[schema(example = "Roses")]
    pub name: String,
    /// Its area.
    pub polygon: PolygonGeometry,
    /// Whether the mower is in the zone now.
    pub occupied: bool,
    /// Since when the mower is in the zone (`null` when it is not).
    #[schema(required = true)]
    pub occupied_since: Option<DateTime<Utc>>,
    /// When the zone was added.
    pub created_at: DateTime<Utc>,
    /// When the zone was last changed.
    pub updated_at: DateTime<Utc>,
}

/// The zones of a mower, by name.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ZoneList {
    /// Every zone of the mower (at most 64), ordered by name, then id.
    pub items: Vec<ZoneDto>,
}

/// A zone to add, or the new name and area of a zone.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ZoneBody {
    /// 1 to 100 characters.
    #[schema(example = "Roses")]
    pub name: String,
    /// The zone's area.
    pub polygon: PolygonGeometry,
}

impl ZoneDto {
    /// The document of `zone`, occupied since `since` (`None`: not occupied).
    pub(crate) fn new(
        zone: swath_domain::watch::zones::Zone,
        since: Option<DateTime<Utc>>,
    ) -> Self {
        ZoneDto {
            id: zone.id,
            mower_id: zone.mower_id.0,
            polygon: PolygonGeometry::of(&zone.polygon),
            name: zone.name,
            occupied: since.is_some(),
            occupied_since: since,
            created_at: zone.created_at,
            updated_at: zone.updated_at,
        }
    }
}

impl ZoneBody {
    /// The zone's name and polygon as the use case takes them, or the `422` of the first problem.
    pub(crate) fn checked(&self) -> Result<(swath_domain::valid::Label, GeoPolygon), ApiError> {
        use swath_domain::valid::{Label, TextRule};
        let name = Label::new("name", self.name.as_str(), TextRule::ZONE_NAME)?;
        Ok((name, self.polygon.validate("/polygon")?))
    }
}

/// The scheduler's view of a mower: busy (on a run or in error) or free to start one.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Busy)]
pub struct BusyDto {
    /// The mower.
    pub mower_id: Uuid,
    /// `true` while mowing, leaving, returning, paused or in error; `false` when docked,
    /// charging or idle.
    pub busy: bool,
    /// The reported activity (`mowing`, `docked`, …).
    #[schema(example = "mowing")]
    pub activity: String,
    /// The `observed_at` of the report the status is from. Refreshed when the activity changes,
    /// at most every 30 s otherwise, or after a move of 100 m.
    pub observed_at: DateTime<Utc>,
    /// The position of that report, if it had one.
    #[schema(required = true)]
    pub lat: Option<f64>,
    /// The position of that report, if it had one.
    #[schema(required = true)]
    pub lon: Option<f64>,
    /// When the status was written.
    pub written_at: DateTime<Utc>,
}

impl From<BusyStatus> for BusyDto {
    fn from(s: BusyStatus) -> Self {
        Self {
            mower_id: s.mower_id.0,
            busy: is_busy(s.activity),
            activity: s.activity.as_str().to_owned(),
            observed_at: s.observed_at,
            lat: s.lat,
            lon: s.lon,
            written_at: s.written_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_round_trip() {
        for kind in EventKind::ALL {
            assert_eq!(EventKindDto::of(kind).domain(), kind);
        }
    }
}
