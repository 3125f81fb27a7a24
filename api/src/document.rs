//! The last touches of the OpenAPI document, applied after the routes are in (a `Modify` on the
//! derive would run before their schemas exist):
//!
//! - every operation of `/v1` gets the answers all of them share and that no route states
//!   itself: `401` when it needs a token and `403` when it needs a scope (derived from its
//!   `security`, the scope the route's extractor enforces), `500` and `503`; `400` when it reads
//!   parameters or a body (the extractors of [`crate::extract`] refuse what they cannot read
//!   with it); `413`, `415` and `422` when it reads a JSON body (the body limit and `ApiJson`'s
//!   refusals);
//! - every refusal a route states with its status and description only (`4xx`, `5xx`) gets the
//!   problem body, so that routes need not repeat it;
//! - every problem answer gets the example of its status, built by [`ApiError::problem`] itself,
//!   so the documented problems are byte for byte what the service answers;
//! - every other body (request or answer) without an example gets one built from the examples of
//!   its schema's properties, so SDK generators and fuzzers start from realistic documents (a
//!   property without an example gets a plain value of its type: `null` when it is nullable).
//!
//! The edits are made on the JSON form of the document and read back, which keeps them short.

use crate::error::{ApiError, FieldProblem, Resource, PROBLEM_JSON};
use serde_json::{json, Map, Value};
use utoipa::openapi::OpenApi;

/// Completes `doc` (see the module). A document that does not survive the round trip through JSON
/// is returned unchanged (never seen; the test of the committed document would show it).
pub fn complete(doc: OpenApi) -> OpenApi {
    let Ok(mut value) = serde_json::to_value(&doc) else {
        return doc;
    };
    let schemas = value["components"]["schemas"].clone();
    if let Some(paths) = value["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, operation) in item.iter_mut() {
                if !matches!(method.as_str(), "get" | "post" | "put" | "patch" | "delete") {
                    continue;
                }
                complete_operation(path, operation, &schemas);
            }
        }
    }
    serde_json::from_value(value).unwrap_or(doc)
}

fn problem_response(description: &str) -> Value {
    json!({"description": description, "content": problem_content()})
}

/// The `content` of every problem answer: an RFC 9457 document.
fn problem_content() -> Value {
    json!({PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}})
}

fn complete_operation(path: &str, operation: &mut Value, schemas: &Value) {
    let needs_token = operation["security"][0].get("bearer").is_some();
    let scope = operation["security"][0]["bearer"][0]
        .as_str()
        .map(str::to_owned);
    let has_body = operation.get("requestBody").is_some();
    let operation_id = operation["operationId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The refusals of `ApiJson` (and their texts) are those of JSON bodies; an operation that
    // reads another media type states its own.
    let has_json_body = operation["requestBody"]["content"]
        .get("application/json")
        .is_some();
    let has_parameters = operation["parameters"]
        .as_array()
        .is_some_and(|p| p.iter().any(|p| p["in"] == "path" || p["in"] == "query"));
    let responses = operation["responses"]
        .as_object_mut()
        .expect("every operation has responses");
    if needs_token {
        responses.entry("401").or_insert_with(|| {
            let mut r = problem_response("The bearer token is missing, unknown or revoked.");
            r["headers"] = json!({"WWW-Authenticate": {
                "description": "`Bearer`, with the reason the token failed.",
                "schema": {"type": "string"}
            }});
            r
        });
    }
    if let Some(scope) = &scope {
        responses.entry("403").or_insert_with(|| {
            problem_response(&format!(
                "The token lacks the `{scope}` scope, or may not do this (a token limited to some \
                 sites, a token stronger than the caller's)."
            ))
        });
    }
    if path.starts_with("/v1/") && (has_body || has_parameters) {
        responses.entry("400").or_insert_with(|| {
            problem_response(
                "A path or query parameter, or the body, could not be read (not a UUID, not a \
                 number, not JSON, …).",
            )
        });
    }
    if path.starts_with("/v1/") && has_json_body {
        responses.entry("413").or_insert_with(|| {
            problem_response("The body is larger than the 2 MiB this service accepts.")
        });
        responses
            .entry("415")
            .or_insert_with(|| problem_response("The body is not `application/json`."));
        responses.entry("422").or_insert_with(|| {
            problem_response("The body is JSON but does not fit the operation's schema.")
        });
    }
    if path.starts_with("/v1/") {
        responses.entry("500").or_insert_with(|| {
            problem_response("Swath failed to answer (a bug); the cause is logged, not shown.")
        });
        responses.entry("503").or_insert_with(|| {
            problem_response(
                "A service Swath depends on (the store) is unavailable; nothing was changed, try \
                 again later.",
            )
        });
    }
    // A route states its own refusals by status and description only: their body is a problem.
    for (status, response) in responses.iter_mut() {
        if let Some(response) = response.as_object_mut() {
            if status.starts_with(['4', '5']) && !response.contains_key("content") {
                response.insert("content".into(), problem_content());
            }
        }
    }
    // `get_mut`, not indexing: indexing a missing key of a mutable object inserts a `null`.
    for (status, response) in responses.iter_mut() {
        let Some(content) = response.get_mut("content").and_then(Value::as_object_mut) else {
            continue;
        };
        for (media, body) in content.iter_mut() {
            if body.get("example").is_some() {
                continue;
            }
            let example = if media == PROBLEM_JSON {
                problem_example(path, &operation_id, status)
            } else {
                example_of(&body["schema"], schemas, 0)
            };
            if let Some(example) = example {
                body["example"] = example;
            }
        }
    }
    if let Some(content) = operation
        .get_mut("requestBody")
        .and_then(|body| body.get_mut("content"))
        .and_then(Value::as_object_mut)
    {
        for body in content.values_mut() {
            if body.get("example").is_none() {
                if let Some(example) = example_of(&body["schema"], schemas, 0) {
                    body["example"] = example;
                }
            }
        }
    }
}

/// The problem the service answers with this status on this path.
fn problem_example(path: &str, operation_id: &str, status: &str) -> Option<Value> {
    let collection = path.split('/').nth(2);
    if collection == Some("exports") {
        if let Some(example) = export_problem_example(status) {
            return Some(example);
        }
    }
    if collection == Some("imports") {
        return import_problem_example(operation_id, status);
    }
    if collection == Some("webhooks") {
        if let Some(example) = webhook_problem_example(status) {
            return Some(example);
        }
    }
    let resource = match collection {
        Some("sites") => Resource::Site,
        Some("tokens") => Resource::Token,
        Some("accounts") => Resource::Account,
        Some("exports") => Resource::Site,
        _ => Resource::Mower,
    };
    let error = match status {
        "400" => ApiError::BadRequest("A path parameter is not valid: UUID parsing failed.".into()),
        "401" => ApiError::InvalidToken,
        "403" => ApiError::MissingScope("read"),
        "404" => ApiError::NotFound(resource),
        "409" => ApiError::Conflict(
            "The site still has mowers; move them to another site or \
            delete them first."
                .into(),
        ),
        "413" => ApiError::PayloadTooLarge(format!(
            "The body is larger than the {} bytes this service accepts.",
            crate::BODY_LIMIT_BYTES
        )),
        "406" => ApiError::NotAcceptable(
            "This operation answers in `application/json` or `text/csv`; the `Accept` header \
            admits none of them."
                .into(),
        ),
        "415" => ApiError::UnsupportedMediaType(
            "Send the body as JSON, with `Content-Type: application/json`.".into(),
        ),
        "422" => ApiError::Validation(vec![
            FieldProblem::new("/name", "`/name` must not be only spaces."),
            FieldProblem::new("/time_zone", "`/time_zone` is required."),
        ]),
        // Only the live stream answers it.
        "429" => ApiError::TooManyRequests {
            detail: "This token has 16 live streams open already, as many as one token may; \
                close one, or try again later."
                .into(),
            retry_after: crate::limits::STREAM_RETRY_AFTER_SECONDS,
        },
        "500" => ApiError::Internal(String::new()),
        "503" => ApiError::Unavailable(String::new()),
        _ => return None,
    };
    serde_json::to_value(error.problem()).ok()
}

/// The problems only the export routes answer so (their `Accept` and their range).
fn export_problem_example(status: &str) -> Option<Value> {
    let error = match status {
        "406" => ApiError::NotAcceptable(
            "This operation answers in `text/csv`; the `Accept` header admits none of them.".into(),
        ),
        "422" => ApiError::invalid("/to", "`to` must be after `from`."),
        _ => return None,
    };
    serde_json::to_value(error.problem()).ok()
}

/// The problem the import routes answer with this status (their scope, media type and limit
/// are their own).
/// The refusals of the webhook routes that differ from the other routes' (the rest are theirs).
fn webhook_problem_example(status: &str) -> Option<Value> {
    use swath_application::{WebhookLimits, WebhooksError};
    let error = match status {
        "404" => ApiError::NotFound(Resource::Webhook),
        "409" => WebhooksError::TooManyEndpoints(WebhookLimits::default().per_account).into(),
        "429" => WebhooksError::TooManyTests {
            retry_after_seconds: 42,
        }
        .into(),
        _ => return None,
    };
    serde_json::to_value(error.problem()).ok()
}

fn import_problem_example(operation_id: &str, status: &str) -> Option<Value> {
    use crate::routes::imports;
    let error = match (operation_id, status) {
        ("create_import", "400") => ApiError::BadRequest(crate::dto::imports::input_failure(
            5000,
            "connection closed before message completed",
        )),
        ("list_imports", "400") => {
            ApiError::BadRequest("`limit` is 0; it must be between 1 and 1000.".into())
        }
        (_, "400") => {
            ApiError::BadRequest("A path parameter is not valid: UUID parsing failed.".into())
        }
        (_, "401") => ApiError::InvalidToken,
        (_, "403") => imports::scope_error(),
        (_, "404") => ApiError::NotFound(Resource::Import),
        (_, "413") => imports::too_large_error(None),
        (_, "415") => imports::media_type_error(),
        (_, "500") => ApiError::Internal(String::new()),
        (_, "503") => ApiError::Unavailable(String::new()),
        _ => return None,
    };
    serde_json::to_value(error.problem()).ok()
}

/// An example document for `schema`, from the examples of its properties (following references);
/// a plain value of the type where there is none. `None` for a schema without a type.
fn example_of(schema: &Value, schemas: &Value, depth: usize) -> Option<Value> {
    if depth > 16 {
        return None;
    }
    if let Some(example) = schema.get("example") {
        return Some(example.clone());
    }
    if let Some(first) = schema["examples"].as_array().and_then(|e| e.first()) {
        return Some(first.clone());
    }
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.strip_prefix("#/components/schemas/")?;
        return example_of(&schemas[name], schemas, depth + 1);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(members) = schema[key].as_array() {
            return members
                .iter()
                .filter(|m| m["type"] != "null")
                .find_map(|m| example_of(m, schemas, depth + 1));
        }
    }
    if let Some(members) = schema["allOf"].as_array() {
        let mut merged = Map::new();
        for member in members {
            match example_of(member, schemas, depth + 1)? {
                Value::Object(fields) => merged.extend(fields),
                other => return Some(other),
            }
        }
        return Some(Value::Object(merged));
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return Some(first.clone());
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"array") {
        return Some(json!([example_of(&schema["items"], schemas, depth + 1)?]));
    }
    if types.contains(&"object") || schema.get("properties").is_some() {
        let mut fields = Map::new();
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            fields.insert(name.clone(), example_of(property, schemas, depth + 1)?);
        }
        return Some(Value::Object(fields));
    }
    if types.contains(&"null") {
        return Some(Value::Null);
    }
    let plain = match (types.first().copied()?, schema["format"].as_str()) {
        ("string", Some("uuid")) => json!("0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60"),
        ("string", Some("date-time")) => json!("2026-06-01T12:00:00Z"),
        ("string", Some("date")) => json!("2026-06-01"),
        ("string", _) => json!("string"),
        ("integer", _) => minimum_or(schema, json!(0)),
        ("number", _) => minimum_or(schema, json!(0.0)),
        ("boolean", _) => json!(false),
        _ => return None,
    };
    Some(plain)
}

/// The schema's minimum, or `default` when it has none.
fn minimum_or(schema: &Value, default: Value) -> Value {
    match schema.get("minimum") {
        Some(minimum) if !minimum.is_null() => minimum.clone(),
        _ => default,
    }
}
