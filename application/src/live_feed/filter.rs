//! What one stream sends of the feed: the principal's visible mowers (from [`crate::Access`],
//! never from the item alone), narrowed by the client's filters, and with "changes only" the
//! domain's rule ([`swath_domain::live::is_change`]) against what this stream sent last.

use super::{FeedBody, FeedItem};
use std::collections::{HashMap, HashSet};
use swath_domain::live::{is_change, SentState};
use swath_domain::watch::EventKind;
use swath_domain::{MowerId, SiteId};

/// A kind of item a client may ask for: states, events of one kind, or alerts cleared without
/// an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKind {
    State,
    Event(EventKind),
    Alert,
}

impl StreamKind {
    /// `state`, `alert`, or an event kind's wire name (`went_offline`, …).
    pub fn parse(value: &str) -> Option<StreamKind> {
        match value {
            "state" => Some(StreamKind::State),
            "alert" => Some(StreamKind::Alert),
            other => EventKind::parse(other).map(StreamKind::Event),
        }
    }
}

/// The filters a client asked for; `None` or `false`: no filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamFilter {
    /// Only these mowers (those of them the principal sees).
    pub mowers: Option<HashSet<MowerId>>,
    /// Only mowers on these sites (those of them the principal sees).
    pub sites: Option<HashSet<SiteId>>,
    /// Only these kinds of items.
    pub kinds: Option<HashSet<StreamKind>>,
    /// States only when they change something a client shows.
    pub changes_only: bool,
}

/// One stream's view: its visible mowers with their sites, its filter, and for "changes only"
/// the last state it sent of each mower.
pub struct StreamView {
    filter: StreamFilter,
    account: swath_domain::AccountId,
    /// The principal's visible mowers and their sites, already narrowed by the filter.
    mowers: HashSet<MowerId>,
    sent: HashMap<MowerId, SentState>,
}

impl StreamView {
    /// `visible`: the principal's mowers with their sites ([`crate::Access::visible_mower_sites`]).
    pub fn new(
        account: swath_domain::AccountId,
        visible: HashMap<MowerId, SiteId>,
        filter: StreamFilter,
    ) -> Self {
        let mut view = Self {
            filter,
            account,
            mowers: HashSet::new(),
            sent: HashMap::new(),
        };
        view.set_visible(visible);
        view
    }

    /// The principal's mowers were resolved again.
    pub fn set_visible(&mut self, visible: HashMap<MowerId, SiteId>) {
        let filter = &self.filter;
        self.mowers = visible
            .into_iter()
            .filter(|(m, _)| filter.mowers.as_ref().is_none_or(|f| f.contains(m)))
            .filter(|(_, s)| filter.sites.as_ref().is_none_or(|f| f.contains(s)))
            .map(|(m, _)| m)
            .collect();
    }

    /// Whether this stream sends `item`; remembers what it sends for "changes only".
    pub fn admits(&mut self, item: &FeedItem) -> bool {
        let mower = item.mower_id();
        // The item must name the principal's account *and* a mower the directory says it sees.
        if item.account_id() != self.account || !self.mowers.contains(&mower) {
            return false;
        }
        let kind = match &item.body {
            FeedBody::State(_) => StreamKind::State,
            FeedBody::Event(e) => StreamKind::Event(e.kind()),
            FeedBody::Cleared(_) => StreamKind::Alert,
        };
        // Availability changes are followed even when their events are not asked for, so that
        // the next state after an outage counts as a change.
        if let FeedBody::Event(e) = &item.body {
            if e.kind() == EventKind::WentOffline {
                if let Some(sent) = self.sent.get_mut(&mower) {
                    sent.went_offline();
                }
            }
        }
        if self
            .filter
            .kinds
            .as_ref()
            .is_some_and(|k| !k.contains(&kind))
        {
            return false;
        }
        match &item.body {
            FeedBody::State(row) if self.filter.changes_only => {
                if !is_change(self.sent.get(&mower), &row.state) {
                    return false;
                }
                self.sent.insert(mower, SentState::of(&row.state));
                true
            }
            _ => true,
        }
    }
}
