//! Waking the [`Dispatcher`](super::delivery::Dispatcher) when there is something to deliver,
//! instead of polling the store for it (issue 42, item 12).
//!
//! [`Wake`] is the signal; [`WakingStore`] is the webhook store as every writer of this process
//! sees it: it gives the signal after each write that can make a delivery due (a delivery
//! enqueued, an endpoint created or updated, a delivery retried). The dispatcher also wakes
//! itself when an attempt is settled, so that an endpoint's next delivery is sent at once.
//! Writes made by another replica wake nobody here: the dispatcher polls for those, but only
//! once it knows an endpoint exists (decision 176).

use crate::ports::{
    Attempt, ClaimLimit, Claimed, Delivery, NewDelivery, WebhookError, WebhookStore,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use swath_domain::webhook::{Endpoint, WebhookId};
use swath_domain::AccountId;
use tokio::sync::Notify;
use uuid::Uuid;

/// Tells the dispatcher of this process that a delivery may be due. Cheap to clone (shared).
/// Signals given while the dispatcher is busy are kept as one: its next wait returns at once.
#[derive(Clone, Debug, Default)]
pub struct Wake(Arc<Notify>);

impl Wake {
    /// Wakes the dispatcher (or its next wait).
    pub fn wake(&self) {
        self.0.notify_one();
    }

    /// Waits for the next signal (or returns at once for one given since the last wait).
    pub async fn woken(&self) {
        self.0.notified().await;
    }
}

/// A webhook store that gives [`Wake`] after every write that can make a delivery due.
pub struct WakingStore {
    inner: Arc<dyn WebhookStore>,
    wake: Wake,
}

impl WakingStore {
    pub fn wrap(inner: Arc<dyn WebhookStore>, wake: Wake) -> Arc<dyn WebhookStore> {
        Arc::new(Self { inner, wake })
    }

    /// Wakes when `result` is a success, answering it.
    fn waking<T>(&self, result: Result<T, WebhookError>) -> Result<T, WebhookError> {
        if result.is_ok() {
            self.wake.wake();
        }
        result
    }
}

#[async_trait]
impl WebhookStore for WakingStore {
    async fn create_endpoint(
        &self,
        endpoint: Endpoint,
        at_most: usize,
    ) -> Result<(), WebhookError> {
        let done = self.inner.create_endpoint(endpoint, at_most).await;
        self.waking(done)
    }

    async fn endpoint(&self, id: WebhookId) -> Result<Option<Endpoint>, WebhookError> {
        self.inner.endpoint(id).await
    }

    async fn endpoints(
        &self,
        account: AccountId,
        after: Option<WebhookId>,
        limit: usize,
    ) -> Result<Vec<Endpoint>, WebhookError> {
        self.inner.endpoints(account, after, limit).await
    }

    async fn enabled_endpoints(&self, account: AccountId) -> Result<Vec<Endpoint>, WebhookError> {
        self.inner.enabled_endpoints(account).await
    }

    async fn put_endpoint(&self, endpoint: Endpoint) -> Result<bool, WebhookError> {
        // Re-enabling an endpoint makes its pending deliveries due again.
        let done = self.inner.put_endpoint(endpoint).await;
        self.waking(done)
    }

    async fn delete_endpoint(&self, id: WebhookId) -> Result<bool, WebhookError> {
        self.inner.delete_endpoint(id).await
    }

    async fn enqueue(&self, deliveries: Vec<NewDelivery>) -> Result<usize, WebhookError> {
        let new = self.inner.enqueue(deliveries).await?;
        if new > 0 {
            self.wake.wake();
        }
        Ok(new)
    }

    async fn deliveries(
        &self,
        endpoint: WebhookId,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhookError> {
        self.inner.deliveries(endpoint, before, limit).await
    }

    async fn delivery(
        &self,
        endpoint: WebhookId,
        id: Uuid,
    ) -> Result<Option<Delivery>, WebhookError> {
        self.inner.delivery(endpoint, id).await
    }

    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: &ClaimLimit,
    ) -> Result<Vec<Claimed>, WebhookError> {
        self.inner.claim_due(now, until, limit).await
    }

    async fn record_attempt(&self, id: Uuid, attempt: Attempt) -> Result<(), WebhookError> {
        self.inner.record_attempt(id, attempt).await
    }

    async fn disable_endpoint(
        &self,
        id: WebhookId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError> {
        self.inner.disable_endpoint(id, reason, at).await
    }

    async fn retry(
        &self,
        endpoint: WebhookId,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> Result<bool, WebhookError> {
        let done = self.inner.retry(endpoint, id, at).await;
        self.waking(done)
    }

    async fn backlog(&self) -> Result<Vec<(WebhookId, u64)>, WebhookError> {
        self.inner.backlog().await
    }

    async fn any_endpoint(&self) -> Result<bool, WebhookError> {
        self.inner.any_endpoint().await
    }

    async fn expire_deliveries(
        &self,
        before: DateTime<Utc>,
        limit: u64,
        dry_run: bool,
    ) -> Result<u64, WebhookError> {
        self.inner.expire_deliveries(before, limit, dry_run).await
    }
}
