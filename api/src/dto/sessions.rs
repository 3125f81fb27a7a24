//! W8's mowing sessions as the API shows them (docs/rules.md §3, W8): a session, a page of them,
//! a mower's open session, their query parameters and their CSV rows.

use crate::csv::{CsvRow, Record};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::sessions::{EndReason, SessionRow};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = EndReason)]
pub enum EndReasonDto {
    /// The next state, within 5 minutes, was `docked` or `charging`.
    Docked,
    /// The next state, within 5 minutes, was `idle`.
    Stopped,
    /// The next state, within 5 minutes, was `error` (its code is the session's `error_code`).
    Error,
    /// More than 5 minutes passed before the next state.
    Silent,
}

impl From<EndReason> for EndReasonDto {
    fn from(reason: EndReason) -> Self {
        match reason {
            EndReason::Docked => Self::Docked,
            EndReason::Stopped => Self::Stopped,
            EndReason::Error => Self::Error,
            EndReason::Silent => Self::Silent,
        }
    }
}

/// A position (WGS 84 degrees).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionPosition {
    /// Latitude in degrees.
    #[schema(example = 52.52)]
    pub lat: f64,
    /// Longitude in degrees.
    #[schema(example = 13.405)]
    pub lon: f64,
}

fn position(lat: Option<f64>, lon: Option<f64>) -> Option<SessionPosition> {
    Some(SessionPosition {
        lat: lat?,
        lon: lon?,
    })
}

/// One mowing session (docs/rules.md §3, W8): a run of working states, with the stretches that
/// resumed within the merge gap after it (a charge or a rain stop is not a new session).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionItem {
    /// The session's id, derived from the mower and `started_at`: the same start gives the same
    /// id everywhere; a late state that moves the start makes it another session.
    #[schema(example = "0190a2b4-5c3e-8d21-9f00-3b1d2c4e5f60")]
    pub id: Uuid,
    /// The mower.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// The first working state's `observed_at` (UTC, RFC 3339, microseconds).
    #[schema(example = "2026-06-01T08:00:00Z")]
    pub started_at: DateTime<Utc>,
    /// The closing state's `observed_at`; `null` while the session is open.
    #[schema(required = true, example = "2026-06-01T10:30:00Z")]
    pub ended_at: Option<DateTime<Utc>>,
    /// Whether the session is open: its last state is the mower's newest and it has not ended.
    #[schema(example = false)]
    pub open: bool,
    /// Why it ended; `null` while open.
    #[schema(required = true)]
    pub end_reason: Option<EndReasonDto>,
    /// The closing state's error code when `end_reason` is `error`, else `null`.
    #[schema(required = true, example = json!(null))]
    pub error_code: Option<String>,
    /// Time spent mowing in the session, in seconds (W4's intervals that start in it).
    #[schema(example = 8100.0)]
    pub mowing_seconds: f64,
    /// Time with the blade turning in the session, in seconds.
    #[schema(example = 8050.5)]
    pub blade_seconds: f64,
    /// Distance driven while mowing in the session, in metres.
    #[schema(example = 2140.125)]
    pub distance_m: f64,
    /// How many stretches merged into this one (a resume after charging counts one).
    #[schema(example = 1)]
    pub breaks: i64,
    /// States from the first through the closing state, the rests between merged stretches
    /// included.
    #[schema(example = 9000)]
    pub states: i64,
    /// The first known position among the session's states; `null` when none had one.
    #[schema(required = true)]
    pub first_position: Option<SessionPosition>,
    /// The last known position among the session's states; `null` when none had one.
    #[schema(required = true)]
    pub last_position: Option<SessionPosition>,
    /// The first known battery charge among the session's states, in percent.
    #[schema(required = true, example = 95, minimum = 0, maximum = 100)]
    pub first_battery_percent: Option<u8>,
    /// The last known battery charge among the session's states, in percent.
    #[schema(required = true, example = 40, minimum = 0, maximum = 100)]
    pub last_battery_percent: Option<u8>,
    /// The local date of `started_at` in the time zone of the mower's site (`YYYY-MM-DD`).
    #[schema(example = "2026-06-01")]
    pub local_date: NaiveDate,
}

impl From<&SessionRow> for SessionItem {
    fn from(row: &SessionRow) -> Self {
        let s = &row.session;
        Self {
            id: s.id,
            mower_id: s.mower_id.0,
            started_at: s.started_at,
            ended_at: s.ended_at,
            open: s.is_open(),
            end_reason: s.end_reason.map(EndReasonDto::from),
            error_code: s.error_code.clone(),
            mowing_seconds: s.mowing_ms as f64 / 1000.0,
            blade_seconds: s.blade_ms as f64 / 1000.0,
            distance_m: s.distance_mm as f64 / 1000.0,
            breaks: s.breaks,
            states: s.states,
            first_position: position(s.first_lat, s.first_lon),
            last_position: position(s.last_lat, s.last_lon),
            first_battery_percent: s.first_battery_percent,
            last_battery_percent: s.last_battery_percent,
            local_date: s.local_date,
        }
    }
}

list_page! {
    /// A page of mowing sessions, newest first.
    SessionPage: SessionItem,
    /// The sessions of this page, by `started_at` (then mower id), newest first.
    items,
    /// Whether more sessions of the range follow this page.
    truncated
}

/// A mower's open session, if it has one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OpenSession {
    /// The mower.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub mower_id: Uuid,
    /// Its open session; `null` when its newest session has ended (or it never mowed).
    #[schema(required = true)]
    pub session: Option<SessionItem>,
}

/// The range and page of a mower's sessions.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionParams {
    /// Only sessions that end after this instant (RFC 3339); open ones always. Absent: from the
    /// first.
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: Option<DateTime<Utc>>,
    /// Only sessions that start before this instant (RFC 3339; exclusive). Absent: up to the
    /// newest.
    #[param(example = "2026-06-02T00:00:00Z")]
    pub to: Option<DateTime<Utc>>,
    /// The most items to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged (with the same
    /// `from` and `to`). Absent (or empty) for the first page.
    pub cursor: Option<String>,
}

/// The filters, range and page of the fleet's sessions.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FleetSessionParams {
    /// Only the sessions of this site's mowers.
    pub site_id: Option<Uuid>,
    /// Only this mower's sessions.
    pub mower_id: Option<Uuid>,
    /// Only sessions that end after this instant (RFC 3339); open ones always. Absent: from the
    /// first.
    #[param(example = "2026-06-01T00:00:00Z")]
    pub from: Option<DateTime<Utc>>,
    /// Only sessions that start before this instant (RFC 3339; exclusive). Absent: up to the
    /// newest.
    #[param(example = "2026-06-02T00:00:00Z")]
    pub to: Option<DateTime<Utc>>,
    /// The most items to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged (with the same
    /// filters). Absent (or empty) for the first page.
    pub cursor: Option<String>,
}

/// An example of the CSV answer of the sessions lists.
pub const SESSIONS_CSV_EXAMPLE: &str = "id,mower_id,started_at,ended_at,end_reason,error_code,\
mowing_seconds,blade_seconds,distance_m,breaks,states,first_lat,first_lon,last_lat,last_lon,\
first_battery_percent,last_battery_percent,local_date\r\n\
0190a2b4-5c3e-8d21-9f00-3b1d2c4e5f60,0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60,\
2026-06-01T08:00:00Z,2026-06-01T10:30:00Z,docked,,8100,8050.5,2140.125,1,9000,\
52.52,13.405,52.5201,13.4049,95,40,2026-06-01\r\n";

impl CsvRow for SessionRow {
    const HEADER: &'static [&'static str] = &[
        "id",
        "mower_id",
        "started_at",
        "ended_at",
        "end_reason",
        "error_code",
        "mowing_seconds",
        "blade_seconds",
        "distance_m",
        "breaks",
        "states",
        "first_lat",
        "first_lon",
        "last_lat",
        "last_lon",
        "first_battery_percent",
        "last_battery_percent",
        "local_date",
    ];

    fn cells(&self, record: &mut Record<'_>) {
        let item = SessionItem::from(self);
        let s = &self.session;
        record.value(item.id);
        record.value(item.mower_id);
        record.instant(item.started_at);
        match item.ended_at {
            Some(at) => record.instant(at),
            None => record.value_opt(None::<u8>),
        }
        record.text_opt(s.end_reason.map(EndReason::as_str));
        record.text_opt(item.error_code.as_deref());
        record.value(item.mowing_seconds);
        record.value(item.blade_seconds);
        record.value(item.distance_m);
        record.value(item.breaks);
        record.value(item.states);
        record.value_opt(s.first_lat);
        record.value_opt(s.first_lon);
        record.value_opt(s.last_lat);
        record.value_opt(s.last_lon);
        record.value_opt(item.first_battery_percent);
        record.value_opt(item.last_battery_percent);
        record.value(item.local_date);
    }
}
