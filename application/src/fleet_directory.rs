//! The directory as a principal manages it over the API: its account, its sites and its mowers
//! (pages, creation, changes, deletions: a site's, and a mower's with everything stored of it).
//!
//! Every method takes the principal and a request of checked values
//! ([`swath_domain::valid`]) and decides here what the principal may do: which ids it sees
//! ([`Access`]: another account's or a hidden site's answers [`FleetError::Access`], exactly like
//! an unknown id), which sites a body may name, that a token limited to sites creates no sites or
//! accounts, the defaults of a new mower and what a patch changes. The pages apply visibility
//! inside the store's query (before the limit), and every change of a mower tells [`Access`] so
//! that no kept placement outlives it; a mower's deletion also makes the telemetry store forget
//! what it kept of the mower (`TelemetryStore::forget`: the latest-state cache), so that a mower
//! created later with the same id, by any account, starts with nothing of it (the reads' half of
//! that rule is [`crate::mower_reads`]).

use crate::creation_rate::{Creation, CreationRate, RateLimited};
use crate::ports::{DirectoryAdmin, DirectoryError, ListQuery, TelemetryStore};
use crate::token_admin::{IssueError, IssuedToken, TokenAdmin};
use crate::visibility::{Access, AccessError, Hidden};
use std::sync::Arc;
use swath_domain::valid::{BladeThreshold, Label};
use swath_domain::{Account, AccountId, Mower, MowerId, OrderKey, Principal, Site, SiteId};

/// The use case of the directory over the API (see the module).
#[derive(Clone)]
pub struct FleetDirectory {
    access: Access,
    directory: Arc<dyn DirectoryAdmin>,
    telemetry: Arc<dyn TelemetryStore>,
    tokens: TokenAdmin,
    rate: CreationRate,
}

/// The name of a new account's first token.
pub const FIRST_TOKEN_NAME: &str = "first admin token";

/// Why a directory request was refused. Every variant is what the principal may be told.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The id is unknown, another account's or on a hidden site; or a site named in the body is
    /// ([`Hidden::ReferencedSite`]).
    #[error(transparent)]
    Access(#[from] AccessError),
    /// What the principal may not do at all, in the service's words.
    #[error("{0}")]
    Forbidden(&'static str),
    /// Problems of the request that only the directory can tell, as `(JSON pointer, sentence)`:
    /// all at once.
    #[error("the request is invalid")]
    Invalid(Vec<(String, String)>),
    /// A mower with this id exists already (in this account or another).
    #[error("a mower with the id {0} exists already")]
    MowerTaken(MowerId),
    /// The site still has mowers.
    #[error("the site still has mowers")]
    SiteInUse,
    /// The creating account created as many accounts as it may for now.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    /// The new account's first token was not issued.
    #[error(transparent)]
    FirstToken(#[from] IssueError),
    #[error(transparent)]
    Store(#[from] DirectoryError),
}

/// A site as a principal creates it.
#[derive(Clone, Debug)]
pub struct SiteRequest {
    pub name: Label,
    pub time_zone: chrono_tz::Tz,
    pub display_order: i32,
}

/// What a principal changes of a site (`None`: unchanged).
#[derive(Clone, Debug, Default)]
pub struct SiteChanges {
    pub name: Option<Label>,
    pub time_zone: Option<chrono_tz::Tz>,
    pub display_order: Option<i32>,
}

/// A mower as a principal creates it: without an id Swath makes one; the blade threshold's
/// default is the rules' ([`BladeThreshold::default`]).
#[derive(Clone, Debug)]
pub struct MowerRequest {
    pub id: Option<MowerId>,
    pub site_id: SiteId,
    pub name: Label,
    pub model: Label,
    pub serial: Label,
    pub display_order: i32,
    pub blade_threshold: BladeThreshold,
}

/// What a principal changes of a mower (`None`: unchanged).
#[derive(Clone, Debug, Default)]
pub struct MowerChanges {
    pub site_id: Option<SiteId>,
    pub name: Option<Label>,
    pub model: Option<Label>,
    pub serial: Option<Label>,
    pub display_order: Option<i32>,
    pub blade_threshold: Option<BladeThreshold>,
}

/// A mower just created, with its site's name (a new mower has no state yet).
#[derive(Clone, Debug)]
pub struct CreatedMower {
    pub mower: Mower,
    pub site_name: String,
}

/// The detail of a site named in a body that the principal cannot see.
const SITE_ID_NOT_VISIBLE: &str = "`/site_id` names no site visible to this token.";

fn referenced_site_refused() -> FleetError {
    FleetError::Invalid(vec![(
        "/site_id".to_owned(),
        SITE_ID_NOT_VISIBLE.to_owned(),
    )])
}

impl FleetDirectory {
    pub fn new(
        access: Access,
        directory: Arc<dyn DirectoryAdmin>,
        telemetry: Arc<dyn TelemetryStore>,
        tokens: TokenAdmin,
        rate: CreationRate,
    ) -> Self {
        Self {
            access,
            directory,
            telemetry,
            tokens,
            rate,
        }
    }

    /// The same over another creation rate (its limits changed), also for new accounts' first
    /// tokens.
    pub fn with_rate(mut self, rate: CreationRate) -> Self {
        self.tokens = self.tokens.with_rate(rate.clone());
        self.rate = rate;
        self
    }

    /// The account `id` if it is the principal's own (any other answers as an unknown one).
    pub async fn account(
        &self,
        principal: &Principal,
        id: AccountId,
    ) -> Result<Option<Account>, FleetError> {
        if id != principal.account_id {
            return Ok(None);
        }
        Ok(self.directory.account(principal.account_id).await?)
    }

    /// The principal's own account (`None`: a store anomaly, a token outlives no account).
    pub async fn own_account(&self, principal: &Principal) -> Result<Option<Account>, FleetError> {
        Ok(self.directory.account(principal.account_id).await?)
    }

    /// Adds an account named `name` on behalf of `creator`, with its first token (every scope,
    /// shown once): refused to a token limited to some sites, and once `creator`'s account
    /// created its hour's allowance of accounts (decision 181).
    pub async fn create_account(
        &self,
        creator: &Principal,
        name: Label,
    ) -> Result<(Account, IssuedToken), FleetError> {
        if creator.sites.is_some() {
            return Err(FleetError::Forbidden(
                "A token limited to some sites cannot create accounts.",
            ));
        }
        let account = Account {
            id: AccountId::new(),
            name: name.into_string(),
        };
        self.rate.take(creator.account_id, Creation::Account)?;
        self.directory.create_account(account.clone()).await?;
        let token = self
            .tokens
            .issue_first(account.id, FIRST_TOKEN_NAME)
            .await?;
        Ok((account, token))
    }

    /// The query of a page of `principal`'s sites or mowers: its account, its sites, after
    /// `after`, at most `limit` rows.
    fn page(principal: &Principal, after: Option<OrderKey>, limit: usize) -> ListQuery {
        ListQuery {
            account: principal.account_id,
            sites: principal.sites.clone(),
            after,
            limit,
        }
    }

    /// A page of the sites `principal` sees, in display order.
    pub async fn sites(
        &self,
        principal: &Principal,
        after: Option<OrderKey>,
        limit: usize,
    ) -> Result<Vec<Site>, FleetError> {
        let query = Self::page(principal, after, limit);
        Ok(self.directory.list_sites(&query).await?)
    }

    /// A page of the mowers `principal` sees, in display order (as every read shows them:
    /// [`crate::MowerReads::views`]).
    pub async fn mowers(
        &self,
        principal: &Principal,
        after: Option<OrderKey>,
        limit: usize,
    ) -> Result<Vec<Mower>, FleetError> {
        let query = Self::page(principal, after, limit);
        Ok(self.directory.list_mowers(&query).await?)
    }

    /// The site `id` if `principal` sees it.
    pub async fn site(&self, principal: &Principal, id: SiteId) -> Result<Site, FleetError> {
        Ok(self.access.visible_site(principal, id).await?)
    }

    /// Adds a site to `principal`'s account; refused to a token limited to some sites.
    pub async fn create_site(
        &self,
        principal: &Principal,
        request: SiteRequest,
    ) -> Result<Site, FleetError> {
        if principal.sites.is_some() {
            return Err(FleetError::Forbidden(
                "A token limited to some sites cannot add sites.",
            ));
        }
        let site = Site {
            id: SiteId::new(),
            account_id: principal.account_id,
            name: request.name.into_string(),
            time_zone: request.time_zone,
            display_order: request.display_order,
        };
        self.directory.create_site(site.clone()).await?;
        Ok(site)
    }

    /// Changes what `changes` gives of the site `id`, if `principal` sees it.
    pub async fn update_site(
        &self,
        principal: &Principal,
        id: SiteId,
        changes: SiteChanges,
    ) -> Result<Site, FleetError> {
        let mut site = self.access.visible_site(principal, id).await?;
        if let Some(name) = changes.name {
            site.name = name.into_string();
        }
        if let Some(zone) = changes.time_zone {
            site.time_zone = zone;
        }
        if let Some(order) = changes.display_order {
            site.display_order = order;
        }
        match self.directory.update_site(site.clone()).await {
            Ok(()) => Ok(site),
            // Deleted since it was found visible.
            Err(DirectoryError::NotFound(_)) => Err(AccessError::NotVisible(Hidden::Site).into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the site `id` if `principal` sees it; refused while it has mowers.
    pub async fn delete_site(&self, principal: &Principal, id: SiteId) -> Result<Site, FleetError> {
        let site = self.access.visible_site(principal, id).await?;
        match self
            .directory
            .delete_site(principal.account_id, site.id)
            .await
        {
            Ok(()) => Ok(site),
            Err(DirectoryError::InUse(_)) => Err(FleetError::SiteInUse),
            Err(DirectoryError::NotFound(_)) => Err(AccessError::NotVisible(Hidden::Site).into()),
            Err(e) => Err(e.into()),
        }
    }

    /// A site named in a body: `None` when `principal` cannot see it.
    async fn referenced_site(
        &self,
        principal: &Principal,
        id: SiteId,
    ) -> Result<Option<Site>, FleetError> {
        match self.access.visible_site(principal, id).await {
            Ok(site) => Ok(Some(site)),
            Err(AccessError::NotVisible(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Adds a mower on a site `principal` sees. A nil id and an invisible site are refused
    /// together; an id another account holds answers [`FleetError::MowerTaken`], which tells
    /// that the id is taken, never by whom.
    pub async fn create_mower(
        &self,
        principal: &Principal,
        request: MowerRequest,
    ) -> Result<CreatedMower, FleetError> {
        let mut problems = Vec::new();
        let id = match request.id {
            Some(id) if id.0.is_nil() => {
                problems.push((
                    "/id".to_owned(),
                    "`/id` must not be the nil UUID.".to_owned(),
                ));
                id
            }
            Some(id) => id,
            None => MowerId::new(),
        };
        let site = self.referenced_site(principal, request.site_id).await?;
        if site.is_none() {
            problems.push(("/site_id".to_owned(), SITE_ID_NOT_VISIBLE.to_owned()));
        }
        let Some(site) = site.filter(|_| problems.is_empty()) else {
            return Err(FleetError::Invalid(problems));
        };
        let mower = Mower {
            id,
            account_id: principal.account_id,
            site_id: site.id,
            name: request.name.into_string(),
            model: request.model.into_string(),
            serial: request.serial.into_string(),
            display_order: request.display_order,
            blade_threshold_ms: request.blade_threshold.ms(),
        };
        match self.directory.create_mower(mower.clone()).await {
            Ok(()) => Ok(CreatedMower {
                mower,
                site_name: site.name,
            }),
            Err(DirectoryError::Conflict(_)) => Err(FleetError::MowerTaken(id)),
            // The site was deleted between the check and the insert.
            Err(DirectoryError::NotFound(_)) => Err(referenced_site_refused()),
            Err(e) => Err(e.into()),
        }
    }

    /// Changes what `changes` gives of the mower `id`, if `principal` sees it (a new site must be
    /// visible too); what this process kept of where mowers are is forgotten whatever the outcome
    /// (a read kept before the write must not outlive it).
    pub async fn update_mower(
        &self,
        principal: &Principal,
        id: MowerId,
        changes: MowerChanges,
    ) -> Result<Mower, FleetError> {
        let mut mower = self.access.visible_mower(principal, id).await?;
        if let Some(site_id) = changes.site_id {
            match self.referenced_site(principal, site_id).await? {
                Some(site) => mower.site_id = site.id,
                None => return Err(referenced_site_refused()),
            }
        }
        if let Some(name) = changes.name {
            mower.name = name.into_string();
        }
        if let Some(model) = changes.model {
            mower.model = model.into_string();
        }
        if let Some(serial) = changes.serial {
            mower.serial = serial.into_string();
        }
        if let Some(order) = changes.display_order {
            mower.display_order = order;
        }
        if let Some(threshold) = changes.blade_threshold {
            mower.blade_threshold_ms = threshold.ms();
        }
        let updated = self.directory.update_mower(mower.clone()).await;
        self.access.mower_changed();
        match updated {
            Ok(()) => Ok(mower),
            // Deleted (or its new site deleted) since the checks above.
            Err(DirectoryError::NotFound(_)) => Err(AccessError::NotVisible(Hidden::Mower).into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the mower `id` if `principal` sees it, with everything stored of it in every
    /// store (the store's `delete_mower` is atomic and refuses late writes of it), and forgets
    /// what this process kept of it whatever the outcome. Answers the deleted mower.
    pub async fn delete_mower(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<Mower, FleetError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let deleted = self
            .directory
            .delete_mower(principal.account_id, mower.id)
            .await;
        // After the write, whatever its outcome: a read kept before it must not outlive it.
        self.telemetry.forget(&[mower.id]);
        self.access.mower_changed();
        match deleted {
            Ok(()) => Ok(mower),
            // Deleted by someone else since the check above.
            Err(DirectoryError::NotFound(_)) => Err(AccessError::NotVisible(Hidden::Mower).into()),
            Err(e) => Err(e.into()),
        }
    }
}
