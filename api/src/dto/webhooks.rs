//! `/v1/webhooks`: endpoints, their secrets (shown once) and their deliveries.

use super::notifications::event_kinds;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use swath_application::ports::{Delivery, DeliveryOutcome};
use swath_domain::webhook::{Endpoint, WebhookKind};
use utoipa::ToSchema;
use uuid::Uuid;

event_kinds! {
    /// What an endpoint may receive: a derived event kind (as in the events feed), or
    /// `alert_cleared` (an alert cleared without an event: a battery recharged, a geofence removed).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    #[schema(as = WebhookKind, example = "error_raised")]
    WebhookKindDto { AlertCleared }
}

impl From<WebhookKindDto> for WebhookKind {
    fn from(k: WebhookKindDto) -> Self {
        WebhookKind::parse(&super::wire_name(k)).unwrap_or(WebhookKind::AlertCleared)
    }
}

impl From<WebhookKind> for WebhookKindDto {
    fn from(k: WebhookKind) -> Self {
        super::from_wire_name(k.as_str()).unwrap_or(WebhookKindDto::AlertCleared)
    }
}

/// A new webhook endpoint of the caller's account.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where deliveries are POSTed: an `https` URL (plain `http` and private addresses only when
    /// the service runs with `SWATH_WEBHOOK_ALLOW_PRIVATE=true`), at most 2048 characters.
    /// Refused with a space, a line break or another control character anywhere (percent-encode
    /// them), a user name or password, or a fragment (`#…`, never sent). Stored and answered in
    /// its normal form: scheme and host in lower case, an international host in punycode, the
    /// default port dropped, `.` and `..` segments resolved.
    #[schema(example = "https://hooks.example.com/swath", max_length = 2048)]
    pub url: String,
    /// What the endpoint receives; at least one kind, at most 100 (each is kept once).
    #[schema(example = json!(["error_raised", "geofence_left"]), min_items = 1, max_items = 100)]
    pub kinds: Vec<WebhookKindDto>,
    /// Only these mowers' messages (at least one, at most 1000, each visible to the token);
    /// absent or `null`: every mower.
    #[schema(example = json!(null), min_items = 1, max_items = 1000)]
    pub mowers: Option<Vec<Uuid>>,
    /// Only messages of mowers on these sites (at least one, at most 1000, each visible to the
    /// token); absent or `null`: every site. A token limited to sites must name some of its
    /// sites.
    #[schema(example = json!(null), min_items = 1, max_items = 1000)]
    pub sites: Option<Vec<Uuid>>,
    /// Whether deliveries are made (default `true`).
    #[serde(default = "enabled_by_default")]
    #[schema(example = true)]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

/// A present field, `null` included, as `Some`: tells "lift the filter" (`null`) from "keep it"
/// (absent).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Changes to an endpoint: the fields given replace the stored ones; absent fields stay.
/// Enabling an endpoint Swath disabled clears `disabled_reason`; its failed deliveries stay
/// failed (retry them one by one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookPatch {
    /// A new URL (the same rules and normal form as at creation).
    #[schema(example = "https://hooks.example.com/swath", max_length = 2048)]
    pub url: Option<String>,
    /// New kinds; at least one, at most 100.
    #[schema(example = json!(["error_raised"]), min_items = 1, max_items = 100)]
    pub kinds: Option<Vec<WebhookKindDto>>,
    /// New mowers (at least one, at most 1000); `null`: every mower from now on.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<Uuid>>, example = json!(null), min_items = 1, max_items = 1000)]
    pub mowers: Option<Option<Vec<Uuid>>>,
    /// New sites (at least one, at most 1000); `null`: every site from now on.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<Uuid>>, example = json!(null), min_items = 1, max_items = 1000)]
    pub sites: Option<Option<Vec<Uuid>>>,
    /// Enable or disable deliveries.
    #[schema(example = false)]
    pub enabled: Option<bool>,
}

/// A webhook endpoint. Never its secrets: they are shown once, when created or rotated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Webhook)]
pub struct WebhookDto {
    /// The endpoint's id.
    #[schema(example = "0190a2b4-5c3e-7d21-9f00-00000000e001")]
    pub id: Uuid,
    /// Where deliveries are POSTed, in its normal form (as the `url` of `NewWebhook` says).
    #[schema(example = "https://hooks.example.com/swath")]
    pub url: String,
    /// What the endpoint receives.
    #[schema(example = json!(["error_raised", "geofence_left"]))]
    pub kinds: Vec<WebhookKindDto>,
    /// Only these mowers' messages; `null`: every mower.
    #[schema(required = true, example = json!(null))]
    pub mowers: Option<Vec<Uuid>>,
    /// Only messages of mowers on these sites; `null`: every site.
    #[schema(required = true, example = json!(null))]
    pub sites: Option<Vec<Uuid>>,
    /// Whether deliveries are made.
    #[schema(example = true)]
    pub enabled: bool,
    /// Why Swath disabled the endpoint (deliveries failed past the retry horizon, or it
    /// answered `410 Gone`); `null` when enabled or disabled by a person.
    #[schema(required = true, example = json!(null))]
    pub disabled_reason: Option<String>,
    /// When the secret a rotation replaced stops signing; `null` when only one secret signs.
    #[schema(required = true, example = json!(null))]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// When it was created.
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub updated_at: DateTime<Utc>,
}

impl From<&Endpoint> for WebhookDto {
    fn from(e: &Endpoint) -> Self {
        Self {
            id: e.id.0,
            url: e.url.clone(),
            kinds: e.kinds.iter().map(|k| (*k).into()).collect(),
            mowers: e.mowers.as_ref().map(|m| m.iter().map(|id| id.0).collect()),
            sites: e.sites.as_ref().map(|s| s.iter().map(|id| id.0).collect()),
            enabled: e.enabled,
            disabled_reason: e.disabled_reason.clone(),
            previous_secret_expires_at: e.secrets.iter().filter_map(|s| s.expires_at).max(),
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

/// An endpoint with its signing secret: the only answers that show a secret (creation and
/// rotation). Store it now; configure your receiver with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WebhookWithSecret {
    /// The signing secret, `whsec_` and base64 (Standard Webhooks 1.0). Shown once.
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    pub secret: String,
    /// The endpoint.
    pub webhook: WebhookDto,
}

list_page! {
    /// A page of webhook endpoints.
    WebhookPage: WebhookDto,
    /// The endpoints, oldest first.
    items,
    /// Whether more endpoints follow this page.
    truncated
}

/// Where a delivery is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = DeliveryOutcome, example = "delivered")]
pub enum DeliveryOutcomeDto {
    /// Waiting for its first attempt or its next retry.
    Pending,
    /// A `2xx` answered it.
    Delivered,
    /// Given up: the endpoint was disabled.
    Failed,
}

impl From<DeliveryOutcome> for DeliveryOutcomeDto {
    fn from(o: DeliveryOutcome) -> Self {
        match o {
            DeliveryOutcome::Pending => Self::Pending,
            DeliveryOutcome::Delivered => Self::Delivered,
            DeliveryOutcome::Failed => Self::Failed,
        }
    }
}

/// One message to one endpoint, with what its attempts did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Delivery)]
pub struct DeliveryDto {
    /// The delivery's id: the `webhook-id` header of every attempt (the same across retries, so
    /// receivers de-duplicate by it).
    #[schema(example = "0190a2b4-5c3e-8d21-9f00-00000000d001")]
    pub id: Uuid,
    /// The message's type: an event kind, `alert_cleared` or `webhook_test`.
    #[schema(example = "error_raised")]
    pub event_type: String,
    /// When it was enqueued.
    #[schema(example = "2026-06-01T12:00:00Z")]
    pub created_at: DateTime<Utc>,
    /// Attempts made so far.
    #[schema(example = 1)]
    pub attempts: u32,
    /// The HTTP status of the last attempt; `null` when none was made or none answered.
    #[schema(required = true, example = 204)]
    pub last_status: Option<u16>,
    /// How long the last attempt took, in milliseconds; `null` before the first.
    #[schema(required = true, example = 42)]
    pub last_latency_ms: Option<u32>,
    /// When it is attempted next; `null` once delivered or failed.
    #[schema(required = true, example = json!(null))]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Where it is.
    pub outcome: DeliveryOutcomeDto,
}

impl From<&Delivery> for DeliveryDto {
    fn from(d: &Delivery) -> Self {
        Self {
            id: d.id,
            event_type: d.event_type.clone(),
            created_at: d.created_at,
            attempts: d.attempts,
            last_status: d.last_status,
            last_latency_ms: d.last_latency_ms,
            next_attempt_at: d.next_attempt_at,
            outcome: d.outcome.into(),
        }
    }
}

list_page! {
    /// A page of an endpoint's deliveries.
    DeliveryPage: DeliveryDto,
    /// The deliveries, newest first.
    items,
    /// Whether older deliveries follow this page.
    truncated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_kinds_round_trip() {
        for kind in WebhookKind::all() {
            assert_eq!(WebhookKind::from(WebhookKindDto::from(kind)), kind);
        }
    }
}
