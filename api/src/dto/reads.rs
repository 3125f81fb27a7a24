//! A mower's history, track (JSON and GeoJSON) and day totals, and the parameters that ask for
//! them.

use super::{seconds, Activity, LawnMowerActivity};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::{DayTotals, HistoryRow, PositionRow};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// The window and page of a history or track request.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowParams {
    /// Only states observed at or after this instant (RFC 3339). Absent: from the oldest kept.
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: Option<DateTime<Utc>>,
    /// Only states observed before this instant (RFC 3339; exclusive). Absent: up to the newest.
    #[param(example = "2026-06-02T00:00:00Z")]
    pub to: Option<DateTime<Utc>>,
    /// The most items to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged (with the same
    /// `from` and `to`). Absent (or empty) for the first page.
    #[param(example = "aGlzdG9yeToxNzgwMzE1MjMwMDAwMDAw")]
    pub cursor: Option<String>,
}

/// How to answer a track on the JSON operation (an undocumented compatibility query: see
/// `get_mower_track`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrackFormat {
    /// `application/json`: a page of positions.
    #[default]
    Json,
    /// `application/geo+json`: a GeoJSON `FeatureCollection` with one `LineString`.
    Geojson,
}

/// The window and page of a track request.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TrackParams {
    /// Only positions observed at or after this instant (RFC 3339). Absent: from the oldest kept.
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: Option<DateTime<Utc>>,
    /// Only positions observed before this instant (RFC 3339; exclusive). Absent: up to the
    /// newest.
    #[param(example = "2026-06-02T00:00:00Z")]
    pub to: Option<DateTime<Utc>>,
    /// The most positions to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged (with the same
    /// `from` and `to`). Absent (or empty) for the first page. A cursor of the JSON track is a
    /// cursor of the GeoJSON track and back.
    #[param(example = "dHJhY2s6MTc4MDMxNTIzMDAwMDAwMA")]
    pub cursor: Option<String>,
    /// Kept for clients written before the GeoJSON track had its own operation (decision 111),
    /// and left out of the document: one operation answering two schemas by a query parameter
    /// is what generated clients could not read.
    #[param(ignore)]
    pub format: Option<TrackFormat>,
}

impl From<&TrackParams> for WindowParams {
    fn from(track: &TrackParams) -> Self {
        Self {
            from: track.from,
            to: track.to,
            limit: track.limit,
            cursor: track.cursor.clone(),
        }
    }
}

/// The range of a day totals request.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DayParams {
    /// The first local day (`YYYY-MM-DD`, inclusive).
    #[param(example = "2026-06-01")]
    pub from: NaiveDate,
    /// The last local day (`YYYY-MM-DD`, inclusive); at most 365 days after `from`.
    #[param(example = "2026-06-07")]
    pub to: NaiveDate,
}

/// One stored state of a mower, as history keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HistoryItem {
    /// When the mower observed this state (UTC, RFC 3339, microseconds); the key of the history.
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub observed_at: DateTime<Utc>,
    /// What the mower was doing.
    pub activity: Activity,
    /// The same activity mapped onto Home Assistant's `lawn_mower` entity.
    pub lawn_mower_activity: LawnMowerActivity,
    /// Battery charge in percent, 0 to 100, if reported.
    #[schema(required = true, example = 87, minimum = 0, maximum = 100)]
    pub battery_percent: Option<u8>,
    /// The vendor's error code, if the mower reported one.
    #[schema(required = true, example = json!(null))]
    pub error_code: Option<String>,
    /// Whether the blade was turning.
    #[schema(example = true)]
    pub blade_on: bool,
}

impl From<&HistoryRow> for HistoryItem {
    fn from(row: &HistoryRow) -> Self {
        Self {
            observed_at: row.observed_at,
            activity: row.activity.into(),
            lawn_mower_activity: row.activity.lawn_mower().into(),
            battery_percent: row.battery_percent,
            error_code: row.error_code.clone(),
            blade_on: row.blade_on,
        }
    }
}

/// A page of a mower's history, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HistoryPage {
    /// The mower this history is of.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// The states, in `observed_at` order.
    pub items: Vec<HistoryItem>,
    /// The most items this page could have had (the request's `limit`).
    #[schema(example = 100)]
    pub limit: u32,
    /// Whether more states of the window follow this page.
    #[schema(example = true)]
    pub truncated: bool,
    /// Pass it as `cursor` (with the same `from` and `to`) to get the next page; `null` on the
    /// last page.
    #[schema(required = true, example = "aGlzdG9yeToxNzgwMzE1MjMwMDAwMDAw")]
    pub next_cursor: Option<String>,
    /// Where the kept history begins, when the store has dropped older states: the embedded
    /// memory store keeps the newest `SWATH_MEMORY_HISTORY_PER_MOWER` states per mower, and once
    /// it has dropped some, this is the `observed_at` of the oldest state kept (UTC, RFC 3339).
    /// Every state from it on is kept; states before it may be missing. The same on every page,
    /// whatever the window. `null` when no state of this mower was dropped for that bound (always
    /// with PostgreSQL, which keeps every state until retention removes it by age).
    #[schema(required = true, example = "2026-06-01T12:00:00Z")]
    pub oldest_kept: Option<DateTime<Utc>>,
}

impl HistoryPage {
    /// A page of the mower `mower_id`'s history as `page` cut it at `limit`.
    pub(crate) fn new(
        mower_id: Uuid,
        page: crate::page::Cut<HistoryRow>,
        limit: usize,
        oldest_kept: Option<DateTime<Utc>>,
    ) -> Self {
        HistoryPage {
            mower_id,
            items: page.rows.iter().map(HistoryItem::from).collect(),
            next_cursor: page.next_cursor,
            limit: limit as u32,
            truncated: page.truncated,
            oldest_kept,
        }
    }
}

/// One reported position of a mower.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrackPoint {
    /// When the mower was here (UTC, RFC 3339, microseconds); the key of the track.
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub observed_at: DateTime<Utc>,
    /// Latitude in degrees, -90 to 90.
    #[schema(example = 52.5163)]
    pub lat: f64,
    /// Longitude in degrees, -180 to 180.
    #[schema(example = 13.3777)]
    pub lon: f64,
    /// Radius of the 1-sigma accuracy circle in metres, if the mower knew it.
    #[schema(required = true, example = 0.4)]
    pub accuracy_m: Option<f64>,
    /// Heading in degrees clockwise from north, if the mower knew it.
    #[schema(required = true, example = 270.0)]
    pub heading_deg: Option<f64>,
}

impl From<&PositionRow> for TrackPoint {
    fn from(row: &PositionRow) -> Self {
        Self {
            observed_at: row.observed_at,
            lat: row.lat,
            lon: row.lon,
            accuracy_m: row.accuracy_m,
            heading_deg: row.heading_deg,
        }
    }
}

/// A page of a mower's track, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrackPage {
    /// The mower this track is of.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// The positions, in `observed_at` order.
    pub items: Vec<TrackPoint>,
    /// The most items this page could have had (the request's `limit`).
    #[schema(example = 100)]
    pub limit: u32,
    /// Whether more positions of the window follow this page.
    #[schema(example = false)]
    pub truncated: bool,
    /// Pass it as `cursor` (with the same `from` and `to`) to get the next page; `null` on the
    /// last page.
    #[schema(required = true, example = json!(null))]
    pub next_cursor: Option<String>,
    /// Where the kept track begins, when the store has dropped older positions: the embedded
    /// memory store keeps the newest `SWATH_MEMORY_HISTORY_PER_MOWER` positions per mower, and
    /// once it has dropped some, this is the `observed_at` of the oldest position kept (UTC,
    /// RFC 3339). Every position from it on is kept; positions before it may be missing. The
    /// same on every page, whatever the window. `null` when no position of this mower was
    /// dropped for that bound (always with PostgreSQL, which keeps every position until
    /// retention removes it by age).
    #[schema(required = true, example = "2026-06-01T12:00:00Z")]
    pub oldest_kept: Option<DateTime<Utc>>,
}

/// The GeoJSON `FeatureCollection` type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = "FeatureCollection")]
pub enum FeatureCollectionType {
    FeatureCollection,
}

/// The GeoJSON `Feature` type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = "Feature")]
pub enum FeatureType {
    Feature,
}

/// The GeoJSON `LineString` type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = "LineString")]
pub enum LineStringType {
    LineString,
}

/// The GeoJSON `Point` type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = "Point")]
pub enum PointType {
    Point,
}

/// A path through two or more positions, in time order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LineString {
    /// Always `LineString`.
    #[serde(rename = "type")]
    pub type_: LineStringType,
    /// `[longitude, latitude]` pairs, in time order.
    #[schema(example = json!([[13.3777, 52.5163], [13.3779, 52.5164]]))]
    pub coordinates: Vec<[f64; 2]>,
}

/// A single position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Point {
    /// Always `Point`.
    #[serde(rename = "type")]
    pub type_: PointType,
    /// `[longitude, latitude]`.
    #[schema(example = json!([13.3777, 52.5163]))]
    pub coordinates: [f64; 2],
}

/// The geometry of a track page: a `LineString` through its positions (two or more), or a
/// `Point` when the page has one position. Coordinates are `[longitude, latitude]` (RFC 7946).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TrackGeometry {
    LineString(LineString),
    Point(Point),
}

/// The properties of a track feature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrackProperties {
    /// The mower this track is of.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// When the mower was at each coordinate, in the same order (UTC, RFC 3339).
    #[schema(example = json!(["2026-06-01T12:00:00Z", "2026-06-01T12:00:01Z"]))]
    pub times: Vec<DateTime<Utc>>,
}

/// A GeoJSON feature: a mower's path during the page's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrackFeature {
    /// Always `Feature`.
    #[serde(rename = "type")]
    pub type_: FeatureType,
    /// The path (`LineString`) or the single position (`Point`).
    pub geometry: TrackGeometry,
    /// The mower and the time of each coordinate.
    pub properties: TrackProperties,
}

/// A page of a mower's track as a GeoJSON `FeatureCollection` (RFC 7946): one feature with the
/// page's positions (none when the page is empty). The paging members are foreign members, as
/// RFC 7946 §6.1 allows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrackFeatureCollection {
    /// Always `FeatureCollection`.
    #[serde(rename = "type")]
    pub type_: FeatureCollectionType,
    /// The track feature; empty when the page has no position.
    pub features: Vec<TrackFeature>,
    /// The most positions this page could have had (the request's `limit`).
    #[schema(example = 100)]
    pub limit: u32,
    /// Whether more positions of the window follow this page.
    #[schema(example = false)]
    pub truncated: bool,
    /// Pass it as `cursor` (with the same `from`, `to` and `format`) to get the next page;
    /// `null` on the last page.
    #[schema(required = true, example = json!(null))]
    pub next_cursor: Option<String>,
    /// Where the kept track begins, when the store has dropped older positions (a foreign
    /// member, like the paging ones): the `observed_at` of the oldest position kept, after the
    /// embedded memory store dropped older ones beyond its `SWATH_MEMORY_HISTORY_PER_MOWER`
    /// positions per mower. Positions before it may be missing. `null` when none was dropped for
    /// that bound (always with PostgreSQL).
    #[schema(required = true, example = json!(null))]
    pub oldest_kept: Option<DateTime<Utc>>,
}

impl TrackFeatureCollection {
    pub fn new(page: TrackPage) -> Self {
        let coordinates: Vec<[f64; 2]> = page.items.iter().map(|p| [p.lon, p.lat]).collect();
        let geometry = match coordinates.as_slice() {
            [] => None,
            [single] => Some(TrackGeometry::Point(Point {
                type_: PointType::Point,
                coordinates: *single,
            })),
            _ => Some(TrackGeometry::LineString(LineString {
                type_: LineStringType::LineString,
                coordinates,
            })),
        };
        Self {
            type_: FeatureCollectionType::FeatureCollection,
            features: geometry
                .map(|geometry| TrackFeature {
                    type_: FeatureType::Feature,
                    geometry,
                    properties: TrackProperties {
                        mower_id: page.mower_id,
                        times: page.items.iter().map(|p| p.observed_at).collect(),
                    },
                })
                .into_iter()
                .collect(),
            limit: page.limit,
            truncated: page.truncated,
            next_cursor: page.next_cursor,
            oldest_kept: page.oldest_kept,
        }
    }
}

/// A mower's totals of one local day of its site (docs/rules.md §3, W5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DayItem {
    /// The local date in the site's time zone (`YYYY-MM-DD`).
    #[schema(example = "2026-06-01")]
    pub day: NaiveDate,
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
    #[schema(example = 1)]
    pub error_count: i64,
    /// How many times the mower entered the `charging` activity.
    #[schema(example = 2)]
    pub charge_count: i64,
    /// How many states advanced the totals on this day.
    #[schema(example = 3600)]
    pub state_count: i64,
}

impl From<&DayTotals> for DayItem {
    fn from(d: &DayTotals) -> Self {
        Self {
            day: d.day,
            mowing_seconds: seconds(d.mowing_ms),
            blade_seconds: seconds(d.blade_ms),
            distance_m: d.distance_mm as f64 / 1000.0,
            error_count: d.error_count,
            charge_count: d.charge_count,
            state_count: d.state_count,
        }
    }
}

/// A mower's day totals over a range of local days.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DayList {
    /// The mower these totals are of.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// The first day of the range (inclusive).
    #[schema(example = "2026-06-01")]
    pub from: NaiveDate,
    /// The last day of the range (inclusive).
    #[schema(example = "2026-06-07")]
    pub to: NaiveDate,
    /// The time zone of the mower's site, which decides the days.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: String,
    /// The days of the range on which the mower counted anything, in date order; days without
    /// totals are left out.
    pub items: Vec<DayItem>,
}
