//! Verifying a run: what PostgreSQL holds of a plan, waiting until it is all stored, and
//! [`compare`], every difference between telemetry rows and what a store exported.

use super::Plan;
use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;
use std::time::Instant;
use swath_domain::{MowerId, TelemetryRows};
use uuid::Uuid;

/// History rows of these mowers in PostgreSQL (one per stored state).
pub async fn stored_count(pool: &PgPool, mowers: &[MowerId]) -> anyhow::Result<usize> {
    let ids: Vec<Uuid> = mowers.iter().map(|m| m.0).collect();
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM state_history WHERE mower_id = ANY($1)")
            .bind(&ids)
            .fetch_one(pool)
            .await?;
    Ok(count as usize)
}

/// History rows of the plan's mowers outside the instants its states are observed at: rows of
/// another run of the same seed (a plan starts two days before the day it runs), which a
/// verification would count as differences.
pub async fn rows_outside(pool: &PgPool, plan: &Plan) -> anyhow::Result<usize> {
    let ids: Vec<Uuid> = plan.mower_ids().iter().map(|m| m.0).collect();
    let count: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM state_history WHERE mower_id = ANY($1) \
         AND (observed_at < $2 OR observed_at >= $3)",
    )
    .bind(&ids)
    .bind(plan.start)
    .bind(plan.last_observed_at() + Duration::seconds(1))
    .fetch_one(pool)
    .await?;
    Ok(count as usize)
}

/// Waits until PostgreSQL holds `expected` history rows of the plan's mowers, printing progress
/// every `report_every` when given. Fails after `timeout` without progress.
pub async fn wait_stored(
    pool: &PgPool,
    plan: &Plan,
    expected: usize,
    timeout: std::time::Duration,
    report_every: Option<std::time::Duration>,
) -> anyhow::Result<std::time::Duration> {
    let mowers = plan.mower_ids();
    let started = Instant::now();
    let mut last = (0, Instant::now());
    let mut reported = Instant::now();
    loop {
        // A database restart makes a count fail for a while: that is not a verdict.
        let count = stored_count(pool, &mowers).await.unwrap_or(last.0);
        if count >= expected {
            anyhow::ensure!(
                count == expected,
                "{count} history rows, more than the {expected} states published"
            );
            return Ok(started.elapsed());
        }
        if count != last.0 {
            last = (count, Instant::now());
        }
        anyhow::ensure!(
            last.1.elapsed() < timeout,
            "stuck at {} of {expected} stored states for {timeout:?}",
            last.0
        );
        if let Some(every) = report_every {
            if reported.elapsed() >= every {
                eprintln!(
                    "  stored {count:>9} of {expected} ({:.0} s)",
                    started.elapsed().as_secs_f64()
                );
                reported = Instant::now();
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Waits until PostgreSQL holds at least `count` history rows of the plan's mowers. Fails after
/// `stall` without progress.
pub async fn wait_at_least(
    pool: &PgPool,
    plan: &Plan,
    count: usize,
    stall: std::time::Duration,
) -> anyhow::Result<()> {
    let mowers = plan.mower_ids();
    let mut last = (0, Instant::now());
    loop {
        let stored = stored_count(pool, &mowers).await.unwrap_or(last.0);
        if stored >= count {
            return Ok(());
        }
        if stored != last.0 {
            last = (stored, Instant::now());
        }
        anyhow::ensure!(
            last.1.elapsed() < stall,
            "stuck at {stored} stored states (waiting for {count}) for {stall:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Which tables [`compare`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// History, positions, latest (all but `last_seen_at`), health and day totals, sessions.
    Everything,
    /// History, positions, latest and sessions only: the rows that do not depend on the order in
    /// which a mower's states were stored (W8's sessions are a function of the set of states).
    OrderFree,
}

/// Every difference between `expected` (the reference) and `actual`, as lines for people; empty
/// when they are equal. `last_seen_at` (when the state was received) is never compared: the
/// reference received its states at another time.
pub fn compare(expected: &TelemetryRows, actual: &TelemetryRows, checked: Checked) -> Vec<String> {
    let mut out = Vec::new();
    diff_table(
        "history",
        &expected.history,
        &actual.history,
        |r| (r.mower_id, r.observed_at),
        &mut out,
    );
    diff_table(
        "positions",
        &expected.positions,
        &actual.positions,
        |r| (r.mower_id, r.observed_at),
        &mut out,
    );
    let without_seen = |rows: &[swath_domain::LatestRow]| -> Vec<swath_domain::LatestRow> {
        rows.iter()
            .cloned()
            .map(|mut r| {
                r.last_seen_at = DateTime::<Utc>::UNIX_EPOCH;
                r
            })
            .collect()
    };
    diff_table(
        "latest",
        &without_seen(&expected.latest),
        &without_seen(&actual.latest),
        |r| r.mower_id,
        &mut out,
    );
    diff_table(
        "sessions",
        &expected.sessions,
        &actual.sessions,
        |r| (r.session.mower_id, r.session.started_at),
        &mut out,
    );
    if checked == Checked::Everything {
        diff_table(
            "health",
            &expected.health,
            &actual.health,
            |r| r.mower_id,
            &mut out,
        );
        diff_table(
            "days",
            &expected.days,
            &actual.days,
            |r| (r.mower_id, r.day),
            &mut out,
        );
    }
    out
}

/// Compares two tables in key order: missing rows, extra rows, differing rows (the first few of
/// each shown, all counted).
pub fn diff_table<T: PartialEq + std::fmt::Debug, K: Ord + std::fmt::Debug>(
    name: &str,
    expected: &[T],
    actual: &[T],
    key: impl Fn(&T) -> K,
    out: &mut Vec<String>,
) {
    const SHOWN: usize = 5;
    let (mut missing, mut extra, mut differing) = (0usize, 0usize, 0usize);
    let mut shown = 0;
    let (mut e, mut a) = (expected.iter().peekable(), actual.iter().peekable());
    loop {
        let line = match (e.peek(), a.peek()) {
            (None, None) => break,
            (Some(x), None) => {
                missing += 1;
                let line = format!("{name}: missing {:?}", key(x));
                e.next();
                line
            }
            (None, Some(y)) => {
                extra += 1;
                let line = format!("{name}: extra {:?}", key(y));
                a.next();
                line
            }
            (Some(x), Some(y)) => match key(x).cmp(&key(y)) {
                std::cmp::Ordering::Less => {
                    missing += 1;
                    let line = format!("{name}: missing {:?}", key(x));
                    e.next();
                    line
                }
                std::cmp::Ordering::Greater => {
                    extra += 1;
                    let line = format!("{name}: extra {:?}", key(y));
                    a.next();
                    line
                }
                std::cmp::Ordering::Equal => {
                    let same = x == y;
                    let line = format!("{name}: differs\n    expected {x:?}\n    stored   {y:?}");
                    e.next();
                    a.next();
                    if same {
                        continue;
                    }
                    differing += 1;
                    line
                }
            },
        };
        if shown < SHOWN {
            out.push(line);
            shown += 1;
        }
    }
    if missing + extra + differing > 0 {
        out.push(format!(
            "{name}: {missing} missing, {extra} extra, {differing} differing (of {} expected rows)",
            expected.len()
        ));
    }
}

/// A one-line summary of a set of rows.
pub fn summary(rows: &TelemetryRows) -> String {
    format!(
        "{} history, {} positions, {} latest, {} health, {} day rows, {} sessions ({} ended, {} with breaks)",
        rows.history.len(),
        rows.positions.len(),
        rows.latest.len(),
        rows.health.len(),
        rows.days.len(),
        rows.sessions.len(),
        rows.sessions.iter().filter(|r| !r.session.is_open()).count(),
        rows.sessions.iter().filter(|r| r.session.breaks > 0).count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_reference_stores_every_state_and_compare_finds_differences() {
        let plan = Plan::new(5, 3, 90);
        let reference = plan.reference().await.unwrap();
        assert_eq!(reference.history.len(), 90);
        assert_eq!(reference.latest.len(), 3);
        assert!(compare(&reference, &reference, Checked::Everything).is_empty());

        let mut changed = reference.clone();
        changed.history.remove(10);
        changed.health[0].mowing_ms += 1;
        changed.latest[1].last_seen_at = Utc::now();
        let found = compare(&reference, &changed, Checked::Everything);
        assert!(
            found.iter().any(|l| l.starts_with("history: missing")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|l| l.starts_with("health: differs")),
            "{found:?}"
        );
        assert!(
            !found.iter().any(|l| l.starts_with("latest")),
            "last_seen_at is not compared"
        );
        let order_free = compare(&reference, &changed, Checked::OrderFree);
        assert!(
            !order_free.iter().any(|l| l.starts_with("health")),
            "{order_free:?}"
        );
    }

    /// A session row that differs in one value, or is missing, is a difference in both modes
    /// (sessions do not depend on the order states were stored in).
    #[tokio::test]
    async fn compare_finds_a_wrong_session() {
        let plan = Plan::new(5, 3, 90);
        let reference = plan.reference().await.unwrap();
        assert!(!reference.sessions.is_empty(), "{}", summary(&reference));
        for checked in [Checked::Everything, Checked::OrderFree] {
            let mut changed = reference.clone();
            changed.sessions[0].session.distance_mm += 1;
            let found = compare(&reference, &changed, checked);
            assert!(
                found.iter().any(|l| l.starts_with("sessions: differs")),
                "{checked:?}: {found:?}"
            );
            let mut changed = reference.clone();
            changed.sessions.pop();
            let found = compare(&reference, &changed, checked);
            assert!(
                found.iter().any(|l| l.starts_with("sessions: missing")),
                "{checked:?}: {found:?}"
            );
        }
    }
}
