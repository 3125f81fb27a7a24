//! The mowing sessions a principal may read (docs/rules.md §3, W8; issue 45 item 2): a mower's,
//! the fleet's, and a mower's open session.
//!
//! The use case decides visibility itself: a mower or site the principal cannot see (another
//! account's, or outside a site-limited token's sites) is [`SessionsError::NotFound`], exactly
//! like an unknown id; and only the sessions written for the principal's account are answered
//! (a re-created mower id never shows an earlier holder's sessions).

use crate::ports::{chain, SessionError, SessionQuery, SessionStore};
use crate::visibility::{Access, AccessError, Hidden};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use swath_domain::sessions::SessionRow;
use swath_domain::{MowerId, Principal, SiteId};

/// Why a sessions read was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The request is not valid: each problem as a JSON Pointer into the query's parameters and
    /// a sentence.
    #[error("the sessions request is not valid: {0:?}")]
    Invalid(Vec<(String, String)>),
    /// The mower or site named is unknown or not visible to the principal.
    #[error("the {0} does not exist or is not visible to this principal")]
    NotFound(Hidden),
    /// Visibility could not be decided, or the store did not answer.
    #[error("sessions could not be read: {0}")]
    Unavailable(String),
}

impl From<AccessError> for SessionsError {
    fn from(e: AccessError) -> Self {
        match e {
            AccessError::NotVisible(hidden) => SessionsError::NotFound(hidden),
            AccessError::Unavailable(_) => SessionsError::Unavailable(chain(&e).to_string()),
        }
    }
}

impl From<SessionError> for SessionsError {
    fn from(e: SessionError) -> Self {
        SessionsError::Unavailable(chain(&e).to_string())
    }
}

/// A validated page of sessions: those overlapping `[from, to)`, newest first, strictly after
/// the key `before` (the last `(started_at, mower)` of the previous page), at most `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRange {
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
    before: Option<(DateTime<Utc>, MowerId)>,
    limit: usize,
}

impl SessionRange {
    /// Checks the range: `from` before `to` when both are given.
    pub fn new(
        from: Option<DateTime<Utc>>,
        to: Option<DateTime<Utc>>,
        before: Option<(DateTime<Utc>, MowerId)>,
        limit: usize,
    ) -> Result<Self, SessionsError> {
        if let (Some(from), Some(to)) = (from, to) {
            if from >= to {
                return Err(SessionsError::Invalid(vec![(
                    "/to".to_owned(),
                    "`to` must be after `from`.".to_owned(),
                )]));
            }
        }
        Ok(Self {
            from,
            to,
            before,
            limit,
        })
    }
}

/// A validated fleet-wide page: the visible mowers' sessions, of one site and one mower when
/// given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetSessions {
    pub site: Option<SiteId>,
    pub mower: Option<MowerId>,
    pub range: SessionRange,
}

/// The sessions use case (see the module).
#[derive(Clone)]
pub struct Sessions {
    access: Access,
    store: Arc<dyn SessionStore>,
}

impl Sessions {
    pub fn new(access: Access, store: Arc<dyn SessionStore>) -> Self {
        Self { access, store }
    }

    /// A page of one mower's sessions.
    pub async fn of_mower(
        &self,
        principal: &Principal,
        mower: MowerId,
        range: &SessionRange,
    ) -> Result<Vec<SessionRow>, SessionsError> {
        let mower = self.access.visible_mower_id(principal, mower).await?;
        self.page(principal, vec![mower], range).await
    }

    /// A page of the visible fleet's sessions, of one site and one mower when the request names
    /// them (each must be visible).
    pub async fn of_fleet(
        &self,
        principal: &Principal,
        request: &FleetSessions,
    ) -> Result<Vec<SessionRow>, SessionsError> {
        if let Some(site) = request.site {
            self.access.visible_site(principal, site).await?;
        }
        if let Some(mower) = request.mower {
            self.access.visible_mower_id(principal, mower).await?;
        }
        let mowers: Vec<MowerId> = self
            .access
            .visible_mower_list(principal)
            .await?
            .into_iter()
            .filter(|m| request.site.is_none_or(|s| m.site_id == s))
            .filter(|m| request.mower.is_none_or(|id| m.id == id))
            .map(|m| m.id)
            .collect();
        self.page(principal, mowers, &request.range).await
    }

    /// The mower's open session, if its newest session is open.
    pub async fn open(
        &self,
        principal: &Principal,
        mower: MowerId,
    ) -> Result<Option<SessionRow>, SessionsError> {
        let mower = self.access.visible_mower_id(principal, mower).await?;
        let newest = SessionRange::new(None, None, None, 1)?;
        let rows = self.page(principal, vec![mower], &newest).await?;
        Ok(rows.into_iter().find(|row| row.session.is_open()))
    }

    async fn page(
        &self,
        principal: &Principal,
        mowers: Vec<MowerId>,
        range: &SessionRange,
    ) -> Result<Vec<SessionRow>, SessionsError> {
        if mowers.is_empty() {
            return Ok(Vec::new());
        }
        let query = SessionQuery {
            account: principal.account_id,
            mowers,
            from: range.from,
            to: range.to,
            before: range.before,
            limit: range.limit,
        };
        Ok(self.store.page(&query).await?)
    }
}
