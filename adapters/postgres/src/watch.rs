//! The notification side on PostgreSQL (the `WatchStore` port): the watcher's batch unit of work,
//! the offline sweep, virtual zones (W7), the busy status, geofences, zones, the events feed and
//! alerts.
//!
//! The watcher's batch, like ingestion's: `BEGIN`; one statement reading each mower's directory
//! account, geofence version (with its polygon when the watcher has not parsed that version yet)
//! and watch row, the watch rows locked in mower id order; then one constant statement per table
//! with array parameters (watches, events, alert clears, raised alerts), skipped when it has no
//! rows (most batches raise no event); `COMMIT`. The count of statements does not depend on the
//! size of the batch, and is counted in [`PostgresStore::watch_counters`].
//!
//! The lock is on `mower_watches`, the row the rules advance (see the migration): in READ
//! COMMITTED the locked row is re-read after a lock wait, but joined rows (the mower, its
//! geofence) come from the statement's snapshot. For those that is harmless: a mower's account
//! never changes, and a geofence replaced while we waited is simply used from the next batch on.
//! The version and its polygon come from that one snapshot, so they always belong together: a
//! second statement (as there was before decision 48) would see a replacement committed between
//! the two and find the version read first gone, which the watcher took for "no geofence".

use crate::{Counters, PostgresStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row, Transaction};
use swath_application::ports::{
    AlertQuery, EventQuery, Geofence, StoreError, WatchBatch, WatchError, WatchRead, WatchRows,
    WatchStore, ZoneBatch, ZoneRows,
};
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Occupancy, Zone, ZoneChanges, ZoneWatch, MAX_ZONES_PER_MOWER};
use swath_domain::watch::{
    ingest_notifications, Alert, AlertChanges, AlertKind, Event, GeoPolygon, Severity, Watch,
    WatchChanges, WatchSnapshot,
};
use swath_domain::{AccountId, Activity, IngestEvent, MowerId};
use uuid::Uuid;

const WATCH_COLUMNS: &str = "w.mower_id, w.account_id, w.watched_until, w.last_seen_at, \
    w.last_activity, w.error_code, w.outside_geofence, w.battery_low, w.offline, \
    w.geofence_version";

/// The batch's read: directory account, current geofence version and the watch row of each
/// mower, the watch rows locked in mower id order. `FOR NO KEY UPDATE`: the key never changes.
/// The geofence's polygon comes with its version unless the watcher has parsed that version
/// (`$2`, versions are unique across mowers): one snapshot for both (decision 48).
const READ_FOR_WATCH: &str =
    "SELECT m.account_id AS dir_account_id, g.version AS current_geofence, \
    CASE WHEN g.version = ANY($2) THEN NULL ELSE g.polygon END AS geofence_polygon, \
    w.mower_id, w.account_id, w.watched_until, w.last_seen_at, w.last_activity, w.error_code, \
    w.outside_geofence, w.battery_low, w.offline, w.geofence_version \
    FROM mower_watches w JOIN mowers m ON m.id = w.mower_id \
    LEFT JOIN geofences g ON g.mower_id = w.mower_id \
    WHERE w.mower_id = ANY($1) ORDER BY w.mower_id FOR NO KEY UPDATE OF w";

/// Silent watches, skipping those a running batch holds (it is about to bring them online).
const READ_FOR_SWEEP: &str = "SELECT w.mower_id, w.account_id, w.watched_until, w.last_seen_at, \
    w.last_activity, w.error_code, w.outside_geofence, w.battery_low, w.offline, \
    w.geofence_version FROM mower_watches w \
    WHERE NOT w.offline AND w.last_seen_at < $1 ORDER BY w.mower_id LIMIT $2 \
    FOR NO KEY UPDATE SKIP LOCKED";

const UPDATE_WATCHES: &str = "UPDATE mower_watches w SET account_id = u.account_id, \
    watched_until = u.watched_until, last_seen_at = u.last_seen_at, \
    last_activity = u.last_activity, error_code = u.error_code, \
    outside_geofence = u.outside_geofence, battery_low = u.battery_low, offline = u.offline, \
    geofence_version = u.geofence_version \
    FROM UNNEST($1::uuid[], $2::uuid[], $3::timestamptz[], $4::timestamptz[], $5::text[], \
    $6::text[], $7::boolean[], $8::boolean[], $9::boolean[], $10::uuid[]) \
    AS u(mower_id, account_id, watched_until, last_seen_at, last_activity, error_code, \
    outside_geofence, battery_low, offline, geofence_version) WHERE w.mower_id = u.mower_id";

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

const READ_BUSY: &str = "SELECT mower_id, account_id, activity, observed_at, lat, lon, \
    written_at FROM busy_statuses WHERE mower_id = ANY($1) ORDER BY mower_id";

/// Never replaces a status by one that is not newer.
const WRITE_BUSY: &str = "INSERT INTO busy_statuses \
    (mower_id, account_id, activity, observed_at, lat, lon, written_at) \
    SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::float8[], \
    $6::float8[], $7::timestamptz[]) ON CONFLICT (mower_id) DO UPDATE SET \
    account_id = EXCLUDED.account_id, activity = EXCLUDED.activity, \
    observed_at = EXCLUDED.observed_at, lat = EXCLUDED.lat, lon = EXCLUDED.lon, \
    written_at = EXCLUDED.written_at WHERE busy_statuses.observed_at < EXCLUDED.observed_at";

const ALERT_COLUMNS: &str = "id, mower_id, account_id, kind, severity, raised_at, cleared_at, code";

fn unavailable(e: impl std::fmt::Display) -> WatchError {
    WatchError::Unavailable(e.to_string())
}

fn corrupt(e: impl std::fmt::Display) -> WatchError {
    WatchError::Corrupt(e.to_string())
}

fn activity(name: &str) -> Result<Activity, WatchError> {
    Activity::parse(name).ok_or_else(|| corrupt(format!("unknown activity {name:?}")))
}

/// A watch row, or `None` for a mower never watched.
fn watch_from(row: &PgRow) -> Result<Option<Watch>, WatchError> {
    let watched_until: Option<DateTime<Utc>> = row.try_get("watched_until").map_err(corrupt)?;
    let Some(watched_until) = watched_until else {
        return Ok(None);
    };
    let account: Option<Uuid> = row.try_get("account_id").map_err(corrupt)?;
    let last_seen_at: Option<DateTime<Utc>> = row.try_get("last_seen_at").map_err(corrupt)?;
    let last_activity: Option<String> = row.try_get("last_activity").map_err(corrupt)?;
    Ok(Some(Watch {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        account_id: AccountId(account.ok_or_else(|| corrupt("watch row without account"))?),
        watched_until,
        last_seen_at: last_seen_at.ok_or_else(|| corrupt("watch row without last_seen_at"))?,
        last_activity: activity(&last_activity.unwrap_or_default())?,
        error_code: row.try_get("error_code").map_err(corrupt)?,
        outside_geofence: row.try_get("outside_geofence").map_err(corrupt)?,
        battery_low: row.try_get("battery_low").map_err(corrupt)?,
        offline: row.try_get("offline").map_err(corrupt)?,
        geofence_version: row.try_get("geofence_version").map_err(corrupt)?,
    }))
}

fn event_from(row: &PgRow) -> Result<Event, WatchError> {
    let document: serde_json::Value = row.try_get("document").map_err(corrupt)?;
    serde_json::from_value(document).map_err(corrupt)
}

fn alert_from(row: &PgRow) -> Result<Alert, WatchError> {
    let kind: String = row.try_get("kind").map_err(corrupt)?;
    let severity: String = row.try_get("severity").map_err(corrupt)?;
    Ok(Alert {
        id: row.try_get("id").map_err(corrupt)?,
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        account_id: AccountId(row.try_get("account_id").map_err(corrupt)?),
        kind: AlertKind::parse(&kind).ok_or_else(|| corrupt(format!("alert kind {kind:?}")))?,
        severity: Severity::parse(&severity)
            .ok_or_else(|| corrupt(format!("severity {severity:?}")))?,
        raised_at: row.try_get("raised_at").map_err(corrupt)?,
        cleared_at: row.try_get("cleared_at").map_err(corrupt)?,
        code: row.try_get("code").map_err(corrupt)?,
    })
}

fn busy_from(row: &PgRow) -> Result<BusyStatus, WatchError> {
    let name: String = row.try_get("activity").map_err(corrupt)?;
    Ok(BusyStatus {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        account_id: AccountId(row.try_get("account_id").map_err(corrupt)?),
        activity: activity(&name)?,
        observed_at: row.try_get("observed_at").map_err(corrupt)?,
        lat: row.try_get("lat").map_err(corrupt)?,
        lon: row.try_get("lon").map_err(corrupt)?,
        written_at: row.try_get("written_at").map_err(corrupt)?,
    })
}

fn zone_from(row: &PgRow, mower_id: MowerId) -> Result<Zone, WatchError> {
    let polygon: serde_json::Value = row.try_get("polygon").map_err(corrupt)?;
    Ok(Zone {
        id: row.try_get("id").map_err(corrupt)?,
        mower_id,
        account_id: AccountId(row.try_get("account_id").map_err(corrupt)?),
        name: row.try_get("name").map_err(corrupt)?,
        polygon: GeoPolygon::from_geojson(&polygon).map_err(corrupt)?,
        created_at: row.try_get("created_at").map_err(corrupt)?,
        updated_at: row.try_get("updated_at").map_err(corrupt)?,
    })
}

fn zone_watch_from(row: &PgRow) -> Result<ZoneWatch, WatchError> {
    let occupancy: serde_json::Value = row.try_get("occupancy").map_err(corrupt)?;
    Ok(ZoneWatch {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        evaluated_until: row.try_get("evaluated_until").map_err(corrupt)?,
        occupancy: serde_json::from_value::<Vec<Occupancy>>(occupancy).map_err(corrupt)?,
    })
}

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
/// alerts, in the ingest transaction. Batches without events (nearly all) cost nothing more.
pub(crate) async fn store_ingest_events(
    tx: &mut Transaction<'static, Postgres>,
    events: &[IngestEvent],
    counters: &Counters,
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let (events, alerts) = ingest_notifications(events);
    insert_events(tx, &events, counters)
        .await
        .map_err(crate::store_error)?;
    apply_alerts(tx, &alerts, counters)
        .await
        .map_err(crate::store_error)?;
    Ok(())
}

struct PostgresWatchBatch {
    store: PostgresStore,
    tx: Transaction<'static, Postgres>,
}

#[async_trait]
impl WatchBatch for PostgresWatchBatch {
    async fn commit(self: Box<Self>, changes: WatchChanges) -> Result<(), WatchError> {
        let PostgresWatchBatch { store, mut tx } = *self;
        let counters = store.watch_counters();
        let w = &changes.watches;
        sqlx::query(UPDATE_WATCHES)
            .bind(w.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(w.iter().map(|r| r.account_id.0).collect::<Vec<_>>())
            .bind(w.iter().map(|r| r.watched_until).collect::<Vec<_>>())
            .bind(w.iter().map(|r| r.last_seen_at).collect::<Vec<_>>())
            .bind(
                w.iter()
                    .map(|r| r.last_activity.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                w.iter()
                    .map(|r| r.error_code.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(w.iter().map(|r| r.outside_geofence).collect::<Vec<_>>())
            .bind(w.iter().map(|r| r.battery_low).collect::<Vec<_>>())
            .bind(w.iter().map(|r| r.offline).collect::<Vec<_>>())
            .bind(w.iter().map(|r| r.geofence_version).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        counters.statement();
        insert_events(&mut tx, &changes.events, counters)
            .await
            .map_err(unavailable)?;
        apply_alerts(&mut tx, &changes.alerts, counters)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        counters.commit();
        Ok(())
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
        insert_events(&mut tx, &changes.events, counters)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        counters.commit();
        Ok(())
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

#[async_trait]
impl WatchStore for PostgresStore {
    async fn begin_watch(
        &self,
        mowers: &[MowerId],
        parsed: &[Uuid],
    ) -> Result<(WatchRead, Box<dyn WatchBatch>), WatchError> {
        let mut tx = self.pool().begin().await.map_err(unavailable)?;
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        let rows = sqlx::query(READ_FOR_WATCH)
            .bind(ids)
            .bind(parsed)
            .fetch_all(&mut *tx)
            .await
            .map_err(unavailable)?;
        self.watch_counters().statement();
        let mut read = WatchRead::default();
        for row in &rows {
            let mower_id = MowerId(row.try_get("mower_id").map_err(corrupt)?);
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
        Ok((
            read,
            Box::new(PostgresWatchBatch {
                store: self.clone(),
                tx,
            }),
        ))
    }

    async fn begin_sweep(
        &self,
        silent_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<(Vec<Watch>, Box<dyn WatchBatch>), WatchError> {
        let mut tx = self.pool().begin().await.map_err(unavailable)?;
        let rows = sqlx::query(READ_FOR_SWEEP)
            .bind(silent_before)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await
            .map_err(unavailable)?;
        self.watch_counters().statement();
        let mut watches = Vec::with_capacity(rows.len());
        for row in &rows {
            watches.extend(watch_from(row)?);
        }
        Ok((
            watches,
            Box::new(PostgresWatchBatch {
                store: self.clone(),
                tx,
            }),
        ))
    }

    async fn begin_zones(
        &self,
        mowers: &[MowerId],
    ) -> Result<(ZoneRows, Box<dyn ZoneBatch>), WatchError> {
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        let zoned: Vec<Uuid> = sqlx::query_scalar(ZONED_MOWERS)
            .bind(ids)
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?;
        self.counters().statement();
        if zoned.is_empty() {
            return Ok((ZoneRows::new(), Box::new(NoZones)));
        }
        // A zone created after that read is evaluated from the next batch on, as if it had been
        // created after this batch; one deleted meanwhile is simply not read below.
        let mut tx = self.pool().begin().await.map_err(unavailable)?;
        let rows = sqlx::query(READ_FOR_ZONES)
            .bind(zoned)
            .fetch_all(&mut *tx)
            .await
            .map_err(unavailable)?;
        self.counters().statement();
        let mut out = ZoneRows::new();
        for row in &rows {
            let mower_id = MowerId(row.try_get("mower_id").map_err(corrupt)?);
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
                store: self.clone(),
                tx,
            }),
        ))
    }

    async fn busy(&self, mowers: &[MowerId]) -> Result<Vec<BusyStatus>, WatchError> {
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        let rows = sqlx::query(READ_BUSY)
            .bind(ids)
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?;
        self.watch_counters().statement();
        rows.iter().map(busy_from).collect()
    }

    async fn write_busy(&self, statuses: &[BusyStatus]) -> Result<(), WatchError> {
        let s = statuses;
        sqlx::query(WRITE_BUSY)
            .bind(s.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.account_id.0).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.activity.as_str()).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.observed_at).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.lat).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.lon).collect::<Vec<_>>())
            .bind(s.iter().map(|r| r.written_at).collect::<Vec<_>>())
            .execute(self.pool())
            .await
            .map_err(unavailable)?;
        self.watch_counters().statement();
        Ok(())
    }

    async fn put_geofence(&self, g: Geofence) -> Result<(), WatchError> {
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
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    async fn geofence(&self, mower: MowerId) -> Result<Option<Geofence>, WatchError> {
        let row = sqlx::query(
            "SELECT mower_id, account_id, version, polygon, updated_at FROM geofences \
             WHERE mower_id = $1",
        )
        .bind(mower.0)
        .fetch_optional(self.pool())
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

    async fn delete_geofence(&self, mower: MowerId) -> Result<bool, WatchError> {
        let done = sqlx::query("DELETE FROM geofences WHERE mower_id = $1")
            .bind(mower.0)
            .execute(self.pool())
            .await
            .map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn zones(&self, mower: MowerId) -> Result<Vec<Zone>, WatchError> {
        let rows = sqlx::query(
            "SELECT id, account_id, name, polygon, created_at, updated_at FROM zones \
             WHERE mower_id = $1",
        )
        .bind(mower.0)
        .fetch_all(self.pool())
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

    async fn create_zone(&self, zone: Zone) -> Result<(), WatchError> {
        let mut tx = self.pool().begin().await.map_err(unavailable)?;
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

    async fn update_zone(&self, zone: Zone) -> Result<bool, WatchError> {
        let done = sqlx::query(
            "UPDATE zones SET name = $3, polygon = $4, updated_at = $5 \
             WHERE id = $1 AND mower_id = $2",
        )
        .bind(zone.id)
        .bind(zone.mower_id.0)
        .bind(&zone.name)
        .bind(zone.polygon.to_geojson())
        .bind(zone.updated_at)
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_zone(&self, mower: MowerId, zone: Uuid) -> Result<bool, WatchError> {
        let done = sqlx::query("DELETE FROM zones WHERE id = $1 AND mower_id = $2")
            .bind(zone)
            .bind(mower.0)
            .execute(self.pool())
            .await
            .map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn zone_watch(&self, mower: MowerId) -> Result<Option<ZoneWatch>, WatchError> {
        let row = sqlx::query(
            "SELECT mower_id, evaluated_until, occupancy FROM zone_watches \
             WHERE mower_id = $1 AND evaluated_until IS NOT NULL",
        )
        .bind(mower.0)
        .fetch_optional(self.pool())
        .await
        .map_err(unavailable)?;
        row.as_ref().map(zone_watch_from).transpose()
    }

    async fn reset_blade(&self, mower: MowerId, at: DateTime<Utc>) -> Result<(), WatchError> {
        let mut tx = self.pool().begin().await.map_err(unavailable)?;
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
        sqlx::query(
            "UPDATE alerts SET cleared_at = $2 WHERE mower_id = $1 AND kind = 'blade_due' \
             AND cleared_at IS NULL",
        )
        .bind(mower.0)
        .bind(at)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(())
    }

    async fn events(&self, query: &EventQuery) -> Result<Vec<Event>, WatchError> {
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
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?;
        rows.iter().map(event_from).collect()
    }

    async fn open_alerts(&self, query: &AlertQuery) -> Result<Vec<Alert>, WatchError> {
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
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?;
        rows.iter().map(alert_from).collect()
    }

    async fn export_watch(&self, mowers: &[MowerId]) -> Result<WatchRows, WatchError> {
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        let mut out = WatchRows::default();
        for row in sqlx::query(&format!(
            "SELECT {WATCH_COLUMNS} FROM mower_watches w WHERE w.mower_id = ANY($1) \
             AND w.watched_until IS NOT NULL ORDER BY w.mower_id"
        ))
        .bind(&ids)
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?
        {
            out.watches.extend(watch_from(&row)?);
        }
        for row in sqlx::query(
            "SELECT document FROM notification_events WHERE mower_id = ANY($1) ORDER BY id",
        )
        .bind(&ids)
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?
        {
            out.events.push(event_from(&row)?);
        }
        for row in sqlx::query(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE mower_id = ANY($1) ORDER BY id"
        ))
        .bind(&ids)
        .fetch_all(self.pool())
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
        .fetch_all(self.pool())
        .await
        .map_err(unavailable)?
        {
            out.zone_watches.push(zone_watch_from(&row)?);
        }
        out.busy = sqlx::query(READ_BUSY)
            .bind(&ids)
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?
            .iter()
            .map(busy_from)
            .collect::<Result<_, _>>()?;
        Ok(out)
    }
}
