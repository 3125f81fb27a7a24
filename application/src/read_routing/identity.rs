//! Who is asking and what they may see, read from the read store when the primary does not
//! answer (issue 44). Every read of the API first resolves its token and the mower's or site's
//! place in the directory; with those lookups on the primary alone, a read whose data comes from
//! a standby would still fail for as long as a failover lasts.
//!
//! Only the lookups by key are routed: a token's principal (by hash or id), an account, a site
//! and a mower. Unlike the telemetry reads they ask the primary first: it is the one that has
//! what was created a moment ago (a client using the token or the mower it just made is not
//! refused) and that has every revocation and deletion at once (the caches of [`crate::visibility`]
//! promise that for this process). Only when the primary is unavailable is the read store asked,
//! and then a revocation or a deletion may be seen late, by the standby's replay lag. Lists,
//! writes and everything else stay on the primary.

use crate::ports::{
    Directory, DirectoryAdmin, DirectoryError, ListQuery, NewToken, TokenError, TokenHash, TokenId,
    TokenInfo, TokenQuery, TokenStore,
};
use async_trait::async_trait;
use std::future::Future;
use std::sync::Arc;
use swath_domain::{Account, AccountId, Mower, MowerId, Principal, Site, SiteId};

/// What a lookup error says about where to ask next.
trait Unanswered {
    fn unavailable(&self) -> bool;
}

impl Unanswered for DirectoryError {
    fn unavailable(&self) -> bool {
        matches!(self, DirectoryError::Unavailable(_))
    }
}

impl Unanswered for TokenError {
    fn unavailable(&self) -> bool {
        matches!(self, TokenError::Unavailable(_))
    }
}

/// `on_primary`'s answer, or `on_replica`'s when the primary is unavailable (counted, and a
/// warning: an operator sees the primary gone). The read store is asked twice if need be: in a
/// failover the router cuts its sessions to the node being promoted, so the first try may fail
/// on a cut session while a node stands behind the port again (as for the telemetry reads).
async fn lookup<T, E, P, R, F>(read: &'static str, on_primary: P, on_replica: R) -> Result<T, E>
where
    E: Unanswered + std::error::Error + 'static,
    P: Future<Output = Result<T, E>>,
    R: Fn() -> F,
    F: Future<Output = Result<T, E>>,
{
    match on_primary.await {
        Err(e) if e.unavailable() => {
            metrics::counter!("swath_store_primary_fallbacks_total", "read" => read).increment(1);
            tracing::warn!(
                read,
                error = %crate::ports::chain(&e),
                "The primary did not answer; the read store answers instead."
            );
            match on_replica().await {
                Err(e) if e.unavailable() => on_replica().await,
                answer => answer,
            }
        }
        answer => answer,
    }
}

/// The directory with its lookups by id on a second store (see the module).
pub struct ReadRoutedDirectory {
    primary: Arc<dyn DirectoryAdmin>,
    replica: Arc<dyn DirectoryAdmin>,
}

impl ReadRoutedDirectory {
    pub fn new(primary: Arc<dyn DirectoryAdmin>, replica: Arc<dyn DirectoryAdmin>) -> Self {
        Self { primary, replica }
    }
}

#[async_trait]
impl Directory for ReadRoutedDirectory {
    async fn create_account(&self, account: Account) -> Result<(), DirectoryError> {
        self.primary.create_account(account).await
    }

    async fn create_site(&self, site: Site) -> Result<(), DirectoryError> {
        self.primary.create_site(site).await
    }

    async fn create_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        self.primary.create_mower(mower).await
    }

    async fn account(&self, id: AccountId) -> Result<Option<Account>, DirectoryError> {
        lookup("account", self.primary.account(id), || {
            self.replica.account(id)
        })
        .await
    }

    async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError> {
        lookup("mower", self.primary.mower(id), || self.replica.mower(id)).await
    }

    async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError> {
        self.primary.sites(account).await
    }

    async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError> {
        self.primary.mowers(account).await
    }
}

#[async_trait]
impl DirectoryAdmin for ReadRoutedDirectory {
    async fn site(&self, id: SiteId) -> Result<Option<Site>, DirectoryError> {
        lookup("site", self.primary.site(id), || self.replica.site(id)).await
    }

    async fn mowers_by_id(&self, ids: &[MowerId]) -> Result<Vec<Mower>, DirectoryError> {
        self.primary.mowers_by_id(ids).await
    }

    async fn list_sites(&self, query: &ListQuery) -> Result<Vec<Site>, DirectoryError> {
        self.primary.list_sites(query).await
    }

    async fn list_mowers(&self, query: &ListQuery) -> Result<Vec<Mower>, DirectoryError> {
        self.primary.list_mowers(query).await
    }

    async fn update_site(&self, site: Site) -> Result<(), DirectoryError> {
        self.primary.update_site(site).await
    }

    async fn delete_site(&self, account: AccountId, id: SiteId) -> Result<(), DirectoryError> {
        self.primary.delete_site(account, id).await
    }

    async fn update_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        self.primary.update_mower(mower).await
    }

    async fn delete_mower(&self, account: AccountId, id: MowerId) -> Result<(), DirectoryError> {
        self.primary.delete_mower(account, id).await
    }
}

/// The token store with its lookups on a second store (see the module).
pub struct ReadRoutedTokens {
    primary: Arc<dyn TokenStore>,
    replica: Arc<dyn TokenStore>,
}

impl ReadRoutedTokens {
    pub fn new(primary: Arc<dyn TokenStore>, replica: Arc<dyn TokenStore>) -> Self {
        Self { primary, replica }
    }
}

#[async_trait]
impl TokenStore for ReadRoutedTokens {
    async fn create_token(&self, hash: TokenHash, token: NewToken) -> Result<(), TokenError> {
        self.primary.create_token(hash, token).await
    }

    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError> {
        lookup("principal", self.primary.principal(hash), || {
            self.replica.principal(hash)
        })
        .await
    }

    async fn tokens(&self, query: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
        self.primary.tokens(query).await
    }

    async fn token(&self, id: TokenId) -> Result<Option<TokenInfo>, TokenError> {
        lookup("token", self.primary.token(id), || self.replica.token(id)).await
    }

    async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenInfo>, TokenError> {
        lookup("token", self.primary.token_by_hash(hash), || {
            self.replica.token_by_hash(hash)
        })
        .await
    }

    async fn revoke_token(&self, id: TokenId) -> Result<bool, TokenError> {
        self.primary.revoke_token(id).await
    }
}
