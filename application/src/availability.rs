//! Whether a mower is online, for every read of a mower (decision 104).
//!
//! The rule is the live views' (`MowerCard::offline`, docs/rules.md §4): a mower is offline
//! while it has an open `offline` alert, which the watcher's offline sweep raises after
//! `SWATH_OFFLINE_AFTER_SECONDS` of silence and its next state clears. One addition: a mower that
//! never reported is not online either (it has no state, so the sweep never watched it).

use crate::ports::{AlertQuery, NotificationFeed, WatchError};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use swath_domain::watch::AlertKind;
use swath_domain::{AccountId, MowerId};

/// Why a mower is not online.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfflineReason {
    /// No state was ever received.
    NeverReported,
    /// Silent for the offline period: its `offline` alert is open.
    Silent,
}

impl OfflineReason {
    pub fn as_str(self) -> &'static str {
        match self {
            OfflineReason::NeverReported => "never_reported",
            OfflineReason::Silent => "silent",
        }
    }
}

/// A mower's availability.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Availability {
    pub online: bool,
    /// When a state of the mower was last received.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// `None` while online.
    pub offline_reason: Option<OfflineReason>,
    /// When its `offline` alert was raised (the instant it had been silent for the period).
    pub offline_since: Option<DateTime<Utc>>,
}

/// The availability of `mowers` (each with the `last_seen_at` of its latest state, `None`
/// when it never reported), of `account`, with one read of their open `offline` alerts. Without
/// a notification feed (no watcher wired) no mower has an alert.
pub async fn availability(
    feed: Option<&dyn NotificationFeed>,
    account: AccountId,
    mowers: &[(MowerId, Option<DateTime<Utc>>)],
) -> Result<HashMap<MowerId, Availability>, WatchError> {
    let offline: HashMap<MowerId, DateTime<Utc>> = match feed {
        Some(feed) if !mowers.is_empty() => feed
            .open_alerts(&AlertQuery {
                account_id: account,
                mowers: Some(mowers.iter().map(|(m, _)| *m).collect()),
                kind: Some(AlertKind::Offline),
                after: None,
                // At most one open alert per kind and mower.
                limit: mowers.len(),
            })
            .await?
            .into_iter()
            .map(|a| (a.mower_id, a.raised_at))
            .collect(),
        _ => HashMap::new(),
    };
    Ok(mowers
        .iter()
        .map(|&(mower, last_seen_at)| {
            let since = offline.get(&mower).copied();
            let reason = match (last_seen_at, since) {
                (None, _) => Some(OfflineReason::NeverReported),
                (Some(_), Some(_)) => Some(OfflineReason::Silent),
                (Some(_), None) => None,
            };
            let availability = Availability {
                online: reason.is_none(),
                last_seen_at,
                offline_reason: reason,
                offline_since: since,
            };
            (mower, availability)
        })
        .collect())
}
