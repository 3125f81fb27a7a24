//! Delivering webhooks: what the watcher commits becomes a delivery per matching endpoint
//! ([`Enqueuer`], a durable consumer of the notifications stream that acknowledges a message only
//! once its deliveries are stored), and the deliveries are POSTed, signed, in order per endpoint,
//! with retries, by [`Dispatcher`].
//!
//! Durability: a message is acknowledged on the bus after its deliveries are in the store, so a
//! crash between the two redelivers it, and its deliveries' ids ([`delivery_id`]) make the
//! second enqueue a no-op. Pending deliveries live in the store, never in this process's memory.
//!
//! Order and fairness: the store hands out an endpoint's oldest pending delivery only, and
//! claims the endpoint while it is attempted (one in flight per endpoint, across replicas); a
//! failing delivery waits for its retry and holds back its own endpoint only. Attempts of
//! different endpoints run concurrently up to [`DeliverySettings::concurrency`], so one slow
//! endpoint holds one slot, never the others, and one account's endpoints hold at most
//! [`DeliverySettings::per_account`] of them, so one tenant's slow endpoints leave slots to the
//! others (decision 177).
//!
//! Speed: the dispatcher claims when it is woken ([`super::wake`]): by a write of this process
//! that can make a delivery due, and by each settled attempt, so an endpoint's next delivery
//! follows the previous one at once; it polls the store only for what other replicas enqueue,
//! and only once an endpoint exists (decision 176).

use super::signing;
use super::wake::Wake;
use crate::ports::{
    chain, Attempt, BatchHandler, ClaimLimit, Claimed, Clock, DeliveryOutcome, Directory, EventBus,
    HandlerError, Message, NewDelivery, SendResult, Settle, WebhookSender, WebhookStore,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use swath_domain::watch::EventKind;
use swath_domain::webhook::{delivery_id, Endpoint, Topic, WebhookId, WebhookKind};
use swath_domain::{AccountId, MowerId};
use tokio::sync::{watch, Semaphore};

/// The durable consumer of the notifications stream that enqueues deliveries.
pub const WEBHOOK_CONSUMER: &str = "swath-webhooks";

/// Everything the notifications stream holds: events, alert clears.
pub const WEBHOOK_SUBJECTS: &str = "notifications.>";

/// The body of every delivery: Standard Webhooks' recommended envelope.
pub fn envelope(event_type: &str, at: DateTime<Utc>, data: Value) -> String {
    serde_json::json!({
        "type": event_type,
        "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "data": data,
    })
    .to_string()
}

/// What a notification message is, for matching: its kind, mower, account, message id (for the
/// delivery id) and instant.
struct Parsed {
    kind: WebhookKind,
    mower: MowerId,
    account: AccountId,
    message_id: String,
    at: DateTime<Utc>,
    data: Value,
}

fn parse(message: &Message) -> Option<Parsed> {
    let tokens: Vec<&str> = message.subject.split('.').collect();
    let data: Value = serde_json::from_slice(&message.payload).ok()?;
    let field = |name: &str| data.get(name).and_then(Value::as_str);
    let account: AccountId = field("account_id")?.parse().ok().map(AccountId)?;
    let (kind, mower, message_id, at) = match tokens.as_slice() {
        ["notifications", "mower", mower, kind] => {
            let kind = WebhookKind::Event(EventKind::parse(kind)?);
            let id = field("id")?.to_owned();
            (kind, *mower, id, field("observed_at")?)
        }
        ["notifications", "alert", mower, "cleared"] => {
            let at = field("cleared_at")?;
            let id = format!("alert-cleared:{mower}:{}:{at}", field("kind")?);
            (WebhookKind::AlertCleared, *mower, id, at)
        }
        _ => return None,
    };
    Some(Parsed {
        kind,
        mower: MowerId(mower.parse().ok()?),
        account,
        message_id,
        at: DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc),
        data,
    })
}

/// The notifications consumer's handler: each message becomes a delivery per matching endpoint,
/// stored before the message is acknowledged.
pub struct Enqueuer {
    store: Arc<dyn WebhookStore>,
    directory: Arc<dyn Directory>,
    clock: Arc<dyn Clock>,
}

impl Enqueuer {
    pub fn new(
        store: Arc<dyn WebhookStore>,
        directory: Arc<dyn Directory>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            directory,
            clock,
        }
    }

    /// The deliveries a batch makes, in the batch's order.
    async fn deliveries(&self, batch: &[Message]) -> Result<Vec<NewDelivery>, HandlerError> {
        let fail = |e: Box<dyn std::error::Error + Send + Sync>| HandlerError(e);
        let parsed: Vec<Parsed> = batch.iter().filter_map(parse).collect();
        let mut endpoints: HashMap<AccountId, Vec<Endpoint>> = HashMap::new();
        let mut sites = HashMap::new();
        for p in &parsed {
            if let std::collections::hash_map::Entry::Vacant(slot) = endpoints.entry(p.account) {
                let found = self
                    .store
                    .enabled_endpoints(p.account)
                    .await
                    .map_err(|e| fail(Box::new(e)))?;
                slot.insert(found);
            }
            if endpoints[&p.account].is_empty() || sites.contains_key(&p.mower) {
                continue;
            }
            let mower = self
                .directory
                .mower(p.mower)
                .await
                .map_err(|e| fail(Box::new(e)))?;
            sites.insert(p.mower, mower.map(|m| m.site_id));
        }
        let now = self.clock.now_micros();
        let mut out = Vec::new();
        for p in parsed {
            let topic = Topic {
                account_id: p.account,
                mower_id: p.mower,
                site_id: sites.get(&p.mower).copied().flatten(),
                kind: p.kind,
            };
            let body = envelope(p.kind.as_str(), p.at, p.data.clone());
            for endpoint in endpoints[&p.account].iter().filter(|e| e.matches(&topic)) {
                out.push(NewDelivery {
                    id: delivery_id(endpoint.id, &p.message_id),
                    endpoint_id: endpoint.id,
                    event_type: p.kind.as_str().to_owned(),
                    body: body.clone(),
                    created_at: now,
                });
            }
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl BatchHandler for Enqueuer {
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError> {
        let deliveries = self.deliveries(batch).await?;
        if !deliveries.is_empty() {
            let count = deliveries.len();
            self.store
                .enqueue(deliveries)
                .await
                .map_err(|e| HandlerError(Box::new(e)))?;
            metrics::counter!("swath_webhook_enqueued_total").increment(count as u64);
        }
        Ok(vec![Settle::Ack; batch.len()])
    }
}

/// How deliveries are attempted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeliverySettings {
    /// How long a delivery is retried before its endpoint is disabled
    /// (`SWATH_WEBHOOK_RETRY_HORIZON_SECONDS`).
    pub horizon: Duration,
    /// The first retry's delay; each next one doubles, up to [`DeliverySettings::max_backoff`],
    /// each drawn at random between half and all of it (jitter).
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// Attempts in flight at once, all endpoints together.
    pub concurrency: usize,
    /// Attempts in flight at once for the endpoints of one account
    /// (`SWATH_WEBHOOK_ACCOUNT_CONCURRENCY`; at most `concurrency`).
    pub per_account: usize,
    /// How long an endpoint is claimed for an attempt: longer than the sender's total time-out,
    /// so that no other replica attempts it meanwhile; a replica that dies holding a claim
    /// delays the endpoint this long.
    pub claim: Duration,
    /// How often the store is asked for due deliveries when nothing woke the dispatcher: for
    /// what other replicas enqueue, and for retries coming due. Never while no endpoint exists.
    pub poll: Duration,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            horizon: Duration::from_secs(24 * 3600),
            first_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(3600),
            concurrency: 16,
            per_account: 4,
            claim: Duration::from_secs(60),
            poll: Duration::from_millis(250),
        }
    }
}

/// The delay before retry number `attempts` (1 after the first failure): exponential, capped,
/// with jitter drawn from `unit` in `[0, 1)`.
pub fn backoff(settings: &DeliverySettings, attempts: u32, unit: f64) -> Duration {
    let doubled = settings
        .first_backoff
        .saturating_mul(2u32.saturating_pow(attempts.saturating_sub(1).min(30)));
    let capped = doubled.min(settings.max_backoff);
    capped.mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0))
}

/// The subject an endpoint's disabling is told on (the notifications stream, outside the
/// events' subjects).
pub fn disabled_subject(endpoint: WebhookId) -> String {
    format!("notifications.webhook.{endpoint}.disabled")
}

/// Attempts due deliveries.
pub struct Dispatcher {
    store: Arc<dyn WebhookStore>,
    sender: Arc<dyn WebhookSender>,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
    settings: DeliverySettings,
    slots: Arc<Semaphore>,
    /// Attempts in flight per account.
    busy: Mutex<HashMap<AccountId, usize>>,
    wake: Wake,
}

impl Dispatcher {
    pub fn new(
        store: Arc<dyn WebhookStore>,
        sender: Arc<dyn WebhookSender>,
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
        settings: DeliverySettings,
    ) -> Self {
        Self {
            store,
            sender,
            bus,
            clock,
            slots: Arc::new(Semaphore::new(settings.concurrency.max(1))),
            settings,
            busy: Mutex::new(HashMap::new()),
            wake: Wake::default(),
        }
    }

    /// Wakes on `wake`, the signal this process's [`super::wake::WakingStore`] gives.
    pub fn waking_on(mut self, wake: Wake) -> Self {
        self.wake = wake;
        self
    }

    /// Runs until `stop` turns `true`: claims due deliveries for the free slots whenever woken
    /// (and every [`DeliverySettings::poll`] once an endpoint exists) and attempts each in a
    /// task of its own.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        // A replica that has never seen an endpoint asks the store nothing until a write of
        // this process wakes it: with no webhooks, no work.
        let mut polling = match self.store.any_endpoint().await {
            Ok(any) => any,
            Err(e) => {
                tracing::warn!(error = %chain(&e), "Could not tell whether webhook endpoints exist; polling for deliveries.");
                true
            }
        };
        loop {
            if *stop.borrow() {
                return;
            }
            if polling {
                self.round().await;
            }
            let poll = async {
                if polling {
                    tokio::time::sleep(self.settings.poll).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = self.wake.woken() => polling = true,
                _ = poll => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// What the next claim may take: the free slots, and per account its share less what it
    /// has in flight.
    fn limit(&self) -> ClaimLimit {
        ClaimLimit {
            total: self.slots.available_permits(),
            per_account: self
                .settings
                .per_account
                .clamp(1, self.settings.concurrency.max(1)),
            busy: self.busy.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    fn count(&self, account: AccountId, started: bool) {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let n = busy.entry(account).or_default();
        if started {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                busy.remove(&account);
            }
        }
    }

    /// One round: claims as many due deliveries as there are free slots (within each account's
    /// share) and starts their attempts; answers how many it started.
    pub async fn round(self: &Arc<Self>) -> usize {
        let limit = self.limit();
        if limit.total == 0 {
            return 0;
        }
        let now = self.clock.now();
        let until =
            now + chrono::Duration::from_std(self.settings.claim).unwrap_or(chrono::Duration::MAX);
        let claimed = match self.store.claim_due(now, until, &limit).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %chain(&e), "Could not claim due webhook deliveries.");
                return 0;
            }
        };
        let count = claimed.len();
        for claim in claimed {
            let Ok(permit) = Arc::clone(&self.slots).acquire_owned().await else {
                return count;
            };
            let account = claim.endpoint.account_id;
            self.count(account, true);
            let this = Arc::clone(self);
            tokio::spawn(async move {
                this.attempt(claim).await;
                this.count(account, false);
                drop(permit);
                // The endpoint's next delivery, if any, is due now: claim it at once.
                this.wake.wake();
            });
        }
        count
    }

    /// Attempts one claimed delivery and records what happened.
    pub async fn attempt(&self, claim: Claimed) {
        let Claimed { endpoint, delivery } = claim;
        let now = self.clock.now();
        let secrets = endpoint.signing_secrets(now);
        let headers = match signing::sign(
            &delivery.id.to_string(),
            now,
            delivery.body.as_bytes(),
            &secrets,
        ) {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(webhook_id = %endpoint.id, error = %e, "Could not sign a webhook delivery.");
                return;
            }
        };
        let started = Instant::now();
        let result = self
            .sender
            .send(&endpoint.url, headers.pairs(), delivery.body.clone())
            .await;
        let elapsed = started.elapsed();
        metrics::histogram!("swath_webhook_attempt_seconds").record(elapsed.as_secs_f64());
        let latency_ms = u32::try_from(elapsed.as_millis()).unwrap_or(u32::MAX);
        let done = self.clock.now();
        use SendResult::{Answered, Failed, Refused};
        let (status, label) = match &result {
            Answered(code) if (200..300).contains(code) => (Some(*code), "delivered"),
            Answered(410) => (Some(410), "gone"),
            Answered(code) => (Some(*code), "failed"),
            Refused(_) => (None, "refused"),
            Failed(_) => (None, "failed"),
        };
        metrics::counter!("swath_webhook_deliveries_total", "outcome" => label).increment(1);
        let mut disable = None;
        let attempt = match label {
            "delivered" => Attempt {
                status,
                latency_ms,
                outcome: DeliveryOutcome::Delivered,
                next_attempt_at: None,
            },
            "gone" => {
                disable = Some("The endpoint answered 410 Gone.".to_owned());
                Attempt {
                    status,
                    latency_ms,
                    outcome: DeliveryOutcome::Failed,
                    next_attempt_at: None,
                }
            }
            _ => {
                let delay = backoff(&self.settings, delivery.attempts + 1, rand::random());
                let next =
                    done + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
                let horizon = delivery.created_at
                    + chrono::Duration::from_std(self.settings.horizon)
                        .unwrap_or(chrono::Duration::MAX);
                if let Refused(why) | Failed(why) = &result {
                    tracing::info!(webhook_id = %endpoint.id, delivery_id = %delivery.id, reason = %why, "A webhook delivery got no answer.");
                }
                if next > horizon {
                    disable = Some(format!(
                        "Deliveries failed for longer than the retry horizon ({} s).",
                        self.settings.horizon.as_secs()
                    ));
                    Attempt {
                        status,
                        latency_ms,
                        outcome: DeliveryOutcome::Failed,
                        next_attempt_at: None,
                    }
                } else {
                    Attempt {
                        status,
                        latency_ms,
                        outcome: DeliveryOutcome::Pending,
                        next_attempt_at: Some(next),
                    }
                }
            }
        };
        if let Err(e) = self.store.record_attempt(delivery.id, attempt).await {
            tracing::warn!(error = %chain(&e), "Could not record a webhook attempt; it will be made again.");
            return;
        }
        if let Some(reason) = disable {
            self.disable(&endpoint, &reason, done).await;
        }
    }

    /// Disables the endpoint, says why in its resource, and tells it on the bus.
    async fn disable(&self, endpoint: &Endpoint, reason: &str, at: DateTime<Utc>) {
        match self.store.disable_endpoint(endpoint.id, reason, at).await {
            Ok(_) => {
                tracing::warn!(webhook_id = %endpoint.id, account_id = %endpoint.account_id, reason, "Disabled a webhook endpoint.");
                metrics::counter!("swath_webhook_endpoints_disabled_total").increment(1);
            }
            Err(e) => {
                tracing::warn!(error = %chain(&e), "Could not disable a webhook endpoint.");
                return;
            }
        }
        let told = serde_json::json!({
            "webhook_id": endpoint.id,
            "account_id": endpoint.account_id,
            "reason": reason,
            "disabled_at": at,
        });
        if let Err(e) = self
            .bus
            .publish(
                &disabled_subject(endpoint.id),
                told.to_string().into(),
                Some(format!(
                    "webhook-disabled:{}:{}",
                    endpoint.id,
                    at.timestamp_micros()
                )),
            )
            .await
        {
            tracing::warn!(error = %chain(&e), "Could not tell that a webhook endpoint was disabled.");
        }
    }
}
