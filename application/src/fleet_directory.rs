//! The directory as a principal manages it over the API: its account, its sites and its mowers
//! (pages, creation, changes, a site's deletion; a mower's deletion is [`crate::MowerData::delete`]).
//!
//! Which ids a principal sees is [`Access`]'s rule; the pages apply it inside the store's query
//! (before the limit), and every change of a mower tells [`Access`] so that no kept placement
//! outlives it.

use crate::access::Access;
use crate::creation_rate::{Creation, CreationRate, RateLimited};
use crate::ports::{DirectoryAdmin, DirectoryError, ListQuery};
use std::sync::Arc;
use swath_domain::{Account, Mower, OrderKey, Principal, Site, SiteId};

/// The use case of the directory over the API (see the module).
#[derive(Clone)]
pub struct FleetDirectory {
    access: Access,
    directory: Arc<dyn DirectoryAdmin>,
    rate: CreationRate,
}

/// Why an account was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateAccountError {
    /// The creating account created as many accounts as it may for now.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error(transparent)]
    Store(#[from] DirectoryError),
}

impl FleetDirectory {
    pub fn new(access: Access, directory: Arc<dyn DirectoryAdmin>, rate: CreationRate) -> Self {
        Self {
            access,
            directory,
            rate,
        }
    }

    /// The same over another creation rate (its limits changed).
    pub fn with_rate(mut self, rate: CreationRate) -> Self {
        self.rate = rate;
        self
    }

    /// The same over another access (its caches' bound changed).
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// The principal's own account (`None`: a store anomaly, a token outlives no account).
    pub async fn own_account(
        &self,
        principal: &Principal,
    ) -> Result<Option<Account>, DirectoryError> {
        self.directory.account(principal.account_id).await
    }

    /// Adds an account on behalf of `creator`, refused once `creator`'s account created its
    /// hour's allowance of accounts (decision 181).
    pub async fn create_account(
        &self,
        creator: &Principal,
        account: Account,
    ) -> Result<(), CreateAccountError> {
        self.rate.take(creator.account_id, Creation::Account)?;
        Ok(self.directory.create_account(account).await?)
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
    ) -> Result<Vec<Site>, DirectoryError> {
        self.directory
            .list_sites(&Self::page(principal, after, limit))
            .await
    }

    /// A page of the mowers `principal` sees, in display order (as every read shows them:
    /// [`crate::MowerData::views`]).
    pub async fn mowers(
        &self,
        principal: &Principal,
        after: Option<OrderKey>,
        limit: usize,
    ) -> Result<Vec<Mower>, DirectoryError> {
        self.directory
            .list_mowers(&Self::page(principal, after, limit))
            .await
    }

    /// Adds a site.
    pub async fn create_site(&self, site: Site) -> Result<(), DirectoryError> {
        self.directory.create_site(site).await
    }

    /// Changes a site found visible.
    pub async fn update_site(&self, site: Site) -> Result<(), DirectoryError> {
        self.directory.update_site(site).await
    }

    /// Deletes a site of `principal`'s account found visible (refused while it has mowers).
    pub async fn delete_site(
        &self,
        principal: &Principal,
        site: SiteId,
    ) -> Result<(), DirectoryError> {
        self.directory.delete_site(principal.account_id, site).await
    }

    /// Adds a mower on a site found visible.
    pub async fn create_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        self.directory.create_mower(mower).await
    }

    /// Changes a mower found visible; what this process kept of where mowers are is forgotten
    /// whatever the outcome (a read kept before the write must not outlive it).
    pub async fn update_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        let updated = self.directory.update_mower(mower).await;
        self.access.mower_changed();
        updated
    }
}
