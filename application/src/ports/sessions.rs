//! The sessions store (docs/rules.md §3, W8): the reads of the stored sessions, and the window a
//! late state's recompute reads inside the telemetry batch.
//!
//! Sessions are written by the telemetry unit of work ([`super::TelemetryBatch::commit`] with
//! [`swath_domain::BatchChanges::sessions`]), never through this port: a batch's sessions are
//! committed with its states or not at all.

use super::Cause;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use swath_domain::sessions::{SessionPoint, SessionRow};
use swath_domain::{AccountId, MowerId};

/// Errors of the [`SessionStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The store could not be reached or a statement failed.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// A stored row could not be read back (a bug or a manual edit).
    #[error("stored data is corrupt: {0}")]
    Corrupt(#[source] Cause),
}

/// A page of sessions, newest first: those of `mowers` written for `account` that overlap
/// `[from, to)` (a session `[started_at, ended_at]`, open ones reaching to the end of time, with
/// `started_at < to` and `ended_at > from`; either bound may be open), ordered by `started_at`
/// then `mower_id`, both descending, strictly after the key `before` (the last key of the
/// previous page), at most `limit` of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionQuery {
    pub account: AccountId,
    pub mowers: Vec<MowerId>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub before: Option<(DateTime<Utc>, MowerId)>,
    pub limit: usize,
}

/// The stored sessions a late state's recompute replaces, and the stored states it folds again
/// (decision 200): for one mower with late states from `t_min` through `t_max`,
/// - `from`: the start of the newest stored session that started before `t_min`, else `t_min`;
/// - `through`: the end of the first stored session that started after `t_max`, when a later
///   stored session follows it; else `None` (through the mower's newest state);
/// - `sessions`: the starts of the stored sessions with `started_at >= from` and, when `through`
///   is given, `started_at <= through`;
/// - `states`: the stored states with `observed_at >= from` and, when `through` is given,
///   `observed_at <= through` plus the first stored state after it; oldest first, each history
///   row with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionWindow {
    pub mower_id: MowerId,
    pub from: DateTime<Utc>,
    pub through: Option<DateTime<Utc>>,
    pub sessions: Vec<DateTime<Utc>>,
    pub states: Vec<SessionPoint>,
}

/// The reads of the stored sessions.
///
/// An implementation MUST:
/// - answer what the telemetry batches committed, never half a batch: the sessions a batch's
///   states give are stored in the batch's own unit of work (its
///   [`swath_domain::sessions::SessionChanges`]: rows upserted by `(mower_id, started_at)`, keys
///   removed, each changed newest session answered with its figures as `newest` gives them,
///   whatever its row last held, decision 207), so that the stored sessions of a mower are always
///   those of its stored, counted states;
/// - in `page`, answer exactly the rows of [`SessionQuery`]'s definition;
/// - export them with the telemetry rows ([`super::TelemetryStore::export`]'s `sessions`);
/// - keep a mower's sessions until the mower is deleted or retention removes them (sessions that
///   ended before its limit; an open session, or the newest one, never).
///
/// Errors: [`SessionError::Unavailable`] when the store cannot answer, [`SessionError::Corrupt`]
/// when a stored row cannot be read back.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// A page of sessions (see [`SessionQuery`]).
    async fn page(&self, query: &SessionQuery) -> Result<Vec<SessionRow>, SessionError>;
}
