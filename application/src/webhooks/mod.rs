//! Webhooks (issue 31): the endpoints an account's admins register (`/v1/webhooks`), their
//! signing secrets, and the log of deliveries; the delivery itself is in [`delivery`].
//!
//! The rules every route goes through: the caller needs the `admin` scope; an endpoint belongs to
//! the caller's account and is visible only to principals of that account that see every site it
//! is limited to (a principal limited to sites sees only endpoints limited to some of its sites,
//! and creates only such endpoints); every mower and site an endpoint names must be visible to
//! the caller. Another account's endpoint, or one not visible, is answered as absent.

pub mod delivery;
pub mod signing;
pub mod wake;

use crate::access::{Access, AccessError};
use crate::ports::{Clock, Delivery, NewDelivery, WebhookError, WebhookStore};
use chrono::Duration;
use std::sync::Arc;
use swath_domain::webhook::{delivery_id, Endpoint, Secret, WebhookId, WebhookKind};
use swath_domain::{MowerId, Principal, Scope, SiteId};
use uuid::Uuid;

/// How long a rotated-out secret still signs: receivers have this long to switch.
pub const SECRET_GRACE: Duration = Duration::hours(24);

/// The longest URL accepted.
pub const MAX_URL_CHARS: usize = 2048;

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

impl Webhooks {
    pub fn new(
        store: Arc<dyn WebhookStore>,
        access: Access,
        clock: Arc<dyn Clock>,
        allow_http: bool,
    ) -> Self {
        Self {
            store,
            access,
            clock,
            allow_http,
        }
    }

    /// The same use case with another access service (a principal cache of another bound).
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
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

    /// Whether `principal` sees `endpoint`: same account, and every site it is limited to is
    /// one of the principal's.
    fn sees(principal: &Principal, endpoint: &Endpoint) -> bool {
        principal.account_id == endpoint.account_id
            && match (&principal.sites, &endpoint.sites) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(theirs), Some(ours)) => ours.iter().all(|s| theirs.contains(s)),
            }
    }

    /// The endpoint `id` if `principal` may manage it.
    pub async fn get(
        &self,
        principal: &Principal,
        id: WebhookId,
    ) -> Result<Endpoint, WebhooksError> {
        Self::admin(principal)?;
        match self.store.endpoint(id).await? {
            Some(e) if Self::sees(principal, &e) => Ok(e),
            _ => Err(WebhooksError::NotFound),
        }
    }

    /// Checks a spec against the rules, every problem at once, and answers it normalised
    /// (kinds, mowers and sites sorted and deduplicated).
    async fn checked(
        &self,
        principal: &Principal,
        mut spec: EndpointSpec,
    ) -> Result<EndpointSpec, WebhooksError> {
        let mut problems = Vec::new();
        if let Err(message) = check_url(&spec.url, self.allow_http) {
            problems.push(("/url".to_owned(), message));
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
            for (i, id) in mowers.iter().enumerate() {
                match self.access.visible_mower(principal, *id).await {
                    Ok(_) => {}
                    Err(AccessError::NotVisible(_)) => problems.push((
                        format!("/mowers/{i}"),
                        format!("`/mowers/{i}` is {id}, which is no mower visible to this token."),
                    )),
                    Err(other) => return Err(other.into()),
                }
            }
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
                for (i, id) in sites.iter().enumerate() {
                    match self.access.referenced_site(principal, *id).await {
                        Ok(_) => {}
                        Err(AccessError::NotVisible(_)) => problems.push((
                            format!("/sites/{i}"),
                            format!(
                                "`/sites/{i}` is {id}, which is no site visible to this token."
                            ),
                        )),
                        Err(other) => return Err(other.into()),
                    }
                }
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

    /// Creates an endpoint of the caller's account; answers it and its secret (the only time
    /// the secret is answered).
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
        self.store.create_endpoint(endpoint.clone()).await?;
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
            seen.extend(rows.into_iter().filter(|e| Self::sees(principal, e)));
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

    /// Enqueues a `webhook_test` message for the endpoint, delivered like any other.
    pub async fn test(
        &self,
        principal: &Principal,
        id: WebhookId,
    ) -> Result<Delivery, WebhooksError> {
        let endpoint = self.get(principal, id).await?;
        let now = self.now();
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

/// A URL an endpoint may have: absolute, `https` (or `http` when `allow_http`), with a host, no
/// user information, at most [`MAX_URL_CHARS`]. Whether its host is a public address is decided
/// at every delivery (the name may resolve elsewhere later).
pub fn check_url(url: &str, allow_http: bool) -> Result<(), String> {
    if url.chars().count() > MAX_URL_CHARS {
        return Err(format!("`/url` has more than {MAX_URL_CHARS} characters."));
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("`/url` is not a URL: {e}."))?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_http => {}
        _ => {
            return Err("`/url` must be an `https` URL (plain `http` only with \
                 SWATH_WEBHOOK_ALLOW_PRIVATE=true)."
                .to_owned())
        }
    }
    if parsed.host().is_none() {
        return Err("`/url` has no host.".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("`/url` must not carry a user name or password.".to_owned());
    }
    Ok(())
}
