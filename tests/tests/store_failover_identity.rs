//! The lookups every API read makes first (its token, the mower's and site's place) with a read
//! store beside the primary (issue 44, decision 196): the primary answers while it answers, so
//! what was just created is found and what was just revoked or deleted is not; only while it is
//! unavailable does the read store answer, so that reads go on through a failover. Lists and
//! writes never go to the read store.

use async_trait::async_trait;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use swath_application::ports::{
    hash_token, Directory, DirectoryAdmin, DirectoryError, ListQuery, NewToken, TokenError,
    TokenHash, TokenId, TokenInfo, TokenQuery, TokenStore,
};
use swath_application::read_routing::{ReadRoutedDirectory, ReadRoutedTokens};
use swath_domain::{Account, AccountId, Mower, MowerId, Principal, Scope, Site, SiteId};
use swath_memory::MemoryStore;
use swath_tests::support::{Fleet, DEFAULT_THRESHOLD};

/// A primary with no server behind the router's port: every call unavailable.
struct Gone;

fn gone() -> DirectoryError {
    DirectoryError::Unavailable("connection refused".into())
}

fn gone_token() -> TokenError {
    TokenError::Unavailable("connection refused".into())
}

#[async_trait]
impl Directory for Gone {
    async fn create_account(&self, _: Account) -> Result<(), DirectoryError> {
        Err(gone())
    }
    async fn create_site(&self, _: Site) -> Result<(), DirectoryError> {
        Err(gone())
    }
    async fn create_mower(&self, _: Mower) -> Result<(), DirectoryError> {
        Err(gone())
    }
    async fn account(&self, _: AccountId) -> Result<Option<Account>, DirectoryError> {
        Err(gone())
    }
    async fn mower(&self, _: MowerId) -> Result<Option<Mower>, DirectoryError> {
        Err(gone())
    }
    async fn sites(&self, _: AccountId) -> Result<Vec<Site>, DirectoryError> {
        Err(gone())
    }
    async fn mowers(&self, _: AccountId) -> Result<Vec<Mower>, DirectoryError> {
        Err(gone())
    }
}

#[async_trait]
impl DirectoryAdmin for Gone {
    async fn site(&self, _: SiteId) -> Result<Option<Site>, DirectoryError> {
        Err(gone())
    }
    async fn mowers_by_id(&self, _: &[MowerId]) -> Result<Vec<Mower>, DirectoryError> {
        Err(gone())
    }
    async fn list_sites(&self, _: &ListQuery) -> Result<Vec<Site>, DirectoryError> {
        Err(gone())
    }
    async fn list_mowers(&self, _: &ListQuery) -> Result<Vec<Mower>, DirectoryError> {
        Err(gone())
    }
    async fn update_site(&self, _: Site) -> Result<(), DirectoryError> {
        Err(gone())
    }
    async fn delete_site(&self, _: AccountId, _: SiteId) -> Result<(), DirectoryError> {
        Err(gone())
    }
    async fn update_mower(&self, _: Mower) -> Result<(), DirectoryError> {
        Err(gone())
    }
    async fn delete_mower(&self, _: AccountId, _: MowerId) -> Result<(), DirectoryError> {
        Err(gone())
    }
}

#[async_trait]
impl TokenStore for Gone {
    async fn create_token(&self, _: TokenHash, _: NewToken) -> Result<(), TokenError> {
        Err(gone_token())
    }
    async fn principal(&self, _: &TokenHash) -> Result<Option<Principal>, TokenError> {
        Err(gone_token())
    }
    async fn tokens(&self, _: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
        Err(gone_token())
    }
    async fn token(&self, _: TokenId) -> Result<Option<TokenInfo>, TokenError> {
        Err(gone_token())
    }
    async fn token_by_hash(&self, _: &TokenHash) -> Result<Option<TokenInfo>, TokenError> {
        Err(gone_token())
    }
    async fn revoke_token(&self, _: TokenId) -> Result<bool, TokenError> {
        Err(gone_token())
    }
}

/// A read store whose next principal lookup fails on a session the router cut; the ones after
/// it answer on a new session.
struct CutOnce {
    store: Arc<MemoryStore>,
    cut: AtomicBool,
}

#[async_trait]
impl TokenStore for CutOnce {
    async fn create_token(&self, hash: TokenHash, token: NewToken) -> Result<(), TokenError> {
        self.store.create_token(hash, token).await
    }
    async fn principal(&self, hash: &TokenHash) -> Result<Option<Principal>, TokenError> {
        if self.cut.swap(false, Ordering::SeqCst) {
            return Err(TokenError::Unavailable("connection reset by peer".into()));
        }
        self.store.principal(hash).await
    }
    async fn tokens(&self, query: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
        self.store.tokens(query).await
    }
    async fn token(&self, id: TokenId) -> Result<Option<TokenInfo>, TokenError> {
        self.store.token(id).await
    }
    async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenInfo>, TokenError> {
        self.store.token_by_hash(hash).await
    }
    async fn revoke_token(&self, id: TokenId) -> Result<bool, TokenError> {
        self.store.revoke_token(id).await
    }
}

fn reader(account: AccountId) -> Principal {
    Principal {
        account_id: account,
        scopes: vec![Scope::Read],
        sites: None,
    }
}

async fn seeded() -> (Arc<MemoryStore>, Fleet) {
    let store = Arc::new(MemoryStore::default());
    let fleet = Fleet::new();
    fleet.seed(store.as_ref(), DEFAULT_THRESHOLD).await;
    (store, fleet)
}

fn new_token(principal: Principal) -> NewToken {
    NewToken {
        id: TokenId::new(),
        name: "t".into(),
        principal,
    }
}

/// While the primary answers, a token or a mower that exists only there (created a moment ago,
/// not replayed yet) is found, and one the standby still has after the primary revoked or
/// deleted it is not.
#[tokio::test]
async fn while_the_primary_answers_its_answers_are_the_lookups() {
    let (primary, fleet) = seeded().await;
    let (standby, _) = seeded().await;
    let tokens = ReadRoutedTokens::new(primary.clone(), standby.clone());
    let directory = ReadRoutedDirectory::new(primary.clone(), standby.clone());

    let fresh = hash_token("created-a-moment-ago");
    primary
        .create_token(fresh.clone(), new_token(reader(fleet.account_a)))
        .await
        .unwrap();
    assert_eq!(
        tokens.principal(&fresh).await.unwrap(),
        Some(reader(fleet.account_a))
    );
    assert!(tokens.token_by_hash(&fresh).await.unwrap().is_some());

    let revoked = hash_token("revoked-on-the-primary");
    let old = new_token(reader(fleet.account_b));
    let old_id = old.id;
    primary
        .create_token(revoked.clone(), old.clone())
        .await
        .unwrap();
    standby.create_token(revoked.clone(), old).await.unwrap();
    assert!(primary.revoke_token(old_id).await.unwrap());
    assert_eq!(tokens.principal(&revoked).await.unwrap(), None);
    assert_eq!(tokens.token(old_id).await.unwrap(), None);
    assert_eq!(tokens.token_by_hash(&revoked).await.unwrap(), None);

    let deleted = fleet.mowers[2];
    primary
        .delete_mower(fleet.account_b, deleted)
        .await
        .unwrap();
    assert_eq!(directory.mower(deleted).await.unwrap(), None);
    assert!(standby.mower(deleted).await.unwrap().is_some());
}

/// With the primary gone, the read store answers every lookup by key, so that a read can be
/// authorised and its visibility decided through a failover.
#[tokio::test]
async fn with_the_primary_gone_the_read_store_answers_the_lookups() {
    let (standby, fleet) = seeded().await;
    let tokens = ReadRoutedTokens::new(Arc::new(Gone), standby.clone());
    let directory = ReadRoutedDirectory::new(Arc::new(Gone), standby.clone());
    let hash = hash_token("a-reader");
    let token = new_token(reader(fleet.account_a));
    let id = token.id;
    standby.create_token(hash.clone(), token).await.unwrap();

    assert_eq!(
        tokens.principal(&hash).await.unwrap(),
        Some(reader(fleet.account_a))
    );
    assert_eq!(tokens.token(id).await.unwrap().map(|t| t.id), Some(id));
    assert_eq!(
        tokens.token_by_hash(&hash).await.unwrap().map(|t| t.id),
        Some(id)
    );
    let mower = directory
        .mower(fleet.mowers[0])
        .await
        .unwrap()
        .expect("found");
    assert_eq!(mower.account_id, fleet.account_a);
    assert!(directory.site(mower.site_id).await.unwrap().is_some());
    assert!(directory.account(fleet.account_a).await.unwrap().is_some());
}

/// In a failover the router also cuts the read store's sessions to the node being promoted: a
/// lookup that fails there is asked once more, on a new session, before the read is refused.
#[tokio::test]
async fn a_lookup_cut_on_the_read_store_too_is_asked_again() {
    let (standby, fleet) = seeded().await;
    let hash = hash_token("a-reader");
    standby
        .create_token(hash.clone(), new_token(reader(fleet.account_a)))
        .await
        .unwrap();
    let cut = Arc::new(CutOnce {
        store: standby,
        cut: AtomicBool::new(true),
    });
    let tokens = ReadRoutedTokens::new(Arc::new(Gone), cut.clone());
    assert_eq!(
        tokens.principal(&hash).await.unwrap(),
        Some(reader(fleet.account_a))
    );
    assert!(!cut.cut.load(Ordering::SeqCst), "the cut session was tried");
}

/// Lists and writes stay on the primary: with it gone they fail as unavailable (the API's 503)
/// rather than answer from a standby or write nowhere.
#[tokio::test]
async fn lists_and_writes_never_go_to_the_read_store() {
    let (standby, fleet) = seeded().await;
    let tokens = ReadRoutedTokens::new(Arc::new(Gone), standby.clone());
    let directory = ReadRoutedDirectory::new(Arc::new(Gone), standby.clone());

    let query = ListQuery {
        account: fleet.account_a,
        sites: None,
        after: None,
        limit: 10,
    };
    assert!(matches!(
        directory.list_mowers(&query).await,
        Err(DirectoryError::Unavailable(_))
    ));
    assert!(matches!(
        directory.mowers(fleet.account_a).await,
        Err(DirectoryError::Unavailable(_))
    ));
    assert!(matches!(
        directory
            .delete_mower(fleet.account_a, fleet.mowers[0])
            .await,
        Err(DirectoryError::Unavailable(_))
    ));
    assert!(standby.mower(fleet.mowers[0]).await.unwrap().is_some());
    let hash = hash_token("never-stored");
    assert!(matches!(
        tokens
            .create_token(hash.clone(), new_token(reader(fleet.account_a)))
            .await,
        Err(TokenError::Unavailable(_))
    ));
    assert_eq!(standby.principal(&hash).await.unwrap(), None);
}
