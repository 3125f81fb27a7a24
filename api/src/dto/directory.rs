//! Accounts, sites, mowers and tokens: what the directory and token routes answer and accept.
//!
//! Request bodies refuse unknown fields (`422`): a misspelt field in a `PATCH` would otherwise be
//! ignored without a word. Text fields must contain something else than spaces.

use crate::error::ApiError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_application::ports::TokenInfo;
use swath_application::{
    IssuedToken, MowerChanges, MowerRequest, SiteChanges, SiteRequest, TokenRequest,
};
use swath_domain::valid::{time_zone, BladeThreshold, Label, TextRule};
use swath_domain::{self as domain, MowerId, Scope as PortScope, SiteId};
use utoipa::ToSchema;
use uuid::Uuid;

/// A directory text of a request (name, model, serial), checked by the domain's one rule.
fn text(field: &str, value: String) -> Result<Label, ApiError> {
    Ok(Label::new(field, value, TextRule::DIRECTORY)?)
}

/// Each optional field of a patch, checked when given.
fn some<T, U>(
    value: Option<T>,
    check: impl FnOnce(T) -> Result<U, ApiError>,
) -> Result<Option<U>, ApiError> {
    value.map(check).transpose()
}

impl NewAccount {
    /// The account's name, checked.
    pub fn checked(self) -> Result<Label, ApiError> {
        text("name", self.name)
    }
}

impl NewSite {
    /// The site as the use case takes it, or the `422` of its first problem.
    pub fn checked(self) -> Result<SiteRequest, ApiError> {
        Ok(SiteRequest {
            name: text("name", self.name)?,
            time_zone: time_zone(&self.time_zone)?,
            display_order: self.display_order,
        })
    }
}

impl SitePatch {
    /// The changes as the use case takes them, or the `422` of the first problem.
    pub fn checked(self) -> Result<SiteChanges, ApiError> {
        Ok(SiteChanges {
            name: some(self.name, |n| text("name", n))?,
            time_zone: some(self.time_zone, |z| Ok(time_zone(&z)?))?,
            display_order: self.display_order,
        })
    }
}

impl NewMower {
    /// The mower as the use case takes it (the blade threshold's default is the domain's), or the
    /// `422` of its first problem.
    pub fn checked(self) -> Result<MowerRequest, ApiError> {
        Ok(MowerRequest {
            id: self.id.map(MowerId),
            site_id: SiteId(self.site_id),
            name: text("name", self.name)?,
            model: text("model", self.model)?,
            serial: text("serial", self.serial)?,
            display_order: self.display_order,
            blade_threshold: BladeThreshold::or_default(self.blade_threshold_seconds)?,
        })
    }
}

impl MowerPatch {
    /// The changes as the use case takes them, or the `422` of the first problem.
    pub fn checked(self) -> Result<MowerChanges, ApiError> {
        Ok(MowerChanges {
            site_id: self.site_id.map(SiteId),
            name: some(self.name, |n| text("name", n))?,
            model: some(self.model, |m| text("model", m))?,
            serial: some(self.serial, |s| text("serial", s))?,
            display_order: self.display_order,
            blade_threshold: some(self.blade_threshold_seconds, |s| {
                Ok(BladeThreshold::from_seconds(s)?)
            })?,
        })
    }
}

impl NewTokenRequest {
    /// The token as the use case takes it, or the `422` of its name.
    pub fn checked(self) -> Result<TokenRequest, ApiError> {
        Ok(TokenRequest {
            name: Label::new("name", self.name, TextRule::TOKEN_NAME)?,
            scopes: self.scopes.iter().map(|s| (*s).into()).collect(),
            sites: self.sites.map(|ids| ids.into_iter().map(SiteId).collect()),
        })
    }
}

impl From<IssuedToken> for CreatedToken {
    fn from(t: IssuedToken) -> Self {
        CreatedToken {
            scopes: scopes(&t.principal),
            sites: t
                .principal
                .sites
                .as_ref()
                .map(|s| s.iter().map(|id| id.0).collect()),
            token: t.token,
            id: t.id.0,
            name: t.name,
        }
    }
}

/// An account (tenant). Every site, mower and token belongs to exactly one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Account)]
pub struct AccountDto {
    /// The account's id.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-0000000000a0")]
    pub id: Uuid,
    /// The account's display name.
    #[schema(example = "Acme Parks")]
    pub name: String,
}

impl From<&domain::Account> for AccountDto {
    fn from(a: &domain::Account) -> Self {
        Self {
            id: a.id.0,
            name: a.name.clone(),
        }
    }
}

/// The accounts the token may see: its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AccountList {
    /// The token's own account (a token sees no other).
    pub items: Vec<AccountDto>,
}

/// A new account.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAccount {
    /// The account's display name: 1 to 100 characters, not only spaces.
    #[schema(
        example = "Borough Lawns",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub name: String,
}

/// A created account with the first token of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreatedAccount {
    /// The new account.
    pub account: AccountDto,
    /// A token of the new account with every scope: the only way into it. Shown once.
    pub token: CreatedToken,
}

/// A site (a garden, a park) of the account.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Site)]
pub struct SiteDto {
    /// The site's id.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-00000000a001")]
    pub id: Uuid,
    /// The site's display name.
    #[schema(example = "North park")]
    pub name: String,
    /// The site's IANA time zone: it decides which local day a state counts for in day totals.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: String,
    /// Where the site comes in lists; lists are ordered by display order, then name, then id.
    #[schema(example = 0)]
    pub display_order: i32,
}

impl From<&domain::Site> for SiteDto {
    fn from(s: &domain::Site) -> Self {
        Self {
            id: s.id.0,
            name: s.name.clone(),
            time_zone: s.time_zone.name().to_owned(),
            display_order: s.display_order,
        }
    }
}

list_page! {
    /// A page of sites.
    SitePage: SiteDto,
    /// The sites, ordered by display order, then name (byte by byte), then id.
    items,
    /// Whether more sites follow this page.
    truncated
}

/// A new site.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSite {
    /// The site's display name: 1 to 100 characters, not only spaces.
    #[schema(
        example = "North park",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub name: String,
    /// An IANA time zone name, like `Europe/Berlin`.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: String,
    /// Where the site comes in lists (default 0).
    #[serde(default)]
    #[schema(example = 0)]
    pub display_order: i32,
}

/// Changes to a site: the fields given replace the stored ones; absent (or `null`) fields stay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SitePatch {
    /// A new display name: 1 to 100 characters, not only spaces.
    #[schema(
        example = "North park",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub name: Option<String>,
    /// A new IANA time zone. Day totals already counted keep the days they were counted for.
    #[schema(example = "Europe/Berlin")]
    pub time_zone: Option<String>,
    /// A new place in lists.
    #[schema(example = 2)]
    pub display_order: Option<i32>,
}

/// A new mower.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMower {
    /// The id the mower's gateway reports with (not the nil UUID); a new one when absent.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60")]
    pub id: Option<Uuid>,
    /// The site the mower works on: a site of the account, visible to the token.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-00000000a001")]
    pub site_id: Uuid,
    /// The mower's display name: 1 to 100 characters, not only spaces.
    #[schema(
        example = "Front lawn",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub name: String,
    /// The vendor's model name: 1 to 100 characters, not only spaces.
    #[schema(
        example = "Automower 450X",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub model: String,
    /// The vendor's serial number: 1 to 100 characters, not only spaces.
    #[schema(
        example = "SN-000042",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub serial: String,
    /// Where the mower comes in lists (default 0).
    #[serde(default)]
    #[schema(example = 0)]
    pub display_order: i32,
    /// Blade time after which the blade is due, in seconds: 1 to 315 360 000 (default 360 000,
    /// 100 hours). Kept to the millisecond.
    #[schema(example = 360000.0, minimum = 1.0, maximum = 315360000.0)]
    pub blade_threshold_seconds: Option<f64>,
}

/// Changes to a mower: the fields given replace the stored ones; absent (or `null`) fields stay.
/// Its stored telemetry is kept, also when it moves to another site.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MowerPatch {
    /// A new site: a site of the account, visible to the token.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-00000000a001")]
    pub site_id: Option<Uuid>,
    /// A new display name: 1 to 100 characters, not only spaces.
    #[schema(
        example = "Back lawn",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub name: Option<String>,
    /// A new model name: 1 to 100 characters, not only spaces.
    #[schema(
        example = "Automower 450X",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub model: Option<String>,
    /// A new serial number: 1 to 100 characters, not only spaces.
    #[schema(
        example = "SN-000042",
        min_length = 1,
        max_length = 100,
        pattern = r"\S"
    )]
    pub serial: Option<String>,
    /// A new place in lists.
    #[schema(example = 1)]
    pub display_order: Option<i32>,
    /// A new blade threshold in seconds, 1 to 315 360 000.
    #[schema(example = 180000.0, minimum = 1.0, maximum = 315360000.0)]
    pub blade_threshold_seconds: Option<f64>,
}

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "read")]
pub enum Scope {
    Read,
    Write,
    Admin,
}

impl From<PortScope> for Scope {
    fn from(s: PortScope) -> Self {
        match s {
            PortScope::Read => Scope::Read,
            PortScope::Write => Scope::Write,
            PortScope::Admin => Scope::Admin,
        }
    }
}

impl From<Scope> for PortScope {
    fn from(s: Scope) -> Self {
        match s {
            Scope::Read => PortScope::Read,
            Scope::Write => PortScope::Write,
            Scope::Admin => PortScope::Admin,
        }
    }
}

/// An API token as lists show it: never the token itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Token)]
pub struct TokenDto {
    /// The token's id: what revocation names.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-00000000c001")]
    pub id: Uuid,
    /// A label for people; may be empty.
    #[schema(example = "Home Assistant")]
    pub name: String,
    /// What the token may do: `read` for `GET`s, `write` for ingestion and directory changes,
    /// `admin` for accounts and tokens.
    #[schema(example = json!(["read"]))]
    pub scopes: Vec<Scope>,
    /// The only sites the token sees (their mowers, everywhere), or `null` for every site.
    #[schema(required = true, example = json!(null))]
    pub sites: Option<Vec<Uuid>>,
    /// When the token was created (UTC, RFC 3339).
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub created_at: DateTime<Utc>,
}

/// Who the calling token is: its account (the `account_id` every state report names), what it may
/// do and which sites it sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Me {
    /// The token's account.
    pub account: AccountDto,
    /// What the token may do: `read` for `GET`s, `write` for ingestion and directory changes,
    /// `admin` for accounts and tokens.
    #[schema(example = json!(["read", "write"]))]
    pub scopes: Vec<Scope>,
    /// The only sites the token sees (their mowers, everywhere), or `null` for every site.
    #[schema(required = true, example = json!(null))]
    pub sites: Option<Vec<Uuid>>,
}

impl Me {
    pub fn new(account: &domain::Account, principal: &domain::Principal) -> Self {
        Self {
            account: AccountDto::from(account),
            scopes: scopes(principal),
            sites: principal
                .sites
                .as_ref()
                .map(|s| s.iter().map(|id| id.0).collect()),
        }
    }
}

/// A principal's scopes, sorted, each once.
pub fn scopes(principal: &domain::Principal) -> Vec<Scope> {
    let mut scopes: Vec<Scope> = principal.scopes.iter().map(|s| (*s).into()).collect();
    scopes.sort();
    scopes.dedup();
    scopes
}

impl From<&TokenInfo> for TokenDto {
    fn from(t: &TokenInfo) -> Self {
        Self {
            id: t.id.0,
            name: t.name.clone(),
            scopes: scopes(&t.principal),
            sites: t
                .principal
                .sites
                .as_ref()
                .map(|s| s.iter().map(|id| id.0).collect()),
            created_at: t.created_at,
        }
    }
}

list_page! {
    /// A page of tokens.
    TokenPage: TokenDto,
    /// The tokens, oldest first.
    items,
    /// Whether more tokens follow this page.
    truncated
}

/// A new token of the caller's account. It can do no more than the caller's token: its scopes
/// are some of the caller's, and a caller limited to sites can only create tokens limited to
/// some of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTokenRequest {
    /// A label for people (at most 100 characters; default empty).
    #[serde(default)]
    #[schema(example = "Home Assistant", max_length = 100)]
    pub name: String,
    /// What the token may do; at least one scope, at most 100 (each is kept once).
    #[schema(example = json!(["read"]), min_items = 1, max_items = 100)]
    pub scopes: Vec<Scope>,
    /// Limit the token to these sites of the account (at least one, at most 1000); absent or
    /// `null`: every site.
    #[schema(example = json!(null), min_items = 1, max_items = 1000)]
    pub sites: Option<Vec<Uuid>>,
}

/// A created token: the only answer that shows the token. Store it now; Swath keeps only its
/// hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    /// The bearer token, for `Authorization: Bearer <token>`. Shown once.
    #[schema(example = "swath_3f1c0e6a9b2d4f8e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f")]
    pub token: String,
    /// The token's id: what lists show and revocation names.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-00000000c001")]
    pub id: Uuid,
    /// A label for people; may be empty.
    #[schema(example = "Home Assistant")]
    pub name: String,
    /// What the token may do.
    #[schema(example = json!(["read"]))]
    pub scopes: Vec<Scope>,
    /// The only sites the token sees, or `null` for every site.
    #[schema(required = true, example = json!(null))]
    pub sites: Option<Vec<Uuid>>,
}
