//! `/v1/webhooks`: the account's webhook endpoints (admin), their secrets and their deliveries.
//! The rules (scope, account, sites) are [`swath_application::Webhooks`]'; these handlers
//! translate requests and answers.

use super::location;
use crate::auth::Admin;
use crate::dto::answers::{ById, ByIdWithBody, NotJson, PageRefused};
use crate::dto::params::{EndpointPath, PageParams};
use crate::dto::webhooks::{
    DeliveryDto, DeliveryPage, NewWebhook, WebhookDto, WebhookPage, WebhookPatch, WebhookWithSecret,
};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::page::{self, List};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use swath_application::{EndpointPatch, EndpointSpec, Webhooks};
use swath_domain::webhook::WebhookId;
use swath_domain::{MowerId, SiteId};
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "webhooks";

/// The webhooks use case, or `503` when the service was started without a webhook store.
fn webhooks(state: &AppState) -> Result<&Webhooks, ApiError> {
    state
        .webhooks
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no webhook store is configured".into()))
}

fn mowers(ids: Option<Vec<Uuid>>) -> Option<Vec<MowerId>> {
    ids.map(|m| m.into_iter().map(MowerId).collect())
}

fn sites(ids: Option<Vec<Uuid>>) -> Option<Vec<SiteId>> {
    ids.map(|s| s.into_iter().map(SiteId).collect())
}

/// The endpoint a new webhook's body asks for.
fn spec(body: NewWebhook) -> EndpointSpec {
    EndpointSpec {
        url: body.url,
        kinds: body.kinds.into_iter().map(Into::into).collect(),
        mowers: mowers(body.mowers),
        sites: sites(body.sites),
        enabled: body.enabled,
    }
}

/// List the webhook endpoints
#[utoipa::path(
    get,
    path = "/v1/webhooks",
    tag = TAG,
    description = "The account's webhook endpoints that this token sees (a token limited to sites \
        sees those limited to some of its sites), oldest first. Never their secrets. Page with \
        `limit` and `cursor`.",
    security(("bearer" = ["admin"])),
    params(PageParams),
    responses(
        (status = 200, description = "A page of endpoints.", body = WebhookPage),
        PageRefused,
    ),
)]
pub async fn list_webhooks(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Json<WebhookPage>, ApiError> {
    let (ask, after) = page::ask(List::Webhooks, params.limit, params.cursor.as_deref())?;
    let rows = webhooks(&state)?
        .list(&principal, after, ask.fetch())
        .await?;
    Ok(Json(ask.page(rows, |e| e.id, |e| WebhookDto::from(&e))))
}

/// Create a webhook endpoint
#[utoipa::path(
    post,
    path = "/v1/webhooks",
    tag = TAG,
    description = "Registers an endpoint that receives the chosen kinds of messages, optionally \
        of some mowers or sites only, as signed POSTs (Standard Webhooks 1.0: `webhook-id`, \
        `webhook-timestamp`, `webhook-signature`). The answer is the only time the signing \
        secret is shown.",
    security(("bearer" = ["admin"])),
    request_body(content = NewWebhook, description = "The endpoint's URL, kinds and filters.",
        content_type = "application/json"),
    responses(
        (status = 201, description = "The endpoint was created; the answer shows its secret once.",
            body = WebhookWithSecret,
            headers(("Location" = String, description = "The path of the new endpoint."))),
        NotJson,
        (status = 409, description = "The account has as many endpoints as it may have (50 \
            unless the service is configured otherwise): delete one first."),
        (status = 422, description = "The URL is not an `https` URL, no kind is named, a list \
            is longer than its bound, or a mower or site is not visible to this token (the \
            first 10 such ids are named, the others counted)."),
    ),
)]
pub async fn create_webhook(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewWebhook>,
) -> Result<Response, ApiError> {
    let (endpoint, secret) = webhooks(&state)?.create(&principal, spec(body)).await?;
    Ok((
        StatusCode::CREATED,
        location(format!("/v1/webhooks/{}", endpoint.id))?,
        Json(WebhookWithSecret {
            secret,
            webhook: WebhookDto::from(&endpoint),
        }),
    )
        .into_response())
}

/// Get a webhook endpoint
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}",
    tag = TAG,
    description = "The endpoint, and why Swath disabled it if it did. Never its secrets.",
    security(("bearer" = ["admin"])),
    params(EndpointPath),
    responses(
        (status = 200, description = "The endpoint.", body = WebhookDto),
        ById<EndpointPath>,
    ),
)]
pub async fn get_webhook(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<WebhookDto>, ApiError> {
    let endpoint = webhooks(&state)?.get(&principal, WebhookId(id)).await?;
    Ok(Json(WebhookDto::from(&endpoint)))
}

/// Change a webhook endpoint
#[utoipa::path(
    patch,
    path = "/v1/webhooks/{id}",
    tag = TAG,
    description = "Replaces the fields given. Enabling an endpoint Swath disabled clears its \
        `disabled_reason`; deliveries resume with its pending ones (failed ones can be retried).",
    security(("bearer" = ["admin"])),
    params(EndpointPath),
    request_body(content = WebhookPatch, description = "The fields to change.",
        content_type = "application/json"),
    responses(
        (status = 200, description = "The endpoint as changed.", body = WebhookDto),
        ByIdWithBody<EndpointPath>,
        (status = 422, description = "A field is not valid (the same rules as at creation)."),
    ),
)]
pub async fn update_webhook(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<WebhookPatch>,
) -> Result<Json<WebhookDto>, ApiError> {
    let patch = EndpointPatch {
        url: body.url,
        kinds: body.kinds.map(|k| k.into_iter().map(Into::into).collect()),
        mowers: body.mowers.map(mowers),
        sites: body.sites.map(sites),
        enabled: body.enabled,
    };
    let endpoint = webhooks(&state)?
        .update(&principal, WebhookId(id), patch)
        .await?;
    Ok(Json(WebhookDto::from(&endpoint)))
}

/// Delete a webhook endpoint
#[utoipa::path(
    delete,
    path = "/v1/webhooks/{id}",
    tag = TAG,
    description = "Deletes the endpoint and its deliveries: nothing more is sent to it.",
    security(("bearer" = ["admin"])),
    params(EndpointPath),
    responses(
        (status = 204, description = "The endpoint is deleted."),
        ById<EndpointPath>,
    ),
)]
pub async fn delete_webhook(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    webhooks(&state)?.delete(&principal, WebhookId(id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Rotate a webhook endpoint's secret
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/rotate-secret",
    tag = TAG,
    description = "Makes a new signing secret, shown once in the answer. The previous secret \
        keeps signing too for 24 hours (each delivery carries one signature per secret), so a \
        receiver can switch without missing a delivery.",
    security(("bearer" = ["admin"])),
    params(EndpointPath),
    responses(
        (status = 200, description = "The new secret and the endpoint.", body = WebhookWithSecret),
        ById<EndpointPath>,
    ),
)]
pub async fn rotate_webhook_secret(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<WebhookWithSecret>, ApiError> {
    let (endpoint, secret) = webhooks(&state)?
        .rotate_secret(&principal, WebhookId(id))
        .await?;
    Ok(Json(WebhookWithSecret {
        secret,
        webhook: WebhookDto::from(&endpoint),
    }))
}

/// List a webhook endpoint's deliveries
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}/deliveries",
    tag = TAG,
    description = "The endpoint's deliveries, newest first: the message type, attempts, last \
        status and latency, next attempt and outcome. Page with `limit` and `cursor`.",
    security(("bearer" = ["admin"])),
    params(EndpointPath, PageParams),
    responses(
        (status = 200, description = "A page of deliveries.", body = DeliveryPage),
        (status = 400, description = "The id is not a UUID, or `limit` or `cursor` is not valid."),
        (status = 404, description = "No such endpoint is visible to this token."),
    ),
)]
pub async fn list_deliveries(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Json<DeliveryPage>, ApiError> {
    let (ask, before) = page::ask(List::Deliveries, params.limit, params.cursor.as_deref())?;
    let rows = webhooks(&state)?
        .deliveries(&principal, WebhookId(id), before, ask.fetch())
        .await?;
    Ok(Json(ask.page(rows, |d| d.seq, |d| DeliveryDto::from(&d))))
}

/// Retry a delivery
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/deliveries/{delivery_id}/retry",
    tag = TAG,
    description = "Makes the delivery pending again, due at once, with the same `webhook-id`. \
        It is attempted when the endpoint is enabled, before the endpoint's later pending \
        deliveries.",
    security(("bearer" = ["admin"])),
    params(
        EndpointPath,
        ("delivery_id" = Uuid, Path, description = "The delivery's id.", example = "0190a2b4-5c3e-8d21-9f00-00000000d001"),
    ),
    responses(
        (status = 202, description = "The delivery is pending again.", body = DeliveryDto),
        (status = 400, description = "An id is not a UUID."),
        (status = 404, description = "No such endpoint or delivery is visible to this token."),
    ),
)]
pub async fn retry_delivery(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath((id, delivery)): ApiPath<(Uuid, Uuid)>,
) -> Result<Response, ApiError> {
    let delivery = webhooks(&state)?
        .retry(&principal, WebhookId(id), delivery)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(DeliveryDto::from(&delivery))).into_response())
}

/// Send a test message
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/test",
    tag = TAG,
    description = "Enqueues a `webhook_test` message for the endpoint, delivered, signed and \
        retried like any other; follow it in the endpoint's deliveries. An endpoint is sent a \
        few test messages a minute at most (5 unless the service is configured otherwise).",
    security(("bearer" = ["admin"])),
    params(EndpointPath),
    responses(
        (status = 202, description = "The test delivery is enqueued.", body = DeliveryDto),
        ById<EndpointPath>,
        (status = 429, description = "The endpoint was sent as many test messages as it may be \
            in the last minute; nothing was enqueued.",
            headers(("Retry-After" = u64, description = "Seconds until the next test message \
                is allowed."))),
    ),
)]
pub async fn test_webhook(
    Admin(principal): Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Response, ApiError> {
    let delivery = webhooks(&state)?.test(&principal, WebhookId(id)).await?;
    Ok((StatusCode::ACCEPTED, Json(DeliveryDto::from(&delivery))).into_response())
}
