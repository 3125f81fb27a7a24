//! The watch store's administration: geofences, zones (with their per-mower limit) and the blade
//! reset. Single statements or short transactions, outside the watcher's batches.

use super::rows::{corrupt, unavailable, zone_from, zone_watch_from};
use crate::PostgresStore;
use chrono::{DateTime, Utc};
use sqlx::Row;
use swath_application::ports::WatchError;
use swath_domain::watch::zones::{Zone, ZoneWatch, MAX_ZONES_PER_MOWER};
use swath_domain::watch::GeoPolygon;
use swath_domain::watch::Geofence;
use swath_domain::{AccountId, MowerId};
use uuid::Uuid;

pub(super) async fn put_geofence(store: &PostgresStore, g: Geofence) -> Result<(), WatchError> {
    sqlx::query(
        "INSERT INTO geofences (mower_id, account_id, version, polygon, updated_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (mower_id) DO UPDATE SET \
         account_id = EXCLUDED.account_id, version = EXCLUDED.version, \
         polygon = EXCLUDED.polygon, updated_at = EXCLUDED.updated_at",
    )
    .bind(g.mower_id.0)
    .bind(g.account_id.0)
    .bind(g.version)
    .bind(g.polygon.to_geojson())
    .bind(g.updated_at)
    .execute(store.pool())
    .await
    .map_err(unavailable)?;
    Ok(())
}

pub(super) async fn geofence(
    store: &PostgresStore,
    mower: MowerId,
) -> Result<Option<Geofence>, WatchError> {
    let row = sqlx::query(
        "SELECT mower_id, account_id, version, polygon, updated_at FROM geofences \
         WHERE mower_id = $1",
    )
    .bind(mower.0)
    .fetch_optional(store.pool())
    .await
    .map_err(unavailable)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let polygon: serde_json::Value = row.try_get("polygon").map_err(corrupt)?;
    Ok(Some(Geofence {
        mower_id: mower,
        account_id: AccountId(row.try_get("account_id").map_err(corrupt)?),
        version: row.try_get("version").map_err(corrupt)?,
        polygon: GeoPolygon::from_geojson(&polygon).map_err(corrupt)?,
        updated_at: row.try_get("updated_at").map_err(corrupt)?,
    }))
}

pub(super) async fn delete_geofence(
    store: &PostgresStore,
    mower: MowerId,
) -> Result<bool, WatchError> {
    let done = sqlx::query("DELETE FROM geofences WHERE mower_id = $1")
        .bind(mower.0)
        .execute(store.pool())
        .await
        .map_err(unavailable)?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn zones(store: &PostgresStore, mower: MowerId) -> Result<Vec<Zone>, WatchError> {
    let rows = sqlx::query(
        "SELECT id, account_id, name, polygon, created_at, updated_at FROM zones \
         WHERE mower_id = $1",
    )
    .bind(mower.0)
    .fetch_all(store.pool())
    .await
    .map_err(unavailable)?;
    let mut zones = rows
        .iter()
        .map(|row| zone_from(row, mower))
        .collect::<Result<Vec<_>, _>>()?;
    // Sorted here rather than in SQL: names compare like Rust strings in every store.
    zones.sort_by(|a, b| (&a.name, a.id).cmp(&(&b.name, b.id)));
    Ok(zones)
}

pub(super) async fn create_zone(store: &PostgresStore, zone: Zone) -> Result<(), WatchError> {
    let mut tx = store.pool().begin().await.map_err(unavailable)?;
    // The zone watch row serialises zone changes of a mower (and W7 units of work with them).
    sqlx::query("SELECT mower_id FROM zone_watches WHERE mower_id = $1 FOR UPDATE")
        .bind(zone.mower_id.0)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM zones WHERE mower_id = $1")
        .bind(zone.mower_id.0)
        .fetch_one(&mut *tx)
        .await
        .map_err(unavailable)?;
    if count >= MAX_ZONES_PER_MOWER as i64 {
        return Err(WatchError::Limit(format!(
            "A mower may have at most {MAX_ZONES_PER_MOWER} zones."
        )));
    }
    sqlx::query(
        "INSERT INTO zones (id, mower_id, account_id, name, polygon, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(zone.id)
    .bind(zone.mower_id.0)
    .bind(zone.account_id.0)
    .bind(&zone.name)
    .bind(zone.polygon.to_geojson())
    .bind(zone.created_at)
    .bind(zone.updated_at)
    .execute(&mut *tx)
    .await
    .map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)?;
    Ok(())
}

pub(super) async fn update_zone(store: &PostgresStore, zone: Zone) -> Result<bool, WatchError> {
    let done = sqlx::query(
        "UPDATE zones SET name = $3, polygon = $4, updated_at = $5 \
         WHERE id = $1 AND mower_id = $2",
    )
    .bind(zone.id)
    .bind(zone.mower_id.0)
    .bind(&zone.name)
    .bind(zone.polygon.to_geojson())
    .bind(zone.updated_at)
    .execute(store.pool())
    .await
    .map_err(unavailable)?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn delete_zone(
    store: &PostgresStore,
    mower: MowerId,
    zone: Uuid,
) -> Result<bool, WatchError> {
    let done = sqlx::query("DELETE FROM zones WHERE id = $1 AND mower_id = $2")
        .bind(zone)
        .bind(mower.0)
        .execute(store.pool())
        .await
        .map_err(unavailable)?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn zone_watch(
    store: &PostgresStore,
    mower: MowerId,
) -> Result<Option<ZoneWatch>, WatchError> {
    let row = sqlx::query(
        "SELECT mower_id, evaluated_until, occupancy FROM zone_watches \
         WHERE mower_id = $1 AND evaluated_until IS NOT NULL",
    )
    .bind(mower.0)
    .fetch_optional(store.pool())
    .await
    .map_err(unavailable)?;
    row.as_ref().map(zone_watch_from).transpose()
}

pub(super) async fn reset_blade(
    store: &PostgresStore,
    mower: MowerId,
    at: DateTime<Utc>,
) -> Result<bool, WatchError> {
    let mut tx = store.pool().begin().await.map_err(unavailable)?;
    // The health row is the ingest batch's lock: this waits for a running batch, and the
    // next batch reads the reset totals.
    sqlx::query(
        "UPDATE health_totals SET blade_since_reset_ms = 0, blade_due_raised = false, \
         blade_reset_until = counted_until WHERE mower_id = $1",
    )
    .bind(mower.0)
    .execute(&mut *tx)
    .await
    .map_err(unavailable)?;
    let cleared = sqlx::query(
        "UPDATE alerts SET cleared_at = $2 WHERE mower_id = $1 AND kind = 'blade_due' \
         AND cleared_at IS NULL",
    )
    .bind(mower.0)
    .bind(at)
    .execute(&mut *tx)
    .await
    .map_err(unavailable)?
    .rows_affected();
    tx.commit().await.map_err(unavailable)?;
    Ok(cleared > 0)
}
