//! The telemetry store's rows decoded from PostgreSQL's, a stored value the domain does not know
//! being corruption.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::Row;
use swath_application::ports::Cause;
use swath_application::ports::StoreError;
use swath_domain::{
    AccountId, Activity, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, PositionRow,
    StateReport,
};
use uuid::Uuid;

pub(super) fn history_from(row: &PgRow) -> Result<HistoryRow, StoreError> {
    let battery: Option<i16> = row.try_get("battery_percent").map_err(corrupt)?;
    let name: String = row.try_get("activity").map_err(corrupt)?;
    Ok(from_row!(row, corrupt, HistoryRow {
        observed_at, error_code, blade_on;
        mower_id: mower_id(row)?,
        activity: activity(&name)?,
        battery_percent: battery.map(|b| b as u8),
    }))
}

pub(super) fn position_from(row: &PgRow) -> Result<PositionRow, StoreError> {
    Ok(from_row!(row, corrupt, PositionRow {
        observed_at, lat, lon, accuracy_m, heading_deg;
        mower_id: mower_id(row)?,
    }))
}

pub(super) fn day_from(row: &PgRow) -> Result<DayTotals, StoreError> {
    Ok(from_row!(row, corrupt, DayTotals {
        day, mowing_ms, blade_ms, distance_mm, error_count, charge_count, state_count;
        mower_id: mower_id(row)?,
    }))
}

/// The `mower_id` column, the key of every telemetry row.
pub(super) fn mower_id(row: &PgRow) -> Result<MowerId, StoreError> {
    Ok(MowerId(row.try_get("mower_id").map_err(corrupt)?))
}

pub(super) fn corrupt(what: impl Into<Cause>) -> StoreError {
    StoreError::Corrupt(what.into())
}

pub(super) fn activity(name: &str) -> Result<Activity, StoreError> {
    Activity::parse(name).ok_or_else(|| corrupt(format!("unknown activity {name:?}")))
}

/// A health row, or `None` for a mower that never reported (`counted_until` NULL).
pub(super) fn health_from(row: &PgRow) -> Result<Option<HealthTotals>, StoreError> {
    let counted_until: Option<DateTime<Utc>> = row.try_get("counted_until").map_err(corrupt)?;
    let Some(counted_until) = counted_until else {
        return Ok(None);
    };
    let account_id: Option<Uuid> = row.try_get("account_id").map_err(corrupt)?;
    let last_activity: Option<String> = row.try_get("last_activity").map_err(corrupt)?;
    let counted_from: Option<DateTime<Utc>> = row.try_get("counted_from").map_err(corrupt)?;
    Ok(Some(from_row!(row, corrupt, HealthTotals {
        last_blade_on, last_lat, last_lon, mowing_ms, blade_ms, distance_mm, error_count,
        charge_count, blade_since_reset_ms, blade_due_raised, blade_reset_until;
        mower_id: mower_id(row)?,
        account_id: AccountId(account_id.ok_or_else(|| corrupt("health row without account"))?),
        counted_from: counted_from.unwrap_or(counted_until),
        counted_until: counted_until,
        last_activity: activity(&last_activity.unwrap_or_default())?,
    })))
}

/// The stored document is decoded straight into the report, with no `serde_json::Value` between
/// (the same fields, numbers and key order; one pass instead of two, decision 124).
pub(super) fn latest_from(row: &PgRow) -> Result<LatestRow, StoreError> {
    let Json(state): Json<StateReport> = row.try_get("state").map_err(corrupt)?;
    Ok(from_row!(row, corrupt, LatestRow {
        observed_at, last_seen_at;
        mower_id: mower_id(row)?,
        account_id: AccountId(row.try_get("account_id").map_err(corrupt)?),
        state: state,
    }))
}
