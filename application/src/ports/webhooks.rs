use super::Cause;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use swath_domain::webhook::{Endpoint, WebhookId};
use swath_domain::AccountId;
use uuid::Uuid;

/// Where a delivery is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Not delivered yet: waiting for its first attempt or its next retry.
    Pending,
    /// A `2xx` answered it.
    Delivered,
    /// Given up: the endpoint was disabled (the retry horizon passed, or a `410`).
    Failed,
}

impl DeliveryOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryOutcome::Pending => "pending",
            DeliveryOutcome::Delivered => "delivered",
            DeliveryOutcome::Failed => "failed",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed]
            .into_iter()
            .find(|o| o.as_str() == value)
    }
}

/// A message to deliver to one endpoint, as enqueued.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    /// The `webhook-id`: [`swath_domain::webhook::delivery_id`] of the endpoint and the message,
    /// so that a message enqueued twice is one delivery.
    pub id: Uuid,
    pub endpoint_id: WebhookId,
    /// The message's type (`error_raised`, `alert_cleared`, `webhook_test`, …).
    pub event_type: String,
    /// The JSON body POSTed, exactly these bytes on every attempt (the signature covers them).
    pub body: String,
    /// When it was enqueued; the retry horizon counts from here.
    pub created_at: DateTime<Utc>,
}

/// A delivery with what its attempts did.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    pub id: Uuid,
    pub endpoint_id: WebhookId,
    /// Its place in the endpoint's queue: increasing in the order deliveries were enqueued.
    pub seq: i64,
    pub event_type: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
    /// Attempts made so far.
    pub attempts: u32,
    /// The HTTP status of the last attempt (`None`: none made, or no answer).
    pub last_status: Option<u16>,
    /// How long the last attempt took, in milliseconds.
    pub last_latency_ms: Option<u32>,
    /// When it is attempted next (`None` once delivered or failed).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub outcome: DeliveryOutcome,
}

/// What one attempt did, as recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    pub status: Option<u16>,
    pub latency_ms: u32,
    /// [`DeliveryOutcome::Pending`] with `next_attempt_at` set for a retry; delivered or failed
    /// otherwise.
    pub outcome: DeliveryOutcome,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// How many endpoints one [`WebhookStore::claim_due`] may claim: at most `total`, and of one
/// account at most `per_account` less what it has in flight already (`busy`), so that one
/// account's endpoints never take every slot of a dispatcher.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimLimit {
    pub total: usize,
    pub per_account: usize,
    /// Attempts in flight per account on the claiming dispatcher.
    pub busy: HashMap<AccountId, usize>,
}

impl ClaimLimit {
    /// At most `total` endpoints, whatever their accounts.
    pub fn total(total: usize) -> Self {
        Self {
            total,
            per_account: total,
            busy: HashMap::new(),
        }
    }

    /// How many more endpoints of `account` this claim may take.
    pub fn room(&self, account: AccountId) -> usize {
        self.per_account
            .saturating_sub(self.busy.get(&account).copied().unwrap_or(0))
    }
}

/// A delivery claimed for an attempt, with its endpoint as it was when claimed.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed {
    pub endpoint: Endpoint,
    pub delivery: Delivery,
}

/// Errors of the [`WebhookStore`] port.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// An endpoint with this id exists already.
    #[error("webhook endpoint already stored")]
    Conflict,
    /// The endpoint's account does not exist (a store that can check it, PostgreSQL by its
    /// foreign key, refuses the endpoint).
    #[error("account {0} does not exist")]
    UnknownAccount(AccountId),
    /// The account has as many endpoints as `create_endpoint` was told it may have.
    #[error("the account has as many webhook endpoints as it may have")]
    AccountFull,
    #[error("webhook store unavailable: {0}")]
    Unavailable(#[source] Cause),
}

/// Webhook endpoints and their queues of deliveries.
///
/// An implementation MUST:
/// - `create_endpoint`: store the endpoint as given; refuse an id stored already with
///   [`WebhookError::Conflict`], and refuse with [`WebhookError::AccountFull`] when its account
///   has `at_most` endpoints already, exactly also under concurrent creations (the check and the
///   insert are one step per account);
/// - `endpoint`: answer the endpoint with this id whatever its account (callers decide
///   visibility), secrets included;
/// - `endpoints`: the account's endpoints in id order, strictly after `after`, at most `limit`;
///   never another account's;
/// - `enabled_endpoints`: every enabled endpoint of the account (matching reads it);
/// - `put_endpoint`: replace the stored endpoint with the same id (url, kinds, filters, enabled,
///   reason, secrets, updated_at); answer whether it existed;
/// - `delete_endpoint`: delete it and its deliveries; answer whether it existed;
/// - `enqueue`: store each delivery as [`DeliveryOutcome::Pending`], due at once, behind every
///   delivery of its endpoint enqueued before (a `seq` greater than theirs, in the order given);
///   a delivery whose id is stored already is left as it is (enqueuing is idempotent); one whose
///   endpoint no longer exists is dropped; answer how many were new;
/// - `deliveries`: an endpoint's deliveries newest first (`seq` descending), strictly before
///   `before` (a `seq`), at most `limit`;
/// - `delivery`: the delivery with this id if it belongs to this endpoint;
/// - `claim_due`: among the enabled endpoints not claimed (or whose claim ended before `now`)
///   whose oldest pending delivery (lowest `seq`) is due (`next_attempt_at <= now`), take at
///   most `limit.total`, and of one account at most [`ClaimLimit::room`]; when there are more
///   than that, take each account's in endpoint id order, every account's first before any
///   account's second (then by endpoint id), so that no account waits behind another's; claim
///   each endpoint taken until `until` and answer its oldest pending delivery with the endpoint.
///   An endpoint whose oldest pending delivery is not due yet answers nothing (order per
///   endpoint: a later delivery never overtakes an earlier one), and two concurrent callers
///   never get the same endpoint;
/// - `record_attempt`: count the attempt, store its status, latency, outcome and next attempt,
///   and end the endpoint's claim;
/// - `disable_endpoint`: mark it disabled with `reason` at `at`, fail its pending deliveries,
///   and end its claim; answer whether it existed;
/// - `retry`: make a delivery of this endpoint pending and due at `at` (its attempts kept);
///   answer whether it exists;
/// - `backlog`: the number of pending deliveries per endpoint that has any;
/// - `any_endpoint`: whether any endpoint is stored, of any account, enabled or not;
/// - `expire_deliveries`: delete at most `limit` settled (delivered or failed) deliveries
///   enqueued before `before` (`created_at < before`), never a pending one, and answer how many
///   it deleted; with `dry_run`, delete nothing and answer how many there are (without the
///   limit);
/// - return [`WebhookError::Unavailable`] when its backing store fails.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    async fn create_endpoint(&self, endpoint: Endpoint, at_most: usize)
        -> Result<(), WebhookError>;
    async fn endpoint(&self, id: WebhookId) -> Result<Option<Endpoint>, WebhookError>;
    async fn endpoints(
        &self,
        account: AccountId,
        after: Option<WebhookId>,
        limit: usize,
    ) -> Result<Vec<Endpoint>, WebhookError>;
    async fn enabled_endpoints(&self, account: AccountId) -> Result<Vec<Endpoint>, WebhookError>;
    async fn put_endpoint(&self, endpoint: Endpoint) -> Result<bool, WebhookError>;
    async fn delete_endpoint(&self, id: WebhookId) -> Result<bool, WebhookError>;
    async fn enqueue(&self, deliveries: Vec<NewDelivery>) -> Result<usize, WebhookError>;
    async fn deliveries(
        &self,
        endpoint: WebhookId,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhookError>;
    async fn delivery(
        &self,
        endpoint: WebhookId,
        id: Uuid,
    ) -> Result<Option<Delivery>, WebhookError>;
    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: &ClaimLimit,
    ) -> Result<Vec<Claimed>, WebhookError>;
    async fn record_attempt(&self, id: Uuid, attempt: Attempt) -> Result<(), WebhookError>;
    async fn disable_endpoint(
        &self,
        id: WebhookId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError>;
    async fn retry(
        &self,
        endpoint: WebhookId,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError>;
    async fn backlog(&self) -> Result<Vec<(WebhookId, u64)>, WebhookError>;
    async fn any_endpoint(&self) -> Result<bool, WebhookError>;
    async fn expire_deliveries(
        &self,
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, WebhookError>;
}

/// What one POST of a delivery got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendResult {
    /// The endpoint answered with this status (its body read up to a small cap and discarded).
    Answered(u16),
    /// The URL's host resolved to an address deliveries may not reach (loopback, private,
    /// link-local, …), or did not resolve: nothing was sent.
    Refused(String),
    /// No answer: connection refused or reset, a time-out, TLS failure. Says why, for the log.
    Failed(String),
}

/// Makes the HTTP requests of deliveries.
///
/// An implementation MUST: POST `body` to `url` with `headers` and `content-type:
/// application/json`; not follow redirects (a `3xx` is an answer like any other); give up after
/// its connect and total time-outs ([`SendResult::Failed`]); read at most a small part of the
/// answer's body; unless told that private addresses are allowed, resolve the host at every call
/// and refuse ([`SendResult::Refused`]) when any address is loopback, private, link-local,
/// unique-local, multicast, unspecified or a cloud metadata address, and connect only to an
/// address it checked; never log the headers (they carry signatures).
#[async_trait]
pub trait WebhookSender: Send + Sync {
    async fn send(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: String,
    ) -> SendResult;
}
