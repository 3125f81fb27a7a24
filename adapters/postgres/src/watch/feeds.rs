//! The watch store's reads for the API and exports: the events feed, the open alerts (keyset
//! pages) and every watch row of some mowers.

use super::rows::ALERT_COLUMNS;
use super::rows::{alert_from, busy_from, event_from, unavailable, zone_watch_from};
use super::unit_of_work::READ_BUSY;
use super::watch_row::{watch_from, WATCH_COLUMNS};
use crate::PostgresStore;
use swath_application::ports::{AlertQuery, EventQuery, WatchError, WatchRows};
use swath_domain::watch::{Alert, Event};
use swath_domain::MowerId;
use uuid::Uuid;

pub(super) async fn events(
    store: &PostgresStore,
    query: &EventQuery,
) -> Result<Vec<Event>, WatchError> {
    let mowers: Option<Vec<Uuid>> = query
        .mowers
        .as_ref()
        .map(|m| m.iter().map(|m| m.0).collect());
    let rows = sqlx::query(
        "SELECT document FROM notification_events WHERE account_id = $1 \
         AND ($2::uuid[] IS NULL OR mower_id = ANY($2)) \
         AND ($3::text IS NULL OR kind = $3) AND ($4::uuid IS NULL OR id < $4) \
         ORDER BY id DESC LIMIT $5",
    )
    .bind(query.account_id.0)
    .bind(mowers)
    .bind(query.kind.map(|k| k.as_str()))
    .bind(query.before)
    .bind(i64::try_from(query.limit).unwrap_or(i64::MAX))
    .fetch_all(store.pool())
    .await
    .map_err(unavailable)?;
    rows.iter().map(event_from).collect()
}

pub(super) async fn open_alerts(
    store: &PostgresStore,
    query: &AlertQuery,
) -> Result<Vec<Alert>, WatchError> {
    let mowers: Option<Vec<Uuid>> = query
        .mowers
        .as_ref()
        .map(|m| m.iter().map(|m| m.0).collect());
    let rows = sqlx::query(&format!(
        "SELECT {ALERT_COLUMNS} FROM alerts WHERE account_id = $1 AND cleared_at IS NULL \
         AND ($2::uuid[] IS NULL OR mower_id = ANY($2)) \
         AND ($3::text IS NULL OR kind = $3) \
         AND ($4::smallint IS NULL OR (severity_rank, raised_at, id) < ($4, $5, $6)) \
         ORDER BY severity_rank DESC, raised_at DESC, id DESC LIMIT $7"
    ))
    .bind(query.account_id.0)
    .bind(mowers)
    .bind(query.kind.map(|k| k.as_str()))
    .bind(query.after.map(|c| c.severity_rank))
    .bind(query.after.map(|c| c.raised_at))
    .bind(query.after.map(|c| c.id))
    .bind(i64::try_from(query.limit).unwrap_or(i64::MAX))
    .fetch_all(store.pool())
    .await
    .map_err(unavailable)?;
    rows.iter().map(alert_from).collect()
}

pub(super) async fn export_watch(
    store: &PostgresStore,
    mowers: &[MowerId],
) -> Result<WatchRows, WatchError> {
    let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
    let mut out = WatchRows::default();
    for row in sqlx::query(&format!(
        "SELECT {WATCH_COLUMNS} FROM mower_watches w WHERE w.mower_id = ANY($1) \
         AND w.watched_until IS NOT NULL ORDER BY w.mower_id"
    ))
    .bind(&ids)
    .fetch_all(store.pool())
    .await
    .map_err(unavailable)?
    {
        out.watches.extend(watch_from(&row)?);
    }
    for row in
        sqlx::query("SELECT document FROM notification_events WHERE mower_id = ANY($1) ORDER BY id")
            .bind(&ids)
            .fetch_all(store.pool())
            .await
            .map_err(unavailable)?
    {
        out.events.push(event_from(&row)?);
    }
    for row in sqlx::query(&format!(
        "SELECT {ALERT_COLUMNS} FROM alerts WHERE mower_id = ANY($1) ORDER BY id"
    ))
    .bind(&ids)
    .fetch_all(store.pool())
    .await
    .map_err(unavailable)?
    {
        out.alerts.push(alert_from(&row)?);
    }
    for row in sqlx::query(
        "SELECT mower_id, evaluated_until, occupancy FROM zone_watches \
         WHERE mower_id = ANY($1) AND evaluated_until IS NOT NULL ORDER BY mower_id",
    )
    .bind(&ids)
    .fetch_all(store.pool())
    .await
    .map_err(unavailable)?
    {
        out.zone_watches.push(zone_watch_from(&row)?);
    }
    out.busy = sqlx::query(READ_BUSY)
        .bind(&ids)
        .fetch_all(store.pool())
        .await
        .map_err(unavailable)?
        .iter()
        .map(busy_from)
        .collect::<Result<_, _>>()?;
    Ok(out)
}
