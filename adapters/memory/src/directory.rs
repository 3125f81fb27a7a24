//! The memory store's directory: the `Directory` and `DirectoryAdmin` impls (accounts, sites,
//! mowers) and their paging.

use crate::store::{read, write, MemoryStore};
use async_trait::async_trait;
use swath_application::ports::{Directory, DirectoryAdmin, DirectoryError, ListQuery};
use swath_domain::{Account, AccountId, Mower, MowerId, OrderKey, Site, SiteId};

#[async_trait]
impl Directory for MemoryStore {
    async fn create_account(&self, account: Account) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        if dir.accounts.contains_key(&account.id) {
            return Err(DirectoryError::Conflict(format!("account {}", account.id)));
        }
        dir.accounts.insert(account.id, account);
        Ok(())
    }

    async fn create_site(&self, site: Site) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        if !dir.accounts.contains_key(&site.account_id) {
            return Err(DirectoryError::NotFound(format!(
                "account {}",
                site.account_id
            )));
        }
        if dir.sites.contains_key(&site.id) {
            return Err(DirectoryError::Conflict(format!("site {}", site.id)));
        }
        dir.sites.insert(site.id, site);
        Ok(())
    }

    async fn create_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get(&mower.site_id) {
            Some(site) if site.account_id == mower.account_id => {}
            _ => return Err(DirectoryError::NotFound(format!("site {}", mower.site_id))),
        }
        if dir.mowers.contains_key(&mower.id) {
            return Err(DirectoryError::Conflict(format!("mower {}", mower.id)));
        }
        dir.mowers.insert(mower.id, mower);
        Ok(())
    }

    async fn account(&self, id: AccountId) -> Result<Option<Account>, DirectoryError> {
        Ok(read(&self.directory).accounts.get(&id).cloned())
    }

    async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError> {
        Ok(read(&self.directory).mowers.get(&id).cloned())
    }

    async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError> {
        let mut sites: Vec<Site> = read(&self.directory)
            .sites
            .values()
            .filter(|s| s.account_id == account)
            .cloned()
            .collect();
        sites.sort_by(|a, b| {
            (a.display_order, &a.name, a.id).cmp(&(b.display_order, &b.name, b.id))
        });
        Ok(sites)
    }

    async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError> {
        let mut mowers: Vec<Mower> = read(&self.directory)
            .mowers
            .values()
            .filter(|m| m.account_id == account)
            .cloned()
            .collect();
        mowers.sort_by(|a, b| {
            (a.display_order, &a.name, a.id).cmp(&(b.display_order, &b.name, b.id))
        });
        Ok(mowers)
    }
}

#[async_trait]
impl DirectoryAdmin for MemoryStore {
    async fn site(&self, id: SiteId) -> Result<Option<Site>, DirectoryError> {
        Ok(read(&self.directory).sites.get(&id).cloned())
    }

    async fn mowers_by_id(&self, ids: &[MowerId]) -> Result<Vec<Mower>, DirectoryError> {
        let dir = read(&self.directory);
        let mut mowers: Vec<Mower> = ids
            .iter()
            .filter_map(|id| dir.mowers.get(id).cloned())
            .collect();
        mowers.sort_by_key(|m| m.id);
        mowers.dedup_by_key(|m| m.id);
        Ok(mowers)
    }

    async fn list_sites(&self, query: &ListQuery) -> Result<Vec<Site>, DirectoryError> {
        let dir = read(&self.directory);
        Ok(page(
            dir.sites.values().filter(|s| {
                s.account_id == query.account
                    && query.sites.as_ref().is_none_or(|only| only.contains(&s.id))
            }),
            Site::order_key,
            query,
        ))
    }

    async fn list_mowers(&self, query: &ListQuery) -> Result<Vec<Mower>, DirectoryError> {
        let dir = read(&self.directory);
        Ok(page(
            dir.mowers.values().filter(|m| {
                m.account_id == query.account
                    && query
                        .sites
                        .as_ref()
                        .is_none_or(|only| only.contains(&m.site_id))
            }),
            Mower::order_key,
            query,
        ))
    }

    async fn update_site(&self, site: Site) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get_mut(&site.id) {
            Some(stored) if stored.account_id == site.account_id => {
                *stored = site;
                Ok(())
            }
            _ => Err(DirectoryError::NotFound(format!("site {}", site.id))),
        }
    }

    async fn delete_site(&self, account: AccountId, id: SiteId) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get(&id) {
            Some(site) if site.account_id == account => {}
            _ => return Err(DirectoryError::NotFound(format!("site {id}"))),
        }
        if dir.mowers.values().any(|m| m.site_id == id) {
            return Err(DirectoryError::InUse(format!("site {id}")));
        }
        dir.sites.remove(&id);
        Ok(())
    }

    async fn update_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        let mut dir = write(&self.directory);
        match dir.sites.get(&mower.site_id) {
            Some(site) if site.account_id == mower.account_id => {}
            _ => return Err(DirectoryError::NotFound(format!("site {}", mower.site_id))),
        }
        match dir.mowers.get_mut(&mower.id) {
            Some(stored) if stored.account_id == mower.account_id => {
                *stored = mower;
                Ok(())
            }
            _ => Err(DirectoryError::NotFound(format!("mower {}", mower.id))),
        }
    }

    async fn delete_mower(&self, account: AccountId, id: MowerId) -> Result<(), DirectoryError> {
        // No batch, watcher batch, sweep or W7 unit may be between its begin and its commit
        // while the mower goes (see the module); always in this order.
        let _batch = self.batch_lock.lock().await;
        let _watch = self.watch.exclusive().await;
        let mut dir = write(&self.directory);
        match dir.mowers.get(&id) {
            Some(mower) if mower.account_id == account => {}
            _ => return Err(DirectoryError::NotFound(format!("mower {id}"))),
        }
        let mut telemetry = write(&self.telemetry);
        dir.mowers.remove(&id);
        telemetry.remove(&id);
        // Under the directory's lock: a write checked against the directory (a late busy
        // status, a zone) comes before this, or finds the mower gone.
        self.watch.remove_mower(id);
        write(&self.assignments).remove(&id);
        Ok(())
    }
}

/// The rows after `query.after`, in [`OrderKey`] order, at most `query.limit`.
fn page<'a, T: Clone + 'a>(
    rows: impl Iterator<Item = &'a T>,
    key: impl Fn(&T) -> OrderKey,
    query: &ListQuery,
) -> Vec<T> {
    let mut keyed: Vec<(OrderKey, &T)> = rows
        .map(|row| (key(row), row))
        .filter(|(k, _)| query.after.as_ref().is_none_or(|after| k > after))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed
        .into_iter()
        .take(query.limit)
        .map(|(_, row)| row.clone())
        .collect()
}
