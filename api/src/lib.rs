//! Swath's REST API: axum routes documented with utoipa, served on any adapters through the
//! application's ports. The `swath` binary (`main.rs`) chooses the adapters and serves
//! [`router`]; tests drive the same router in process.
//!
//! The OpenAPI document is generated from the handlers' `#[utoipa::path]` attributes and the
//! DTOs' `ToSchema` derives, never written by hand: `swath openapi` prints it, the committed
//! `openapi/openapi.json` is its output, and a test fails when the two drift.
//!
//! # Layout
//! - [`state`]: [`AppState`], the use cases every handler can reach (never a port).
//! - [`auth`]: bearer tokens resolved to a principal, one extractor per scope.
//! - [`routes`]: the handlers, one module per OpenAPI tag.
//! - [`dto`]: the documents the API answers, built from domain rows (never the rows themselves).
//! - [`error`]: [`ApiError`], mapped to RFC 9457 problems in one place.
//! - [`extract`]: `Path`, `Query` and `Json` extractors whose rejections are problems.
//! - [`etag`]: entity tags and `If-None-Match`.
//! - [`csv`]: CSV answers (RFC 4180, formulas neutralised) and streamed exports.
//! - [`negotiate`]: the `Accept` header: JSON or CSV, `406` for neither.
//! - [`http_metrics`]: the request span (status, latency) and the latency histogram per route.
//! - [`live_pages`]: the server-rendered live pages (`/live/fleet`, `/live/wall`, `/live/health`,
//!   `/live/map`).
//! - [`page`]: limits, opaque cursors and the sentinel row of paged lists.
//! - [`server`]: the HTTP server loop: connection limit, header-read and idle timeouts, over
//!   the plain [`server::HttpLimits`] the wiring builds (the settings are `swath::config`'s).
//! - [`limits`]: live streams per token and in all, request bodies' idle timeout.
//! - [`security_headers`]: `nosniff` and `frame-ancestors 'none'` on every answer.
//! - [`document`]: what the generated document gets after the routes are in: the answers every
//!   operation shares (`401`, `403`, `500`, `503`) and an example for every body.

pub mod auth;
pub mod csv;
pub mod document;
pub mod dto;
pub mod error;
pub mod etag;
pub mod extract;
pub mod http_metrics;
pub mod limits;
pub mod live_pages;
pub mod negotiate;
pub mod page;
pub mod routes;
pub mod security_headers;
pub mod server;
pub mod state;
pub mod validate;

pub use error::{ApiError, Problem};

pub use state::{AppState, UseCases};

use axum::extract::DefaultBodyLimit;
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::{Config, SwaggerUi};

/// The name of the security scheme the operations refer to.
pub const BEARER_SCHEME: &str = "bearer";

/// The largest request body accepted, in bytes (2 MiB): room for 1000 state reports of a usual
/// size. A larger body is refused with `413` before it is parsed.
pub const BODY_LIMIT_BYTES: usize = 2 * 1024 * 1024;

/// The smallest answer compressed, in bytes: below it gzip's header and the CPU buy little (a
/// problem document, a `204`). A mower's state (about 400 bytes) is compressed.
pub const COMPRESS_ABOVE_BYTES: u16 = 256;

/// Answers compressed with gzip when the request's `Accept-Encoding` asks for it (decision 91):
/// JSON, HTML, the metrics and the documentation, above [`COMPRESS_ABOVE_BYTES`]. At gzip's
/// fastest level: it sends a few more bytes than level 6 for much less CPU, and CPU is what a
/// busy replica runs out of (BENCHMARKS.md, "gzip and 304 on the polled reads"). Never the live
/// stream (`text/event-stream`: a compressor would hold its events back until its buffer fills),
/// nor images (compressed already). The `ETag`s stay as the handlers set them: weak, so that one
/// tag names both encodings (see [`etag`]); the layer adds `Vary: Accept-Encoding`.
fn compression() -> CompressionLayer<impl Predicate> {
    CompressionLayer::new()
        .quality(CompressionLevel::Fastest)
        .compress_when(
            SizeAbove::new(COMPRESS_ABOVE_BYTES)
                .and(NotForContentType::GRPC)
                .and(NotForContentType::IMAGES)
                .and(NotForContentType::SSE),
        )
}

/// The document's fixed parts; the paths and their schemas come from [`api_routes`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Swath",
        description = "Telemetry of a robot lawn mower fleet: the directory of sites and mowers, \
            the latest state of every mower, its history, track, health and day totals, state \
            ingestion over HTTP, API tokens, and the operations endpoints.\n\n\
            Authenticate with an API token of your account: `Authorization: Bearer <token>`. \
            Scopes: `read` for every `GET`, `write` for ingestion and directory changes, `admin` \
            for accounts and tokens; imports take `write` or `admin`. A token sees its account only (and only some of its sites, \
            when it is limited to them); an id of another account answers `404`, exactly like an \
            unknown id.\n\n\
            Lists are paged with `limit` (1 to 1000, default 100) and an opaque `cursor`: each \
            page says whether more follow (`truncated`) and where the next starts \
            (`next_cursor`). Units are seconds and metres; timestamps are UTC, RFC 3339. Errors \
            are `application/problem+json` (RFC 9457) with a stable `type` URI under \
            `https://swath.dev/problems/`.\n\n\
            Answers are compressed with gzip when `Accept-Encoding` allows it (all but the live \
            stream, and answers under 256 bytes). The reads made for polling (the mowers, a \
            mower, its state and health, the live views) carry a weak `ETag`, the same for every \
            encoding: send it back in `If-None-Match` (compared weakly; a list or `*` is \
            accepted) to get `304 Not Modified` without a body while nothing changed.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    tags(
        (name = routes::mowers::TAG, description = "The mowers of the directory, with their latest states."),
        (name = routes::telemetry::TAG, description = "A mower's latest state, health totals, history, track and day totals."),
        (name = routes::sessions::TAG, description = "Mowing sessions (docs/rules.md W8): when each mower mowed, for how long, how far and why it stopped, kept exact whatever the order states arrive in."),
        (name = routes::exports::TAG, description = "Fleet-wide CSV exports: every visible mower's history or day totals over a range, streamed."),
        (name = routes::states::TAG, description = "State reports over HTTP, through the same path as the bus."),
        (name = routes::imports::TAG, description = "History in bulk: NDJSON state reports, imported as `swath import` imports a file, and the import's progress and result. Scope `write` or `admin`."),
        (name = routes::sites::TAG, description = "The sites of the account and their time zones."),
        (name = routes::tokens::TAG, description = "API tokens of the account. Scope `admin`."),
        (name = routes::webhooks::TAG, description = "Webhook endpoints: the account's events pushed as signed POSTs (Standard Webhooks 1.0), retried, in order per endpoint, with a log of deliveries. Scope `admin`."),
        (name = routes::accounts::TAG, description = "The token's account, and new accounts. Scope `admin`."),
        (name = routes::notifications::TAG, description = "Geofences, virtual zones and blade resets; the events feed, open alerts and the busy check."),
        (name = routes::projections::TAG, description = "Bounded live projections (fleet dashboard, site wall, health wall) and the operator assignments they show."),
        (name = routes::live::TAG, description = "Live views: the states and events of your mowers as they arrive (Server-Sent Events), resumable with `Last-Event-ID`."),
        (name = routes::operations::TAG, description = "Liveness, readiness, metrics and this document. No token needed."),
    ),
    components(schemas(Problem, dto::live_stream::StreamEvent, dto::live_stream::StreamAlertCleared)),
    modifiers(&BearerAuth),
)]
struct ApiDoc;

/// Adds the bearer security scheme (utoipa's derive has no syntax for it).
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER_SCHEME,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token of your account, sent as `Authorization: Bearer <token>`. \
                         Scopes: `read`, `write`, `admin`.",
                    ))
                    .build(),
            ),
        );
    }
}

/// Every documented route, with the document they make up.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(
            routes::mowers::list_mowers,
            routes::mowers::create_mower
        ))
        .routes(routes!(
            routes::mowers::get_mower,
            routes::mowers::update_mower,
            routes::mowers::delete_mower
        ))
        .routes(routes!(routes::telemetry::get_mower_state))
        .routes(routes!(routes::telemetry::get_mower_health))
        .routes(routes!(routes::telemetry::get_mower_history))
        .routes(routes!(routes::telemetry::get_mower_track))
        .routes(routes!(routes::telemetry::get_mower_track_geojson))
        .routes(routes!(routes::telemetry::get_mower_days))
        .routes(routes!(routes::sessions::list_mower_sessions))
        .routes(routes!(routes::sessions::get_open_session))
        .routes(routes!(routes::sessions::list_sessions))
        .routes(routes!(routes::exports::export_history))
        .routes(routes!(routes::exports::export_days))
        .routes(routes!(routes::exports::export_sessions))
        .routes(routes!(routes::states::record_states))
        .routes(routes!(
            routes::imports::create_import,
            routes::imports::list_imports
        ))
        .routes(routes!(routes::imports::get_import))
        .routes(routes!(
            routes::sites::list_sites,
            routes::sites::create_site
        ))
        .routes(routes!(
            routes::sites::get_site,
            routes::sites::update_site,
            routes::sites::delete_site
        ))
        .routes(routes!(
            routes::tokens::list_tokens,
            routes::tokens::create_token
        ))
        .routes(routes!(
            routes::tokens::get_token,
            routes::tokens::revoke_token
        ))
        .routes(routes!(
            routes::webhooks::list_webhooks,
            routes::webhooks::create_webhook
        ))
        .routes(routes!(
            routes::webhooks::get_webhook,
            routes::webhooks::update_webhook,
            routes::webhooks::delete_webhook
        ))
        .routes(routes!(routes::webhooks::rotate_webhook_secret))
        .routes(routes!(routes::webhooks::list_deliveries))
        .routes(routes!(routes::webhooks::retry_delivery))
        .routes(routes!(routes::webhooks::test_webhook))
        .routes(routes!(
            routes::accounts::list_accounts,
            routes::accounts::create_account
        ))
        .routes(routes!(routes::accounts::get_account))
        .routes(routes!(routes::accounts::get_me))
        .routes(routes!(
            routes::notifications::geofence::get_geofence,
            routes::notifications::geofence::put_geofence,
            routes::notifications::geofence::delete_geofence
        ))
        .routes(routes!(
            routes::notifications::zones::list_zones,
            routes::notifications::zones::create_zone
        ))
        .routes(routes!(
            routes::notifications::zones::update_zone,
            routes::notifications::zones::delete_zone
        ))
        .routes(routes!(routes::notifications::blade::reset_blade))
        .routes(routes!(routes::notifications::busy::get_busy))
        .routes(routes!(routes::notifications::events::list_events))
        .routes(routes!(routes::notifications::alerts::list_alerts))
        .routes(routes!(routes::live::live_stream))
        .routes(routes!(routes::projections::live_views::live_fleet))
        .routes(routes!(routes::projections::live_views::live_wall))
        .routes(routes!(routes::projections::live_views::live_health))
        .routes(routes!(
            routes::assignments::list_assignments,
            routes::assignments::create_assignment
        ))
        .routes(routes!(
            routes::assignments::update_assignment,
            routes::assignments::delete_assignment
        ))
        .routes(routes!(routes::operations::healthz))
        .routes(routes!(routes::operations::readyz))
        .routes(routes!(routes::operations::metrics))
        .routes(routes!(routes::operations::openapi_json))
}

/// The OpenAPI 3.1 document of [`router`]. `swath openapi` prints it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api_routes().into_openapi();
    describe_nullable_refs(&mut doc);
    bound_state_batch(&mut doc);
    document::complete(doc)
}

/// The body of `POST /v1/states` is an array of at most [`routes::states::MAX_REPORTS`] reports:
/// its `maxItems`, which `request_body(content = Vec<…>)` has no syntax for (every array of a
/// request body states its bound, issue 42).
fn bound_state_batch(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{RefOr, Schema};
    let body = doc
        .paths
        .paths
        .get_mut("/v1/states")
        .and_then(|item| item.post.as_mut())
        .and_then(|op| op.request_body.as_mut())
        .and_then(|body| body.content.get_mut("application/json"))
        .and_then(|content| content.schema.as_mut());
    if let Some(RefOr::T(Schema::Array(batch))) = body {
        batch.max_items = Some(routes::states::MAX_REPORTS);
    }
}

/// utoipa writes a nullable reference (`Option<Dto>`) as `oneOf: [null, {$ref, description}]`,
/// with the field's doc comment inside the `$ref` branch, where documentation tools do not show
/// it as the property's description. Moves it up to the `oneOf`, next to the property.
/// (Runs after the routes are added: a `Modify` on [`ApiDoc`] would run before their schemas
/// exist.)
fn describe_nullable_refs(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{RefOr, Schema};
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for schema in components.schemas.values_mut() {
        match schema {
            RefOr::T(Schema::Object(object)) => describe_nullable_properties(object),
            // A struct with a flattened member (`StreamEvent`) is an `allOf` whose own properties
            // are one of its items.
            RefOr::T(Schema::AllOf(all_of)) => {
                for item in &mut all_of.items {
                    if let RefOr::T(Schema::Object(object)) = item {
                        describe_nullable_properties(object);
                    }
                }
            }
            _ => {}
        }
    }
}

/// [`describe_nullable_refs`] for the properties of one object.
fn describe_nullable_properties(object: &mut utoipa::openapi::schema::Object) {
    use utoipa::openapi::{RefOr, Schema};
    for property in object.properties.values_mut() {
        let RefOr::T(Schema::OneOf(one_of)) = property else {
            continue;
        };
        if one_of.description.is_some() {
            continue;
        }
        for item in &mut one_of.items {
            if let RefOr::Ref(reference) = item {
                if !reference.description.is_empty() {
                    one_of.description = Some(std::mem::take(&mut reference.description));
                }
            }
        }
    }
}

/// The whole HTTP service: the API, `/docs` (Swagger UI, served from the binary, no internet
/// needed), problem answers for unknown paths and methods, a body limit, gzip by
/// `Accept-Encoding` (decision 91), a trace span per request, and panics answered as `500`
/// problems instead of dropped connections.
pub fn router(state: AppState) -> Router {
    let bodies = state.limits.bodies;
    let (api, _) = api_routes().split_for_parts();
    api.merge(live_pages::routes())
        .merge(SwaggerUi::new("/docs").config(Config::new(["/openapi.json"])))
        .fallback(error::route_not_found)
        // After every route is added: axum applies it to the routes present.
        .method_not_allowed_fallback(error::method_not_allowed)
        // The extractors read bodies through it, so an oversized body is their `413` problem.
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        // A body that stops coming, or takes too long in all, fails its reader, whoever reads it.
        .layer(axum::middleware::from_fn_with_state(
            bodies,
            limits::body_timeouts,
        ))
        .layer(CatchPanicLayer::custom(error::panic_response))
        // Outside the panic catcher, so that a `500` is compressed like any answer; inside the
        // metrics, which count answers whatever their encoding.
        .layer(compression())
        // Outside the panic catcher, so that a panic is observed as the `500` it answers.
        .layer(axum::middleware::from_fn(http_metrics::record_latency))
        .layer(http_metrics::trace_layer())
        // Outermost: an oversized head is answered before anything reads it.
        .layer(axum::middleware::from_fn(server::head_limits))
        // Outermost: every answer, a refused head's included.
        .layer(axum::middleware::map_response(
            security_headers::security_headers,
        ))
        .with_state(state)
}
