//! What the write rules read and write for one batch: the directory entry and rows of a mower
//! ([`MowerSnapshot`]), what became of each state and how the states counted, and the batch's
//! writes ([`BatchChanges`]).

use super::Neighbourhood;
use crate::events::IngestEvent;
use crate::ids::{AccountId, MowerId};
use crate::report::DropReason;
use crate::rows::{DayTotals, HealthTotals, HistoryRow, LatestKey, LatestRow, PositionRow};
use crate::sessions::{SessionCarry, SessionChanges};
use chrono_tz::Tz;

/// What the directory says about a mower, as the write rules need it.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectoryEntry {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// The time zone of the mower's site: decides the day a state counts for (W5).
    pub time_zone: Tz,
    pub blade_threshold_ms: i64,
}

/// The rows of one mower as read at the start of a batch (and advanced by
/// [`apply_states`](super::apply_states)). A snapshot serves one batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MowerSnapshot {
    /// `None`: the mower is not in the directory.
    pub directory: Option<DirectoryEntry>,
    pub latest: Option<LatestKey>,
    pub health: Option<HealthTotals>,
    /// The stored states around the batch's late states (empty when it has none), and the
    /// states the rules counted so far in this batch.
    pub neighbourhood: Neighbourhood,
    /// The mower's newest stored session and its rest (W8), read with the rest of the snapshot.
    pub sessions: SessionCarry,
}

/// What became of one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateOutcome {
    /// Stored, or already stored earlier (a redelivered state changes nothing and is acknowledged).
    Stored,
    /// Refused alone; the other states of the batch are unaffected.
    Dropped(DropReason),
}

/// How the stored states of a batch counted in the totals (W4, W5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateCounts {
    /// New states newer than everything counted (or a mower's first): they extended the totals.
    pub in_order: u64,
    /// New states older than the mower's newest: merged between their neighbours.
    pub late_merged: u64,
    /// New late states whose neighbours retention may have removed: stored, not counted.
    pub late_not_counted: u64,
    /// States whose key was stored already (or came earlier in the batch): they change nothing.
    pub duplicates: u64,
}

impl StateCounts {
    /// States stored for the first time.
    pub fn new_states(&self) -> u64 {
        self.in_order + self.late_merged + self.late_not_counted
    }

    pub fn add(&mut self, other: &StateCounts) {
        self.in_order += other.in_order;
        self.late_merged += other.late_merged;
        self.late_not_counted += other.late_not_counted;
        self.duplicates += other.duplicates;
    }
}

/// The writes of one batch, one list per table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchChanges {
    /// Insert; a key stored earlier keeps its row.
    pub history: Vec<HistoryRow>,
    /// Insert with the history row of the same key, in the order of `history` (a subsequence
    /// of its keys): a key stored earlier keeps its rows, and gets no position.
    pub positions: Vec<PositionRow>,
    /// At most one per mower, in mower id order: replaces the stored row.
    pub latest: Vec<LatestRow>,
    /// At most one per mower, in mower id order: replaces the stored row.
    pub health: Vec<HealthTotals>,
    /// One per touched `(mower, day)`: added to the stored row (or inserted). A merge can make
    /// some values negative (an interval taken back).
    pub days: Vec<DayTotals>,
    /// Raised by the rules, to publish after the commit, in order.
    pub events: Vec<IngestEvent>,
    /// How the batch's stored states counted.
    pub counts: StateCounts,
    /// W8's sessions, computed by the ingest after the rules (`apply_states` leaves it empty).
    pub sessions: SessionChanges,
}

impl BatchChanges {
    /// True when the batch writes nothing at all.
    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
            && self.positions.is_empty()
            && self.latest.is_empty()
            && self.health.is_empty()
            && self.days.is_empty()
            && self.sessions.is_empty()
    }
}
