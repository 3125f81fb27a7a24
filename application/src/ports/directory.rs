use super::Cause;
use async_trait::async_trait;
use swath_domain::{Account, AccountId, Mower, MowerId, OrderKey, Site, SiteId};

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
/// - `delete_mower`: delete the mower with this id and account together with every row of it in
///   every store (telemetry: history, positions, latest, health, days; the notification side:
///   watch row, geofence, zones and zone watch, busy status, events, alerts; assignments),
///   atomically and never in the middle of an ingest batch, a watcher batch or sweep, or a W7
///   unit of that mower; states of it ingested afterwards are dropped as `unknown_mower`, and a
///   late write of it (a busy status the busy check computed before the deletion) stores
///   nothing, so that whoever creates a mower with the same id next finds nothing of it;
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
