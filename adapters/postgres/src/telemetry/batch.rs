//! An open telemetry batch: its late states' neighbours read in one statement, its changes
//! written in one statement (data-modifying `WITH`) and committed.

use super::newest;
use super::rows::{activity, corrupt};
use crate::{arrays, store_error, unavailable, PostgresStore};
use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use sqlx::{Postgres, Row, Transaction};
use std::collections::BTreeMap;
use std::sync::LazyLock;
use swath_application::ports::{SessionWindow, StoreError, TelemetryBatch};
use swath_domain::sessions::{Session, SessionCarry, SessionPoint};
use swath_domain::watch::IngestNotifications;
use swath_domain::{BatchChanges, MowerId, MowerSnapshot, StoredState};
use uuid::Uuid;

/// What every neighbour read selects from first: retention's floors, as one row (`f`) that the
/// probes are joined to, so that the answer has a row even when no neighbour is found. A macro,
/// so that each read stays one constant text (`concat!`).
macro_rules! retention_floors {
    () => {
        "FROM (SELECT (SELECT done_until FROM retention_progress WHERE name = 'history_floor') \
        AS history_floor, (SELECT done_until FROM retention_progress \
        WHERE name = 'positions_floor') AS positions_floor) f "
    };
}

/// The batch's late states' neighbours, read after the lock (so from a snapshot that sees every
/// batch committed before it): for each `(mower, observed_at)` of `$1, $2`, the newest stored
/// history row at or before it and the oldest after it, each with its position, plus retention's
/// floors (always one row, even when nothing is found). Each probe walks the primary key
/// `(mower_id, observed_at)` of the partitions backwards or forwards and stops at the first row.
///
/// Used for the late states that the near read ([`READ_NEAR_PROBES`], [`READ_NEAR_NEIGHBOURS`])
/// could not settle: its plan holds every monthly partition (the late instants are only known
/// row by row, so none is pruned when the plan is made), and opening them all is what this
/// statement costs.
pub(super) const READ_NEIGHBOURS: &str = concat!(
    "SELECT f.history_floor, f.positions_floor, n.mower_id, n.observed_at, n.activity, \
    n.blade_on, p.lat, p.lon ",
    retention_floors!(),
    "LEFT JOIN (SELECT l.mower_id, s.observed_at, s.activity, s.blade_on \
    FROM UNNEST($1::uuid[], $2::timestamptz[]) AS l(mower_id, observed_at) \
    CROSS JOIN LATERAL ((SELECT h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE h.mower_id = l.mower_id AND h.observed_at <= l.observed_at \
    ORDER BY h.observed_at DESC LIMIT 1) UNION ALL \
    (SELECT h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE h.mower_id = l.mower_id AND h.observed_at > l.observed_at \
    ORDER BY h.observed_at LIMIT 1)) s) n ON true \
    LEFT JOIN positions p ON p.mower_id = n.mower_id AND p.observed_at = n.observed_at"
);

/// [`READ_NEIGHBOURS`] within `[$3, $4]`: every probe and position bounded by the batch's window
/// ([`NEAR`] around its late states); the near read of a batch whose mowers have one late state
/// each, where a probe per state is a probe per mower and [`READ_NEAR_NEIGHBOURS`]' range part
/// would only cost its planning. Sent unprepared, so that PostgreSQL plans it with the
/// bounds' values and keeps only the partitions the window touches (a prepared, generic plan
/// would open them all, which costs more than the probes). A probe that finds nothing within the
/// window proves nothing about the rows beyond it: those late states go to [`READ_NEIGHBOURS`].
pub(super) const READ_NEAR_PROBES: &str = concat!(
    "SELECT f.history_floor, f.positions_floor, n.mower_id, n.observed_at, n.activity, \
    n.blade_on, p.lat, p.lon ",
    retention_floors!(),
    "LEFT JOIN (SELECT l.mower_id, s.observed_at, s.activity, s.blade_on \
    FROM UNNEST($1::uuid[], $2::timestamptz[]) AS l(mower_id, observed_at) \
    CROSS JOIN LATERAL ((SELECT h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE h.mower_id = l.mower_id AND h.observed_at <= l.observed_at \
    AND h.observed_at >= $3 AND h.observed_at <= $4 \
    ORDER BY h.observed_at DESC LIMIT 1) UNION ALL \
    (SELECT h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE h.mower_id = l.mower_id AND h.observed_at > l.observed_at \
    AND h.observed_at >= $3 AND h.observed_at <= $4 \
    ORDER BY h.observed_at LIMIT 1)) s) n ON true \
    LEFT JOIN LATERAL (SELECT p.lat, p.lon FROM positions p WHERE p.mower_id = n.mower_id \
    AND p.observed_at = n.observed_at AND p.observed_at >= $3 AND p.observed_at <= $4 LIMIT 1) p \
    ON true"
);

/// The neighbours of each mower's late states within `[$5, $6]` (the batch's window, [`NEAR`]
/// around its late states), read as one range per mower rather than two probes per late state:
/// for each `(mower, lo, hi, cap)` of `$1..$4` (the mower's oldest and newest late instants), the
/// newest stored row at or before `lo` (part 0), the stored rows in `(lo, hi]` oldest first, at
/// most `cap` of them (part 1, skipped when `lo = hi`), and the oldest stored row after `hi`
/// (part 2). A backfill's run of late states next to stored days costs three probes per mower
/// instead of two per state. Sent unprepared, so that PostgreSQL plans it with the bounds' values
/// and keeps only the partitions the window touches (a prepared, generic plan would open them
/// all, which costs more than the probes). What it cannot prove (nothing found on a side within
/// the window, or a range cut by `cap`) goes to [`READ_NEIGHBOURS`].
pub(super) const READ_NEAR_NEIGHBOURS: &str = concat!(
    "SELECT f.history_floor, f.positions_floor, n.mower_id, n.part, n.observed_at, n.activity, \
    n.blade_on, p.lat, p.lon ",
    retention_floors!(),
    "LEFT JOIN (SELECT l.mower_id, s.part, s.observed_at, s.activity, s.blade_on \
    FROM UNNEST($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::int8[]) \
    AS l(mower_id, lo, hi, cap) \
    CROSS JOIN LATERAL ((SELECT 0 AS part, h.observed_at, h.activity, h.blade_on \
    FROM state_history h WHERE h.mower_id = l.mower_id AND h.observed_at <= l.lo \
    AND h.observed_at >= $5 AND h.observed_at <= $6 \
    ORDER BY h.observed_at DESC LIMIT 1) UNION ALL \
    (SELECT 1, h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE l.lo < l.hi AND h.mower_id = l.mower_id AND h.observed_at > l.lo \
    AND h.observed_at <= l.hi AND h.observed_at >= $5 AND h.observed_at <= $6 \
    ORDER BY h.observed_at LIMIT l.cap) UNION ALL \
    (SELECT 2, h.observed_at, h.activity, h.blade_on FROM state_history h \
    WHERE h.mower_id = l.mower_id AND h.observed_at > l.hi \
    AND h.observed_at >= $5 AND h.observed_at <= $6 \
    ORDER BY h.observed_at LIMIT 1)) s) n ON true \
    LEFT JOIN LATERAL (SELECT p.lat, p.lon FROM positions p WHERE p.mower_id = n.mower_id \
    AND p.observed_at = n.observed_at AND p.observed_at >= $5 AND p.observed_at <= $6 LIMIT 1) p \
    ON true"
);

/// How many stored rows between a mower's oldest and newest late state [`READ_NEAR_NEIGHBOURS`]
/// reads, for `late` late states of the mower: enough for late states interleaved with stored
/// ones (a replica overtaken), bounded for a run of late states spread over a stored stretch,
/// whose rest then goes to the per-state probes.
fn range_cap(late: usize) -> i64 {
    i64::try_from(late).map_or(i64::MAX, |n| n.saturating_mul(2).saturating_add(8))
}

/// How far before its first and after its last late state a batch looks for neighbours first.
/// Wide enough that a fleet's late states (a gateway's buffer, a replica overtaken, a backfill
/// next to stored days) find both neighbours in it, narrow enough to touch one or two monthly
/// partitions.
const NEAR: Duration = Duration::days(7);

/// The health row's columns the write sets, `mower_id` (the key) first, with their array types in
/// the order the write binds them (`$18` on): the totals, then the newest session's carry
/// ([`newest::encode`]), NULL for a row whose carry the batch did not change. The widest of the
/// write's parts, so its rows are built from the arrays side by side (`arrays::zipped`, decision
/// 209).
const HEALTH: [(&str, &str); 16] = [
    ("mower_id", "uuid"),
    ("account_id", "uuid"),
    ("counted_from", "timestamptz"),
    ("counted_until", "timestamptz"),
    ("last_activity", "text"),
    ("last_blade_on", "boolean"),
    ("last_lat", "float8"),
    ("last_lon", "float8"),
    ("mowing_ms", "int8"),
    ("blade_ms", "int8"),
    ("distance_mm", "int8"),
    ("error_count", "int8"),
    ("charge_count", "int8"),
    ("blade_since_reset_ms", "int8"),
    ("blade_due_raised", "boolean"),
    ("session_carry", "text"),
];

/// The batch's writes, one sub-statement per table, sent as one statement (data-modifying
/// `WITH`): the history rows, the position rows of the history rows it inserted (a key stored
/// earlier writes nothing, W1/W2), one latest row, one health row and one row per touched day
/// per mower, and W8's sessions (the keys a recompute removed deleted, the others upserted:
/// disjoint keys, so no row is touched twice; the newest session's running figures and rest go
/// in the health row as one text, decisions 207 and 210). Built once, from [`HEALTH`]. Each
/// sub-statement takes its own arrays (`UNNEST`; the health row's side by side, [`HEALTH`]) and
/// writes its own table; only the positions look at another one's result (the keys `history`
/// returned). All of them run on the statement's snapshot, which is all they need: the rules
/// computed every value from the rows the batch's reads locked. One statement instead of five
/// saves four round trips and statement starts per batch (decision 35; BENCHMARKS.md,
/// "PostgreSQL batched ingest").
///
/// The latest row's guard on `observed_at` cannot change the result (the rules only send strictly
/// newer rows); it makes a regression impossible even if they did.
///
/// Most batches write no session row (in order, a session's row is written only when it starts or
/// closes: decision 207), so [`WRITE_BATCH`] leaves the two sessions sub-statements out and
/// [`WRITE_BATCH_WITH_SESSIONS`] has them: a batch sends the sessions' arrays only when it has
/// session rows to write or remove (decision 212). Either is one statement.
pub(super) static WRITE_BATCH: LazyLock<String> = LazyLock::new(|| write_batch(false));

/// [`WRITE_BATCH`] with W8's session rows written and removed.
pub(super) static WRITE_BATCH_WITH_SESSIONS: LazyLock<String> = LazyLock::new(|| write_batch(true));

fn write_batch(sessions: bool) -> String {
    // A carry the batch did not change stays as the row has it.
    let health_set = arrays::set_from_u(&HEALTH[1..HEALTH.len() - 1]);
    let health_rows = arrays::zipped(18, &HEALTH);
    // The day totals' and the sessions' arrays follow the health row's.
    let n = 18 + HEALTH.len();
    let text = format!(
        "WITH history AS (INSERT INTO state_history \
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
    health AS (UPDATE health_totals h SET {health_set}, \
    session_carry = COALESCE(u.session_carry, h.session_carry) \
    FROM ({health_rows}) AS u WHERE h.mower_id = u.mower_id), \
    days AS (INSERT INTO day_totals \
    (mower_id, day, mowing_ms, blade_ms, distance_mm, error_count, charge_count, state_count) \
    SELECT * FROM UNNEST(${d0}::uuid[], ${d1}::date[], ${d2}::int8[], ${d3}::int8[], \
    ${d4}::int8[], ${d5}::int8[], ${d6}::int8[], ${d7}::int8[]) \
    ON CONFLICT (mower_id, day) DO UPDATE SET \
    mowing_ms = day_totals.mowing_ms + EXCLUDED.mowing_ms, \
    blade_ms = day_totals.blade_ms + EXCLUDED.blade_ms, \
    distance_mm = day_totals.distance_mm + EXCLUDED.distance_mm, \
    error_count = day_totals.error_count + EXCLUDED.error_count, \
    charge_count = day_totals.charge_count + EXCLUDED.charge_count, \
    state_count = day_totals.state_count + EXCLUDED.state_count)",
        d0 = n,
        d1 = n + 1,
        d2 = n + 2,
        d3 = n + 3,
        d4 = n + 4,
        d5 = n + 5,
        d6 = n + 6,
        d7 = n + 7,
    );
    if !sessions {
        return text + " SELECT 1";
    }
    format!(
        "{text}, sessions_removed AS (DELETE FROM mower_sessions s USING UNNEST(${r0}::uuid[], \
    ${r1}::timestamptz[]) AS r(mower_id, started_at) \
    WHERE s.mower_id = r.mower_id AND s.started_at = r.started_at), \
    sessions AS (INSERT INTO mower_sessions (mower_id, started_at, id, account_id, ended_at, \
    end_reason, error_code, mowing_ms, blade_ms, distance_mm, breaks, states, first_lat, \
    first_lon, last_lat, last_lon, first_battery_percent, last_battery_percent, local_date) \
    SELECT * FROM UNNEST(${s0}::uuid[], ${s1}::timestamptz[], ${s2}::uuid[], ${s3}::uuid[], \
    ${s4}::timestamptz[], ${s5}::text[], ${s6}::text[], ${s7}::int8[], ${s8}::int8[], \
    ${s9}::int8[], ${s10}::int8[], ${s11}::int8[], ${s12}::float8[], ${s13}::float8[], \
    ${s14}::float8[], ${s15}::float8[], ${s16}::int2[], ${s17}::int2[], ${s18}::date[]) \
    ON CONFLICT (mower_id, started_at) DO UPDATE SET id = EXCLUDED.id, \
    account_id = EXCLUDED.account_id, ended_at = EXCLUDED.ended_at, \
    end_reason = EXCLUDED.end_reason, error_code = EXCLUDED.error_code, \
    mowing_ms = EXCLUDED.mowing_ms, blade_ms = EXCLUDED.blade_ms, \
    distance_mm = EXCLUDED.distance_mm, breaks = EXCLUDED.breaks, states = EXCLUDED.states, \
    first_lat = EXCLUDED.first_lat, first_lon = EXCLUDED.first_lon, \
    last_lat = EXCLUDED.last_lat, last_lon = EXCLUDED.last_lon, \
    first_battery_percent = EXCLUDED.first_battery_percent, \
    last_battery_percent = EXCLUDED.last_battery_percent, local_date = EXCLUDED.local_date) \
    SELECT 1",
        r0 = n + 8,
        r1 = n + 9,
        s0 = n + 10,
        s1 = n + 11,
        s2 = n + 12,
        s3 = n + 13,
        s4 = n + 14,
        s5 = n + 15,
        s6 = n + 16,
        s7 = n + 17,
        s8 = n + 18,
        s9 = n + 19,
        s10 = n + 20,
        s11 = n + 21,
        s12 = n + 22,
        s13 = n + 23,
        s14 = n + 24,
        s15 = n + 25,
        s16 = n + 26,
        s17 = n + 27,
        s18 = n + 28,
    )
}

/// The session windows' bounds (W8, decision 200): for each `(mower, t_min, t_max)` of `$1..$3`,
/// `lo` (the start of the newest stored session before `t_min`, else `t_min`), `n_start` and
/// `hi` (the start and end of the first stored session after `t_max`, `hi` only when a later
/// one follows it) and the starts of the stored sessions in the window (one row each, or one
/// row with none). Each part is a probe of the key `(mower_id, started_at)`.
pub(super) const READ_SESSION_BOUNDS: &str = "SELECT l.mower_id, b.lo, b.hi, s.started_at \
    FROM UNNEST($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS l(mower_id, t_min, t_max) \
    CROSS JOIN LATERAL (SELECT COALESCE((SELECT p.started_at FROM mower_sessions p \
    WHERE p.mower_id = l.mower_id AND p.started_at < l.t_min ORDER BY p.started_at DESC LIMIT 1), \
    l.t_min) AS lo, n.started_at AS n_start, CASE WHEN EXISTS (SELECT 1 FROM mower_sessions f \
    WHERE f.mower_id = l.mower_id AND f.started_at > n.started_at) THEN n.ended_at END AS hi \
    FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT x.started_at, x.ended_at FROM mower_sessions x \
    WHERE x.mower_id = l.mower_id AND x.started_at > l.t_max ORDER BY x.started_at LIMIT 1) n \
    ON true) b \
    LEFT JOIN mower_sessions s ON s.mower_id = l.mower_id AND s.started_at >= b.lo \
    AND (b.hi IS NULL OR s.started_at <= b.n_start) \
    ORDER BY l.mower_id, s.started_at";

/// The stored states of the session windows: for each `(mower, lo, hi)` of `$1..$3`, the history
/// rows with `lo <= observed_at <= hi` (no upper bound when `hi` is NULL) and the first one after
/// `hi`, each with its position, oldest first.
pub(super) const READ_SESSION_STATES: &str = "SELECT w.mower_id, h.observed_at, h.activity, \
    h.blade_on, h.battery_percent, h.error_code, p.lat, p.lon \
    FROM UNNEST($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS w(mower_id, lo, hi) \
    CROSS JOIN LATERAL ((SELECT i.observed_at, i.activity, i.blade_on, i.battery_percent, \
    i.error_code FROM state_history i WHERE i.mower_id = w.mower_id AND i.observed_at >= w.lo \
    AND i.observed_at <= COALESCE(w.hi, 'infinity'::timestamptz)) UNION ALL \
    (SELECT j.observed_at, j.activity, j.blade_on, j.battery_percent, j.error_code \
    FROM state_history j WHERE w.hi IS NOT NULL AND j.mower_id = w.mower_id \
    AND j.observed_at > w.hi ORDER BY j.observed_at LIMIT 1)) h \
    LEFT JOIN positions p ON p.mower_id = w.mower_id AND p.observed_at = h.observed_at \
    ORDER BY w.mower_id, h.observed_at";

pub(super) struct PostgresBatch {
    pub(super) store: PostgresStore,
    pub(super) tx: Transaction<'static, Postgres>,
}

impl PostgresBatch {
    /// The near read within `window`: [`READ_NEAR_NEIGHBOURS`], one range per mower, or
    /// [`READ_NEAR_PROBES`] when no mower has more than one late state.
    async fn read_near(
        &mut self,
        late: &[(MowerId, DateTime<Utc>)],
        (from, until): (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<Neighbours, StoreError> {
        let mut ranges: BTreeMap<MowerId, (DateTime<Utc>, DateTime<Utc>, usize)> = BTreeMap::new();
        for (mower, at) in late {
            ranges
                .entry(*mower)
                .and_modify(|(lo, hi, n)| {
                    *lo = (*lo).min(*at);
                    *hi = (*hi).max(*at);
                    *n += 1;
                })
                .or_insert((*at, *at, 1));
        }
        let caps: Vec<i64> = ranges.values().map(|(_, _, n)| range_cap(*n)).collect();
        let ranged = ranges.values().any(|(lo, hi, _)| lo < hi);
        let query = if ranged {
            sqlx::query(READ_NEAR_NEIGHBOURS)
                .bind(ranges.keys().map(|m| m.0).collect::<Vec<_>>())
                .bind(ranges.values().map(|(lo, _, _)| *lo).collect::<Vec<_>>())
                .bind(ranges.values().map(|(_, hi, _)| *hi).collect::<Vec<_>>())
                .bind(&caps)
        } else {
            sqlx::query(READ_NEAR_PROBES)
                .bind(ranges.keys().map(|m| m.0).collect::<Vec<_>>())
                .bind(ranges.values().map(|(lo, _, _)| *lo).collect::<Vec<_>>())
        };
        let rows = query
            .bind(from)
            .bind(until)
            .persistent(false)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(unavailable)?;
        self.store.counters().statement();
        let mut found = Neighbours::from_rows(&rows, late)?;
        if ranged {
            // A range that filled its cap is known only up to its last row.
            let mut in_range: BTreeMap<MowerId, (i64, DateTime<Utc>)> = BTreeMap::new();
            for row in &rows {
                if row.try_get::<Option<i32>, _>("part").map_err(corrupt)? != Some(1) {
                    continue;
                }
                let mower = MowerId(row.try_get("mower_id").map_err(corrupt)?);
                let at: DateTime<Utc> = row.try_get("observed_at").map_err(corrupt)?;
                let seen = in_range.entry(mower).or_insert((0, at));
                seen.0 += 1;
                seen.1 = seen.1.max(at);
            }
            for ((mower, _), cap) in ranges.iter().zip(&caps) {
                if let Some((n, last)) = in_range.get(mower) {
                    if n >= cap {
                        found.known_until.insert(*mower, *last);
                    }
                }
            }
        }
        Ok(found)
    }

    /// [`READ_NEIGHBOURS`]: two probes per late state, unbounded.
    async fn read_far(
        &mut self,
        late: &[(MowerId, DateTime<Utc>)],
    ) -> Result<Neighbours, StoreError> {
        let rows = sqlx::query(READ_NEIGHBOURS)
            .bind(late.iter().map(|(m, _)| m.0).collect::<Vec<_>>())
            .bind(late.iter().map(|(_, at)| *at).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(unavailable)?;
        self.store.counters().statement();
        Neighbours::from_rows(&rows, late)
    }
}

/// What one neighbours statement read: retention's floors and the stored states it found.
struct Neighbours {
    history_floor: Option<DateTime<Utc>>,
    positions_floor: Option<DateTime<Utc>>,
    /// The mowers it was asked about (the floors apply to them).
    mowers: Vec<MowerId>,
    states: Vec<(MowerId, StoredState)>,
    /// Mowers whose stored rows between their late states were read only up to this instant
    /// (the range's cap was reached).
    known_until: BTreeMap<MowerId, DateTime<Utc>>,
}

impl Neighbours {
    fn from_rows(
        rows: &[sqlx::postgres::PgRow],
        late: &[(MowerId, DateTime<Utc>)],
    ) -> Result<Self, StoreError> {
        let floor = |name: &str| -> Result<Option<DateTime<Utc>>, StoreError> {
            match rows.first() {
                Some(row) => row.try_get(name).map_err(corrupt),
                None => Ok(None),
            }
        };
        let mut found = Neighbours {
            history_floor: floor("history_floor")?,
            positions_floor: floor("positions_floor")?,
            mowers: late.iter().map(|(m, _)| *m).collect(),
            states: Vec::with_capacity(rows.len()),
            known_until: BTreeMap::new(),
        };
        for row in rows {
            let Some(mower) = row
                .try_get::<Option<Uuid>, _>("mower_id")
                .map_err(corrupt)?
            else {
                continue;
            };
            let name: String = row.try_get("activity").map_err(corrupt)?;
            found.states.push((
                MowerId(mower),
                StoredState {
                    observed_at: row.try_get("observed_at").map_err(corrupt)?,
                    activity: activity(&name)?,
                    blade_on: row.try_get("blade_on").map_err(corrupt)?,
                    lat: row.try_get("lat").map_err(corrupt)?,
                    lon: row.try_get("lon").map_err(corrupt)?,
                },
            ));
        }
        Ok(found)
    }

    /// For each mower, whether a stored state at or before each of `late`, and one after it,
    /// were found: the late states left without one. Every row of a statement lies within the
    /// same bounds, and what lies between a mower's oldest and newest late state was read whole
    /// (up to `known_until` when the range was cut), so finding any state on a side means the
    /// nearest one on that side was found: a mower's oldest and newest found states decide for
    /// all its late states below the cut.
    fn unresolved(&self, late: &[(MowerId, DateTime<Utc>)]) -> Vec<(MowerId, DateTime<Utc>)> {
        let mut spans: BTreeMap<MowerId, (DateTime<Utc>, DateTime<Utc>)> = BTreeMap::new();
        for (mower, state) in &self.states {
            let t = state.observed_at;
            spans
                .entry(*mower)
                .and_modify(|(oldest, newest)| {
                    *oldest = (*oldest).min(t);
                    *newest = (*newest).max(t);
                })
                .or_insert((t, t));
        }
        late.iter()
            .filter(|(mower, at)| {
                let found = spans
                    .get(mower)
                    .is_some_and(|(oldest, newest)| oldest <= at && newest > at);
                let below_cut = self.known_until.get(mower).is_none_or(|cut| at < cut);
                !(found && below_cut)
            })
            .copied()
            .collect()
    }

    fn apply(self, snapshots: &mut BTreeMap<MowerId, MowerSnapshot>) {
        for mower in &self.mowers {
            if let Some(snapshot) = snapshots.get_mut(mower) {
                let near = &mut snapshot.neighbourhood;
                if let Some(floor) = self.history_floor {
                    near.raise_history_floor(floor);
                }
                if let Some(floor) = self.positions_floor {
                    near.raise_positions_floor(floor);
                }
            }
        }
        for (mower, state) in self.states {
            if let Some(snapshot) = snapshots.get_mut(&mower) {
                snapshot.neighbourhood.insert_stored(state);
            }
        }
    }
}

#[async_trait]
impl TelemetryBatch for PostgresBatch {
    async fn neighbours(
        &mut self,
        late: &[(MowerId, DateTime<Utc>)],
        snapshots: &mut BTreeMap<MowerId, MowerSnapshot>,
    ) -> Result<(), StoreError> {
        let (Some(first), Some(last)) = (
            late.iter().map(|(_, at)| *at).min(),
            late.iter().map(|(_, at)| *at).max(),
        ) else {
            return Ok(());
        };
        let near = self.read_near(late, (first - NEAR, last + NEAR)).await?;
        let unresolved = near.unresolved(late);
        near.apply(snapshots);
        if !unresolved.is_empty() {
            self.read_far(&unresolved).await?.apply(snapshots);
        }
        Ok(())
    }

    async fn session_windows(
        &mut self,
        late: &[(MowerId, DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<Vec<SessionWindow>, StoreError> {
        if late.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(READ_SESSION_BOUNDS)
            .bind(late.iter().map(|(m, _, _)| m.0).collect::<Vec<_>>())
            .bind(late.iter().map(|(_, lo, _)| *lo).collect::<Vec<_>>())
            .bind(late.iter().map(|(_, _, hi)| *hi).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(unavailable)?;
        self.store.counters().statement();
        let mut windows: BTreeMap<MowerId, SessionWindow> = BTreeMap::new();
        for row in &rows {
            let mower = MowerId(row.try_get("mower_id").map_err(corrupt)?);
            let window = match windows.entry(mower) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(SessionWindow {
                    mower_id: mower,
                    from: row.try_get("lo").map_err(corrupt)?,
                    through: row.try_get("hi").map_err(corrupt)?,
                    sessions: Vec::new(),
                    states: Vec::new(),
                }),
            };
            let start: Option<DateTime<Utc>> = row.try_get("started_at").map_err(corrupt)?;
            window.sessions.extend(start);
        }
        let rows = sqlx::query(READ_SESSION_STATES)
            .bind(windows.keys().map(|m| m.0).collect::<Vec<_>>())
            .bind(windows.values().map(|w| w.from).collect::<Vec<_>>())
            .bind(windows.values().map(|w| w.through).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(unavailable)?;
        self.store.counters().statement();
        for row in &rows {
            let mower = MowerId(row.try_get("mower_id").map_err(corrupt)?);
            let name: String = row.try_get("activity").map_err(corrupt)?;
            let battery: Option<i16> = row.try_get("battery_percent").map_err(corrupt)?;
            let Some(window) = windows.get_mut(&mower) else {
                continue;
            };
            window.states.push(SessionPoint {
                observed_at: row.try_get("observed_at").map_err(corrupt)?,
                activity: activity(&name)?,
                blade_on: row.try_get("blade_on").map_err(corrupt)?,
                battery_percent: battery.map(|b| b as u8),
                error_code: row.try_get("error_code").map_err(corrupt)?,
                lat: row.try_get("lat").map_err(corrupt)?,
                lon: row.try_get("lon").map_err(corrupt)?,
            });
        }
        Ok(windows.into_values().collect())
    }

    async fn commit(
        self: Box<Self>,
        changes: BatchChanges,
        notifications: IngestNotifications,
    ) -> Result<(), StoreError> {
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
        let (su, removed) = (&changes.sessions.upsert, &changes.sessions.remove);
        let ss: Vec<&Session> = su.iter().map(|r| &r.session).collect();
        // The ingest gives every changed carry its health row (`SessionChanges::newest`).
        let changed: BTreeMap<MowerId, &SessionCarry> = changes
            .sessions
            .newest
            .iter()
            .map(|n| (n.mower_id, &n.carry))
            .collect();
        let with_sessions = !su.is_empty() || !removed.is_empty();
        let text = if with_sessions {
            WRITE_BATCH_WITH_SESSIONS.as_str()
        } else {
            WRITE_BATCH.as_str()
        };
        let mut query = sqlx::query(text)
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
            .bind(
                t.iter()
                    .map(|r| changed.get(&r.mower_id).map(|c| newest::encode(c)))
                    .collect::<Vec<_>>(),
            )
            .bind(d.iter().map(|r| r.mower_id.0).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.day).collect::<Vec<NaiveDate>>())
            .bind(d.iter().map(|r| r.mowing_ms).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.blade_ms).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.distance_mm).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.error_count).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.charge_count).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.state_count).collect::<Vec<_>>());
        if with_sessions {
            query = query
                .bind(removed.iter().map(|(m, _)| m.0).collect::<Vec<_>>())
                .bind(removed.iter().map(|(_, at)| *at).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.mower_id.0).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.started_at).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.id).collect::<Vec<_>>())
                .bind(su.iter().map(|r| r.account_id.0).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.ended_at).collect::<Vec<_>>())
                .bind(
                    ss.iter()
                        .map(|s| s.end_reason.map(|r| r.as_str()))
                        .collect::<Vec<_>>(),
                )
                .bind(
                    ss.iter()
                        .map(|s| s.error_code.as_deref())
                        .collect::<Vec<_>>(),
                )
                .bind(ss.iter().map(|s| s.mowing_ms).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.blade_ms).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.distance_mm).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.breaks).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.states).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.first_lat).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.first_lon).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.last_lat).collect::<Vec<_>>())
                .bind(ss.iter().map(|s| s.last_lon).collect::<Vec<_>>())
                .bind(
                    ss.iter()
                        .map(|s| s.first_battery_percent.map(i16::from))
                        .collect::<Vec<_>>(),
                )
                .bind(
                    ss.iter()
                        .map(|s| s.last_battery_percent.map(i16::from))
                        .collect::<Vec<_>>(),
                )
                .bind(ss.iter().map(|s| s.local_date).collect::<Vec<NaiveDate>>());
        }
        query.execute(&mut *tx).await.map_err(store_error)?;
        counters.statement();
        // W6's events and alerts, in this transaction (only when the rules raised any).
        crate::watch::store_ingest_events(&mut tx, &notifications, counters).await?;

        tx.commit().await.map_err(store_error)?;
        counters.commit();
        Ok(())
    }
}
