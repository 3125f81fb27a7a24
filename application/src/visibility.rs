//! Who may see what: the one place where a [`Principal`] meets the directory.
//!
//! Every HTTP route, the live stream, the live pages and `POST /v1/states` ask [`Access`]; none
//! decides visibility itself. The rules (docs/rules.md §7, decision 76):
//!
//! - a mower or site is visible when it is of the principal's account and its site is one the
//!   principal sees ([`sees_site`]: every site of the account for an unlimited token, else only
//!   the listed ones);
//! - an invisible resource is refused exactly like an unknown id ([`AccessError::NotVisible`]),
//!   so that ids of other tenants cannot be probed;
//! - a site named in a request body that the principal cannot see is one refusal, whether it is
//!   unknown, another account's or hidden ([`Hidden::ReferencedSite`]);
//! - a feed (events, alerts) or the live stream shows the visible mowers only; a state report
//!   over HTTP must name the principal's account and a visible mower ([`Access::filter_states`]).
//!
//! Bearer tokens resolve to principals through [`Access::principal`], which keeps each answer for
//! at most [`PRINCIPAL_CACHE_TTL`] (decision 78): a revocation through this process is honoured
//! at once ([`Revocations`]), one through another replica within that bound. The telemetry reads
//! of one mower ask [`Access::visible_mower_id`], which keeps a mower's account and site for the
//! same bound (decision 108): a mower moved or deleted through this process is seen at once
//! ([`Access::mower_changed`]), one moved through another replica within that bound.

use crate::ports::{
    Cause, Clock, DirectoryAdmin, DirectoryError, TokenError, TokenHash, TokenId, TokenInfo,
    TokenStore,
};
use crate::ttl_cache::TtlCache;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use swath_domain::{
    AccountId, DropReason, InvalidReport, Mower, MowerId, Principal, Site, SiteId, StateReport,
};

/// How long a token's principal is answered from memory before the token store is asked again:
/// the longest a token revoked through another replica keeps working here (decision 78).
pub const PRINCIPAL_CACHE_TTL: Duration = Duration::from_secs(2);

/// The most principals kept. Only valid tokens are kept (an unknown token is asked every time),
/// so this bounds memory against many valid tokens, not against guessed ones.
pub const PRINCIPAL_CACHE_ENTRIES: usize = 10_000;

/// The most mowers whose account and site are kept (decision 108). Only existing mowers are
/// kept, so guessed ids cost a directory read each, never memory.
pub const MOWER_CACHE_ENTRIES: usize = 100_000;

/// The detail of a state report whose mower the token cannot see (unknown, another account's or
/// on a hidden site: one sentence for the three).
pub const MOWER_NOT_VISIBLE: &str = "No mower with this id is visible to this token.";

/// The detail of a state report of another account than the token's.
pub const ACCOUNT_MISMATCH: &str = "`account_id` is not the account of this token.";

/// Whether a principal limited to `sites` (`None`: every site of its account) sees `site`. The
/// one statement of the rule: principals, live views and adapters all ask it.
pub fn sees_site(sites: Option<&[SiteId]>, site: SiteId) -> bool {
    sites.is_none_or(|s| s.contains(&site))
}

/// What was not visible: each kind answers one error for "unknown", "another account's" and
/// "hidden from this token".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hidden {
    /// A mower named by a path or a filter.
    Mower,
    /// A site named by a path.
    Site,
    /// A site named in a request body (a mower's `site_id`, a token's sites).
    ReferencedSite,
}

impl fmt::Display for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hidden::Mower => "mower",
            Hidden::Site => "site",
            Hidden::ReferencedSite => "referenced site",
        })
    }
}

/// Errors of [`Access`].
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// Unknown, another account's, or on a site the principal may not see.
    #[error("the {0} does not exist or is not visible to this principal")]
    NotVisible(Hidden),
    /// The directory or the token store failed: visibility could not be decided.
    #[error("access could not be decided: {0}")]
    Unavailable(#[source] Cause),
}

impl From<DirectoryError> for AccessError {
    fn from(e: DirectoryError) -> Self {
        AccessError::Unavailable(Box::new(e))
    }
}

impl From<TokenError> for AccessError {
    fn from(e: TokenError) -> Self {
        AccessError::Unavailable(Box::new(e))
    }
}

/// A generation counter of token revocations in this process: revoking a token bumps it; the
/// principal cache forgets every answer older than the bump, and every open live stream checks
/// its own token again. Other replicas find out within [`PRINCIPAL_CACHE_TTL`] (requests) or at
/// their stream's periodic check.
#[derive(Clone)]
pub struct Revocations(Arc<tokio::sync::watch::Sender<u64>>);

impl Default for Revocations {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

impl Revocations {
    /// A token was revoked.
    pub fn notify(&self) {
        self.0
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// Changes whenever a token is revoked from now on.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }

    fn generation(&self) -> u64 {
        *self.0.borrow()
    }
}

/// The visibility use case: holds the directory and the token store, answers every question of
/// the form "may this principal see that".
#[derive(Clone)]
pub struct Access {
    directory: Arc<dyn DirectoryAdmin>,
    tokens: Arc<dyn TokenStore>,
    clock: Arc<dyn Clock>,
    revocations: Revocations,
    principals: Arc<TtlCache<TokenHash, Principal>>,
    /// A token's principal by its id, for the live pages' sessions (decision 189).
    sessions: Arc<TtlCache<TokenId, Principal>>,
    /// A mower's account and site, for [`Access::visible_mower_id`].
    placements: Arc<TtlCache<MowerId, Placement>>,
    /// Bumped by [`Access::mower_changed`]: every kept placement is forgotten.
    mower_changes: Arc<AtomicU64>,
}

/// Where a mower is: what its visibility depends on.
#[derive(Clone, Copy)]
struct Placement {
    account: swath_domain::AccountId,
    site: SiteId,
}

impl Access {
    pub fn new(
        directory: Arc<dyn DirectoryAdmin>,
        tokens: Arc<dyn TokenStore>,
        clock: Arc<dyn Clock>,
        revocations: Revocations,
    ) -> Self {
        Self {
            directory,
            tokens,
            clock,
            revocations,
            principals: Arc::new(TtlCache::new(Duration::ZERO, PRINCIPAL_CACHE_ENTRIES)),
            sessions: Arc::new(TtlCache::new(Duration::ZERO, PRINCIPAL_CACHE_ENTRIES)),
            placements: Arc::new(TtlCache::new(Duration::ZERO, MOWER_CACHE_ENTRIES)),
            mower_changes: Arc::default(),
        }
    }

    /// Another bound for the principal and mower caches; zero (the default of [`Access::new`])
    /// asks the stores on every request.
    pub fn with_cache_ttl(mut self, ttl: Duration) -> Self {
        self.principals = Arc::new(TtlCache::new(ttl, PRINCIPAL_CACHE_ENTRIES));
        self.sessions = Arc::new(TtlCache::new(ttl, PRINCIPAL_CACHE_ENTRIES));
        self.placements = Arc::new(TtlCache::new(ttl, MOWER_CACHE_ENTRIES));
        self
    }

    /// The revocations this service honours at once.
    pub fn revocations(&self) -> &Revocations {
        &self.revocations
    }

    /// The principal of a token (by its hash), or `None` when the token is unknown or revoked.
    /// Answered from memory for at most [`PRINCIPAL_CACHE_TTL`] after the store said so, and
    /// never across a revocation in this process.
    pub async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, AccessError> {
        let now = self.clock.now();
        let read = async { Ok::<_, AccessError>(self.tokens.principal(hash).await?) };
        self.principals
            .read_through(hash, now, || self.revocations.generation(), read)
            .await
    }

    /// The token whose hash this is, from the token store itself (a live page's sign-in, which
    /// names the session by the token's id), or `None` when unknown or revoked.
    pub async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenInfo>, AccessError> {
        Ok(self.tokens.token_by_hash(hash).await?)
    }

    /// The principal of the token with this id (a live page's session), or `None` once it is
    /// revoked; kept like [`Access::principal`]'s answers, and never across a revocation in this
    /// process.
    pub async fn principal_of_token(&self, id: TokenId) -> Result<Option<Principal>, AccessError> {
        let now = self.clock.now();
        let read =
            async { Ok::<_, AccessError>(self.tokens.token(id).await?.map(|t| t.principal)) };
        self.sessions
            .read_through(&id, now, || self.revocations.generation(), read)
            .await
    }

    /// The principal of a token from the token store itself, never from memory (a live stream's
    /// periodic check, which must see another replica's revocation).
    pub async fn principal_uncached(
        &self,
        hash: &TokenHash,
    ) -> Result<Option<Principal>, AccessError> {
        Ok(self.tokens.principal(hash).await?)
    }

    /// The mower `id` if `principal` may see it; otherwise the one error of every invisible
    /// mower.
    pub async fn visible_mower(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<Mower, AccessError> {
        match self.directory.mower(id).await? {
            Some(m) if sees(principal, m.account_id, m.site_id) => Ok(m),
            _ => Err(AccessError::NotVisible(Hidden::Mower)),
        }
    }

    /// The mower `id` if `principal` may see it, like [`Access::visible_mower`], for reads that
    /// need nothing of the mower but its id (its latest state, history, track). Its account and
    /// site are answered from memory for at most the cache bound (decision 108): a mower moved
    /// to another site or deleted through another replica keeps its old visibility here that
    /// long.
    pub async fn visible_mower_id(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<MowerId, AccessError> {
        let now = self.clock.now();
        let read = async {
            Ok::<_, AccessError>(self.directory.mower(id).await?.map(|m| Placement {
                account: m.account_id,
                site: m.site_id,
            }))
        };
        let generation = || self.mower_changes.load(Ordering::Acquire);
        match self
            .placements
            .read_through(&id, now, generation, read)
            .await?
        {
            Some(p) if sees(principal, p.account, p.site) => Ok(id),
            _ => Err(AccessError::NotVisible(Hidden::Mower)),
        }
    }

    /// A mower was moved to another site or deleted through this process: every mower's kept
    /// account and site is forgotten, so the next read asks the directory.
    pub fn mower_changed(&self) {
        self.mower_changes.fetch_add(1, Ordering::AcqRel);
    }

    /// The site `id` if `principal` may see it; otherwise the one error of every invisible site.
    pub async fn visible_site(
        &self,
        principal: &Principal,
        id: SiteId,
    ) -> Result<Site, AccessError> {
        match self.directory.site(id).await? {
            Some(s) if sees(principal, s.account_id, s.id) => Ok(s),
            _ => Err(AccessError::NotVisible(Hidden::Site)),
        }
    }

    /// A site named in a request body: [`Hidden::ReferencedSite`] when `principal` cannot see it.
    pub async fn referenced_site(
        &self,
        principal: &Principal,
        id: SiteId,
    ) -> Result<Site, AccessError> {
        self.visible_site(principal, id).await.map_err(|e| match e {
            AccessError::NotVisible(_) => AccessError::NotVisible(Hidden::ReferencedSite),
            other => other,
        })
    }

    /// The positions in `ids` of the mowers `principal` may not see (unknown, another account's
    /// or on a hidden site), in order: one directory read for the whole list, never one per id.
    pub async fn invisible_mowers(
        &self,
        principal: &Principal,
        ids: &[MowerId],
    ) -> Result<Vec<usize>, AccessError> {
        let mut unique = ids.to_vec();
        unique.sort_unstable();
        unique.dedup();
        let visible: HashSet<MowerId> = self
            .directory
            .mowers_by_id(&unique)
            .await?
            .into_iter()
            .filter(|m| sees(principal, m.account_id, m.site_id))
            .map(|m| m.id)
            .collect();
        Ok(positions_outside(ids, &visible))
    }

    /// The positions in `ids` of the sites `principal` may not see, in order: one read of the
    /// account's sites for the whole list.
    pub async fn invisible_sites(
        &self,
        principal: &Principal,
        ids: &[SiteId],
    ) -> Result<Vec<usize>, AccessError> {
        let visible: HashSet<SiteId> = self
            .directory
            .sites(principal.account_id)
            .await?
            .into_iter()
            .filter(|s| sees(principal, s.account_id, s.id))
            .map(|s| s.id)
            .collect();
        Ok(positions_outside(ids, &visible))
    }

    /// Every mower of the principal's account that it may see.
    async fn seen_mowers(&self, principal: &Principal) -> Result<Vec<Mower>, AccessError> {
        let mut mowers = self.directory.mowers(principal.account_id).await?;
        mowers.retain(|m| sees(principal, m.account_id, m.site_id));
        Ok(mowers)
    }

    /// Every mower `principal` may see (an export's mowers).
    pub async fn visible_mower_list(
        &self,
        principal: &Principal,
    ) -> Result<Vec<Mower>, AccessError> {
        self.seen_mowers(principal).await
    }

    /// The ids of every mower `principal` may see (the live stream's set).
    pub async fn visible_mowers(
        &self,
        principal: &Principal,
    ) -> Result<HashSet<MowerId>, AccessError> {
        let mowers = self.seen_mowers(principal).await?;
        Ok(mowers.into_iter().map(|m| m.id).collect())
    }

    /// The principal's visible mowers with their sites (the live stream's site filter).
    pub async fn visible_mower_sites(
        &self,
        principal: &Principal,
    ) -> Result<HashMap<MowerId, SiteId>, AccessError> {
        let mowers = self.seen_mowers(principal).await?;
        Ok(mowers.into_iter().map(|m| (m.id, m.site_id)).collect())
    }

    /// The mowers a feed (events, alerts) may show: `None` (the whole account) for an unlimited
    /// principal without a filter; otherwise the visible ones, narrowed to `only`. A filter naming
    /// an invisible mower gives an empty list, exactly like an unknown one.
    pub async fn feed_mowers(
        &self,
        principal: &Principal,
        only: Option<MowerId>,
    ) -> Result<Option<Vec<MowerId>>, AccessError> {
        if let Some(id) = only {
            return Ok(Some(match self.visible_mower(principal, id).await {
                Ok(m) => vec![m.id],
                Err(AccessError::NotVisible(_)) => Vec::new(),
                Err(e) => return Err(e),
            }));
        }
        if principal.sites.is_none() {
            return Ok(None);
        }
        let mowers = self.seen_mowers(principal).await?;
        Ok(Some(mowers.into_iter().map(|m| m.id).collect()))
    }

    /// The tenant filter of state reports received from `principal` (`POST /v1/states`): a
    /// report of another account is dropped as `account_mismatch`; a report of a mower the
    /// principal cannot see as `unknown_mower` ([`MOWER_NOT_VISIBLE`]). An unlimited principal's
    /// mowers are left to W0, which refuses another account's mower during ingestion (callers
    /// answer that refusal as an unknown mower).
    pub async fn filter_states(
        &self,
        principal: &Principal,
        batch: &mut [Result<StateReport, InvalidReport>],
    ) -> Result<(), AccessError> {
        for report in batch.iter_mut() {
            if let Ok(r) = report {
                if r.account_id != principal.account_id {
                    *report = Err(InvalidReport {
                        reason: DropReason::AccountMismatch,
                        detail: ACCOUNT_MISMATCH.to_owned(),
                        mower_id: Some(r.mower_id),
                    });
                }
            }
        }
        if principal.sites.is_none() {
            return Ok(());
        }
        let mut ids: Vec<MowerId> = batch
            .iter()
            .filter_map(|r| r.as_ref().ok().map(|s| s.mower_id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let visible: HashSet<MowerId> = self
            .directory
            .mowers_by_id(&ids)
            .await?
            .into_iter()
            .filter(|m| sees(principal, m.account_id, m.site_id))
            .map(|m| m.id)
            .collect();
        for report in batch.iter_mut() {
            if let Ok(s) = report {
                if !visible.contains(&s.mower_id) {
                    *report = Err(InvalidReport {
                        reason: DropReason::UnknownMower,
                        detail: MOWER_NOT_VISIBLE.to_owned(),
                        mower_id: Some(s.mower_id),
                    });
                }
            }
        }
        Ok(())
    }
}

/// A row of a mower's child data (its zones, geofence, busy status, latest state, health totals,
/// events, alerts): each carries the account it was written for.
pub trait OfAccount {
    fn account_id(&self) -> AccountId;
}

/// The rows of `rows` that belong to `principal`'s account: the one account filter of every
/// per-mower read of child data ([`crate::MowerReads`]). The mower of the path was found visible
/// first, but its id is global: rows written for an earlier holder of the id (another account
/// that deleted it) must never show, whatever a store kept.
pub fn of_account<T: OfAccount>(
    principal: &Principal,
    rows: impl IntoIterator<Item = T>,
) -> Vec<T> {
    rows.into_iter()
        .filter(|row| row.account_id() == principal.account_id)
        .collect()
}

macro_rules! of_account {
    ($($row:ty),* $(,)?) => {
        $(impl OfAccount for $row {
            fn account_id(&self) -> AccountId {
                self.account_id
            }
        })*
    };
}

of_account!(
    swath_domain::watch::zones::Zone,
    swath_domain::watch::Geofence,
    swath_domain::watch::busy::BusyStatus,
    swath_domain::watch::Event,
    swath_domain::watch::Alert,
    swath_domain::LatestRow,
    swath_domain::HealthTotals,
);

/// The positions of the `ids` that are not in `visible`, in order.
fn positions_outside<T: Eq + std::hash::Hash>(ids: &[T], visible: &HashSet<T>) -> Vec<usize> {
    (0..ids.len())
        .filter(|&i| !visible.contains(&ids[i]))
        .collect()
}

/// The most ids of one list a refusal names one by one; the others are counted (issue 42: a
/// request naming many ids that are not visible got an answer many times its size).
pub const NAMED_IDS: usize = 10;

/// The problems of a list of ids at `pointer` whose `bad` positions name no `what` visible to
/// the token, as `(JSON pointer, message)`: the first [`NAMED_IDS`] one by one, then one
/// problem at `pointer` that counts the others.
pub fn invisible_ids<T: fmt::Display>(
    pointer: &str,
    ids: &[T],
    bad: &[usize],
    what: &str,
) -> Vec<(String, String)> {
    let mut problems: Vec<(String, String)> = bad
        .iter()
        .take(NAMED_IDS)
        .map(|&i| {
            (
                format!("{pointer}/{i}"),
                format!(
                    "`{pointer}/{i}` is {}, which is no {what} visible to this token.",
                    ids[i]
                ),
            )
        })
        .collect();
    if let Some(more) = bad.len().checked_sub(NAMED_IDS).filter(|&n| n > 0) {
        problems.push((
            pointer.to_owned(),
            format!(
                "`{pointer}` names {more} more that are no {what}s visible to this token (only \
                 the first {NAMED_IDS} are listed)."
            ),
        ));
    }
    problems
}

/// Whether `principal` sees a resource of `account` on `site`.
fn sees(principal: &Principal, account: AccountId, site: SiteId) -> bool {
    account == principal.account_id && sees_site(principal.sites.as_deref(), site)
}
