//! The watcher's units of work: the batch (W6 notification rules), the offline sweep, virtual
//! zones (W7) and the busy status, and the events and alerts an ingest batch raises. Every write
//! is one constant statement per table with array parameters (see the parent module).

use super::rows::{busy_from, corrupt, mower_id, unavailable, zone_from, zone_watch_from};
use super::watch_row::{has_session, update_watches, watch_columns, watch_from};
use crate::{Counters, PostgresStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, Row, Transaction};
use swath_application::ports::{
    StoreError, WatchBatch, WatchError, WatchRead, ZoneBatch, ZoneRows,
};
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::ZoneChanges;
use swath_domain::watch::{
    AlertChanges, Event, GeoPolygon, IngestNotifications, Watch, WatchChanges, WatchSnapshot,
};
use swath_domain::{AccountId, MowerId};
use uuid::Uuid;

/// The batch's read: directory account, current geofence version and the watch row of each
/// mower, the watch rows locked in mower id order. `FOR NO KEY UPDATE`: the key never changes.
/// The geofence's polygon comes with its version unless the watcher has parsed that version
/// (`$2`, versions are unique across mowers): one snapshot for both (decision 48).
const READ_FOR_WATCH: &str = concat!(
    "SELECT m.account_id AS dir_account_id, g.version AS current_geofence, \
    CASE WHEN g.version = ANY($2) THEN NULL ELSE g.polygon END AS geofence_polygon, ",
    watch_columns!(),
    " FROM mower_watches w JOIN mowers m ON m.id = w.mower_id \
    LEFT JOIN geofences g ON g.mower_id = w.mower_id \
    WHERE w.mower_id = ANY($1) ORDER BY w.mower_id FOR NO KEY UPDATE OF w"
);

/// Silent watches and watches whose pending session is due (decision 203), skipping those a
/// running batch holds (it is about to bring them online, or to fold their session). Neither
/// column is indexed, so that the per-batch update of the row stays a HOT one (migration 6).
const READ_FOR_SWEEP: &str = concat!(
    "SELECT ",
    watch_columns!(),
    " FROM mower_watches w \
    WHERE (NOT w.offline AND w.last_seen_at < $1) OR w.session_due_at < $3 \
    ORDER BY w.mower_id LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED"
);

const INSERT_EVENTS: &str = "INSERT INTO notification_events \
    (id, mower_id, account_id, kind, observed_at, document) \
    SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::timestamptz[], \
    $6::jsonb[]) ON CONFLICT (id) DO NOTHING";

/// Clears the open alert of each (mower, kind). Run before [`INSERT_ALERTS`]: it must not clear
/// an alert the same batch raises.
const CLEAR_ALERTS: &str = "UPDATE alerts a SET cleared_at = u.cleared_at \
    FROM UNNEST($1::uuid[], $2::text[], $3::timestamptz[]) AS u(mower_id, kind, cleared_at) \
    WHERE a.mower_id = u.mower_id AND a.kind = u.kind AND a.cleared_at IS NULL";

/// No conflict target: a stored id, and a second open alert of a mower and kind (the partial
/// unique index), are both left alone.
const INSERT_ALERTS: &str = "INSERT INTO alerts \
    (id, mower_id, account_id, kind, severity, severity_rank, raised_at, cleared_at, code) \
    SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], \
    $6::smallint[], $7::timestamptz[], $8::timestamptz[], $9::text[]) ON CONFLICT DO NOTHING";

/// Which of the batch's mowers have zones, read before any transaction: most batches name none,
/// and then W7 costs this one statement (no `BEGIN`, lock or `ROLLBACK`).
const ZONED_MOWERS: &str = "SELECT DISTINCT mower_id FROM zones WHERE mower_id = ANY($1) \
    ORDER BY mower_id";

/// W7's read: the zone watch and zones of each mower that has zones, one row per zone, the zone
/// watches locked in mower id order.
const READ_FOR_ZONES: &str = "SELECT zw.mower_id, zw.evaluated_until, zw.occupancy, z.id, \
    z.account_id, z.name, z.polygon, z.created_at, z.updated_at \
    FROM zone_watches zw JOIN zones z ON z.mower_id = zw.mower_id \
    WHERE zw.mower_id = ANY($1) ORDER BY zw.mower_id, z.id FOR NO KEY UPDATE OF zw";

const UPDATE_ZONE_WATCHES: &str = "UPDATE zone_watches zw SET \
    evaluated_until = u.evaluated_until, occupancy = u.occupancy \
    FROM UNNEST($1::uuid[], $2::timestamptz[], $3::jsonb[]) AS u(mower_id, evaluated_until, \
    occupancy) WHERE zw.mower_id = u.mower_id";

pub(super) const READ_BUSY: &str = "SELECT mower_id, account_id, activity, observed_at, lat, lon, \
    written_at FROM busy_statuses WHERE mower_id = ANY($1) ORDER BY mower_id";

/// Never replaces a status by one that is not newer. Guarded: only statuses of a mower in the
/// directory under the same account are written, its row held `FOR KEY SHARE` until the commit,
/// so a late write of a mower deleted meanwhile stores nothing (a deletion either waits for
/// this statement, whose row its cascade then removes, or came first and is seen).
const WRITE_BUSY: &str = "INSERT INTO busy_statuses \
    (mower_id, account_id, activity, observed_at, lat, lon, written_at) \
    SELECT u.mower_id, u.account_id, u.activity, u.observed_at, u.lat, u.lon, u.written_at \
    FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::float8[], \
    $6::float8[], $7::timestamptz[]) \
    AS u(mower_id, account_id, activity, observed_at, lat, lon, written_at) \
    JOIN mowers m ON m.id = u.mower_id AND m.account_id = u.account_id \
    ORDER BY u.mower_id FOR KEY SHARE OF m ON CONFLICT (mower_id) DO UPDATE SET \
    account_id = EXCLUDED.account_id, activity = EXCLUDED.activity, \
    observed_at = EXCLUDED.observed_at, lat = EXCLUDED.lat, lon = EXCLUDED.lon, \
    written_at = EXCLUDED.written_at WHERE busy_statuses.observed_at < EXCLUDED.observed_at";

/// Inserts events (one statement, none when there are no events).
async fn insert_events(
    tx: &mut Transaction<'static, Postgres>,
    events: &[Event],
    counters: &Counters,
) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let documents = events
        .iter()
        .map(|e| serde_json::to_value(e).map_err(|e| sqlx::Error::Encode(Box::new(e))))
        .collect::<Result<Vec<_>, _>>()?;
    sqlx::query(INSERT_EVENTS)
        .bind(events.iter().map(|e| e.id).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.mower_id.0).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.account_id.0).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.kind().as_str()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.observed_at).collect::<Vec<_>>())
        .bind(documents)
        .execute(&mut **tx)
        .await?;
    counters.statement();
    Ok(())
}

/// Clears, then inserts alerts (two statements; none for an empty side).
async fn apply_alerts(
    tx: &mut Transaction<'static, Postgres>,
    alerts: &AlertChanges,
    counters: &Counters,
) -> Result<(), sqlx::Error> {
    let c = &alerts.clears;
    if !c.is_empty() {
        sqlx::query(CLEAR_ALERTS)
            .bind(c.iter().map(|a| a.mower_id.0).collect::<Vec<_>>())
            .bind(c.iter().map(|a| a.kind.as_str()).collect::<Vec<_>>())
            .bind(c.iter().map(|a| a.cleared_at).collect::<Vec<_>>())
            .execute(&mut **tx)
            .await?;
        counters.statement();
    }
    let r = &alerts.raised;
    if r.is_empty() {
        return Ok(());
    }
    sqlx::query(INSERT_ALERTS)
        .bind(r.iter().map(|a| a.id).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.mower_id.0).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.account_id.0).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.kind.as_str()).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.severity.as_str()).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.severity.rank()).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.raised_at).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.cleared_at).collect::<Vec<_>>())
        .bind(r.iter().map(|a| a.code.as_deref()).collect::<Vec<_>>())
        .execute(&mut **tx)
        .await?;
    counters.statement();
    Ok(())
}

/// Called by the telemetry commit when the write rules raised events (W6): the events and their
/// alerts as the ingest derived them, in the ingest transaction. Batches without events (nearly
/// all) cost nothing more.
pub(crate) async fn store_ingest_events(
    tx: &mut Transaction<'static, Postgres>,
    notifications: &IngestNotifications,
    counters: &Counters,
) -> Result<(), StoreError> {
    if notifications.is_empty() {
        return Ok(());
    }
    insert_events(tx, &notifications.events, counters)
        .await
        .map_err(crate::store_error)?;
    apply_alerts(tx, &notifications.alerts, counters)
        .await
        .map_err(crate::store_error)?;
    Ok(())
}

/// The end of a batch's unit of work: its events, its alerts, the commit.
async fn finish(
    mut tx: Transaction<'static, Postgres>,
    events: &[Event],
    alerts: &AlertChanges,
    counters: &Counters,
) -> Result<(), WatchError> {
    insert_events(&mut tx, events, counters)
        .await
        .map_err(unavailable)?;
    apply_alerts(&mut tx, alerts, counters)
        .await
        .map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)?;
    counters.commit();
    Ok(())
}

struct PostgresWatchBatch {
    store: PostgresStore,
    tx: Transaction<'static, Postgres>,
    /// Some row read held a pending session (its columns are written back).
    sessions_read: bool,
}

/// The unit of work `tx` of the watcher's batch or sweep, committed by [`WatchBatch::commit`].
fn watch_batch(
    store: &PostgresStore,
    tx: Transaction<'static, Postgres>,
    sessions_read: bool,
) -> Box<dyn WatchBatch> {
    Box::new(PostgresWatchBatch {
        store: store.clone(),
        tx,
        sessions_read,
    })
}

#[async_trait]
impl WatchBatch for PostgresWatchBatch {
    async fn commit(self: Box<Self>, changes: WatchChanges) -> Result<(), WatchError> {
        let PostgresWatchBatch {
            store,
            mut tx,
            sessions_read,
        } = *self;
        let counters = store.watch_counters();
        update_watches(&mut tx, &changes.watches, sessions_read, counters).await?;
        finish(tx, &changes.events, &changes.alerts, counters).await
    }
}

struct PostgresZoneBatch {
    store: PostgresStore,
    tx: Transaction<'static, Postgres>,
}

#[async_trait]
impl ZoneBatch for PostgresZoneBatch {
    async fn commit(self: Box<Self>, changes: ZoneChanges) -> Result<(), WatchError> {
        let PostgresZoneBatch { store, mut tx } = *self;
        let counters = store.counters();
        let w = &changes.watches;
        let occupancy = w
            .iter()
            .map(|z| serde_json::to_value(&z.occupancy))
            .collect::<Result<Vec<_>, _>>()
            .map_err(corrupt)?;
        sqlx::query(UPDATE_ZONE_WATCHES)
            .bind(w.iter().map(|z| z.mower_id.0).collect::<Vec<_>>())
            .bind(w.iter().map(|z| z.evaluated_until).collect::<Vec<_>>())
            .bind(occupancy)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        counters.statement();
        // Zones raise events only; no alert.
        finish(tx, &changes.events, &AlertChanges::default(), counters).await
    }
}

/// The unit of work of a batch none of whose mowers has zones: nothing to lock or write.
struct NoZones;

#[async_trait]
impl ZoneBatch for NoZones {
    async fn commit(self: Box<Self>, changes: ZoneChanges) -> Result<(), WatchError> {
        // Without zones the rules change nothing; anything else would be a bug upstream.
        if changes.watches.is_empty() && changes.events.is_empty() {
            Ok(())
        } else {
            Err(corrupt("zone changes for mowers without zones"))
        }
    }
}

pub(super) async fn begin_watch(
    store: &PostgresStore,
    mowers: &[MowerId],
    parsed: &[Uuid],
) -> Result<(WatchRead, Box<dyn WatchBatch>), WatchError> {
    let mut tx = store.pool().begin().await.map_err(unavailable)?;
    let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
    let rows = sqlx::query(READ_FOR_WATCH)
        .bind(ids)
        .bind(parsed)
        .fetch_all(&mut *tx)
        .await
        .map_err(unavailable)?;
    store.watch_counters().statement();
    let mut read = WatchRead::default();
    let mut sessions_read = false;
    for row in &rows {
        sessions_read |= has_session(row)?;
        let mower_id = mower_id(row)?;
        let polygon: Option<serde_json::Value> =
            row.try_get("geofence_polygon").map_err(corrupt)?;
        if let Some(polygon) = polygon {
            read.geofences.insert(
                mower_id,
                GeoPolygon::from_geojson(&polygon).map_err(corrupt)?,
            );
        }
        read.snapshots.insert(
            mower_id,
            WatchSnapshot {
                account_id: Some(AccountId(row.try_get("dir_account_id").map_err(corrupt)?)),
                geofence_version: row.try_get("current_geofence").map_err(corrupt)?,
                watch: watch_from(row)?,
            },
        );
    }
    Ok((read, watch_batch(store, tx, sessions_read)))
}

pub(super) async fn begin_sweep(
    store: &PostgresStore,
    silent_before: DateTime<Utc>,
    due_before: DateTime<Utc>,
    limit: usize,
) -> Result<(Vec<Watch>, Box<dyn WatchBatch>), WatchError> {
    let mut tx = store.pool().begin().await.map_err(unavailable)?;
    let rows = sqlx::query(READ_FOR_SWEEP)
        .bind(silent_before)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(due_before)
        .fetch_all(&mut *tx)
        .await
        .map_err(unavailable)?;
    store.watch_counters().statement();
    let mut watches = Vec::with_capacity(rows.len());
    let mut sessions_read = false;
    for row in &rows {
        sessions_read |= has_session(row)?;
        watches.extend(watch_from(row)?);
    }
    Ok((watches, watch_batch(store, tx, sessions_read)))
}

pub(super) async fn begin_zones(
    store: &PostgresStore,
    mowers: &[MowerId],
) -> Result<(ZoneRows, Box<dyn ZoneBatch>), WatchError> {
    let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
    let zoned: Vec<Uuid> = sqlx::query_scalar(ZONED_MOWERS)
        .bind(ids)
        .fetch_all(store.pool())
        .await
        .map_err(unavailable)?;
    store.counters().statement();
    if zoned.is_empty() {
        return Ok((ZoneRows::new(), Box::new(NoZones)));
    }
    // A zone created after that read is evaluated from the next batch on, as if it had been
    // created after this batch; one deleted meanwhile is simply not read below.
    let mut tx = store.pool().begin().await.map_err(unavailable)?;
    let rows = sqlx::query(READ_FOR_ZONES)
        .bind(zoned)
        .fetch_all(&mut *tx)
        .await
        .map_err(unavailable)?;
    store.counters().statement();
    let mut out = ZoneRows::new();
    for row in &rows {
        let mower_id = mower_id(row)?;
        let zone = zone_from(row, mower_id)?;
        match out.get_mut(&mower_id) {
            Some((zones, _)) => zones.push(zone),
            None => {
                out.insert(mower_id, (vec![zone], zone_watch_from(row)?));
            }
        }
    }
    Ok((
        out,
        Box::new(PostgresZoneBatch {
            store: store.clone(),
            tx,
        }),
    ))
}

pub(super) async fn busy(
    store: &PostgresStore,
    mowers: &[MowerId],
) -> Result<Vec<BusyStatus>, WatchError> {
    let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
    let rows = sqlx::query(READ_BUSY)
        .bind(ids)
        .fetch_all(store.pool())
        .await
        .map_err(unavailable)?;
    store.watch_counters().statement();
    rows.iter().map(busy_from).collect()
}

pub(super) async fn write_busy(
    store: &PostgresStore,
    statuses: &[BusyStatus],
) -> Result<(), WatchError> {
    let s = statuses;
    sqlx::query(WRITE_BUSY)
        .bind(s.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.account_id.0).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.activity.as_str()).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.observed_at).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.lat).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.lon).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.written_at).collect::<Vec<_>>())
        .execute(store.pool())
        .await
        .map_err(unavailable)?;
    store.watch_counters().statement();
    Ok(())
}
