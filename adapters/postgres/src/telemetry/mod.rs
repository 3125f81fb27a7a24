//! The telemetry store on PostgreSQL: the batch unit of work of docs/rules.md §3 and the reads.
//!
//! Per batch: `BEGIN`; one statement reading the directory entry and the health row of every mower
//! of the batch, locked in mower id order; for a batch with late states, one statement reading
//! their stored neighbours within a window around them (two probes per late state,
//! [`READ_NEAR_PROBES`](batch::READ_NEAR_PROBES), or one range per mower when a mower has several,
//! [`READ_NEAR_NEIGHBOURS`](batch::READ_NEAR_NEIGHBOURS)), and one more for those whose
//! neighbours lie beyond it ([`READ_NEIGHBOURS`](batch::READ_NEIGHBOURS)); then one statement
//! writing every table (one sub-statement per table, see [`WRITE_BATCH`](batch::WRITE_BATCH); the
//! sessions' two only in [`WRITE_BATCH_WITH_SESSIONS`](batch::WRITE_BATCH_WITH_SESSIONS), for a
//! batch that writes or removes session rows, decision 212).
//! Each is a constant text with array parameters (`UNNEST`), so that the count of statements does
//! not depend on the batch; sqlx prepares each once per connection, except the windowed read,
//! which is planned with its window's values (decisions 168 and 171).
//!
//! Why the lock is on `health_totals` and not on `mowers`: in READ COMMITTED, a statement that
//! waits for a row lock re-reads the *locked* row once the lock is granted, but the rows it joins
//! come from the snapshot taken before the wait. Locking the mower and joining its totals would
//! read the totals as they were before the batch we waited for: a lost update. So the row we lock
//! is the totals row itself, created with the mower, and the latest row's key is read from it
//! (`counted_until` equals the latest `observed_at`, see the migration).
//!
//! Layout: this file holds the `TelemetryStore` impl (the batch's read and lock, the reads);
//! `batch` the open batch (late states' neighbours, the one write statement, the commit);
//! `newest` the newest session's columns on the health row; `rows` the decoding of rows.

mod batch;
mod newest;
mod rows;

use batch::PostgresBatch;
use rows::{corrupt, day_from, health_from, history_from, latest_from, position_from};

use crate::{unavailable, PostgresStore};
use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, SubsecRound, TimeZone, Utc};
use chrono_tz::Tz;
use sqlx::postgres::PgRow;
use sqlx::Row;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use swath_application::ports::{
    StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows,
};
use swath_domain::{
    AccountId, DayTotals, DirectoryEntry, HealthTotals, HistoryRow, LatestKey, LatestRow, MowerId,
    MowerSnapshot, PositionRow, TelemetryRows,
};
use uuid::Uuid;

const HEALTH_COLUMNS: &str = "h.mower_id, h.account_id, h.counted_from, h.counted_until, \
    h.last_activity, h.last_blade_on, h.last_lat, h.last_lon, h.mowing_ms, h.blade_ms, \
    h.distance_mm, h.error_count, h.charge_count, h.blade_since_reset_ms, h.blade_due_raised, \
    h.blade_reset_until";

/// The batch's read: directory entry and health row of each mower, locked in mower id order,
/// with the mower's newest session (W8) and the rest after its end, which the health row keeps
/// (decision 207): no other table is read.
/// `FOR NO KEY UPDATE` because the batch never changes the key; it leaves foreign-key checks of
/// other writers (which take `KEY SHARE`) unblocked.
static READ_FOR_BATCH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT m.account_id AS dir_account_id, s.time_zone, \
    m.blade_threshold_ms, {HEALTH_COLUMNS}, h.session_carry \
    FROM health_totals h JOIN mowers m ON m.id = h.mower_id JOIN sites s ON s.id = m.site_id \
    WHERE h.mower_id = ANY($1) ORDER BY h.mower_id FOR NO KEY UPDATE OF h"
    )
});

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

fn limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
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
        let rows = sqlx::query(READ_FOR_BATCH.as_str())
            .bind(ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(unavailable)?;
        self.counters().statement();
        let mut snapshots = BTreeMap::new();
        for row in &rows {
            let mower_id = rows::mower_id(row)?;
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
                    sessions: newest::decode(
                        row.try_get("session_carry").map_err(corrupt)?,
                        mower_id,
                    )?,
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

    /// On the read's own connections, put back without sqlx's ping (decision 124).
    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
        let mut taken = self.reads.take().await.map_err(unavailable)?;
        let rows = sqlx::query(
            "SELECT mower_id, account_id, observed_at, last_seen_at, state FROM latest_states \
             WHERE mower_id = ANY($1) ORDER BY mower_id",
        )
        .bind(ids)
        .fetch_all(taken.connection())
        .await
        .map_err(unavailable)?;
        // Only now, its answer read to the end; on an error (above) it is closed.
        taken.give_back();
        rows.iter().map(latest_from).collect()
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
        for row in sqlx::query(crate::sessions::READ_EXPORT.as_str())
            .bind(&ids)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?
        {
            out.sessions
                .push(crate::sessions::session_from(&row).map_err(corrupt)?);
        }
        Ok(out)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        // The pool's gauges ride on the ping, which `/readyz` and every `/metrics` scrape ask for.
        let size = self.pool.size() as usize;
        let idle = self.pool.num_idle().min(size);
        metrics::gauge!("swath_postgres_pool_connections", "state" => "idle").set(idle as f64);
        metrics::gauge!("swath_postgres_pool_connections", "state" => "busy")
            .set((size - idle) as f64);
        metrics::gauge!("swath_postgres_pool_max_connections")
            .set(f64::from(self.pool.options().get_max_connections()));
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
