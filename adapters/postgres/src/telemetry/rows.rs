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
    Ok(HistoryRow {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        observed_at: row.try_get("observed_at").map_err(corrupt)?,
        activity: activity(&name)?,
        battery_percent: battery.map(|b| b as u8),
        error_code: row.try_get("error_code").map_err(corrupt)?,
        blade_on: row.try_get("blade_on").map_err(corrupt)?,
    })
}

pub(super) fn position_from(row: &PgRow) -> Result<PositionRow, StoreError> {
    Ok(PositionRow {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        observed_at: row.try_get("observed_at").map_err(corrupt)?,
        lat: row.try_get("lat").map_err(corrupt)?,
        lon: row.try_get("lon").map_err(corrupt)?,
        accuracy_m: row.try_get("accuracy_m").map_err(corrupt)?,
        heading_deg: row.try_get("heading_deg").map_err(corrupt)?,
    })
}

pub(super) fn day_from(row: &PgRow) -> Result<DayTotals, StoreError> {
    Ok(DayTotals {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        day: row.try_get("day").map_err(corrupt)?,
        mowing_ms: row.try_get("mowing_ms").map_err(corrupt)?,
        blade_ms: row.try_get("blade_ms").map_err(corrupt)?,
        distance_mm: row.try_get("distance_mm").map_err(corrupt)?,
        error_count: row.try_get("error_count").map_err(corrupt)?,
        charge_count: row.try_get("charge_count").map_err(corrupt)?,
        state_count: row.try_get("state_count").map_err(corrupt)?,
    })
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
    Ok(Some(HealthTotals {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        account_id: AccountId(account_id.ok_or_else(|| corrupt("health row without account"))?),
        counted_from: counted_from.unwrap_or(counted_until),
        counted_until,
        last_activity: activity(&last_activity.unwrap_or_default())?,
        last_blade_on: row.try_get("last_blade_on").map_err(corrupt)?,
        last_lat: row.try_get("last_lat").map_err(corrupt)?,
        last_lon: row.try_get("last_lon").map_err(corrupt)?,
        mowing_ms: row.try_get("mowing_ms").map_err(corrupt)?,
        blade_ms: row.try_get("blade_ms").map_err(corrupt)?,
        distance_mm: row.try_get("distance_mm").map_err(corrupt)?,
        error_count: row.try_get("error_count").map_err(corrupt)?,
        charge_count: row.try_get("charge_count").map_err(corrupt)?,
        blade_since_reset_ms: row.try_get("blade_since_reset_ms").map_err(corrupt)?,
        blade_due_raised: row.try_get("blade_due_raised").map_err(corrupt)?,
        blade_reset_until: row.try_get("blade_reset_until").map_err(corrupt)?,
    }))
}

/// The stored document is decoded straight into the report, with no `serde_json::Value` between
/// (the same fields, numbers and key order; one pass instead of two, decision 124).
pub(super) fn latest_from(row: &PgRow) -> Result<LatestRow, StoreError> {
    let Json(state): Json<StateReport> = row.try_get("state").map_err(corrupt)?;
    Ok(LatestRow {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        account_id: AccountId(row.try_get("account_id").map_err(corrupt)?),
        observed_at: row.try_get("observed_at").map_err(corrupt)?,
        last_seen_at: row.try_get("last_seen_at").map_err(corrupt)?,
        state,
    })
}
