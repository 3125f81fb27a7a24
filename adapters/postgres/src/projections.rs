//! The live projections on PostgreSQL (`ProjectionStore`) and operator assignments
//! (`Assignments`).
//!
//! Every read of a level is **one** constant statement, whatever the tenant's size, counted in
//! [`PostgresStore::projection_counters`]:
//! - the first level (mowers of the fleet dashboard, sites of the walls) is an index scan in
//!   display order that stops at `LIMIT n+1` (`mowers_account_order`, `sites_account_order`);
//! - each lower level takes the parent window's ids as an array and answers each parent's rows
//!   with `CROSS JOIN LATERAL (… ORDER BY … LIMIT n+1)`, an index scan per parent that stops at
//!   its own sentinel (`mowers_site_order`, `alerts_open_mower_order`);
//! - the operator on duty is ranked by the index `assignments_on_duty` and only the first entry
//!   (`LIMIT 1`) of each mower's active assignments of the viewer's account is read.
//!
//! Visibility is part of each statement's `WHERE`, so it is applied before each `LIMIT`; a
//! principal limited to some sites reads through the `… ANY($n)` variants. The lower levels join
//! `mowers` again on the viewer's account and sites: ids passed by a caller never reach rows the
//! viewer could not see. Each `UNNEST … WITH ORDINALITY` keeps the parents' order in the answer.

use crate::PostgresStore;
use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::Row;
use swath_application::ports::Cause;
use swath_application::ports::{
    AlertCard, AssignmentError, Assignments, HealthCard, LatLon, MowerCard, MowerFilter,
    ProjectionError, ProjectionStore, SiteCard, Visibility, MAX_ASSIGNMENTS_PER_MOWER,
};
use swath_application::visibility::sees_site;
use swath_domain::watch::{AlertKind, Severity};
use swath_domain::{AccountId, Activity, Assignment, MowerId, Priority, SiteId};
use uuid::Uuid;

/// The columns of a [`MowerCard`], over `mowers m LEFT JOIN latest_states l` and
/// `offline_join!`.
macro_rules! mower_card_columns {
    () => {
        "m.id, m.site_id, m.name, m.model, m.display_order, \
         l.state->>'activity' AS activity, (l.state->>'battery_percent')::smallint AS battery, \
         l.observed_at, l.last_seen_at, o.offline, l.state->>'error_code' AS error_code, \
         (l.state->'position'->>'lat')::float8 AS lat, (l.state->'position'->>'lon')::float8 AS lon"
    };
}

/// Offline: the watch row's flag, set and cleared by the watcher in the same commit as the open
/// `offline` alert (so it equals "has an open offline alert", what the memory adapter reads). A
/// one-to-one join on a plain column: the planner knows how rare it is, so it walks
/// `mowers_site_order` and stops at the sentinel; an `EXISTS` over `alerts` was estimated so
/// selective that the planner read whole sites and sorted them, or hashed every offline alert.
macro_rules! offline_join {
    () => {
        " JOIN mower_watches o ON o.mower_id = m.id "
    };
}

/// In the field: reported, neither docked nor charging, and not offline.
macro_rules! in_the_field {
    () => {
        "l.state->>'activity' NOT IN ('docked', 'charging') AND NOT o.offline"
    };
}

const WINDOW_MOWERS: &str = concat!(
    "SELECT ",
    mower_card_columns!(),
    " FROM mowers m LEFT JOIN latest_states l ON l.mower_id = m.id",
    offline_join!(),
    "WHERE m.account_id = $1 ORDER BY m.display_order, m.name COLLATE \"C\", m.id LIMIT $2"
);

const WINDOW_MOWERS_OF_SITES: &str = concat!(
    "SELECT ",
    mower_card_columns!(),
    " FROM mowers m LEFT JOIN latest_states l ON l.mower_id = m.id",
    offline_join!(),
    "WHERE m.account_id = $1 AND m.site_id = ANY($2) \
     ORDER BY m.display_order, m.name COLLATE \"C\", m.id LIMIT $3"
);

const WINDOW_SITES: &str = "SELECT id, name, time_zone, display_order FROM sites \
    WHERE account_id = $1 ORDER BY display_order, name COLLATE \"C\", id LIMIT $2";

const WINDOW_SITES_OF_SITES: &str = "SELECT id, name, time_zone, display_order FROM sites \
    WHERE account_id = $1 AND id = ANY($2) ORDER BY display_order, name COLLATE \"C\", id LIMIT $3";

/// `$1` sites (visible ones, in window order), `$2` account, `$3` the per-site limit.
const SITE_MOWERS: &str = concat!(
    "SELECT w.* FROM UNNEST($1::uuid[]) WITH ORDINALITY AS s(site_id, ord) \
     CROSS JOIN LATERAL (SELECT ",
    mower_card_columns!(),
    " FROM mowers m LEFT JOIN latest_states l ON l.mower_id = m.id",
    offline_join!(),
    "WHERE m.site_id = s.site_id AND m.account_id = $2 \
     ORDER BY m.display_order, m.name COLLATE \"C\", m.id LIMIT $3) w \
     ORDER BY s.ord, w.display_order, w.name COLLATE \"C\", w.id"
);

/// [`SITE_MOWERS`] with the site wall's filter, applied before each site's limit.
const SITE_FIELD_MOWERS: &str = concat!(
    "SELECT w.* FROM UNNEST($1::uuid[]) WITH ORDINALITY AS s(site_id, ord) \
     CROSS JOIN LATERAL (SELECT ",
    mower_card_columns!(),
    " FROM mowers m JOIN latest_states l ON l.mower_id = m.id",
    offline_join!(),
    "WHERE m.site_id = s.site_id AND m.account_id = $2 AND ",
    in_the_field!(),
    " ORDER BY m.display_order, m.name COLLATE \"C\", m.id LIMIT $3) w \
     ORDER BY s.ord, w.display_order, w.name COLLATE \"C\", w.id"
);

/// The visible mowers of `$1`, in its order: `$2` account, `$3` the viewer's sites (NULL: all).
macro_rules! visible_window {
    () => {
        "UNNEST($1::uuid[]) WITH ORDINALITY AS w(mower_id, ord) \
         JOIN mowers m ON m.id = w.mower_id AND m.account_id = $2 \
         AND ($3::uuid[] IS NULL OR m.site_id = ANY($3))"
    };
}

const OPEN_ALERTS: &str = concat!(
    "SELECT a.id, a.mower_id, a.kind, a.severity, a.raised_at, a.code FROM ",
    visible_window!(),
    " CROSS JOIN LATERAL (SELECT id, mower_id, kind, severity, severity_rank, raised_at, code \
     FROM alerts a WHERE a.mower_id = m.id AND a.account_id = $2 AND a.cleared_at IS NULL \
     ORDER BY a.severity_rank DESC, a.raised_at DESC, a.id DESC LIMIT $4) a \
     ORDER BY w.ord, a.severity_rank DESC, a.raised_at DESC, a.id DESC"
);

/// Counts over all of a mower's open alerts: the status is never computed from a window.
const HEALTH: &str = concat!(
    "SELECT m.id AS mower_id, m.blade_threshold_ms, \
     COALESCE(h.blade_since_reset_ms, 0) AS blade_since_reset_ms, \
     COALESCE(h.error_count, 0) AS error_count, c.critical, c.high, c.normal, c.low FROM ",
    visible_window!(),
    " LEFT JOIN health_totals h ON h.mower_id = m.id \
     CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE a.severity_rank = 4) AS critical, \
     count(*) FILTER (WHERE a.severity_rank = 3) AS high, \
     count(*) FILTER (WHERE a.severity_rank = 2) AS normal, \
     count(*) FILTER (WHERE a.severity_rank = 1) AS low \
     FROM alerts a WHERE a.mower_id = m.id AND a.account_id = $2 AND a.cleared_at IS NULL) c \
     ORDER BY w.ord"
);

/// The winner of each mower: the first entry of `assignments_on_duty`; nothing else is read.
const OPERATORS_ON_DUTY: &str = concat!(
    "SELECT a.id, a.mower_id, a.account_id, a.operator, a.priority, a.active, a.updated_at FROM ",
    visible_window!(),
    " CROSS JOIN LATERAL (SELECT id, mower_id, account_id, operator, priority, active, \
     updated_at FROM assignments a WHERE a.mower_id = m.id AND a.account_id = $2 AND a.active \
     ORDER BY a.priority_rank DESC, a.updated_at DESC, a.id DESC LIMIT 1) a ORDER BY w.ord"
);

/// Serialises assignment creations of one mower (the limit check). `NO KEY UPDATE` does not
/// conflict with the key-share locks ingestion's foreign keys take.
const LOCK_MOWER: &str = "SELECT id FROM mowers WHERE id = $1 FOR NO KEY UPDATE";
const COUNT_ASSIGNMENTS: &str = "SELECT count(*) FROM assignments WHERE mower_id = $1";
const INSERT_ASSIGNMENT: &str = "INSERT INTO assignments \
    (id, mower_id, account_id, operator, priority, active, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7)";
const LIST_ASSIGNMENTS: &str = "SELECT id, mower_id, account_id, operator, priority, active, \
    updated_at FROM assignments WHERE mower_id = $1 AND account_id = $2 \
    ORDER BY active DESC, priority_rank DESC, updated_at DESC, id DESC";
const UPDATE_ASSIGNMENT: &str = "UPDATE assignments SET operator = $4, priority = $5, \
    active = $6, updated_at = $7 WHERE id = $1 AND mower_id = $2 AND account_id = $3";
const DELETE_ASSIGNMENT: &str =
    "DELETE FROM assignments WHERE id = $1 AND mower_id = $2 AND account_id = $3";

fn unavailable(e: impl Into<Cause>) -> ProjectionError {
    ProjectionError::Unavailable(e.into())
}

fn corrupt(e: impl Into<Cause>) -> ProjectionError {
    ProjectionError::Corrupt(e.into())
}

fn mower_card(row: &PgRow) -> Result<MowerCard, ProjectionError> {
    let activity: Option<String> = row.try_get("activity").map_err(corrupt)?;
    let battery: Option<i16> = row.try_get("battery").map_err(corrupt)?;
    Ok(MowerCard {
        id: MowerId(row.try_get("id").map_err(corrupt)?),
        site_id: SiteId(row.try_get("site_id").map_err(corrupt)?),
        name: row.try_get("name").map_err(corrupt)?,
        model: row.try_get("model").map_err(corrupt)?,
        display_order: row.try_get("display_order").map_err(corrupt)?,
        activity: activity
            .map(|a| Activity::parse(&a).ok_or_else(|| corrupt(format!("activity {a:?}"))))
            .transpose()?,
        battery_percent: battery.and_then(|b| u8::try_from(b).ok()),
        observed_at: row.try_get("observed_at").map_err(corrupt)?,
        last_seen_at: row.try_get("last_seen_at").map_err(corrupt)?,
        offline: row.try_get("offline").map_err(corrupt)?,
        error_code: row.try_get("error_code").map_err(corrupt)?,
        position: match (
            row.try_get::<Option<f64>, _>("lat").map_err(corrupt)?,
            row.try_get::<Option<f64>, _>("lon").map_err(corrupt)?,
        ) {
            (Some(lat), Some(lon)) => Some(LatLon { lat, lon }),
            _ => None,
        },
    })
}

fn site_card(row: &PgRow) -> Result<SiteCard, ProjectionError> {
    Ok(SiteCard {
        id: SiteId(row.try_get("id").map_err(corrupt)?),
        name: row.try_get("name").map_err(corrupt)?,
        time_zone: row.try_get("time_zone").map_err(corrupt)?,
        display_order: row.try_get("display_order").map_err(corrupt)?,
    })
}

fn alert_card(row: &PgRow) -> Result<AlertCard, ProjectionError> {
    let kind: String = row.try_get("kind").map_err(corrupt)?;
    let severity: String = row.try_get("severity").map_err(corrupt)?;
    Ok(AlertCard {
        id: row.try_get("id").map_err(corrupt)?,
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        kind: AlertKind::parse(&kind).ok_or_else(|| corrupt(format!("alert kind {kind:?}")))?,
        severity: Severity::parse(&severity)
            .ok_or_else(|| corrupt(format!("severity {severity:?}")))?,
        raised_at: row.try_get("raised_at").map_err(corrupt)?,
        code: row.try_get("code").map_err(corrupt)?,
    })
}

fn count(row: &PgRow, column: &str) -> Result<u32, ProjectionError> {
    let n: i64 = row.try_get(column).map_err(corrupt)?;
    u32::try_from(n).map_err(corrupt)
}

fn health_card(row: &PgRow) -> Result<HealthCard, ProjectionError> {
    Ok(HealthCard {
        mower_id: MowerId(row.try_get("mower_id").map_err(corrupt)?),
        critical: count(row, "critical")?,
        high: count(row, "high")?,
        normal: count(row, "normal")?,
        low: count(row, "low")?,
        blade_since_reset_ms: row.try_get("blade_since_reset_ms").map_err(corrupt)?,
        blade_threshold_ms: row.try_get("blade_threshold_ms").map_err(corrupt)?,
        error_count: row.try_get("error_count").map_err(corrupt)?,
    })
}

fn assignment(row: &PgRow) -> Result<Assignment, Cause> {
    let priority: String = row.try_get("priority")?;
    Ok(Assignment {
        id: row.try_get("id")?,
        mower_id: MowerId(row.try_get("mower_id")?),
        account_id: AccountId(row.try_get("account_id")?),
        operator: row.try_get("operator")?,
        priority: Priority::parse(&priority).ok_or_else(|| format!("priority {priority:?}"))?,
        active: row.try_get("active")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// A limit as a SQL `bigint` (saturating: a limit beyond `i64::MAX` means "all").
fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn uuids<T>(ids: &[T], f: impl Fn(&T) -> Uuid) -> Vec<Uuid> {
    ids.iter().map(f).collect()
}

fn sites_of(who: &Visibility) -> Option<Vec<Uuid>> {
    who.sites.as_ref().map(|s| uuids(s, |s| s.0))
}

impl PostgresStore {
    /// The rows of one statement about `mowers` as `who` sees them: `sql` takes the mowers, the
    /// account and the visible sites (`null`: all), then `per_mower` when given. One statement.
    async fn of_mowers(
        &self,
        sql: &'static str,
        who: &Visibility,
        mowers: &[MowerId],
        per_mower: Option<i64>,
    ) -> Result<Vec<PgRow>, ProjectionError> {
        self.projection_counters().statement();
        let mut query = sqlx::query(sql)
            .bind(uuids(mowers, |m| m.0))
            .bind(who.account_id.0)
            .bind(sites_of(who));
        if let Some(per_mower) = per_mower {
            query = query.bind(per_mower);
        }
        query.fetch_all(self.pool()).await.map_err(unavailable)
    }

    /// The first `n` rows (and the sentinel) of a first-level window as `who` sees it: `sql[0]`
    /// takes the account and the limit, `sql[1]` (a principal limited to some sites) the
    /// account, the sites and the limit. One statement.
    async fn first_level(
        &self,
        sql: [&'static str; 2],
        who: &Visibility,
        n: usize,
    ) -> Result<Vec<PgRow>, ProjectionError> {
        let query = match &who.sites {
            None => sqlx::query(sql[0]).bind(who.account_id.0),
            Some(sites) => sqlx::query(sql[1])
                .bind(who.account_id.0)
                .bind(uuids(sites, |s| s.0)),
        };
        self.projection_counters().statement();
        query
            .bind(limit(n))
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)
    }
}

#[async_trait]
impl ProjectionStore for PostgresStore {
    async fn window_mowers(
        &self,
        who: &Visibility,
        n: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        let rows = self
            .first_level([WINDOW_MOWERS, WINDOW_MOWERS_OF_SITES], who, n)
            .await?;
        rows.iter().map(mower_card).collect()
    }

    async fn window_sites(
        &self,
        who: &Visibility,
        n: usize,
    ) -> Result<Vec<SiteCard>, ProjectionError> {
        let rows = self
            .first_level([WINDOW_SITES, WINDOW_SITES_OF_SITES], who, n)
            .await?;
        rows.iter().map(site_card).collect()
    }

    async fn site_mowers(
        &self,
        who: &Visibility,
        sites: &[SiteId],
        filter: MowerFilter,
        per_site: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        let visible: Vec<Uuid> = sites
            .iter()
            .filter(|s| sees_site(who.sites.as_deref(), **s))
            .map(|s| s.0)
            .collect();
        let sql = match filter {
            MowerFilter::All => SITE_MOWERS,
            MowerFilter::InTheField => SITE_FIELD_MOWERS,
        };
        self.projection_counters().statement();
        let rows = sqlx::query(sql)
            .bind(visible)
            .bind(who.account_id.0)
            .bind(limit(per_site))
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?;
        rows.iter().map(mower_card).collect()
    }

    async fn open_alerts(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
        per_mower: usize,
    ) -> Result<Vec<AlertCard>, ProjectionError> {
        let rows = self
            .of_mowers(OPEN_ALERTS, who, mowers, Some(limit(per_mower)))
            .await?;
        rows.iter().map(alert_card).collect()
    }

    async fn health(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<HealthCard>, ProjectionError> {
        let rows = self.of_mowers(HEALTH, who, mowers, None).await?;
        rows.iter().map(health_card).collect()
    }

    async fn operators_on_duty(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<Assignment>, ProjectionError> {
        let rows = self.of_mowers(OPERATORS_ON_DUTY, who, mowers, None).await?;
        rows.iter()
            .map(|r| assignment(r).map_err(corrupt))
            .collect()
    }
}

/// `INSERT_ASSIGNMENT` and `UPDATE_ASSIGNMENT` take the same parameters, in this order.
fn bind_assignment<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    a: &'q Assignment,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    query
        .bind(a.id)
        .bind(a.mower_id.0)
        .bind(a.account_id.0)
        .bind(&a.operator)
        .bind(a.priority.as_str())
        .bind(a.active)
        .bind(a.updated_at)
}

fn store_failed(e: impl Into<Cause>) -> AssignmentError {
    AssignmentError::Unavailable(e.into())
}

#[async_trait]
impl Assignments for PostgresStore {
    async fn create_assignment(&self, a: Assignment) -> Result<(), AssignmentError> {
        let counters = self.projection_counters();
        let mut tx = self.pool().begin().await.map_err(store_failed)?;
        counters.statement();
        let mower = sqlx::query(LOCK_MOWER)
            .bind(a.mower_id.0)
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_failed)?;
        if mower.is_none() {
            return Err(AssignmentError::NotFound(format!("mower {}", a.mower_id)));
        }
        counters.statement();
        let stored: i64 = sqlx::query_scalar(COUNT_ASSIGNMENTS)
            .bind(a.mower_id.0)
            .fetch_one(&mut *tx)
            .await
            .map_err(store_failed)?;
        if stored >= MAX_ASSIGNMENTS_PER_MOWER as i64 {
            return Err(AssignmentError::Limit(format!(
                "A mower may have at most {MAX_ASSIGNMENTS_PER_MOWER} assignments."
            )));
        }
        counters.statement();
        let inserted = bind_assignment(sqlx::query(INSERT_ASSIGNMENT), &a)
            .execute(&mut *tx)
            .await;
        match inserted {
            Ok(_) => {}
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                return Err(AssignmentError::Conflict(a.id));
            }
            Err(e) => return Err(store_failed(e)),
        }
        tx.commit().await.map_err(store_failed)?;
        counters.commit();
        Ok(())
    }

    async fn assignments(
        &self,
        account: AccountId,
        mower: MowerId,
    ) -> Result<Vec<Assignment>, AssignmentError> {
        self.projection_counters().statement();
        let rows = sqlx::query(LIST_ASSIGNMENTS)
            .bind(mower.0)
            .bind(account.0)
            .fetch_all(self.pool())
            .await
            .map_err(store_failed)?;
        rows.iter()
            .map(|r| assignment(r).map_err(AssignmentError::Unavailable))
            .collect()
    }

    async fn update_assignment(&self, a: Assignment) -> Result<bool, AssignmentError> {
        self.projection_counters().statement();
        let done = bind_assignment(sqlx::query(UPDATE_ASSIGNMENT), &a)
            .execute(self.pool())
            .await
            .map_err(store_failed)?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_assignment(
        &self,
        account: AccountId,
        mower: MowerId,
        id: Uuid,
    ) -> Result<bool, AssignmentError> {
        self.projection_counters().statement();
        let done = sqlx::query(DELETE_ASSIGNMENT)
            .bind(id)
            .bind(mower.0)
            .bind(account.0)
            .execute(self.pool())
            .await
            .map_err(store_failed)?;
        Ok(done.rows_affected() > 0)
    }
}
