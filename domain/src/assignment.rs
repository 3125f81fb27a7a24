//! Operators assigned to mowers: who is on duty for a mower in the live views (docs/rules.md §6),
//! ranked by priority, then the newest change, then the id. The store of assignments is the
//! `Assignments` port's (`swath_application::ports`).

use crate::{AccountId, MowerId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// How urgently an operator's assignment counts: the operator on duty is the active assignment of
/// the highest priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    Normal,
    High,
    Critical,
}

impl Priority {
    pub const ALL: [Priority; 4] = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Critical,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }

    pub fn parse(value: &str) -> Option<Priority> {
        Priority::ALL.into_iter().find(|p| p.as_str() == value)
    }

    /// 1 (low) to 4 (critical): what stores rank by, highest first.
    pub fn rank(self) -> i16 {
        self as i16 + 1
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operator assigned to a mower. Several may be active at once; the live views show the one
/// that wins ([`Assignment::rank_key`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub id: Uuid,
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// The operator's name, as people know them (1 to [`MAX_OPERATOR_CHARS`] characters).
    pub operator: String,
    pub priority: Priority,
    /// Only active assignments can be on duty.
    pub active: bool,
    pub updated_at: DateTime<Utc>,
}

impl Assignment {
    /// The ranking of assignments of one mower, ascending: the greatest key wins (priority, then
    /// the newest `updated_at`, then the highest id).
    pub fn rank_key(&self) -> (i16, DateTime<Utc>, Uuid) {
        (self.priority.rank(), self.updated_at, self.id)
    }
}

/// The longest operator name accepted.
pub const MAX_OPERATOR_CHARS: usize = 128;

/// The listing order of a mower's assignments: active first, then the ranking, best first.
pub fn list_order(a: &Assignment, b: &Assignment) -> std::cmp::Ordering {
    b.active
        .cmp(&a.active)
        .then_with(|| b.rank_key().cmp(&a.rank_key()))
}
