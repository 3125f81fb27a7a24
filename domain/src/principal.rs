//! Who is asking: a principal (an account, its scopes, optionally the only sites it may see) and
//! the scopes a bearer token carries (docs/rules.md §7). The tokens themselves, stored hashed, are
//! the `TokenStore` port's (`swath_application::ports`).

use crate::{AccountId, SiteId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Read,
    Write,
    Admin,
}

/// Who is asking: an account, its scopes, and optionally the only sites it may see.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    pub account_id: AccountId,
    pub scopes: Vec<Scope>,
    /// `None`: every site of the account.
    pub sites: Option<Vec<SiteId>>,
}

impl Scope {
    /// Every scope, in order.
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Admin];

    /// The wire name (`read`, `write`, `admin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Principal {
    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// Whether `other` can do nothing that `self` cannot: same account, every scope of `other` is
    /// one of `self`, and `other` sees no site that `self` does not (an unlimited `other` only
    /// under an unlimited `self`). A principal creates, sees and revokes only tokens within its
    /// own powers, so that no token can mint or remove a stronger one.
    pub fn covers(&self, other: &Principal) -> bool {
        self.account_id == other.account_id
            && other.scopes.iter().all(|s| self.has_scope(*s))
            && match (&self.sites, &other.sites) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(mine), Some(theirs)) => theirs.iter().all(|s| mine.contains(s)),
            }
    }
}
