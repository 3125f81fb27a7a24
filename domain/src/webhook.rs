//! Webhook endpoints (issue 31): where a tenant wants Swath's events pushed, which of them, and
//! the secrets the deliveries are signed with (Standard Webhooks 1.0). The matching rule — which
//! endpoint gets which message — lives here, pure, so that the delivery side and its tests read
//! one definition.

use crate::ids::{AccountId, MowerId, SiteId};
use crate::watch::EventKind;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// A webhook endpoint's id (UUID v7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WebhookId(pub Uuid);

impl WebhookId {
    /// A new id that sorts by creation time (UUID v7).
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for WebhookId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for WebhookId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What an endpoint may subscribe to: a derived event kind, an alert cleared without an event,
/// the webhook's own test message, or the endpoint's disabling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookKind {
    /// A derived event of this kind (`notifications.mower.<id>.<kind>`).
    Event(EventKind),
    /// An alert cleared without an event (`notifications.alert.<id>.cleared`, decision 130).
    AlertCleared,
}

impl WebhookKind {
    /// Every kind an endpoint may ask for.
    pub fn all() -> Vec<WebhookKind> {
        let mut all: Vec<WebhookKind> =
            EventKind::ALL.into_iter().map(WebhookKind::Event).collect();
        all.push(WebhookKind::AlertCleared);
        all
    }

    /// The wire name: the event kind's, or `alert_cleared`.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookKind::Event(kind) => kind.as_str(),
            WebhookKind::AlertCleared => "alert_cleared",
        }
    }

    pub fn parse(value: &str) -> Option<WebhookKind> {
        WebhookKind::all().into_iter().find(|k| k.as_str() == value)
    }
}

impl fmt::Display for WebhookKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The prefix of every signing secret (Standard Webhooks 1.0): `whsec_` and the base64 of the
/// key's bytes.
pub const SECRET_PREFIX: &str = "whsec_";

/// A signing secret, `whsec_<base64>`. Never logged: its `Debug` says only that it is one.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    /// The secret as shown once to its creator and as a receiver configures it.
    pub value: String,
    /// Until when it still signs (a rotated-out secret during its grace period); `None`: the
    /// current secret.
    pub expires_at: Option<DateTime<Utc>>,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("value", &"whsec_…")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// A webhook endpoint of an account.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    pub id: WebhookId,
    pub account_id: AccountId,
    /// Where deliveries are POSTed.
    pub url: String,
    /// What it gets; never empty, sorted, without duplicates.
    pub kinds: Vec<WebhookKind>,
    /// Only these mowers' messages (`None`: every mower).
    pub mowers: Option<Vec<MowerId>>,
    /// Only messages of mowers on these sites (`None`: every site).
    pub sites: Option<Vec<SiteId>>,
    /// Whether deliveries are made; a disabled endpoint keeps its pending deliveries.
    pub enabled: bool,
    /// Why Swath disabled it (retries past the horizon, a `410`); `None` when enabled or
    /// disabled by its owner.
    pub disabled_reason: Option<String>,
    /// The current secret first, then rotated-out ones still in their grace period.
    pub secrets: Vec<Secret>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a message is about, as far as matching goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topic {
    pub account_id: AccountId,
    pub mower_id: MowerId,
    /// The mower's site, if it has one.
    pub site_id: Option<SiteId>,
    pub kind: WebhookKind,
}

impl Endpoint {
    /// Whether this endpoint gets a message about `topic`: it is enabled, of the same account,
    /// asks for the kind, and its mower and site filters (when given) both name the mower's.
    pub fn matches(&self, topic: &Topic) -> bool {
        self.enabled
            && self.account_id == topic.account_id
            && self.kinds.contains(&topic.kind)
            && self
                .mowers
                .as_ref()
                .is_none_or(|m| m.contains(&topic.mower_id))
            && self
                .sites
                .as_ref()
                .is_none_or(|s| topic.site_id.is_some_and(|site| s.contains(&site)))
    }

    /// The secrets that sign at `now`: the current one and those still in their grace period.
    pub fn signing_secrets(&self, now: DateTime<Utc>) -> Vec<&Secret> {
        self.secrets
            .iter()
            .filter(|s| s.expires_at.is_none_or(|at| at > now))
            .collect()
    }

    /// Rotates: `new` becomes the current secret, the current one signs until `grace_until`, and
    /// secrets whose grace ended are dropped.
    pub fn rotate(&mut self, new: String, now: DateTime<Utc>, grace_until: DateTime<Utc>) {
        let mut kept: Vec<Secret> = vec![Secret {
            value: new,
            expires_at: None,
        }];
        for mut s in std::mem::take(&mut self.secrets) {
            if s.expires_at.is_none() {
                s.expires_at = Some(grace_until);
            }
            if s.expires_at.is_some_and(|at| at > now) {
                kept.push(s);
            }
        }
        self.secrets = kept;
        self.updated_at = now;
    }
}

/// The delivery id (`webhook-id`) of a message for an endpoint: the same message always gets the
/// same id for the same endpoint, so that a message consumed twice (a redelivery after a crash)
/// makes one delivery, and receivers de-duplicate retries by it. UUID version 8 over the SHA-256
/// of the endpoint and the message id.
pub fn delivery_id(endpoint: WebhookId, message_id: &str) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(endpoint.0.as_bytes());
    hash.update(b"/");
    hash.update(message_id.as_bytes());
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests;
