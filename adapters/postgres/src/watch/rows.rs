//! Row decoding shared by the watch store's statements: a stored value that does not decode is
//! `WatchError::Corrupt`, a failed statement `WatchError::Unavailable`.

use sqlx::postgres::PgRow;
use sqlx::Row;
use swath_application::ports::Cause;
use swath_application::ports::WatchError;
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Occupancy, Zone, ZoneWatch};
use swath_domain::watch::{Alert, AlertKind, Event, GeoPolygon, Severity};
use swath_domain::{AccountId, Activity, MowerId};

pub(super) const ALERT_COLUMNS: &str =
    "id, mower_id, account_id, kind, severity, raised_at, cleared_at, code";

pub(super) fn unavailable(e: impl Into<Cause>) -> WatchError {
    WatchError::Unavailable(e.into())
}

pub(super) fn corrupt(e: impl Into<Cause>) -> WatchError {
    WatchError::Corrupt(e.into())
}

/// The `mower_id` column.
pub(super) fn mower_id(row: &PgRow) -> Result<MowerId, WatchError> {
    Ok(MowerId(row.try_get("mower_id").map_err(corrupt)?))
}

/// The `account_id` column.
fn account_id(row: &PgRow) -> Result<AccountId, WatchError> {
    Ok(AccountId(row.try_get("account_id").map_err(corrupt)?))
}

pub(super) fn activity(name: &str) -> Result<Activity, WatchError> {
    Activity::parse(name).ok_or_else(|| corrupt(format!("unknown activity {name:?}")))
}

pub(super) fn event_from(row: &PgRow) -> Result<Event, WatchError> {
    let document: serde_json::Value = row.try_get("document").map_err(corrupt)?;
    serde_json::from_value(document).map_err(corrupt)
}

pub(super) fn alert_from(row: &PgRow) -> Result<Alert, WatchError> {
    let kind: String = row.try_get("kind").map_err(corrupt)?;
    let severity: String = row.try_get("severity").map_err(corrupt)?;
    Ok(from_row!(row, corrupt, Alert {
        id, raised_at, cleared_at, code;
        mower_id: mower_id(row)?,
        account_id: account_id(row)?,
        kind: AlertKind::parse(&kind).ok_or_else(|| corrupt(format!("alert kind {kind:?}")))?,
        severity: Severity::parse(&severity)
            .ok_or_else(|| corrupt(format!("severity {severity:?}")))?,
    }))
}

pub(super) fn busy_from(row: &PgRow) -> Result<BusyStatus, WatchError> {
    let name: String = row.try_get("activity").map_err(corrupt)?;
    Ok(from_row!(row, corrupt, BusyStatus {
        observed_at, lat, lon, written_at;
        mower_id: mower_id(row)?,
        account_id: account_id(row)?,
        activity: activity(&name)?,
    }))
}

pub(super) fn zone_from(row: &PgRow, mower_id: MowerId) -> Result<Zone, WatchError> {
    let polygon: serde_json::Value = row.try_get("polygon").map_err(corrupt)?;
    Ok(from_row!(row, corrupt, Zone {
        id, name, created_at, updated_at;
        mower_id: mower_id,
        account_id: account_id(row)?,
        polygon: GeoPolygon::from_geojson(&polygon).map_err(corrupt)?,
    }))
}

pub(super) fn zone_watch_from(row: &PgRow) -> Result<ZoneWatch, WatchError> {
    let occupancy: serde_json::Value = row.try_get("occupancy").map_err(corrupt)?;
    Ok(ZoneWatch {
        mower_id: mower_id(row)?,
        evaluated_until: row.try_get("evaluated_until").map_err(corrupt)?,
        occupancy: serde_json::from_value::<Vec<Occupancy>>(occupancy).map_err(corrupt)?,
    })
}
