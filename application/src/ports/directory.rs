use super::Cause;
use async_trait::async_trait;
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use swath_domain::{AccountId, MowerId, SiteId};
use uuid::Uuid;

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
    /// The row is still referenced (a site that still has mowers) and was not deleted.
    #[error("{0} is in use")]
    InUse(String),
    /// The backing store could not be reached or failed; the caller may retry.
    #[error("directory unavailable: {0}")]
    Unavailable(#[source] Cause),
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

/// The ordering key of directory lists: `(display_order, name, id)`, names compared byte by byte
/// (UTF-8 code point order, PostgreSQL's `COLLATE "C"`), so that every store orders alike and a
/// page boundary means the same in each. A page starts strictly after the key of the previous
/// page's last item.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OrderKey {
    pub display_order: i32,
    pub name: String,
    pub id: Uuid,
}

impl Site {
    pub fn order_key(&self) -> OrderKey {
        OrderKey {
            display_order: self.display_order,
            name: self.name.clone(),
            id: self.id.0,
        }
    }
}

impl Mower {
    pub fn order_key(&self) -> OrderKey {
        OrderKey {
            display_order: self.display_order,
            name: self.name.clone(),
            id: self.id.0,
        }
    }
}

/// One page of sites or mowers of an account.
#[derive(Clone, Debug, PartialEq)]
pub struct ListQuery {
    pub account: AccountId,
    /// `None`: every site of the account. `Some`: only these sites (sites are filtered by their
    /// id, mowers by their site). Applied before the limit, never after it.
    pub sites: Option<Vec<SiteId>>,
    /// Only rows whose [`OrderKey`] is strictly greater (the previous page's last key).
    pub after: Option<OrderKey>,
    /// The most rows to return. Callers ask for one more than they show, to learn whether more
    /// exist without counting.
    pub limit: usize,
}

/// The directory as the API manages it: pages, single reads, updates and deletes. Separate from
/// [`Directory`], which is what ingestion and the simulator need.
///
/// An implementation MUST:
/// - `site`, `mowers_by_id`: answer the rows with these ids whatever their account (callers decide
///   visibility); `mowers_by_id` in mower id order, unknown ids left out;
/// - `list_sites`, `list_mowers`: answer the rows of `query.account` only, restricted to
///   `query.sites` when given, strictly after `query.after`, ordered by [`OrderKey`] (names byte
///   by byte), at most `query.limit`;
/// - `update_site`: replace name, time zone and display order of the site with this id *and*
///   account, or [`DirectoryError::NotFound`];
/// - `delete_site`: delete the site with this id and account, or [`DirectoryError::NotFound`];
///   refuse with [`DirectoryError::InUse`] (deleting nothing) while a mower is on it, also one
///   created concurrently;
/// - `update_mower`: replace site, name, model, serial, display order and blade threshold of the
///   mower with this id and account, or [`DirectoryError::NotFound`] (also when the new site does
///   not exist or belongs to another account: then nothing changes); its stored telemetry stays;
/// - `delete_mower`: delete the mower with this id and account together with every telemetry row
///   of it (history, positions, latest, health, days), atomically and never in the middle of an
///   ingest batch of that mower; states of it ingested afterwards are dropped as `unknown_mower`;
///   [`DirectoryError::NotFound`] when there is no such mower;
/// - return [`DirectoryError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait DirectoryAdmin: Directory {
    async fn site(&self, id: SiteId) -> Result<Option<Site>, DirectoryError>;
    async fn mowers_by_id(&self, ids: &[MowerId]) -> Result<Vec<Mower>, DirectoryError>;
    async fn list_sites(&self, query: &ListQuery) -> Result<Vec<Site>, DirectoryError>;
    async fn list_mowers(&self, query: &ListQuery) -> Result<Vec<Mower>, DirectoryError>;
    async fn update_site(&self, site: Site) -> Result<(), DirectoryError>;
    async fn delete_site(&self, account: AccountId, id: SiteId) -> Result<(), DirectoryError>;
    async fn update_mower(&self, mower: Mower) -> Result<(), DirectoryError>;
    async fn delete_mower(&self, account: AccountId, id: MowerId) -> Result<(), DirectoryError>;
}
