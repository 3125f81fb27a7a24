//! The ports of the bounded live projections (docs/rules.md §6): [`ProjectionStore`], the reads a live
//! view is built from, one bounded read per level, and [`Assignments`], the operators assigned to
//! mowers (the "operator on duty" of a live view).
//!
//! Every read answers typed cards (never store rows), already restricted to what a [`Visibility`]
//! may see, already ordered, and at most as long as the limit it was given. The use case
//! ([`crate::projections::Projections`]) asks for one row beyond each ceiling (the sentinel) and
//! cuts; the store never counts to say that a list was cut.

use super::Cause;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use swath_domain::watch::{AlertKind, Severity};
use swath_domain::{AccountId, Activity, Assignment, MowerId, Principal, SiteId};
use uuid::Uuid;

/// Errors of the [`ProjectionStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// The store could not be reached or a statement failed; the caller may retry.
    #[error("projection store unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// A stored row could not be read back (a bug or a manual edit).
    #[error("stored data is corrupt: {0}")]
    Corrupt(#[source] Cause),
}

/// Who is looking: an account, optionally limited to some of its sites. Applied by every read
/// **before** its limit, so that rows the viewer may not see never use up a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Visibility {
    pub account_id: AccountId,
    /// `None`: every site of the account.
    pub sites: Option<Vec<SiteId>>,
}

impl From<&Principal> for Visibility {
    fn from(p: &Principal) -> Self {
        Self {
            account_id: p.account_id,
            sites: p.sites.clone(),
        }
    }
}

/// A site as a live view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteCard {
    pub id: SiteId,
    pub name: String,
    pub time_zone: String,
    pub display_order: i32,
}

/// A mower as a live view shows it: the directory's entry and what its latest state says.
#[derive(Clone, Debug, PartialEq)]
pub struct MowerCard {
    pub id: MowerId,
    pub site_id: SiteId,
    pub name: String,
    pub model: String,
    pub display_order: i32,
    /// The latest reported activity; `None`: never reported.
    pub activity: Option<Activity>,
    pub battery_percent: Option<u8>,
    /// The `observed_at` of the latest state.
    pub observed_at: Option<DateTime<Utc>>,
    /// When the latest state was received.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Whether the mower has an open `offline` alert (silent for the offline period).
    pub offline: bool,
    /// The latest state's `error_code`, if it has one.
    pub error_code: Option<String>,
    /// The latest state's position, if it has one.
    pub position: Option<LatLon>,
}

/// A WGS 84 position, in degrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatLon {
    pub lat: f64,
    pub lon: f64,
}

impl MowerCard {
    /// In the field: reported, and neither docked, charging nor offline (the site wall's filter).
    pub fn in_the_field(&self) -> bool {
        !self.offline
            && self
                .activity
                .is_some_and(|a| !matches!(a, Activity::Docked | Activity::Charging))
    }
}

/// An open alert as a live view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertCard {
    pub id: Uuid,
    pub mower_id: MowerId,
    pub kind: AlertKind,
    pub severity: Severity,
    pub raised_at: DateTime<Utc>,
    pub code: Option<String>,
}

/// What the health wall shows of a mower: counts over **all** of its open alerts (never a window
/// of them), and its blade wear.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthCard {
    pub mower_id: MowerId,
    /// Open alerts by severity: critical, high, normal, low.
    pub critical: u32,
    pub high: u32,
    pub normal: u32,
    pub low: u32,
    /// Blade time since the last blade reset; 0 before the first state.
    pub blade_since_reset_ms: i64,
    pub blade_threshold_ms: i64,
    /// Errors counted since the mower first reported.
    pub error_count: i64,
}

/// Which of a site's mowers a level shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MowerFilter {
    /// Every mower of the site.
    All,
    /// Only mowers [`MowerCard::in_the_field`]; filtered before the limit.
    InTheField,
}

/// The [`ProjectionStore`]'s reads, one per level of a live view.
///
/// An implementation MUST, in every read:
/// - answer only rows of `who.account_id`, and of `who.sites` when given, deciding this **before**
///   the limit (rows the viewer may not see never use up a window);
/// - answer at most `limit` (or `per_*`) rows, in the documented total order, ids last (names
///   compared byte by byte, PostgreSQL's `COLLATE "C"`); never count the rows beyond it;
/// - answer what was committed, and cost a constant number of statements, whatever the number of
///   rows in the tenant (PostgreSQL: one statement per call);
/// - return [`ProjectionError::Unavailable`] when its backing store fails.
///
/// And per read:
/// - `window_mowers`: the visible mowers by `(display_order, name, id)`;
/// - `window_sites`: the visible sites by `(display_order, name, id)`;
/// - `site_mowers`: for each of `sites` (in the given order), its visible mowers passing
///   `filter` (applied before the limit), by `(display_order, name, id)`, at most `per_site` of
///   each; grouped by site in the order of `sites`;
/// - `open_alerts`: for each of `mowers` (in the given order), its open alerts of `who`'s
///   account by `(severity desc, raised_at desc, id desc)`, at most `per_mower` of each;
/// - `health`: for each of `mowers` that is visible, one [`HealthCard`] counting all its open
///   alerts, in the order of `mowers`;
/// - `operators_on_duty`: for each of `mowers`, the winning active assignment of `who`'s account
///   (priority critical → low, then `updated_at` desc, then id desc), ranked by the store, only
///   the winner answered; an inactive assignment or another account's never wins. Mowers without
///   one are absent. In the order of `mowers`.
#[async_trait]
pub trait ProjectionStore: Send + Sync {
    async fn window_mowers(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError>;

    async fn window_sites(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<SiteCard>, ProjectionError>;

    async fn site_mowers(
        &self,
        who: &Visibility,
        sites: &[SiteId],
        filter: MowerFilter,
        per_site: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError>;

    async fn open_alerts(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
        per_mower: usize,
    ) -> Result<Vec<AlertCard>, ProjectionError>;

    async fn health(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<HealthCard>, ProjectionError>;

    async fn operators_on_duty(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<Assignment>, ProjectionError>;
}

/// The most assignments a mower may have (active or not): an assignment list is a small
/// administrative table, not an inventory.
pub const MAX_ASSIGNMENTS_PER_MOWER: usize = 64;

/// Errors of the [`Assignments`] port.
#[derive(Debug, thiserror::Error)]
pub enum AssignmentError {
    /// The mower does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The id is taken.
    #[error("assignment {0} already exists")]
    Conflict(Uuid),
    /// The mower has [`MAX_ASSIGNMENTS_PER_MOWER`] assignments already; nothing was stored.
    #[error("{0}")]
    Limit(String),
    /// The store could not be reached or failed; the caller may retry.
    #[error("assignment store unavailable: {0}")]
    Unavailable(#[source] Cause),
}

/// Operator assignments.
///
/// An implementation MUST:
/// - `create_assignment`: store it as given (its account is the caller's decision); refuse a
///   mower that does not exist with [`AssignmentError::NotFound`], a taken id with
///   [`AssignmentError::Conflict`], and a mower with [`MAX_ASSIGNMENTS_PER_MOWER`] assignments with
///   [`AssignmentError::Limit`];
/// - `assignments`: answer the assignments of `mower` and `account` (never another account's), in
///   ranking order (the winner first among the active ones: active first, then priority, then
///   `updated_at` desc, then id desc);
/// - `update_assignment`: replace operator, priority, active and `updated_at` of the assignment
///   with this id, mower *and* account; `false` if there is none;
/// - `delete_assignment`: delete the assignment with this id, mower and account; `false` if there
///   is none;
/// - forget a mower's assignments when the mower is deleted (or never show them again);
/// - return [`AssignmentError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait Assignments: Send + Sync {
    async fn create_assignment(&self, assignment: Assignment) -> Result<(), AssignmentError>;
    async fn assignments(
        &self,
        account: AccountId,
        mower: MowerId,
    ) -> Result<Vec<Assignment>, AssignmentError>;
    async fn update_assignment(&self, assignment: Assignment) -> Result<bool, AssignmentError>;
    async fn delete_assignment(
        &self,
        account: AccountId,
        mower: MowerId,
        id: Uuid,
    ) -> Result<bool, AssignmentError>;
}
