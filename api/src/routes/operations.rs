//! Operations routes: liveness and the OpenAPI document. Neither needs a token: load balancers
//! and SDK generators call them without one.

use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use bytes::Bytes;
use std::sync::OnceLock;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "operations";

/// Liveness
#[utoipa::path(
    get,
    path = "/healthz",
    tag = TAG,
    operation_id = "healthz",
    summary = "Liveness",
    description = "Answers `200 ok` while the process serves HTTP. It checks nothing else: a \
        failing store or bus does not restart the process.",
    responses(
        (status = 200, description = "The process is alive.", body = String, content_type = "text/plain",
            example = "ok"),
    ),
)]
pub async fn healthz() -> &'static str {
    "ok"
}

/// The OpenAPI document
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = TAG,
    operation_id = "openapi",
    summary = "The OpenAPI document",
    description = "This API's OpenAPI 3.1 document, the same as `openapi/openapi.json` in the \
        repository. Generate clients from it; browse it at `/docs`.",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document.", body = Object, content_type = "application/json"),
    ),
)]
pub async fn openapi_json() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document().clone(),
    )
}

/// The document, serialised once: it never changes while the process runs.
fn document() -> &'static Bytes {
    static DOCUMENT: OnceLock<Bytes> = OnceLock::new();
    DOCUMENT.get_or_init(|| match crate::openapi().to_json() {
        Ok(json) => Bytes::from(json),
        Err(e) => {
            tracing::error!(error = %e, "Could not serialise the OpenAPI document.");
            Bytes::from_static(b"{}")
        }
    })
}
