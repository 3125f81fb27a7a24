//! The telemetry store on PostgreSQL: the batch unit of work of docs/rules.md §3 and the reads.
//!
//! Per batch: `BEGIN`; one statement reading the directory entry and the health row of every mower
//! of the batch, locked in mower id order; for a batch with late states, one statement reading
//! their stored neighbours ([`READ_NEIGHBOURS`]); then one statement writing every table (one
//! sub-statement per table, see [`WRITE_BATCH`]), a constant text with array parameters
//! (`UNNEST`), so that sqlx prepares it once per connection and the count of statements does not
//! depend on the batch; `COMMIT`.
//!
//! Why the lock is on `health_totals` and not on `mowers`: in READ COMMITTED, a statement that
//! waits for a row lock re-reads the *locked* row once the lock is granted, but the rows it joins
//! come from the snapshot taken before the wait. Locking the mower and joining its totals would
//! read the totals as they were before the batch we waited for: a lost update. So the row we lock
//! is the totals row itself, created with the mower, and the latest row's key is read from it
//! (`counted_until` equals the latest `observed_at`, see the migration).

use crate::{store_error, unavailable, PostgresStore};
use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, SubsecRound, TimeZone, Utc};
use chrono_tz::Tz;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row, Transaction};
use std::collections::BTreeMap;
use swath_application::ports::{
    StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows,
};
use swath_domain::{
    AccountId, Activity, BatchChanges, DayTotals, DirectoryEntry, HealthTotals, HistoryRow,
    LatestKey, LatestRow, MowerId, MowerSnapshot, PositionRow, StateReport, StoredState,
    TelemetryRows,
};
use uuid::Uuid;

const HEALTH_COLUMNS: &str = "h.mower_id, h.account_id, h.counted_from, h.counted_until, \
    h.last_activity, h.last_blade_on, h.last_lat, h.last_lon, h.mowing_ms, h.blade_ms, \
    h.distance_mm, h.error_count, h.charge_count, h.blade_since_reset_ms, h.blade_due_raised, \
    h.blade_reset_until";

/// The batch's read: directory entry and health row of each mower, locked in mower id order.
/// `FOR NO KEY UPDATE` because the batch never changes the key; it leaves foreign-key checks of
/// other writers (which take `KEY SHARE`) unblocked.
const READ_FOR_BATCH: &str = "SELECT m.account_id AS dir_account_id, s.time_zone, \
    m.blade_threshold_ms, h.mower_id, h.account_id, h.counted_from, h.counted_until, \
    h.last_activity, h.last_blade_on, h.last_lat, h.last_lon, h.mowing_ms, h.blade_ms, \
    h.distance_mm, h.error_count, h.charge_count, h.blade_since_reset_ms, h.blade_due_raised, \
    h.blade_reset_until \
    FROM health_totals h JOIN mowers m ON m.id = h.mower_id JOIN sites s ON s.id = m.site_id \
    WHERE h.mower_id = ANY($1) ORDER BY h.mower_id FOR NO KEY UPDATE OF h";

/// The batch's late states' neighbours, read after the lock (so from a snapshot that sees every
/// batch committed before it): for each `(mower, observed_at)` of `$1, $2`, the newest stored
/// history row at or before it and the oldest after it, each with its position, plus retention's
/// floors (always one row, even when nothing is found). Each probe walks the primary key
/// `(mower_id, observed_at)` of the partitions backwards or forwards and stops at the first row.
const READ_NEIGHBOURS: &str = "SELECT f.history_floor, f.positions_floor, n.mower_id, \
    n.observed_at, n.activity, n.blade_on, p.lat, p.lon \
    FROM (SELECT (SELECT done_until FROM retention_progress WHERE name = 'history_floor') \
    AS history_floor, (SELECT done_until FROM retention_progress \
    WHERE name = 'positions_floor') AS positions_floor) f \
    LEFT JOIN (SELECT l.mower_id, s.observed_at, s.activity, s.blade_on \
    FROM UNNEST($1::uuid[], $2::timestamptz[]) AS l(mower_id, observed_at) \
    CROSS JOIN LATERAL ((SELECT h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE h.mower_id = l.mower_id AND h.observed_at <= l.observed_at \
    ORDER BY h.observed_at DESC LIMIT 1) UNION ALL \
    (SELECT h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE h.mower_id = l.mower_id AND h.observed_at > l.observed_at \
    ORDER BY h.observed_at LIMIT 1)) s) n ON true \
    LEFT JOIN positions p ON p.mower_id = n.mower_id AND p.observed_at = n.observed_at";

/// The batch's writes, one sub-statement per table, sent as one statement (data-modifying
/// `WITH`): the history rows, the position rows of the history rows it inserted (a key stored
/// earlier writes nothing, W1/W2), one latest row, one health row and one row per touched day
/// per mower. Each sub-statement takes its own arrays (`UNNEST`) and writes its own table; only
/// the positions look at another one's result (the keys `history` returned). All of them run on
/// the statement's snapshot, which is all they need: the rules computed every value from the
/// rows the batch's reads locked. One statement instead of five saves four round trips and
/// statement starts per batch: about 12 % of a 64-state batch in `ingest_postgres` (decision 35).
///
/// The latest row's guard on `observed_at` cannot change the result (the rules only send strictly
/// newer rows); it makes a regression impossible even if they did.
const WRITE_BATCH: &str = "WITH history AS (INSERT INTO state_history \
    (mower_id, observed_at, activity, battery_percent, error_code, blade_on) \
    SELECT * FROM UNNEST($1::uuid[], $2::timestamptz[], $3::text[], $4::smallint[], $5::text[], \
    $6::boolean[]) ON CONFLICT (mower_id, observed_at) DO NOTHING \
    RETURNING mower_id, observed_at), \
    positions AS (INSERT INTO positions \
    (mower_id, observed_at, lat, lon, accuracy_m, heading_deg) \
    SELECT u.* FROM UNNEST($7::uuid[], $8::timestamptz[], $9::float8[], $10::float8[], \
    $11::float8[], $12::float8[]) AS u(mower_id, observed_at, lat, lon, accuracy_m, heading_deg) \
    JOIN history USING (mower_id, observed_at) \
    ON CONFLICT (mower_id, observed_at) DO NOTHING), \
    latest AS (INSERT INTO latest_states \
    (mower_id, account_id, observed_at, last_seen_at, state) \
    SELECT * FROM UNNEST($13::uuid[], $14::uuid[], $15::timestamptz[], $16::timestamptz[], \
    $17::jsonb[]) ON CONFLICT (mower_id) DO UPDATE SET account_id = EXCLUDED.account_id, \
    observed_at = EXCLUDED.observed_at, last_seen_at = EXCLUDED.last_seen_at, \
    state = EXCLUDED.state WHERE latest_states.observed_at < EXCLUDED.observed_at), \
    health AS (UPDATE health_totals h SET account_id = u.account_id, \
    counted_from = u.counted_from, counted_until = u.counted_until, last_activity = u.last_activity, \
    last_blade_on = u.last_blade_on, last_lat = u.last_lat, last_lon = u.last_lon, \
    mowing_ms = u.mowing_ms, blade_ms = u.blade_ms, distance_mm = u.distance_mm, \
    error_count = u.error_count, charge_count = u.charge_count, \
    blade_since_reset_ms = u.blade_since_reset_ms, blade_due_raised = u.blade_due_raised \
    FROM UNNEST($18::uuid[], $19::uuid[], $20::timestamptz[], $21::timestamptz[], \
    $22::text[], $23::boolean[], $24::float8[], $25::float8[], $26::int8[], $27::int8[], \
    $28::int8[], $29::int8[], $30::int8[], $31::int8[], $32::boolean[]) AS u(mower_id, \
    account_id, counted_from, counted_until, last_activity, last_blade_on, last_lat, last_lon, \
    mowing_ms, blade_ms, distance_mm, error_count, charge_count, blade_since_reset_ms, \
    blade_due_raised) \
    WHERE h.mower_id = u.mower_id), \
    days AS (INSERT INTO day_totals \
    (mower_id, day, mowing_ms, blade_ms, distance_mm, error_count, charge_count, state_count) \
    SELECT * FROM UNNEST($33::uuid[], $34::date[], $35::int8[], $36::int8[], $37::int8[], \
    $38::int8[], $39::int8[], $40::int8[]) ON CONFLICT (mower_id, day) DO UPDATE SET \
    mowing_ms = day_totals.mowing_ms + EXCLUDED.mowing_ms, \
    blade_ms = day_totals.blade_ms + EXCLUDED.blade_ms, \
    distance_mm = day_totals.distance_mm + EXCLUDED.distance_mm, \
    error_count = day_totals.error_count + EXCLUDED.error_count, \
    charge_count = day_totals.charge_count + EXCLUDED.charge_count, \
    state_count = day_totals.state_count + EXCLUDED.state_count) \
    SELECT 1";

/// A page of history: `$1` mower, rows with `$2 < observed_at < $3`, `$4` the limit. Both bounds
/// are always given (see [`bounds`]), so the statement has one text and PostgreSQL prunes the
/// monthly partitions and walks the primary key in order.
const READ_HISTORY: &str = "SELECT mower_id, observed_at, activity, battery_percent, error_code, \
    blade_on FROM state_history WHERE mower_id = $1 AND observed_at > $2 AND observed_at < $3 \
    ORDER BY observed_at LIMIT $4";

/// A page of positions, with the parameters of [`READ_HISTORY`].
const READ_TRACK: &str = "SELECT mower_id, observed_at, lat, lon, accuracy_m, heading_deg \
    FROM positions WHERE mower_id = $1 AND observed_at > $2 AND observed_at < $3 \
    ORDER BY observed_at LIMIT $4";

const READ_DAYS: &str = "SELECT mower_id, day, mowing_ms, blade_ms, distance_mm, error_count, \
    charge_count, state_count FROM day_totals WHERE mower_id = $1 AND day >= $2 AND day <= $3 \
    ORDER BY day";

/// `t` rounded up to the microsecond, the precision PostgreSQL keeps (sqlx truncates finer
/// digits when it sends a timestamp, which would move a bound the wrong way).
fn ceil_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    let truncated = t.trunc_subsecs(6);
    if truncated == t {
        t
    } else {
        truncated + Duration::microseconds(1)
    }
}

/// The window as two exclusive bounds on stored (microsecond) instants: `lower < observed_at <
/// upper`. `from` (inclusive) becomes the microsecond before it; an open bound becomes an instant
/// before or after every storable one.
fn bounds(window: &TimeWindow) -> (DateTime<Utc>, DateTime<Utc>) {
    let from = window
        .from
        .map(|from| ceil_micros(from) - Duration::microseconds(1));
    let lower = match (from, window.after) {
        (Some(from), Some(after)) => from.max(after),
        (Some(bound), None) | (None, Some(bound)) => bound,
        (None, None) => Utc.with_ymd_and_hms(-4000, 1, 1, 0, 0, 0).unwrap(),
    };
    let upper = window
        .to
        .map(ceil_micros)
        .unwrap_or_else(|| Utc.with_ymd_and_hms(100_000, 1, 1, 0, 0, 0).unwrap());
    (lower, upper)
}

fn history_from(row: &PgRow) -> Result<HistoryRow, StoreError> {
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

fn position_from(row: &PgRow) -> Result<PositionRow, StoreError> {
    Ok(PositionRow {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        observed_at: row.try_get("observed_at").map_err(corrupt)?,
        lat: row.try_get("lat").map_err(corrupt)?,
        lon: row.try_get("lon").map_err(corrupt)?,
        accuracy_m: row.try_get("accuracy_m").map_err(corrupt)?,
        heading_deg: row.try_get("heading_deg").map_err(corrupt)?,
    })
}

fn day_from(row: &PgRow) -> Result<DayTotals, StoreError> {
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

fn limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn activity(name: &str) -> Result<Activity, StoreError> {
    Activity::parse(name).ok_or_else(|| corrupt(format!("unknown activity {name:?}")))
}

/// A health row, or `None` for a mower that never reported (`counted_until` NULL).
fn health_from(row: &PgRow) -> Result<Option<HealthTotals>, StoreError> {
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

fn latest_from(row: &PgRow) -> Result<LatestRow, StoreError> {
    let state: serde_json::Value = row.try_get("state").map_err(corrupt)?;
    let state: StateReport = serde_json::from_value(state).map_err(corrupt)?;
    Ok(LatestRow {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        account_id: AccountId(row.try_get("account_id").map_err(corrupt)?),
        observed_at: row.try_get("observed_at").map_err(corrupt)?,
        last_seen_at: row.try_get("last_seen_at").map_err(corrupt)?,
        state,
    })
}

struct PostgresBatch {
    store: PostgresStore,
    tx: Transaction<'static, Postgres>,
}

#[async_trait]
impl TelemetryBatch for PostgresBatch {
    async fn neighbours(
        &mut self,
        late: &[(MowerId, DateTime<Utc>)],
        snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
    ) -> Result<(), StoreError> {
        let rows = sqlx::query(READ_NEIGHBOURS)
            .bind(late.iter().map(|(m, _)| m.0).collect::<Vec<_>>())
            .bind(late.iter().map(|(_, at)| *at).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(unavailable)?;
        self.store.counters().statement();
        let floor = |name: &str| -> Result<Option<DateTime<Utc>>, StoreError> {
            match rows.first() {
                Some(row) => row.try_get(name).map_err(corrupt),
                None => Ok(None),
            }
        };
        let (history_floor, positions_floor) = (floor("history_floor")?, floor("positions_floor")?);
        for (mower, _) in late {
            if let Some(snapshot) = snapshots.get_mut(mower) {
                let near = &mut snapshot.neighbourhood;
                if let Some(floor) = history_floor {
                    near.raise_history_floor(floor);
                }
                if let Some(floor) = positions_floor {
                    near.raise_positions_floor(floor);
                }
            }
        }
        for row in &rows {
            let Some(mower) = row
                .try_get::<Option<Uuid>, _>("mower_id")
                .map_err(corrupt)?
            else {
                continue;
            };
            let Some(snapshot) = snapshots.get_mut(&MowerId(mower)) else {
                continue;
            };
            let name: String = row.try_get("activity").map_err(corrupt)?;
            snapshot.neighbourhood.insert_stored(StoredState {
                observed_at: row.try_get("observed_at").map_err(corrupt)?,
                activity: activity(&name)?,
                blade_on: row.try_get("blade_on").map_err(corrupt)?,
                lat: row.try_get("lat").map_err(corrupt)?,
                lon: row.try_get("lon").map_err(corrupt)?,
            });
        }
        Ok(())
    }

    async fn commit(self: Box<Self>, changes: BatchChanges) -> Result<(), StoreError> {
        let PostgresBatch { store, mut tx } = *self;
        let counters = store.counters();

        let (h, p, l, t, d) = (
            &changes.history,
            &changes.positions,
            &changes.latest,
            &changes.health,
            &changes.days,
        );
        let documents = l
            .iter()
            .map(|r| serde_json::to_value(&r.state))
            .collect::<Result<Vec<_>, _>>()
            .map_err(corrupt)?;
        sqlx::query(WRITE_BATCH)
            .bind(h.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(h.iter().map(|r| r.observed_at).collect::<Vec<_>>())
            .bind(h.iter().map(|r| r.activity.as_str()).collect::<Vec<_>>())
            .bind(
                h.iter()
                    .map(|r| r.battery_percent.map(i16::from))
                    .collect::<Vec<_>>(),
            )
            .bind(
                h.iter()
                    .map(|r| r.error_code.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(h.iter().map(|r| r.blade_on).collect::<Vec<_>>())
            .bind(p.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(p.iter().map(|r| r.observed_at).collect::<Vec<_>>())
            .bind(p.iter().map(|r| r.lat).collect::<Vec<_>>())
            .bind(p.iter().map(|r| r.lon).collect::<Vec<_>>())
            .bind(p.iter().map(|r| r.accuracy_m).collect::<Vec<_>>())
            .bind(p.iter().map(|r| r.heading_deg).collect::<Vec<_>>())
            .bind(l.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(l.iter().map(|r| r.account_id.0).collect::<Vec<_>>())
            .bind(l.iter().map(|r| r.observed_at).collect::<Vec<_>>())
            .bind(l.iter().map(|r| r.last_seen_at).collect::<Vec<_>>())
            .bind(documents)
            .bind(t.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.account_id.0).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.counted_from).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.counted_until).collect::<Vec<_>>())
            .bind(
                t.iter()
                    .map(|r| r.last_activity.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(t.iter().map(|r| r.last_blade_on).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.last_lat).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.last_lon).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.mowing_ms).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.blade_ms).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.distance_mm).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.error_count).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.charge_count).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.blade_since_reset_ms).collect::<Vec<_>>())
            .bind(t.iter().map(|r| r.blade_due_raised).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.day).collect::<Vec<NaiveDate>>())
            .bind(d.iter().map(|r| r.mowing_ms).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.blade_ms).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.distance_mm).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.error_count).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.charge_count).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.state_count).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
        counters.statement();
        // W6's events and alerts, in this transaction (only when the rules raised any).
        crate::watch::store_ingest_events(&mut tx, &changes.events, counters).await?;

        tx.commit().await.map_err(store_error)?;
        counters.commit();
        Ok(())
    }
}

impl PostgresStore {
    /// One page of a mower's history or track: `sql` takes (mower, lower, upper, limit) and is
    /// read in key order; an empty window reads nothing.
    async fn window_rows<T>(
        &self,
        sql: &'static str,
        mower: MowerId,
        window: &TimeWindow,
        row: fn(&PgRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let (lower, upper) = bounds(window);
        if lower >= upper || window.limit == 0 {
            return Ok(Vec::new());
        }
        sqlx::query(sql)
            .bind(mower.0)
            .bind(lower)
            .bind(upper)
            .bind(limit(window.limit))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?
            .iter()
            .map(row)
            .collect()
    }
}

#[async_trait]
impl TelemetryStore for PostgresStore {
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError> {
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        let rows = sqlx::query(READ_FOR_BATCH)
            .bind(ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(unavailable)?;
        self.counters().statement();
        let mut snapshots = BTreeMap::new();
        for row in &rows {
            let mower_id = MowerId(row.try_get("mower_id").map_err(corrupt)?);
            let zone: String = row.try_get("time_zone").map_err(corrupt)?;
            let time_zone: Tz = zone
                .parse()
                .map_err(|_| corrupt(format!("mower {mower_id}: unknown time zone {zone:?}")))?;
            let health = health_from(row)?;
            snapshots.insert(
                mower_id,
                MowerSnapshot {
                    directory: Some(DirectoryEntry {
                        mower_id,
                        account_id: AccountId(row.try_get("dir_account_id").map_err(corrupt)?),
                        time_zone,
                        blade_threshold_ms: row.try_get("blade_threshold_ms").map_err(corrupt)?,
                    }),
                    latest: health.as_ref().map(|h| LatestKey {
                        account_id: h.account_id,
                        observed_at: h.counted_until,
                    }),
                    health,
                    neighbourhood: Default::default(),
                },
            );
        }
        Ok((
            snapshots,
            Box::new(PostgresBatch {
                store: self.clone(),
                tx,
            }),
        ))
    }

    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        sqlx::query(
            "SELECT mower_id, account_id, observed_at, last_seen_at, state FROM latest_states \
             WHERE mower_id = ANY($1) ORDER BY mower_id",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?
        .iter()
        .map(latest_from)
        .collect()
    }

    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {HEALTH_COLUMNS} FROM health_totals h WHERE h.mower_id = $1"
        ))
        .bind(mower.0)
        .fetch_optional(&self.pool)
        .await
        .map_err(unavailable)?;
        match row {
            Some(row) => health_from(&row),
            None => Ok(None),
        }
    }

    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError> {
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        let mut out = TelemetryRows::default();
        for row in sqlx::query(
            "SELECT mower_id, observed_at, activity, battery_percent, error_code, blade_on \
             FROM state_history WHERE mower_id = ANY($1) ORDER BY mower_id, observed_at",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?
        {
            out.history.push(history_from(&row)?);
        }
        for row in sqlx::query(
            "SELECT mower_id, observed_at, lat, lon, accuracy_m, heading_deg FROM positions \
             WHERE mower_id = ANY($1) ORDER BY mower_id, observed_at",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?
        {
            out.positions.push(position_from(&row)?);
        }
        out.latest = self.latest(mowers).await?;
        for row in sqlx::query(&format!(
            "SELECT {HEALTH_COLUMNS} FROM health_totals h WHERE h.mower_id = ANY($1) \
             AND h.counted_until IS NOT NULL ORDER BY h.mower_id"
        ))
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?
        {
            out.health.extend(health_from(&row)?);
        }
        for row in sqlx::query(
            "SELECT mower_id, day, mowing_ms, blade_ms, distance_mm, error_count, charge_count, \
             state_count FROM day_totals WHERE mower_id = ANY($1) ORDER BY mower_id, day",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?
        {
            out.days.push(day_from(&row)?);
        }
        Ok(out)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError> {
        // PostgreSQL has no bound on rows per mower: only retention (by age) removes rows.
        self.window_rows(READ_HISTORY, mower, window, history_from)
            .await
            .map(WindowRows::complete)
    }

    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError> {
        self.window_rows(READ_TRACK, mower, window, position_from)
            .await
            .map(WindowRows::complete)
    }

    async fn days(
        &self,
        mower: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError> {
        sqlx::query(READ_DAYS)
            .bind(mower.0)
            .bind(from)
            .bind(to)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?
            .iter()
            .map(day_from)
            .collect()
    }
}
