//! `WebhookStore` in memory: endpoints by id, and each endpoint's queue of deliveries in `seq`
//! order, with the endpoint's claim beside it. One lock: every operation is a few map steps.
//!
//! Bounded like every memory adapter (decision 6): an endpoint keeps at most
//! [`SETTLED_PER_ENDPOINT`] settled deliveries (delivered or failed), the oldest going first;
//! pending ones are never dropped.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use swath_application::ports::{
    Attempt, ClaimLimit, Claimed, Delivery, DeliveryOutcome, NewDelivery, WebhookError,
    WebhookStore,
};
use swath_domain::webhook::{Endpoint, WebhookId};
use swath_domain::AccountId;
use uuid::Uuid;

/// Settled deliveries an endpoint keeps by default, newest first: a page of the deliveries'
/// listing many times over.
pub const SETTLED_PER_ENDPOINT: usize = 1_000;

#[derive(Default)]
struct Data {
    /// In id order, the listing order.
    endpoints: BTreeMap<WebhookId, Held>,
    /// Where each delivery is: its endpoint and `seq`.
    index: HashMap<Uuid, (WebhookId, i64)>,
    next_seq: i64,
}

struct Held {
    endpoint: Endpoint,
    deliveries: BTreeMap<i64, Delivery>,
    claimed_until: Option<DateTime<Utc>>,
}

impl Data {
    /// Drops the endpoint's oldest settled deliveries past `cap`.
    fn trim(&mut self, endpoint: WebhookId, cap: usize) {
        let Some(held) = self.endpoints.get_mut(&endpoint) else {
            return;
        };
        let settled: Vec<i64> = held
            .deliveries
            .values()
            .filter(|d| d.outcome != DeliveryOutcome::Pending)
            .map(|d| d.seq)
            .collect();
        for seq in settled.iter().take(settled.len().saturating_sub(cap)) {
            if let Some(d) = held.deliveries.remove(seq) {
                self.index.remove(&d.id);
            }
        }
    }
}

/// The in-memory webhook store. Cheap to clone (shared state).
#[derive(Clone)]
pub struct MemoryWebhooks {
    data: Arc<Mutex<Data>>,
    settled_cap: usize,
}

impl Default for MemoryWebhooks {
    fn default() -> Self {
        Self::with_settled_cap(SETTLED_PER_ENDPOINT)
    }
}

impl MemoryWebhooks {
    /// A store whose endpoints keep at most `cap` settled deliveries each.
    pub fn with_settled_cap(cap: usize) -> Self {
        Self {
            data: Arc::default(),
            settled_cap: cap,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl WebhookStore for MemoryWebhooks {
    async fn create_endpoint(
        &self,
        endpoint: Endpoint,
        at_most: usize,
    ) -> Result<(), WebhookError> {
        let mut data = self.lock();
        // In PostgreSQL's order: the account's count, then the id.
        let held = data
            .endpoints
            .values()
            .filter(|h| h.endpoint.account_id == endpoint.account_id)
            .count();
        if held >= at_most {
            return Err(WebhookError::AccountFull);
        }
        if data.endpoints.contains_key(&endpoint.id) {
            return Err(WebhookError::Conflict);
        }
        data.endpoints.insert(
            endpoint.id,
            Held {
                endpoint,
                deliveries: BTreeMap::new(),
                claimed_until: None,
            },
        );
        Ok(())
    }

    async fn endpoint(&self, id: WebhookId) -> Result<Option<Endpoint>, WebhookError> {
        Ok(self.lock().endpoints.get(&id).map(|h| h.endpoint.clone()))
    }

    async fn endpoints(
        &self,
        account: AccountId,
        after: Option<WebhookId>,
        limit: usize,
    ) -> Result<Vec<Endpoint>, WebhookError> {
        let data = self.lock();
        Ok(data
            .endpoints
            .values()
            .map(|h| &h.endpoint)
            .filter(|e| e.account_id == account && after.is_none_or(|a| e.id > a))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn enabled_endpoints(&self, account: AccountId) -> Result<Vec<Endpoint>, WebhookError> {
        let data = self.lock();
        Ok(data
            .endpoints
            .values()
            .map(|h| &h.endpoint)
            .filter(|e| e.account_id == account && e.enabled)
            .cloned()
            .collect())
    }

    async fn put_endpoint(&self, endpoint: Endpoint) -> Result<bool, WebhookError> {
        let mut data = self.lock();
        match data.endpoints.get_mut(&endpoint.id) {
            Some(held) => {
                let created_at = held.endpoint.created_at;
                held.endpoint = Endpoint {
                    created_at,
                    account_id: held.endpoint.account_id,
                    ..endpoint
                };
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn delete_endpoint(&self, id: WebhookId) -> Result<bool, WebhookError> {
        let mut data = self.lock();
        match data.endpoints.remove(&id) {
            Some(held) => {
                for d in held.deliveries.values() {
                    data.index.remove(&d.id);
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn enqueue(&self, deliveries: Vec<NewDelivery>) -> Result<usize, WebhookError> {
        let mut data = self.lock();
        let mut new = 0;
        for d in deliveries {
            if data.index.contains_key(&d.id) || !data.endpoints.contains_key(&d.endpoint_id) {
                continue;
            }
            data.next_seq += 1;
            let seq = data.next_seq;
            data.index.insert(d.id, (d.endpoint_id, seq));
            let held = data
                .endpoints
                .get_mut(&d.endpoint_id)
                .expect("checked above");
            held.deliveries.insert(
                seq,
                Delivery {
                    id: d.id,
                    endpoint_id: d.endpoint_id,
                    seq,
                    event_type: d.event_type,
                    body: d.body,
                    created_at: d.created_at,
                    attempts: 0,
                    last_status: None,
                    last_latency_ms: None,
                    next_attempt_at: Some(d.created_at),
                    outcome: DeliveryOutcome::Pending,
                },
            );
            new += 1;
        }
        Ok(new)
    }

    async fn deliveries(
        &self,
        endpoint: WebhookId,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhookError> {
        let data = self.lock();
        Ok(data
            .endpoints
            .get(&endpoint)
            .map(|h| {
                h.deliveries
                    .range(..before.unwrap_or(i64::MAX))
                    .rev()
                    .take(limit)
                    .map(|(_, d)| d.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn delivery(
        &self,
        endpoint: WebhookId,
        id: Uuid,
    ) -> Result<Option<Delivery>, WebhookError> {
        let data = self.lock();
        Ok(match data.index.get(&id) {
            Some((e, seq)) if *e == endpoint => data
                .endpoints
                .get(e)
                .and_then(|h| h.deliveries.get(seq))
                .cloned(),
            _ => None,
        })
    }

    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: &ClaimLimit,
    ) -> Result<Vec<Claimed>, WebhookError> {
        let mut data = self.lock();
        // Each due endpoint's rank within its account (endpoint id order), as the contract
        // takes them: every account's first before any account's second.
        let mut ranks: HashMap<AccountId, usize> = HashMap::new();
        let mut due: Vec<(usize, WebhookId)> = Vec::new();
        for held in data.endpoints.values() {
            if !held.endpoint.enabled || held.claimed_until.is_some_and(|c| c >= now) {
                continue;
            }
            let head = held
                .deliveries
                .values()
                .find(|d| d.outcome == DeliveryOutcome::Pending);
            if head.is_some_and(|d| d.next_attempt_at.is_none_or(|at| at <= now)) {
                let account = held.endpoint.account_id;
                let rank = ranks.entry(account).or_default();
                if *rank < limit.room(account) {
                    due.push((*rank, held.endpoint.id));
                }
                *rank += 1;
            }
        }
        due.sort_unstable();
        let mut claimed = Vec::new();
        for (_, id) in due.into_iter().take(limit.total) {
            let held = data.endpoints.get_mut(&id).expect("found above");
            let head = held
                .deliveries
                .values()
                .find(|d| d.outcome == DeliveryOutcome::Pending)
                .cloned()
                .expect("found above");
            held.claimed_until = Some(until);
            claimed.push(Claimed {
                endpoint: held.endpoint.clone(),
                delivery: head,
            });
        }
        Ok(claimed)
    }

    async fn record_attempt(&self, id: Uuid, attempt: Attempt) -> Result<(), WebhookError> {
        let mut data = self.lock();
        let Some((endpoint, seq)) = data.index.get(&id).copied() else {
            return Ok(());
        };
        if let Some(held) = data.endpoints.get_mut(&endpoint) {
            held.claimed_until = None;
            if let Some(d) = held.deliveries.get_mut(&seq) {
                d.attempts += 1;
                d.last_status = attempt.status;
                d.last_latency_ms = Some(attempt.latency_ms);
                d.outcome = attempt.outcome;
                d.next_attempt_at = attempt.next_attempt_at;
            }
        }
        data.trim(endpoint, self.settled_cap);
        Ok(())
    }

    async fn disable_endpoint(
        &self,
        id: WebhookId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError> {
        let mut data = self.lock();
        let Some(held) = data.endpoints.get_mut(&id) else {
            return Ok(false);
        };
        held.endpoint.enabled = false;
        held.endpoint.disabled_reason = Some(reason.to_owned());
        held.endpoint.updated_at = at;
        held.claimed_until = None;
        for d in held.deliveries.values_mut() {
            if d.outcome == DeliveryOutcome::Pending {
                d.outcome = DeliveryOutcome::Failed;
                d.next_attempt_at = None;
            }
        }
        data.trim(id, self.settled_cap);
        Ok(true)
    }

    async fn retry(
        &self,
        endpoint: WebhookId,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError> {
        let mut data = self.lock();
        let Some((e, seq)) = data.index.get(&id).copied() else {
            return Ok(false);
        };
        if e != endpoint {
            return Ok(false);
        }
        match data
            .endpoints
            .get_mut(&e)
            .and_then(|h| h.deliveries.get_mut(&seq))
        {
            Some(d) => {
                d.outcome = DeliveryOutcome::Pending;
                d.next_attempt_at = Some(at);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn backlog(&self) -> Result<Vec<(WebhookId, u64)>, WebhookError> {
        let data = self.lock();
        Ok(data
            .endpoints
            .iter()
            .filter_map(|(id, h)| {
                let n = h
                    .deliveries
                    .values()
                    .filter(|d| d.outcome == DeliveryOutcome::Pending)
                    .count() as u64;
                (n > 0).then_some((*id, n))
            })
            .collect())
    }

    async fn any_endpoint(&self) -> Result<bool, WebhookError> {
        Ok(!self.lock().endpoints.is_empty())
    }

    async fn expire_deliveries(
        &self,
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, WebhookError> {
        let mut data = self.lock();
        let old: Vec<(WebhookId, i64, Uuid)> = data
            .endpoints
            .values()
            .flat_map(|h| h.deliveries.values())
            .filter(|d| d.outcome != DeliveryOutcome::Pending && d.created_at < before)
            .map(|d| (d.endpoint_id, d.seq, d.id))
            .collect();
        if dry_run {
            return Ok(old.len() as u64);
        }
        let mut deleted = 0;
        for (endpoint, seq, id) in old.into_iter().take(limit.try_into().unwrap_or(usize::MAX)) {
            if let Some(held) = data.endpoints.get_mut(&endpoint) {
                held.deliveries.remove(&seq);
            }
            data.index.remove(&id);
            deleted += 1;
        }
        Ok(deleted)
    }
}
