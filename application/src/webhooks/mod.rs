//! Webhooks (issue 31): the endpoints an account's admins register (`/v1/webhooks`), their
//! signing secrets, and the log of deliveries; the delivery itself is in [`delivery`].
//!
//! The rules every route goes through: the caller needs the `admin` scope; an endpoint belongs to
//! the caller's account and is visible only to principals of that account that see every site
//! and every mower it names (a principal limited to sites sees only endpoints limited to some of
//! its sites whose mowers are all on its sites, also after a mower moved, and creates only such
//! endpoints); every mower and site an endpoint names must be visible to the caller. Another
//! account's endpoint, or one not visible, is answered as absent. An account has at most
//! [`WebhookLimits::per_account`] endpoints, and an endpoint gets at most
//! [`WebhookLimits::tests_per_minute`] test messages a minute (decision 179).

pub mod delivery;
mod endpoint_url;
pub mod signing;
pub mod wake;

pub use endpoint_url::{check_url, MAX_URL_CHARS};

use crate::ports::{Clock, Delivery, NewDelivery, WebhookError, WebhookStore};
use crate::rate_limit::RateLimit;
use crate::visibility::{invisible_ids, Access, AccessError};
use chrono::Duration;
use std::collections::HashSet;
use std::sync::Arc;
use swath_domain::webhook::{delivery_id, Endpoint, Secret, WebhookId, WebhookKind};
use swath_domain::{MowerId, Principal, Scope, SiteId};
use uuid::Uuid;

/// How long a rotated-out secret still signs: receivers have this long to switch.
pub const SECRET_GRACE: Duration = Duration::hours(24);

/// How much of the service an account's endpoints may take (decision 179).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebhookLimits {
    /// The most endpoints an account has (`SWATH_WEBHOOKS_PER_ACCOUNT`).
    pub per_account: usize,
    /// The most test messages an endpoint is sent per minute, on each replica
    /// (`SWATH_WEBHOOK_TESTS_PER_MINUTE`).
    pub tests_per_minute: usize,
}

impl Default for WebhookLimits {
    fn default() -> Self {
        Self {
            per_account: 50,
            tests_per_minute: 5,
        }
    }
}

/// Why a webhook request was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebhooksError {
    /// The caller lacks the `admin` scope.
    #[error("the webhooks need the admin scope")]
    Forbidden(String),
    /// No such endpoint (or delivery) visible to the caller.
    #[error("no such webhook visible to this principal")]
    NotFound,
    /// The request names something invalid: `(JSON pointer, message)` for each problem.
    #[error("invalid webhook: {0:?}")]
    Invalid(Vec<(String, String)>),
    /// The account has this many endpoints already, the most it may have.
    #[error("the account has {0} webhook endpoints, the most it may have")]
    TooManyEndpoints(usize),
    /// The endpoint was sent as many test messages as it may be in the last minute; the next
    /// is allowed after this many seconds.
    #[error("too many test messages for this webhook; the next in {retry_after_seconds} s")]
    TooManyTests { retry_after_seconds: u64 },
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error(transparent)]
    Store(#[from] WebhookError),
}

/// What an endpoint is asked to be (creation), or becomes (an update applied).
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointSpec {
    pub url: String,
    pub kinds: Vec<WebhookKind>,
    pub mowers: Option<Vec<MowerId>>,
    pub sites: Option<Vec<SiteId>>,
    pub enabled: bool,
}

/// A partial update: `None` leaves a field as it is; `Some(None)` lifts a filter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub kinds: Option<Vec<WebhookKind>>,
    pub mowers: Option<Option<Vec<MowerId>>>,
    pub sites: Option<Option<Vec<SiteId>>>,
    pub enabled: Option<bool>,
}

/// The webhooks use case of the API.
#[derive(Clone)]
pub struct Webhooks {
    store: Arc<dyn WebhookStore>,
    access: Access,
    clock: Arc<dyn Clock>,
    /// Whether plain `http` URLs are accepted (`SWATH_WEBHOOK_ALLOW_PRIVATE`).
    allow_http: bool,
    limits: WebhookLimits,
    /// The test messages of each endpoint in the last minute.
    tests: Arc<RateLimit<WebhookId>>,
}

/// A new signing secret: [`swath_domain::webhook::SECRET_PREFIX`] and the base64 of 24 random
/// bytes (the key size Standard Webhooks' libraries generate).
pub fn generate_secret() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = [0u8; 24];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!(
        "{}{}",
        swath_domain::webhook::SECRET_PREFIX,
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// The limit of test messages of `limits`: per endpoint, per minute.
fn test_limit(limits: WebhookLimits) -> RateLimit<WebhookId> {
    RateLimit::new(limits.tests_per_minute, Duration::minutes(1))
}

impl Webhooks {
    pub fn new(
        store: Arc<dyn WebhookStore>,
        access: Access,
        clock: Arc<dyn Clock>,
        allow_http: bool,
    ) -> Self {
        let limits = WebhookLimits::default();
        Self {
            store,
            access,
            clock,
            allow_http,
            limits,
            tests: Arc::new(test_limit(limits)),
        }
    }

    /// The same use case with other limits.
    pub fn with_limits(mut self, limits: WebhookLimits) -> Self {
        self.limits = limits;
        self.tests = Arc::new(test_limit(limits));
        self
    }

    /// Now, to the microsecond: what the stores keep (decision 1), so that an answer made from
    /// the endpoint in hand equals the endpoint read back later.
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now_micros()
    }

    fn admin(principal: &Principal) -> Result<(), WebhooksError> {
        if principal.has_scope(Scope::Admin) {
            Ok(())
        } else {
            Err(WebhooksError::Forbidden(
                "The webhooks need a token with the `admin` scope.".to_owned(),
            ))
        }
    }

    /// The `endpoints` `principal` sees: of its account, and, for a principal limited to
    /// sites, limited to some of its sites with every mower they name visible to it now (a
    /// mower moved to another site hides the endpoint). Whether a mower is visible is read
    /// from the directory, once for all the endpoints. A principal of every site sees every
    /// endpoint of its account, also one naming a mower deleted since: someone must be able to
    /// manage it, and it shows nothing of another account.
    async fn visible(
        &self,
        principal: &Principal,
        mut endpoints: Vec<Endpoint>,
    ) -> Result<Vec<Endpoint>, WebhooksError> {
        endpoints.retain(|e| e.account_id == principal.account_id);
        let Some(theirs) = &principal.sites else {
            return Ok(endpoints);
        };
        endpoints.retain(|e| {
            e.sites
                .as_ref()
                .is_some_and(|ours| ours.iter().all(|s| theirs.contains(s)))
        });
        let named: Vec<MowerId> = endpoints
            .iter()
            .flat_map(|e| e.mowers.iter().flatten().copied())
            .collect();
        let hidden: HashSet<MowerId> = self
            .access
            .invisible_mowers(principal, &named)
            .await?
            .into_iter()
            .map(|i| named[i])
            .collect();
        endpoints.retain(|e| !e.mowers.iter().flatten().any(|m| hidden.contains(m)));
        Ok(endpoints)
    }

    /// The endpoint `id` if `principal` may manage it.
    pub async fn get(
        &self,
        principal: &Principal,
        id: WebhookId,
    ) -> Result<Endpoint, WebhooksError> {
        Self::admin(principal)?;
        let stored = self.store.endpoint(id).await?.into_iter().collect();
        self.visible(principal, stored)
            .await?
            .pop()
            .ok_or(WebhooksError::NotFound)
    }

    /// Checks a spec against the rules, every problem at once, and answers it normalised
    /// (kinds, mowers and sites sorted and deduplicated).
    async fn checked(
        &self,
        principal: &Principal,
        mut spec: EndpointSpec,
    ) -> Result<EndpointSpec, WebhooksError> {
        let mut problems = Vec::new();
        match check_url(&spec.url, self.allow_http) {
            Ok(normal) => spec.url = normal,
            Err(message) => problems.push(("/url".to_owned(), message)),
        }
        spec.kinds.sort();
        spec.kinds.dedup();
        if spec.kinds.is_empty() {
            problems.push((
                "/kinds".to_owned(),
                "`/kinds` must name at least one kind.".to_owned(),
            ));
        }
        if let Some(mowers) = &mut spec.mowers {
            if mowers.is_empty() {
                problems.push((
                    "/mowers".to_owned(),
                    "`/mowers` must name at least one mower, or be absent for every mower."
                        .to_owned(),
                ));
            }
            let bad = self.access.invisible_mowers(principal, mowers).await?;
            problems.extend(invisible_ids("/mowers", mowers, &bad, "mower"));
            mowers.sort();
            mowers.dedup();
        }
        match &mut spec.sites {
            None if principal.sites.is_some() => problems.push((
                "/sites".to_owned(),
                "A token limited to sites must limit the webhook to some of its sites.".to_owned(),
            )),
            None => {}
            Some(sites) => {
                if sites.is_empty() {
                    problems.push((
                        "/sites".to_owned(),
                        "`/sites` must name at least one site, or be absent for every site."
                            .to_owned(),
                    ));
                }
                let bad = self.access.invisible_sites(principal, sites).await?;
                problems.extend(invisible_ids("/sites", sites, &bad, "site"));
                sites.sort();
                sites.dedup();
            }
        }
        if problems.is_empty() {
            Ok(spec)
        } else {
            Err(WebhooksError::Invalid(problems))
        }
    }

    /// Creates an endpoint of the caller's account, unless it has [`WebhookLimits::per_account`]
    /// already; answers it and its secret (the only time the secret is answered).
    pub async fn create(
        &self,
        principal: &Principal,
        spec: EndpointSpec,
    ) -> Result<(Endpoint, String), WebhooksError> {
        Self::admin(principal)?;
        let spec = self.checked(principal, spec).await?;
        let now = self.now();
        let secret = generate_secret();
        let endpoint = Endpoint {
            id: WebhookId::new(),
            account_id: principal.account_id,
            url: spec.url,
            kinds: spec.kinds,
            mowers: spec.mowers,
            sites: spec.sites,
            enabled: spec.enabled,
            disabled_reason: None,
            secrets: vec![Secret {
                value: secret.clone(),
                expires_at: None,
            }],
            created_at: now,
            updated_at: now,
        };
        let at_most = self.limits.per_account;
        match self.store.create_endpoint(endpoint.clone(), at_most).await {
            Ok(()) => {}
            Err(WebhookError::AccountFull) => return Err(WebhooksError::TooManyEndpoints(at_most)),
            Err(other) => return Err(other.into()),
        }
        tracing::info!(webhook_id = %endpoint.id, account_id = %endpoint.account_id, "Created a webhook endpoint.");
        Ok((endpoint, secret))
    }

    /// The caller's visible endpoints in id order, strictly after `after`, at most `limit`.
    pub async fn list(
        &self,
        principal: &Principal,
        after: Option<WebhookId>,
        limit: usize,
    ) -> Result<Vec<Endpoint>, WebhooksError> {
        Self::admin(principal)?;
        // Filtered after the read: a page may come back short, never with a foreign endpoint;
        // the cursor still advances past what was read.
        let mut after = after;
        let mut seen = Vec::new();
        loop {
            let rows = self
                .store
                .endpoints(principal.account_id, after, limit)
                .await?;
            let full = rows.len() == limit;
            after = rows.last().map(|e| e.id);
            seen.extend(self.visible(principal, rows).await?);
            if !full || seen.len() >= limit {
                seen.truncate(limit);
                return Ok(seen);
            }
        }
    }

    /// Applies `patch` to the endpoint; re-enabling it clears the reason Swath disabled it.
    pub async fn update(
        &self,
        principal: &Principal,
        id: WebhookId,
        patch: EndpointPatch,
    ) -> Result<Endpoint, WebhooksError> {
        let mut endpoint = self.get(principal, id).await?;
        let spec = EndpointSpec {
            url: patch.url.unwrap_or(endpoint.url.clone()),
            kinds: patch.kinds.unwrap_or(endpoint.kinds.clone()),
            mowers: patch.mowers.unwrap_or(endpoint.mowers.clone()),
            sites: patch.sites.unwrap_or(endpoint.sites.clone()),
            enabled: patch.enabled.unwrap_or(endpoint.enabled),
        };
        let spec = self.checked(principal, spec).await?;
        if spec.enabled {
            endpoint.disabled_reason = None;
        }
        endpoint.url = spec.url;
        endpoint.kinds = spec.kinds;
        endpoint.mowers = spec.mowers;
        endpoint.sites = spec.sites;
        endpoint.enabled = spec.enabled;
        endpoint.updated_at = self.now();
        if !self.store.put_endpoint(endpoint.clone()).await? {
            return Err(WebhooksError::NotFound);
        }
        Ok(endpoint)
    }

    /// Deletes the endpoint and its deliveries.
    pub async fn delete(&self, principal: &Principal, id: WebhookId) -> Result<(), WebhooksError> {
        let endpoint = self.get(principal, id).await?;
        if !self.store.delete_endpoint(endpoint.id).await? {
            return Err(WebhooksError::NotFound);
        }
        tracing::info!(webhook_id = %id, account_id = %endpoint.account_id, "Deleted a webhook endpoint.");
        Ok(())
    }

    /// A new current secret; the previous one signs too for [`SECRET_GRACE`]. Answers the
    /// endpoint and the new secret (the only time it is answered).
    pub async fn rotate_secret(
        &self,
        principal: &Principal,
        id: WebhookId,
    ) -> Result<(Endpoint, String), WebhooksError> {
        let mut endpoint = self.get(principal, id).await?;
        let now = self.now();
        let secret = generate_secret();
        endpoint.rotate(secret.clone(), now, now + SECRET_GRACE);
        if !self.store.put_endpoint(endpoint.clone()).await? {
            return Err(WebhooksError::NotFound);
        }
        tracing::info!(webhook_id = %id, "Rotated a webhook endpoint's secret.");
        Ok((endpoint, secret))
    }

    /// The endpoint's deliveries, newest first, strictly before `before` (a `seq`).
    pub async fn deliveries(
        &self,
        principal: &Principal,
        id: WebhookId,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhooksError> {
        let endpoint = self.get(principal, id).await?;
        Ok(self.store.deliveries(endpoint.id, before, limit).await?)
    }

    /// Makes a delivery pending again, due at once: it keeps its place in the endpoint's queue,
    /// so it is attempted before the endpoint's later pending deliveries.
    pub async fn retry(
        &self,
        principal: &Principal,
        id: WebhookId,
        delivery: Uuid,
    ) -> Result<Delivery, WebhooksError> {
        let endpoint = self.get(principal, id).await?;
        if !self.store.retry(endpoint.id, delivery, self.now()).await? {
            return Err(WebhooksError::NotFound);
        }
        self.store
            .delivery(endpoint.id, delivery)
            .await?
            .ok_or(WebhooksError::NotFound)
    }

    /// Enqueues a `webhook_test` message for the endpoint, delivered like any other, unless
    /// the endpoint had [`WebhookLimits::tests_per_minute`] in the last minute.
    pub async fn test(
        &self,
        principal: &Principal,
        id: WebhookId,
    ) -> Result<Delivery, WebhooksError> {
        let endpoint = self.get(principal, id).await?;
        let now = self.now();
        if let Err(wait) = self.tests.take(&endpoint.id, now) {
            // Whole seconds, rounded up: `Retry-After` never says "now" too early.
            let millis = wait.num_milliseconds().max(0) as u64;
            return Err(WebhooksError::TooManyTests {
                retry_after_seconds: millis.div_ceil(1000),
            });
        }
        let message_id = format!("webhook_test.{}", Uuid::now_v7());
        let id = delivery_id(endpoint.id, &message_id);
        let body = delivery::envelope(
            "webhook_test",
            now,
            serde_json::json!({ "webhook_id": endpoint.id }),
        );
        self.store
            .enqueue(vec![NewDelivery {
                id,
                endpoint_id: endpoint.id,
                event_type: "webhook_test".to_owned(),
                body,
                created_at: now,
            }])
            .await?;
        self.store
            .delivery(endpoint.id, id)
            .await?
            .ok_or(WebhooksError::NotFound)
    }
}
