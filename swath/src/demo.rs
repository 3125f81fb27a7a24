//! Demo credentials only for a demo (decision 142): the demo account and its full-scope token are
//! made only when the simulator runs (`SWATH_SIM_MOWERS` > 0) or `SWATH_DEMO_TOKEN` is set; a new
//! demo token revokes the demo tokens stored before it, and a start without a demo revokes them
//! all ([`revoke_all`], decision 182); on PostgreSQL a demo token shorter than
//! [`MIN_PERSISTENT_DEMO_TOKEN_CHARS`] is refused at start-up.

use crate::config::StoreKind;
use swath_application::ports::{hash_token, NewToken, TokenError, TokenId, TokenQuery, TokenStore};
use swath_domain::{AccountId, Principal, Scope};

/// The name of the demo token in `GET /v1/tokens`.
pub const DEMO_TOKEN_NAME: &str = "demo";

/// The shortest `SWATH_DEMO_TOKEN` a persistent store accepts: a token that outlives the process
/// opens an admin account, so it must not be guessable ("demo" is fine for the memory demo,
/// which dies with its process).
pub const MIN_PERSISTENT_DEMO_TOKEN_CHARS: usize = 32;

/// Whether this start makes the demo account and token: the simulator runs, or a demo token was
/// asked for.
pub fn wanted(sim_mowers: u32, demo_token: Option<&str>) -> bool {
    sim_mowers > 0 || demo_token.is_some()
}

/// Refuses a demo token too short for a persistent store, naming the variable.
pub fn check_token(store: StoreKind, demo_token: Option<&str>) -> Result<(), String> {
    let Some(token) = demo_token else {
        return Ok(());
    };
    let chars = token.chars().count();
    if store == StoreKind::Postgres && chars < MIN_PERSISTENT_DEMO_TOKEN_CHARS {
        return Err(format!(
            "SWATH_DEMO_TOKEN has {chars} characters; with SWATH_STORE=postgres the demo token \
             outlives the process and opens an admin account, so it needs at least \
             {MIN_PERSISTENT_DEMO_TOKEN_CHARS} (for example `openssl rand -hex 32`). Unset it for \
             a random one, or run the demo on the memory store."
        ));
    }
    Ok(())
}

/// The demo account's principal: every scope, every site.
pub fn demo_principal(account_id: AccountId) -> Principal {
    Principal {
        account_id,
        scopes: vec![Scope::Read, Scope::Write, Scope::Admin],
        sites: None,
    }
}

/// The id of the demo token `token`: derived from it, so that a restart with the same
/// `SWATH_DEMO_TOKEN` (or another replica given it) finds it as its own and keeps it.
fn demo_token_id(token: &str) -> TokenId {
    // A digest of the token's hash (never the hash itself, which the id would reveal).
    let digest = hash_token(&format!("swath demo token id:{}", hash_token(token).0)).0;
    let mut bytes = [0u8; 16];
    // Both hex, 64 digits: the first 32 make 16 bytes.
    let _ = hex::decode_to_slice(&digest[..32], &mut bytes);
    TokenId(uuid::Builder::from_custom_bytes(bytes).into_uuid())
}

/// Whether `info` is a demo token: named so, or, as earlier versions stored it, unnamed with
/// every scope on every site.
fn is_demo_token(info: &swath_application::ports::TokenInfo) -> bool {
    info.name == DEMO_TOKEN_NAME
        || (info.name.is_empty()
            && info.principal.sites.is_none()
            && [Scope::Read, Scope::Write, Scope::Admin]
                .iter()
                .all(|s| info.principal.has_scope(*s)))
}

/// Revokes every demo token of `account_id` but `keep`; answers how many it revoked.
async fn revoke_demo_tokens(
    tokens: &dyn TokenStore,
    account_id: AccountId,
    keep: Option<TokenId>,
) -> Result<usize, TokenError> {
    let within = demo_principal(account_id);
    let mut revoked = 0;
    let mut after = None;
    loop {
        const PAGE: usize = 100;
        let page = tokens
            .tokens(&TokenQuery {
                within: within.clone(),
                after,
                limit: PAGE,
            })
            .await?;
        for info in &page {
            if Some(info.id) != keep && is_demo_token(info) && tokens.revoke_token(info.id).await? {
                revoked += 1;
            }
        }
        if page.len() < PAGE {
            break;
        }
        after = page.last().map(|info| info.id);
    }
    Ok(revoked)
}

/// A start without a demo: revokes every demo token of the demo account `account_id`, so that
/// one an earlier demo start stored (on PostgreSQL it outlives that process) opens nothing now;
/// answers how many it revoked (none once a start did it).
pub async fn revoke_all(
    tokens: &dyn TokenStore,
    account_id: AccountId,
) -> Result<usize, TokenError> {
    revoke_demo_tokens(tokens, account_id, None).await
}

/// Stores `token` as the demo token of `account_id` and revokes every other demo token of the
/// account; answers how many it revoked.
pub async fn install_token(
    tokens: &dyn TokenStore,
    account_id: AccountId,
    token: &str,
) -> Result<usize, TokenError> {
    let principal = demo_principal(account_id);
    let id = demo_token_id(token);
    let revoked = revoke_demo_tokens(tokens, account_id, Some(id)).await?;
    let hash = hash_token(token);
    let new = NewToken {
        id,
        name: DEMO_TOKEN_NAME.to_owned(),
        principal: principal.clone(),
    };
    match tokens.create_token(hash.clone(), new).await {
        Ok(()) => {}
        // A restart with the same SWATH_DEMO_TOKEN: fine if it is ours.
        Err(TokenError::Conflict) if tokens.principal(&hash).await? == Some(principal) => {}
        Err(e) => return Err(e),
    }
    Ok(revoked)
}
