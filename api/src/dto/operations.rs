//! The operations routes' documents: readiness, and the OpenAPI document's schema.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What `/readyz` found for each backing service: `up`, or `down` with why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Readiness {
    /// The store (directory, tokens, telemetry): `up` or `down`.
    #[schema(example = "up")]
    pub store: String,
    /// The event bus: `up` or `down`.
    #[schema(example = "up")]
    pub bus: String,
    /// This process's ingest consumer: `up`, or `stalled` when every batch it tried failed for
    /// 60 s or more (it stopped making progress; see `swath_ingest_failed_batches_in_a_row`).
    #[schema(example = "up")]
    pub ingest: String,
}

/// `/readyz` when a backing service is down: an RFC 9457 problem (type `unavailable`) whose
/// `detail` names what is down, with the check of each service.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "type": "https://swath.dev/problems/unavailable",
    "title": "Service unavailable",
    "status": 503,
    "detail": "Not ready: the store is down.",
    "checks": {"store": "down", "bus": "up", "ingest": "up"}
}))]
pub struct NotReady {
    /// `https://swath.dev/problems/unavailable`.
    #[serde(rename = "type")]
    pub type_uri: String,
    /// `Service unavailable`.
    pub title: String,
    /// `503`.
    pub status: u16,
    /// Names every service that is down.
    pub detail: String,
    /// The check of each service.
    pub checks: Readiness,
}

// Only a schema: a named one, so that generated clients call its model `OpenApiDocument` instead
// of a name made from the operation (`OpenapiResponse200`, decision 112).
/// An OpenAPI 3.1 document.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct OpenApiDocument(pub serde_json::Value);
