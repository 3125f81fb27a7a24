//! Swath's REST API: axum routes documented with utoipa, served on any adapters through the
//! application's ports. The `swath` binary (`main.rs`) chooses the adapters and serves
//! [`router`]; tests drive the same router in process.
//!
//! The OpenAPI document is generated from the handlers' `#[utoipa::path]` attributes and the
//! DTOs' `ToSchema` derives, never written by hand: `swath openapi` prints it, the committed
//! `openapi/openapi.json` is its output, and a test fails when the two drift.
//!
//! # Layout
//! - [`state`]: [`AppState`], the ports every handler can reach.
//! - [`auth`]: bearer tokens resolved to a principal, one extractor per scope.
//! - [`routes`]: the handlers, one module per OpenAPI tag.
//! - [`dto`]: the documents the API answers, built from domain rows (never the rows themselves).
//! - [`error`]: [`ApiError`], mapped to RFC 9457 problems in one place.
//! - [`extract`]: `Path` and `Query` extractors whose rejections are problems.
//! - [`etag`]: entity tags and `If-None-Match`.

pub mod auth;
pub mod dto;
pub mod error;
pub mod etag;
pub mod extract;
pub mod routes;
pub mod state;

pub use error::{ApiError, Problem};
pub use state::AppState;

use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::{Config, SwaggerUi};

/// The name of the security scheme the operations refer to.
pub const BEARER_SCHEME: &str = "bearer";

/// The document's fixed parts; the paths and their schemas come from [`api_routes`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Swath",
        description = "Telemetry of a robot lawn mower fleet: the latest state of every mower, \
            its health totals, and the operations endpoints.\n\n\
            Authenticate with an API token of your account: `Authorization: Bearer <token>`. \
            A token sees the mowers of its account only (of some of its sites, when it is limited \
            to them); an id of another account answers `404`, exactly like an unknown id.\n\n\
            Units are seconds and metres; timestamps are UTC, RFC 3339. Errors are \
            `application/problem+json` (RFC 9457) with a stable `type` URI under \
            `https://swath.dev/problems/`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    tags(
        (name = routes::mowers::TAG, description = "Mowers with their latest states and health totals."),
        (name = routes::operations::TAG, description = "Liveness and this document. No token needed."),
    ),
    components(schemas(Problem)),
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
        .routes(routes!(routes::mowers::list_mowers))
        .routes(routes!(routes::mowers::get_mower_state))
        .routes(routes!(routes::mowers::get_mower_health))
        .routes(routes!(routes::operations::healthz))
        .routes(routes!(routes::operations::openapi_json))
}

/// The OpenAPI 3.1 document of [`router`]. `swath openapi` prints it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api_routes().into_openapi();
    describe_nullable_refs(&mut doc);
    doc
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
        let RefOr::T(Schema::Object(object)) = schema else {
            continue;
        };
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
}

/// The whole HTTP service: the API, `/docs` (Swagger UI, served from the binary, no internet
/// needed), problem answers for unknown paths and methods, a trace span per request, and panics
/// answered as `500` problems instead of dropped connections.
pub fn router(state: AppState) -> Router {
    let (api, _) = api_routes().split_for_parts();
    api.merge(SwaggerUi::new("/docs").config(Config::new(["/openapi.json"])))
        .fallback(error::route_not_found)
        // After every route is added: axum applies it to the routes present.
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(CatchPanicLayer::custom(error::panic_response))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
