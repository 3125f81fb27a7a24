//! The live views' documents (`GET /v1/live/fleet`, `/v1/live/wall`, `/v1/live/health`): snapshot
//! documents built from the use case's typed snapshots, never store rows. Every list, at every
//! level, is `{items, truncated, limit}` (declared by `list_page!`'s `window` form): `truncated`
//! says that at least one more visible item exists beyond `limit`.

use super::assignments::PriorityDto;
use super::notifications::{AlertKindDto, SeverityDto};
use super::seconds;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::ports::{AlertCard, MowerCard, SiteCard};
use swath_application::projections::{
    FleetSnapshot, HealthMower, HealthSnapshot, HealthStatus, LiveMower, WallSnapshot,
};
use swath_domain::Assignment;
use utoipa::ToSchema;
use uuid::Uuid;

/// The operator on duty of a mower: its winning active assignment (priority critical → low, then
/// the most recently updated, then the highest id).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct OperatorOnDuty {
    /// The assignment's id.
    pub assignment_id: Uuid,
    /// The operator's name.
    #[schema(example = "Robin")]
    pub operator: String,
    /// The assignment's priority.
    pub priority: PriorityDto,
    /// When the assignment was last changed.
    pub updated_at: DateTime<Utc>,
}

fn operator_on_duty(a: &Option<Assignment>) -> Option<OperatorOnDuty> {
    a.as_ref().map(|a| OperatorOnDuty {
        assignment_id: a.id,
        operator: a.operator.clone(),
        priority: PriorityDto::of(a.priority),
        updated_at: a.updated_at,
    })
}

/// A mower card's latest activity and charge, as the live views show them.
fn card_fields(m: &MowerCard) -> (Option<String>, Option<u8>) {
    (m.activity.map(|a| a.as_str().to_owned()), m.battery_percent)
}

/// A site of a wall.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveSite {
    /// The site's id.
    pub id: Uuid,
    /// Its name.
    #[schema(example = "Riverside park")]
    pub name: String,
    /// Its IANA time zone.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: String,
    /// Where it sorts (ascending, then name, then id).
    pub display_order: i32,
}

impl From<SiteCard> for LiveSite {
    fn from(s: SiteCard) -> Self {
        Self {
            id: s.id.0,
            name: s.name,
            time_zone: s.time_zone,
            display_order: s.display_order,
        }
    }
}

/// An open alert of a mower in a live view.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveAlert {
    /// The alert's id (the id of the event that raised it).
    pub id: Uuid,
    /// What it is about.
    pub kind: AlertKindDto,
    /// How urgent it is.
    pub severity: SeverityDto,
    /// When it was raised.
    pub raised_at: DateTime<Utc>,
    /// The error code of an `error` alert.
    #[schema(required = true)]
    pub code: Option<String>,
}

impl From<AlertCard> for LiveAlert {
    fn from(a: AlertCard) -> Self {
        Self {
            id: a.id,
            kind: AlertKindDto::of(a.kind),
            severity: SeverityDto::of(a.severity),
            raised_at: a.raised_at,
            code: a.code,
        }
    }
}

list_page! {
    /// A mower's most urgent open alerts: at most `limit`, by severity (critical first), then
    /// `raised_at` and id, newest first.
    window LiveAlertList: LiveAlert,
    /// The alerts inside the window.
    items,
    /// Whether the mower has more open alerts than shown.
    truncated,
    /// The most alerts shown per mower (32).
    #[schema(example = 32)]
    limit
}

/// A mower in a live view: its directory entry and latest state.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = LiveMower)]
pub struct LiveMowerDto {
    /// The mower's id.
    pub id: Uuid,
    /// Its site.
    pub site_id: Uuid,
    /// Its name.
    #[schema(example = "Lawn 1")]
    pub name: String,
    /// Its model.
    #[schema(example = "M1")]
    pub model: String,
    /// Where it sorts (ascending, then name, then id).
    pub display_order: i32,
    /// The latest reported activity (`mowing`, `docked`, …); `null` before the first state.
    #[schema(required = true, example = "mowing")]
    pub activity: Option<String>,
    /// The latest reported charge, 0 to 100.
    #[schema(required = true)]
    pub battery_percent: Option<u8>,
    /// When the latest state was observed.
    #[schema(required = true)]
    pub observed_at: Option<DateTime<Utc>>,
    /// When Swath received the latest state.
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Whether the mower is offline (silent for the offline period).
    pub offline: bool,
    /// The operator on duty; `null` when no active assignment exists.
    #[schema(required = true)]
    pub operator: Option<OperatorOnDuty>,
    /// Its most urgent open alerts.
    pub alerts: LiveAlertList,
}

impl From<LiveMower> for LiveMowerDto {
    fn from(m: LiveMower) -> Self {
        let (activity, battery_percent) = card_fields(&m.mower);
        Self {
            id: m.mower.id.0,
            site_id: m.mower.site_id.0,
            name: m.mower.name,
            model: m.mower.model,
            display_order: m.mower.display_order,
            activity,
            battery_percent,
            observed_at: m.mower.observed_at,
            last_seen_at: m.mower.last_seen_at,
            offline: m.mower.offline,
            operator: operator_on_duty(&m.operator),
            alerts: LiveAlertList::of(m.alerts, LiveAlert::from),
        }
    }
}

list_page! {
    /// Mowers of a live view: at most `limit`, by display order, then name, then id.
    window LiveMowerList: LiveMowerDto,
    /// The mowers inside the window.
    items,
    /// Whether more visible mowers exist than shown.
    truncated,
    /// The most mowers shown (64 on the fleet dashboard, 32 per site on the site wall).
    #[schema(example = 64)]
    limit
}

/// The fleet dashboard: your first mowers, each with its most urgent open alerts and its operator
/// on duty.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct FleetDashboard {
    /// When the snapshot was taken.
    pub generated_at: DateTime<Utc>,
    /// The mowers.
    pub mowers: LiveMowerList,
}

impl FleetDashboard {
    /// The dashboard of a snapshot taken at `generated_at`.
    pub fn of(s: FleetSnapshot, generated_at: DateTime<Utc>) -> Self {
        Self {
            generated_at,
            mowers: LiveMowerList::of(s.mowers, LiveMowerDto::from),
        }
    }
}

/// A site on the site wall, with its mowers in the field.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = WallSite)]
pub struct WallSiteDto {
    /// The site.
    pub site: LiveSite,
    /// Its mowers in the field (reported, and neither docked, charging nor offline), filtered
    /// before the window is cut.
    pub mowers: LiveMowerList,
}

list_page! {
    /// Sites of a wall: at most `limit`, by display order, then name, then id.
    window WallSiteList: WallSiteDto,
    /// The sites inside the window.
    items,
    /// Whether more visible sites exist than shown.
    truncated,
    /// The most sites shown (16).
    #[schema(example = 16)]
    limit
}

/// The site wall: your first sites, each with its mowers in the field.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SiteWall {
    /// When the snapshot was taken.
    pub generated_at: DateTime<Utc>,
    /// The sites.
    pub sites: WallSiteList,
}

impl SiteWall {
    /// The wall of a snapshot taken at `generated_at`.
    pub fn of(s: WallSnapshot, generated_at: DateTime<Utc>) -> Self {
        Self {
            generated_at,
            sites: WallSiteList::of(s.sites, |w| WallSiteDto {
                site: w.site.into(),
                mowers: LiveMowerList::of(w.mowers, LiveMowerDto::from),
            }),
        }
    }
}

/// Open alerts of a mower by severity: all of them, not a window.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SeverityCounts {
    /// Open critical alerts.
    pub critical: u32,
    /// Open high alerts.
    pub high: u32,
    /// Open normal alerts.
    pub normal: u32,
    /// Open low alerts.
    pub low: u32,
}

/// How a mower is: the severity of the most severe of all its open alerts, or `ok`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = HealthStatus)]
pub enum HealthStatusDto {
    Ok,
    Low,
    Normal,
    High,
    Critical,
}

impl HealthStatusDto {
    fn of(s: HealthStatus) -> Self {
        match s {
            HealthStatus::Ok => HealthStatusDto::Ok,
            HealthStatus::Low => HealthStatusDto::Low,
            HealthStatus::Normal => HealthStatusDto::Normal,
            HealthStatus::High => HealthStatusDto::High,
            HealthStatus::Critical => HealthStatusDto::Critical,
        }
    }
}

/// A mower on the health wall.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = HealthMower)]
pub struct HealthMowerDto {
    /// The mower's id.
    pub id: Uuid,
    /// Its name.
    #[schema(example = "Lawn 1")]
    pub name: String,
    /// Its model.
    #[schema(example = "M1")]
    pub model: String,
    /// Where it sorts (ascending, then name, then id).
    pub display_order: i32,
    /// The latest reported activity; `null` before the first state.
    #[schema(required = true, example = "docked")]
    pub activity: Option<String>,
    /// The latest reported charge, 0 to 100.
    #[schema(required = true)]
    pub battery_percent: Option<u8>,
    /// When Swath received the latest state.
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Whether the mower is offline.
    pub offline: bool,
    /// The most severe of all its open alerts, or `ok`.
    pub status: HealthStatusDto,
    /// All its open alerts, counted by severity.
    pub open_alerts: SeverityCounts,
    /// Blade time since the last blade reset, in seconds.
    pub blade_since_reset_seconds: f64,
    /// Blade time after which the blade is due, in seconds.
    pub blade_threshold_seconds: f64,
    /// Errors since the mower first reported.
    pub error_count: i64,
    /// The operator on duty; `null` when no active assignment exists.
    #[schema(required = true)]
    pub operator: Option<OperatorOnDuty>,
}

impl From<HealthMower> for HealthMowerDto {
    fn from(m: HealthMower) -> Self {
        let (activity, battery_percent) = card_fields(&m.mower);
        Self {
            id: m.mower.id.0,
            name: m.mower.name,
            model: m.mower.model,
            display_order: m.mower.display_order,
            activity,
            battery_percent,
            last_seen_at: m.mower.last_seen_at,
            offline: m.mower.offline,
            status: HealthStatusDto::of(m.status),
            open_alerts: SeverityCounts {
                critical: m.health.critical,
                high: m.health.high,
                normal: m.health.normal,
                low: m.health.low,
            },
            blade_since_reset_seconds: seconds(m.health.blade_since_reset_ms),
            blade_threshold_seconds: seconds(m.health.blade_threshold_ms),
            error_count: m.health.error_count,
            operator: operator_on_duty(&m.operator),
        }
    }
}

list_page! {
    /// Mowers of a site on the health wall: at most `limit`, by display order, then name, then id.
    window HealthMowerList: HealthMowerDto,
    /// The mowers inside the window.
    items,
    /// Whether the site has more visible mowers than shown.
    truncated,
    /// The most mowers shown per site (32).
    #[schema(example = 32)]
    limit
}

/// A site on the health wall.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = HealthSite)]
pub struct HealthSiteDto {
    /// The site.
    pub site: LiveSite,
    /// Its mowers, each with a health summary.
    pub mowers: HealthMowerList,
}

list_page! {
    /// Sites of the health wall: at most `limit`, by display order, then name, then id.
    window HealthSiteList: HealthSiteDto,
    /// The sites inside the window.
    items,
    /// Whether more visible sites exist than shown.
    truncated,
    /// The most sites shown (16).
    #[schema(example = 16)]
    limit
}

/// The health wall: your first sites, each with its mowers' health.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthWall {
    /// When the snapshot was taken.
    pub generated_at: DateTime<Utc>,
    /// The sites.
    pub sites: HealthSiteList,
}

impl HealthWall {
    /// The health wall of a snapshot taken at `generated_at`.
    pub fn of(s: HealthSnapshot, generated_at: DateTime<Utc>) -> Self {
        Self {
            generated_at,
            sites: HealthSiteList::of(s.sites, |w| HealthSiteDto {
                site: w.site.into(),
                mowers: HealthMowerList::of(w.mowers, HealthMowerDto::from),
            }),
        }
    }
}
