//! `RetentionStore` on PostgreSQL.
//!
//! The lock is a session advisory lock (`pg_try_advisory_lock`) on one connection taken from the
//! pool for the whole run; every statement of the run goes through that connection. Several
//! replicas may start a run at once: one gets the lock, the others skip. A run that is dropped
//! without [`RetentionRun::release`] (its task aborted) closes that connection instead of
//! returning it to the pool, so the lock never outlives the run in a pooled session.
//!
//! No statement reads or rewrites a whole table:
//! - a monthly partition entirely past its limit is dropped (`DROP TABLE`), under a
//!   `lock_timeout`: dropping a partition takes a brief `ACCESS EXCLUSIVE` lock on the parent
//!   (`DETACH … CONCURRENTLY` would not, but PostgreSQL refuses it on a table with a `DEFAULT`
//!   partition). If the lock is not granted within [`DROP_LOCK_TIMEOUT`], nothing changes and
//!   the partition's rows are deleted in chunks instead;
//! - other rows go in chunks, per partition: `DELETE FROM part WHERE ctid IN (SELECT ctid FROM
//!   part WHERE mower_id = ANY($1) AND … LIMIT $n)`. The inner select walks the primary key
//!   `(mower_id, observed_at)` range of each given mower, so a chunk touches the rows it deletes
//!   and the few it keeps, never the rest of the partition.
//!
//! Downsampling looks for the earlier position of the same minute in the same partition: the
//! partitions are whole UTC months (and the `DEFAULT` partition holds whole months too, those
//! without a partition of their own), so a minute never spans two of them.

use crate::PostgresStore;
use async_trait::async_trait;
use chrono::{DateTime, Months, NaiveDate, TimeZone, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{Connection, Postgres, Row};
use swath_application::ports::Cause;
use swath_application::ports::{
    DownsampleWindow, Partition, RetainedTable, RetentionError, RetentionRun, RetentionStore,
};
use swath_domain::MowerId;
use uuid::Uuid;

/// An arbitrary constant that names Swath's retention lock among PostgreSQL advisory locks.
const RETENTION_LOCK: i64 = 0x5357_4154_4800_0008;

/// How long dropping a partition may wait for its parent's lock (ingest statements last
/// milliseconds; a longer wait would queue them behind the drop).
pub const DROP_LOCK_TIMEOUT: &str = "1s";

/// The key of the downsampling watermark in `retention_progress`.
const DOWNSAMPLED: &str = "positions_downsampled";

/// The keys of the floors in `retention_progress`: history rows, and positions, older than these
/// may have been removed (read by ingestion with a late state's neighbours: `READ_NEIGHBOURS` and
/// `READ_NEAR_NEIGHBOURS` in `telemetry/batch.rs` name them too).
const HISTORY_FLOOR: &str = "history_floor";
const POSITIONS_FLOOR: &str = "positions_floor";

fn parent(table: RetainedTable) -> &'static str {
    match table {
        RetainedTable::History => "state_history",
        RetainedTable::Positions => "positions",
    }
}

fn failed(e: impl Into<Cause>) -> RetentionError {
    RetentionError::Unavailable(e.into())
}

/// A table name as an SQL identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A child table of `state_history` or `positions`, with its range when it is a monthly
/// partition (`<parent>_YYYYMM`, as `swath_ensure_partitions` names them); `None` for the
/// default partition (or any other): its rows may be of any time.
#[derive(Clone, Debug)]
struct Child {
    table: RetainedTable,
    name: String,
    range: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

impl Child {
    /// Whether the partition may hold rows with `from <= observed_at < to`.
    fn overlaps(&self, from: Option<DateTime<Utc>>, to: DateTime<Utc>) -> bool {
        match self.range {
            None => true,
            Some((start, end)) => start < to && from.is_none_or(|from| from < end),
        }
    }
}

fn month_range(parent: &str, name: &str) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let digits = name.strip_prefix(parent)?.strip_prefix('_')?;
    if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let year: i32 = digits[..4].parse().ok()?;
    let month: u32 = digits[4..].parse().ok()?;
    let first = NaiveDate::from_ymd_opt(year, month, 1)?;
    let next = first.checked_add_months(Months::new(1))?;
    Some((
        Utc.from_utc_datetime(&first.and_hms_opt(0, 0, 0)?),
        Utc.from_utc_datetime(&next.and_hms_opt(0, 0, 0)?),
    ))
}

#[async_trait]
impl RetentionStore for PostgresStore {
    async fn try_lock(&self) -> Result<Option<Box<dyn RetentionRun>>, RetentionError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(RETENTION_LOCK)
            .fetch_one(&mut *conn)
            .await
            .map_err(failed)?;
        if !locked {
            return Ok(None);
        }
        Ok(Some(Box::new(PgRun {
            conn: Some(conn),
            children: None,
        })))
    }
}

struct PgRun {
    /// `None` only once released.
    conn: Option<PoolConnection<Postgres>>,
    /// The child tables, read once per run and kept up to date as partitions are dropped.
    children: Option<Vec<Child>>,
}

impl Drop for PgRun {
    fn drop(&mut self) {
        // Not released (the run's task was aborted mid-way): close the session, which releases
        // the advisory lock, rather than hand a locked session back to the pool.
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
    }
}

/// A statement of the run, its parameters bound one by one.
type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

/// What a chunked count or delete is about: the mowers, the most rows to delete, whether only to
/// count.
struct Chunks<'a> {
    mowers: &'a [MowerId],
    limit: u64,
    dry_run: bool,
}

impl PgRun {
    fn conn(&mut self) -> &mut sqlx::PgConnection {
        // Only `release` takes the connection, and it consumes the run.
        self.conn
            .as_deref_mut()
            .expect("a run holds its connection")
    }

    /// Counts (a dry run) or deletes, partition by partition (the children `of` picks), the rows
    /// that `victims(part)` selects: `FROM {part} p WHERE …`, with `$1` the mowers and the next
    /// `params - 1` parameters bound by `bind`. A delete goes in one chunk per partition of at
    /// most what is left of the limit (`$params+1`), and stops once the limit is reached.
    async fn in_chunks(
        &mut self,
        chunks: Chunks<'_>,
        of: impl Fn(&Child) -> bool,
        victims: impl Fn(&str) -> String,
        params: usize,
        bind: impl for<'q> Fn(PgQuery<'q>) -> PgQuery<'q>,
    ) -> Result<u64, RetentionError> {
        let ids: Vec<Uuid> = chunks.mowers.iter().map(|m| m.0).collect();
        let mut done = 0u64;
        for child in self.children().await?.into_iter().filter(|c| of(c)) {
            let part = quoted(&child.name);
            let victims = victims(&part);
            let n = if chunks.dry_run {
                let sql = format!("SELECT count(*) {victims}");
                let row = bind(sqlx::query(&sql).bind(&ids))
                    .fetch_one(&mut *self.conn())
                    .await
                    .map_err(failed)?;
                row.try_get::<i64, _>(0).map_err(failed)? as u64
            } else {
                let limit = params + 1;
                let sql = format!(
                    "DELETE FROM {part} WHERE ctid IN (SELECT p.ctid {victims} LIMIT ${limit})"
                );
                bind(sqlx::query(&sql).bind(&ids))
                    .bind((chunks.limit - done) as i64)
                    .execute(&mut *self.conn())
                    .await
                    .map_err(failed)?
                    .rows_affected()
            };
            done += n;
            if !chunks.dry_run && done >= chunks.limit {
                break;
            }
        }
        Ok(done)
    }

    async fn children(&mut self) -> Result<Vec<Child>, RetentionError> {
        if let Some(children) = &self.children {
            return Ok(children.clone());
        }
        let mut children = Vec::new();
        for table in [RetainedTable::History, RetainedTable::Positions] {
            let names: Vec<String> = sqlx::query_scalar(
                "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                 WHERE i.inhparent = $1::regclass ORDER BY 1",
            )
            .bind(parent(table))
            .fetch_all(&mut *self.conn())
            .await
            .map_err(failed)?;
            children.extend(names.into_iter().map(|name| Child {
                table,
                range: month_range(parent(table), &name),
                name,
            }));
        }
        self.children = Some(children.clone());
        Ok(children)
    }
}

#[async_trait]
impl RetentionRun for PgRun {
    async fn mowers(&mut self) -> Result<Vec<MowerId>, RetentionError> {
        // Every mower has a health row from its creation, and its rows go with it when it is
        // deleted: these are all the mowers that may have history or positions.
        let ids: Vec<Uuid> =
            sqlx::query_scalar("SELECT mower_id FROM health_totals ORDER BY mower_id")
                .fetch_all(&mut *self.conn())
                .await
                .map_err(failed)?;
        Ok(ids.into_iter().map(MowerId).collect())
    }

    async fn partitions(&mut self) -> Result<Vec<Partition>, RetentionError> {
        Ok(self
            .children()
            .await?
            .into_iter()
            .filter_map(|c| {
                c.range.map(|(start, end)| Partition {
                    table: c.table,
                    name: c.name,
                    start,
                    end,
                })
            })
            .collect())
    }

    async fn drop_partition(
        &mut self,
        partition: &Partition,
        dry_run: bool,
    ) -> Result<Option<u64>, RetentionError> {
        // The planner's estimate: counting a month of rows exactly would read all of them.
        let rows: f32 = sqlx::query_scalar(
            "SELECT greatest(reltuples, 0)::real FROM pg_class WHERE oid = $1::regclass",
        )
        .bind(quoted(&partition.name))
        .fetch_one(&mut *self.conn())
        .await
        .map_err(failed)?;
        let rows = rows as u64;
        if dry_run {
            // Counted as gone from here on, so that the dry run's chunk counts leave its rows
            // out, as the real run's chunks will.
            if let Some(children) = &mut self.children {
                children.retain(|c| c.name != partition.name);
            }
            return Ok(Some(rows));
        }
        let conn = self.conn();
        let mut tx = conn.begin().await.map_err(failed)?;
        sqlx::query(&format!("SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'"))
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        let dropped = sqlx::query(&format!("DROP TABLE {}", quoted(&partition.name)))
            .execute(&mut *tx)
            .await;
        match dropped {
            Ok(_) => {
                tx.commit().await.map_err(failed)?;
                if let Some(children) = &mut self.children {
                    children.retain(|c| c.name != partition.name);
                }
                Ok(Some(rows))
            }
            // lock_not_available: the parent is busy; try again at the next run.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => {
                drop(tx);
                Ok(None)
            }
            Err(e) => Err(failed(e)),
        }
    }

    async fn expire(
        &mut self,
        table: RetainedTable,
        mowers: &[MowerId],
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError> {
        let chunks = Chunks {
            mowers,
            limit,
            dry_run,
        };
        let of = |child: &Child| child.table == table && child.overlaps(None, before);
        let victims =
            |part: &str| format!("FROM {part} p WHERE p.mower_id = ANY($1) AND p.observed_at < $2");
        self.in_chunks(chunks, of, victims, 2, |query| query.bind(before))
            .await
    }

    async fn downsample(
        &mut self,
        mowers: &[MowerId],
        window: DownsampleWindow,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError> {
        if window.from >= window.to {
            return Ok(0);
        }
        let chunks = Chunks {
            mowers,
            limit,
            dry_run,
        };
        let of = |child: &Child| {
            child.table == RetainedTable::Positions && child.overlaps(Some(window.from), window.to)
        };
        // A position goes when an earlier one of its mower and UTC minute stays: at or
        // after `keep_from` ($4), the instant before which positions expire anyway.
        let victims = |part: &str| {
            format!(
                "FROM {part} p WHERE p.mower_id = ANY($1) AND p.observed_at >= $2 \
                 AND p.observed_at < $3 AND EXISTS (SELECT 1 FROM {part} q \
                 WHERE q.mower_id = p.mower_id \
                 AND q.observed_at >= greatest(date_trunc('minute', p.observed_at, 'UTC'), $4) \
                 AND q.observed_at < p.observed_at)"
            )
        };
        self.in_chunks(chunks, of, victims, 4, |query| {
            query
                .bind(window.from)
                .bind(window.to)
                .bind(window.keep_from)
        })
        .await
    }

    /// One statement either way: the victims are the mowers' sessions that ended before `$2`
    /// other than each mower's newest (a probe of the key, backwards), at most `$3` deleted.
    async fn expire_sessions(
        &mut self,
        mowers: &[MowerId],
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, RetentionError> {
        let ids: Vec<uuid::Uuid> = mowers.iter().map(|m| m.0).collect();
        let victims = "FROM mower_sessions s WHERE s.mower_id = ANY($1) AND s.ended_at < $2 \
            AND s.started_at < (SELECT max(n.started_at) FROM mower_sessions n \
            WHERE n.mower_id = s.mower_id)";
        let row = if dry_run {
            sqlx::query(&format!("SELECT count(*) AS n {victims}"))
                .bind(ids)
                .bind(before)
                .fetch_one(&mut *self.conn())
                .await
        } else {
            sqlx::query(&format!(
                "WITH gone AS (DELETE FROM mower_sessions d WHERE (d.mower_id, d.started_at) IN \
                 (SELECT s.mower_id, s.started_at {victims} LIMIT $3) RETURNING 1) \
                 SELECT count(*) AS n FROM gone"
            ))
            .bind(ids)
            .bind(before)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_one(&mut *self.conn())
            .await
        }
        .map_err(failed)?;
        let n: i64 = row.try_get("n").map_err(failed)?;
        Ok(n.max(0) as u64)
    }

    async fn downsampled_until(&mut self) -> Result<Option<DateTime<Utc>>, RetentionError> {
        sqlx::query("SELECT done_until FROM retention_progress WHERE name = $1")
            .bind(DOWNSAMPLED)
            .fetch_optional(&mut *self.conn())
            .await
            .map_err(failed)?
            .map(|row| row.try_get("done_until").map_err(failed))
            .transpose()
    }

    async fn set_downsampled_until(&mut self, until: DateTime<Utc>) -> Result<(), RetentionError> {
        sqlx::query(
            "INSERT INTO retention_progress (name, done_until) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET done_until = EXCLUDED.done_until",
        )
        .bind(DOWNSAMPLED)
        .bind(until)
        .execute(&mut *self.conn())
        .await
        .map_err(failed)?;
        Ok(())
    }

    async fn raise_floors(
        &mut self,
        history: DateTime<Utc>,
        positions: DateTime<Utc>,
    ) -> Result<(), RetentionError> {
        // One statement (autocommitted): both floors are visible before the first removal.
        sqlx::query(
            "INSERT INTO retention_progress (name, done_until) \
             VALUES ($1, $2), ($3, $4) ON CONFLICT (name) DO UPDATE \
             SET done_until = GREATEST(retention_progress.done_until, EXCLUDED.done_until)",
        )
        .bind(HISTORY_FLOOR)
        .bind(history)
        .bind(POSITIONS_FLOOR)
        .bind(positions)
        .execute(&mut *self.conn())
        .await
        .map_err(failed)?;
        Ok(())
    }

    async fn release(mut self: Box<Self>) -> Result<(), RetentionError> {
        let mut conn = self.conn.take().expect("a run holds its connection");
        let unlocked = sqlx::query_scalar::<_, bool>("SELECT pg_advisory_unlock($1)")
            .bind(RETENTION_LOCK)
            .fetch_one(&mut *conn)
            .await;
        match unlocked {
            Ok(_) => Ok(()),
            Err(e) => {
                // Close the session: that releases the lock for certain.
                drop(conn.detach());
                Err(failed(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monthly_partitions_are_recognised_by_name() {
        let (start, end) = month_range("positions", "positions_202512").unwrap();
        assert_eq!(start, Utc.with_ymd_and_hms(2025, 12, 1, 0, 0, 0).unwrap());
        assert_eq!(end, Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
        assert_eq!(month_range("positions", "positions_default"), None);
        assert_eq!(month_range("positions", "state_history_202512"), None);
        assert_eq!(month_range("positions", "positions_202513"), None);
    }
}
