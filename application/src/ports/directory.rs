use async_trait::async_trait;
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use swath_domain::{AccountId, MowerId, SiteId};

/// An account (tenant).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Account {
    pub id: AccountId,
    pub name: String,
}

/// A site of an account: its time zone decides which local day a state counts for.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub id: SiteId,
    pub account_id: AccountId,
    pub name: String,
    pub time_zone: Tz,
    pub display_order: i32,
}

/// A mower as the directory knows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Mower {
    pub id: MowerId,
    pub account_id: AccountId,
    pub site_id: SiteId,
    pub name: String,
    pub model: String,
    pub serial: String,
    pub display_order: i32,
    /// Blade time after which `blade_due` is raised (W6).
    pub blade_threshold_ms: i64,
}

/// Errors of the [`Directory`] port.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// A referenced row (account, site) does not exist, or belongs to another account.
    #[error("{0} not found")]
    NotFound(String),
    /// The id is taken.
    #[error("{0} already exists")]
    Conflict(String),
    /// The backing store could not be reached or failed; the caller may retry.
    #[error("directory unavailable: {0}")]
    Unavailable(String),
}

/// Accounts, sites and mowers.
///
/// An implementation MUST:
/// - refuse a site whose account does not exist, and a mower whose site does not exist or belongs
///   to another account, with [`DirectoryError::NotFound`]; refuse a taken id with
///   [`DirectoryError::Conflict`];
/// - list an account's sites ordered by `(display_order, name, id)` and its mowers by
///   `(display_order, name, id)`, never another account's;
/// - return [`DirectoryError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait Directory: Send + Sync {
    async fn create_account(&self, account: Account) -> Result<(), DirectoryError>;
    async fn create_site(&self, site: Site) -> Result<(), DirectoryError>;
    async fn create_mower(&self, mower: Mower) -> Result<(), DirectoryError>;
    async fn account(&self, id: AccountId) -> Result<Option<Account>, DirectoryError>;
    async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError>;
    async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError>;
    async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError>;
}
