//! CSV rows and the fleet-wide exports' parameters (issue 45, decisions 193 and 194).
//!
//! Every CSV row starts with the mower's id, so that a mower's page and a fleet-wide export have
//! the same columns; the other columns are the JSON item's fields, in its order and with its
//! names, units and values. Text a client or a gateway chose (an error code) is a text cell,
//! neutralised (`crate::csv`); the rest are values.

use super::notifications::EventDto;
use super::reads::DayItem;
use super::{Activity, LawnMowerActivity};
use crate::csv::{CsvRow, Record};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;
use swath_domain::{DayTotals, HistoryRow, PositionRow};
use utoipa::IntoParams;
use uuid::Uuid;

/// An example of a history CSV answer, for the document.
pub const HISTORY_CSV_EXAMPLE: &str =
    "mower_id,observed_at,activity,lawn_mower_activity,battery_percent,error_code,blade_on\r\n\
0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60,2026-06-01T12:00:00Z,mowing,mowing,87,,true\r\n";

/// An example of a track CSV answer, for the document.
pub const TRACK_CSV_EXAMPLE: &str = "mower_id,observed_at,lat,lon,accuracy_m,heading_deg\r\n\
0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60,2026-06-01T12:00:00Z,52.5163,-0.1277,0.4,270\r\n";

/// An example of a day totals CSV answer, for the document.
pub const DAYS_CSV_EXAMPLE: &str =
    "mower_id,day,mowing_seconds,blade_seconds,distance_m,error_count,charge_count,state_count\r\n\
0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60,2026-06-01,5400,5100.5,2140.125,1,2,3600\r\n";

/// An example of an events CSV answer, for the document.
pub const EVENTS_CSV_EXAMPLE: &str = "id,kind,mower_id,observed_at,details\r\n\
0190a2b4-6000-7000-8000-000000000001,error_raised,0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60,2026-06-01T12:00:00Z,\"{\"\"kind\"\":\"\"error_raised\"\",\"\"error_code\"\":\"\"BLADE_BLOCKED\"\"}\"\r\n";

impl CsvRow for HistoryRow {
    const HEADER: &'static [&'static str] = &[
        "mower_id",
        "observed_at",
        "activity",
        "lawn_mower_activity",
        "battery_percent",
        "error_code",
        "blade_on",
    ];

    fn cells(&self, record: &mut Record<'_>) {
        record.value(self.mower_id.0);
        record.instant(self.observed_at);
        record.name(&Activity::from(self.activity));
        record.name(&LawnMowerActivity::from(self.activity.lawn_mower()));
        record.value_opt(self.battery_percent);
        record.text_opt(self.error_code.as_deref());
        record.value(self.blade_on);
    }
}

impl CsvRow for PositionRow {
    const HEADER: &'static [&'static str] = &[
        "mower_id",
        "observed_at",
        "lat",
        "lon",
        "accuracy_m",
        "heading_deg",
    ];

    fn cells(&self, record: &mut Record<'_>) {
        record.value(self.mower_id.0);
        record.instant(self.observed_at);
        record.value(self.lat);
        record.value(self.lon);
        record.value_opt(self.accuracy_m);
        record.value_opt(self.heading_deg);
    }
}

impl CsvRow for DayTotals {
    const HEADER: &'static [&'static str] = &[
        "mower_id",
        "day",
        "mowing_seconds",
        "blade_seconds",
        "distance_m",
        "error_count",
        "charge_count",
        "state_count",
    ];

    fn cells(&self, record: &mut Record<'_>) {
        let item = DayItem::from(self);
        record.value(self.mower_id.0);
        record.value(item.day);
        record.value(item.mowing_seconds);
        record.value(item.blade_seconds);
        record.value(item.distance_m);
        record.value(item.error_count);
        record.value(item.charge_count);
        record.value(item.state_count);
    }
}

impl CsvRow for EventDto {
    const HEADER: &'static [&'static str] = &["id", "kind", "mower_id", "observed_at", "details"];

    /// The details as the JSON answer's object, in one text cell.
    fn cells(&self, record: &mut Record<'_>) {
        record.value(self.id);
        record.name(&self.kind);
        record.value(self.mower_id);
        record.instant(self.observed_at);
        record.text(&serde_json::to_string(&self.details).unwrap_or_default());
    }
}

/// The range of a history export.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryExportParams {
    /// Only the mowers of this site (it must be visible to the token). Absent: every mower the
    /// token sees.
    #[param(example = "0190a2b4-0000-7000-8000-00000000a100")]
    pub site_id: Option<Uuid>,
    /// States observed at or after this instant (RFC 3339).
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: DateTime<Utc>,
    /// States observed before this instant (RFC 3339; exclusive); at most 366 days after `from`.
    #[param(example = "2026-06-08T00:00:00Z")]
    pub to: DateTime<Utc>,
}

/// The range of a day totals export.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DaysExportParams {
    /// Only the mowers of this site (it must be visible to the token). Absent: every mower the
    /// token sees.
    #[param(example = "0190a2b4-0000-7000-8000-00000000a100")]
    pub site_id: Option<Uuid>,
    /// The first local day (`YYYY-MM-DD`, inclusive).
    #[param(example = "2026-06-01")]
    pub from: NaiveDate,
    /// The last local day (`YYYY-MM-DD`, inclusive); at most 365 days after `from`.
    #[param(example = "2026-06-07")]
    pub to: NaiveDate,
}

/// The range of a sessions export.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionsExportParams {
    /// Only the mowers of this site (it must be visible to the token). Absent: every mower the
    /// token sees.
    #[param(example = "0190a2b4-0000-7000-8000-00000000a100")]
    pub site_id: Option<Uuid>,
    /// Sessions that end after this instant (RFC 3339); open ones always.
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: DateTime<Utc>,
    /// Sessions that start before this instant (RFC 3339; exclusive); at most 366 days after
    /// `from`.
    #[param(example = "2026-06-08T00:00:00Z")]
    pub to: DateTime<Utc>,
}
