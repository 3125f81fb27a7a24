//! The committed `openapi/openapi.json` is exactly what the code generates, and the document is
//! complete enough to generate SDKs and read: every operation, parameter and schema property is
//! described.

use serde_json::Value;

const REGENERATE: &str = "cargo run -p swath -- openapi > openapi/openapi.json";

fn generated() -> String {
    // `swath openapi` prints the pretty JSON and a newline.
    format!("{}\n", swath_api::openapi().to_pretty_json().unwrap())
}

#[test]
fn the_committed_document_is_up_to_date() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated(),
        "openapi/openapi.json is not what the code generates; run `{REGENERATE}` and commit it"
    );
}

/// Generated SDKs name their models after the schemas: a Rust type's suffix (`Dto`) or a name a
/// generator makes up for an inline object (`Type0`) would be a client's type name (decision 112).
#[test]
fn schema_names_are_the_apis_nouns() {
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let odd: Vec<&String> = schemas
        .keys()
        .filter(|name| name.ends_with("Dto") || name.contains("Type0"))
        .collect();
    assert!(odd.is_empty(), "schemas named after Rust types: {odd:?}");
}

#[test]
fn the_document_is_openapi_3_1_with_a_bearer_scheme() {
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "Swath");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    for path in [
        "/v1/mowers",
        "/v1/mowers/{id}/state",
        "/v1/mowers/{id}/health",
    ] {
        assert_eq!(
            doc["paths"][path]["get"]["security"][0]["bearer"][0], "read",
            "{path}"
        );
    }
}

#[test]
fn every_operation_parameter_and_property_is_described() {
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let at = format!("{method} {path}");
            for key in ["summary", "description", "operationId"] {
                if !has_text(&operation[key]) {
                    missing.push(format!("{at}: {key}"));
                }
            }
            if operation["tags"].as_array().is_none_or(Vec::is_empty) {
                missing.push(format!("{at}: tags"));
            }
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if !has_text(&parameter["description"]) {
                    missing.push(format!("{at}: parameter {}", parameter["name"]));
                }
            }
            for (status, response) in operation["responses"].as_object().unwrap() {
                if !has_text(&response["description"]) {
                    missing.push(format!("{at}: response {status}"));
                }
            }
        }
    }
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        if !has_text(&schema["description"]) {
            missing.push(format!("schema {name}"));
        }
        walk_properties(name, schema, &mut missing);
    }
    for tag in doc["tags"].as_array().unwrap() {
        if !has_text(&tag["description"]) {
            missing.push(format!("tag {}", tag["name"]));
        }
    }
    assert!(missing.is_empty(), "not described: {missing:#?}");
}

/// Every property of `schema`, and of the objects nested in it, must have a description.
fn walk_properties(at: &str, schema: &Value, missing: &mut Vec<String>) {
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            let here = format!("{at}.{name}");
            if !has_text(&property["description"]) {
                missing.push(here.clone());
            }
            walk_properties(&here, property, missing);
            walk_properties(&format!("{here}[]"), &property["items"], missing);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for member in schema[key].as_array().into_iter().flatten() {
            walk_properties(at, member, missing);
        }
    }
}

fn has_text(value: &Value) -> bool {
    value.as_str().is_some_and(|s| !s.trim().is_empty())
}

#[test]
fn every_body_has_an_example_and_every_secured_operation_its_refusals() {
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let at = format!("{method} {path}");
            let responses = operation["responses"].as_object().unwrap();
            for (status, response) in responses {
                for (media, content) in response["content"].as_object().into_iter().flatten() {
                    if content.get("example").is_none() {
                        missing.push(format!("{at}: {status} {media} example"));
                    }
                }
            }
            for (media, content) in operation["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flatten()
            {
                if content.get("example").is_none() {
                    missing.push(format!("{at}: request {media} example"));
                }
            }
            if let Some(security) = operation.get("security") {
                // An operation open to any valid token (no scope) cannot answer 403.
                let scoped = security[0]["bearer"]
                    .as_array()
                    .is_some_and(|scopes| !scopes.is_empty());
                let refusals: &[&str] = if scoped { &["401", "403"] } else { &["401"] };
                for status in refusals {
                    if !responses.contains_key(*status) {
                        missing.push(format!("{at}: {status}"));
                    }
                }
            }
            if path.starts_with("/v1/") {
                for status in ["500", "503"] {
                    if !responses.contains_key(status) {
                        missing.push(format!("{at}: {status}"));
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "missing: {missing:#?}");
}

/// Every `/v1` operation needs a token: with the `admin` scope for tokens and accounts, `read` for
/// the other `GET`s, `write` for the rest, and none for `GET /v1/me` (any token may ask who it is:
/// a gateway's write-only token needs its account id). Imports, and polling them, take `write` or
/// `admin`: the two alternatives, in that order.
#[test]
fn every_v1_operation_needs_a_token_with_one_scope() {
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/v1/") {
            continue;
        }
        for (method, operation) in item.as_object().unwrap() {
            if path.starts_with("/v1/imports") {
                assert_eq!(
                    operation["security"],
                    serde_json::json!([{"bearer": ["write"]}, {"bearer": ["admin"]}]),
                    "{method} {path}"
                );
                continue;
            }
            let scopes = &operation["security"][0]["bearer"];
            let expected = match method.as_str() {
                _ if path == "/v1/me" => serde_json::json!([]),
                _ if path.starts_with("/v1/tokens")
                    || path.starts_with("/v1/accounts")
                    || path.starts_with("/v1/webhooks") =>
                {
                    serde_json::json!(["admin"])
                }
                "get" => serde_json::json!(["read"]),
                _ => serde_json::json!(["write"]),
            };
            assert!(
                operation["security"][0]["bearer"].is_array(),
                "{method} {path}"
            );
            assert_eq!(scopes, &expected, "{method} {path}");
        }
    }
}
