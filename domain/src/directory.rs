//! The directory's entities: accounts (tenants), their sites and their mowers, and the order every
//! list of sites or mowers follows. What stores keep and the API shows; the ports that keep them
//! are in `swath_application::ports` (`Directory`, `DirectoryAdmin`).

use crate::{AccountId, MowerId, SiteId};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
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
