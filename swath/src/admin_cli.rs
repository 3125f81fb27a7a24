//! `swath token create` and `swath account create`: the operator's way into a store, before any
//! token exists to call the API with.
//!
//! The token is printed once, alone on stdout (so that `TOKEN=$(swath token create …)` works);
//! what it can do goes to stderr. Only its SHA-256 is stored. On `SWATH_STORE=memory` the
//! commands run against a store that lives as long as the command: they work, but what they
//! create is gone when they exit, and a running `swath` never sees it. They say so.

use crate::config::{StoreArgs, StoreKind};
use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use swath_application::ports::{generate_token, hash_token, NewToken, TokenError, TokenId};
use swath_domain::{Account, AccountId, Principal, Scope, SiteId};
use uuid::Uuid;

const MEMORY_WARNING: &str = "warning: SWATH_STORE=memory: this command's store lives only as \
    long as the command, so what it creates is lost when it exits and no `swath serve` process \
    can use it. Use SWATH_STORE=postgres (with SWATH_DATABASE_URL), or SWATH_DEMO_TOKEN for the \
    memory demo.";

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an API token of an account. Prints the token once, on stdout; stores only its hash.
    Create(TokenCreateArgs),
}

#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Create an account (a tenant). Prints its id on stdout.
    Create(AccountCreateArgs),
}

/// A scope on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScopeArg {
    /// Every `GET` of `/v1`.
    Read,
    /// `POST /v1/states` and the directory's changes.
    Write,
    /// Accounts and tokens.
    Admin,
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::Read => Scope::Read,
            ScopeArg::Write => Scope::Write,
            ScopeArg::Admin => Scope::Admin,
        }
    }
}

#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// The account the token belongs to.
    #[arg(long, value_name = "UUID")]
    account: Uuid,
    /// What the token may do, comma-separated.
    #[arg(
        long,
        value_name = "SCOPES",
        value_enum,
        value_delimiter = ',',
        required = true
    )]
    scopes: Vec<ScopeArg>,
    /// Limit the token to these sites of the account (comma-separated ids). Default: every site.
    #[arg(long, value_name = "UUIDS", value_delimiter = ',')]
    sites: Option<Vec<Uuid>>,
    /// A label for people, shown in `GET /v1/tokens`.
    #[arg(long, default_value = "")]
    name: String,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Args)]
pub struct AccountCreateArgs {
    /// The account's display name.
    #[arg(long)]
    name: String,
    #[command(flatten)]
    store: StoreArgs,
}

/// `swath token …`
pub async fn token(command: TokenCommand) -> anyhow::Result<()> {
    let TokenCommand::Create(args) = command;
    let memory = args.store.store == StoreKind::Memory;
    if memory {
        eprintln!("{MEMORY_WARNING}");
    }
    let stores = args.store.open().await?;
    let account = AccountId(args.account);
    let mut scopes: Vec<Scope> = args.scopes.iter().map(|s| (*s).into()).collect();
    scopes.sort();
    scopes.dedup();
    // A fresh memory store has no account to check against: the warning above says it all.
    if !memory {
        if stores.directory.account(account).await?.is_none() {
            bail!("there is no account {account}");
        }
        for site in args.sites.iter().flatten() {
            match stores.admin.site(SiteId(*site)).await? {
                Some(s) if s.account_id == account => {}
                _ => bail!("account {account} has no site {site}"),
            }
        }
    }
    if args.sites.as_ref().is_some_and(Vec::is_empty) {
        bail!("--sites must name at least one site (leave it out for every site)");
    }
    let token = generate_token();
    let id = TokenId::new();
    let principal = Principal {
        account_id: account,
        scopes,
        sites: args
            .sites
            .map(|s| s.into_iter().map(SiteId).collect::<Vec<_>>()),
    };
    stores
        .tokens
        .create_token(
            hash_token(&token),
            NewToken {
                id,
                name: args.name.clone(),
                principal: principal.clone(),
            },
        )
        .await
        .map_err(|e| match e {
            TokenError::UnknownAccount(a) => anyhow::anyhow!("there is no account {a}"),
            other => anyhow::Error::new(other),
        })
        .context("could not store the token")?;
    let scopes: Vec<&str> = principal.scopes.iter().map(|s| s.as_str()).collect();
    let sites = match &principal.sites {
        None => "every site".to_owned(),
        Some(s) => s
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    };
    eprintln!(
        "Created token {id} of account {account}: scopes {}, {sites}. It is shown once:",
        scopes.join(", ")
    );
    println!("{token}");
    Ok(())
}

/// `swath account …`
pub async fn account(command: AccountCommand) -> anyhow::Result<()> {
    let AccountCommand::Create(args) = command;
    if args.store.store == StoreKind::Memory {
        eprintln!("{MEMORY_WARNING}");
    }
    let name = args.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        bail!("--name must have 1 to 100 characters");
    }
    let stores = args.store.open().await?;
    let account = Account {
        id: AccountId::new(),
        name: name.to_owned(),
    };
    stores
        .directory
        .create_account(account.clone())
        .await
        .context("could not create the account")?;
    eprintln!(
        "Created account {:?}. Its id (for `swath token create --account`):",
        account.name
    );
    println!("{}", account.id);
    Ok(())
}
