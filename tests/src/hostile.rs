//! Hostile input at the HTTP door, the same on every store (issue 13, decision 40): a NUL
//! character in any string of any request body answers `422` (never a `503` "try again" that
//! would never succeed), in a state report it drops that report alone as `invalid_text`, and a
//! cursor holding a NUL or dated outside the storable range answers `400`.
//!
//! The bodies come from [`table`], one valid body per operation of the OpenAPI document that has
//! a JSON request body; [`check_table_covers_the_document`] fails when an operation or one of its
//! string fields is missing from it, so a new operation or field cannot escape the test. Each
//! scenario runs on an [`App`]: the real router on the memory adapters or on PostgreSQL.

use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// One operation with a JSON body: method, path (with `{site}`, `{mower}`, `{zone}`,
/// `{assignment}` and `{webhook}` placeholders) and a body it accepts.
pub struct Entry {
    pub method: &'static str,
    pub path: &'static str,
    pub body: Value,
}

fn square(lon: f64, lat: f64, side: f64) -> Value {
    json!({"type": "Polygon", "coordinates": [[
        [lon, lat], [lon + side, lat], [lon + side, lat + side], [lon, lat + side], [lon, lat]
    ]]})
}

/// A valid body for every operation with a JSON request body, `{site}` standing for a site id
/// (in bodies, as a string value).
pub fn table() -> Vec<Entry> {
    let assignment = json!({"operator": "Robin", "priority": "high", "active": true});
    let zone = json!({"name": "Roses", "polygon": square(13.4, 52.5, 0.001)});
    vec![
        Entry {
            method: "POST",
            path: "/v1/accounts",
            body: json!({"name": "Acme Parks"}),
        },
        Entry {
            method: "POST",
            path: "/v1/sites",
            body: json!({"name": "North", "time_zone": "Europe/Berlin", "display_order": 1}),
        },
        Entry {
            method: "PATCH",
            path: "/v1/sites/{site}",
            body: json!({"name": "North park", "time_zone": "Europe/Paris", "display_order": 2}),
        },
        Entry {
            method: "POST",
            path: "/v1/mowers",
            body: json!({"id": "{new_mower}", "site_id": "{site}", "name": "Front",
                "model": "RX-1", "serial": "S-1",
                "display_order": 0, "blade_threshold_seconds": 3600.0}),
        },
        Entry {
            method: "PATCH",
            path: "/v1/mowers/{mower}",
            body: json!({"site_id": "{site}", "name": "Back", "model": "RX-2", "serial": "S-2",
                "display_order": 1, "blade_threshold_seconds": 7200.0}),
        },
        Entry {
            method: "PUT",
            path: "/v1/mowers/{mower}/geofence",
            body: square(13.39, 52.49, 0.02),
        },
        Entry {
            method: "POST",
            path: "/v1/mowers/{mower}/zones",
            body: zone.clone(),
        },
        Entry {
            method: "PUT",
            path: "/v1/mowers/{mower}/zones/{zone}",
            body: zone,
        },
        Entry {
            method: "POST",
            path: "/v1/mowers/{mower}/assignments",
            body: assignment.clone(),
        },
        Entry {
            method: "PUT",
            path: "/v1/mowers/{mower}/assignments/{assignment}",
            body: assignment,
        },
        Entry {
            method: "POST",
            path: "/v1/tokens",
            body: json!({"name": "Home Assistant", "scopes": ["read"], "sites": ["{site}"]}),
        },
        Entry {
            method: "POST",
            path: "/v1/webhooks",
            body: json!({"url": "https://hooks.example.com/swath", "kinds": ["error_raised"],
                "mowers": ["{mower}"], "sites": ["{site}"], "enabled": true}),
        },
        Entry {
            method: "PATCH",
            path: "/v1/webhooks/{webhook}",
            body: json!({"url": "https://hooks.example.com/other", "kinds": ["alert_cleared"],
                "mowers": ["{mower}"], "sites": ["{site}"], "enabled": false}),
        },
        Entry {
            method: "POST",
            path: "/v1/states",
            body: json!([{
                "mower_id": "{mower}", "account_id": "{account}",
                "observed_at": "2026-06-01T12:00:00Z", "activity": "mowing",
                "battery_percent": 80, "position": {"lat": 52.5, "lon": 13.4},
                "blade_on": true, "error_code": "E1", "vendor_state": "MOWING",
                "extra": {"zone": "front", "deep": [{"note": "x"}]}
            }]),
        },
    ]
}

/// The JSON paths of every string a body holds (`a.b`, `a[]` for array elements), object keys
/// of free-form objects included as `a.{key}`.
pub fn string_paths(value: &Value) -> Vec<Vec<Step>> {
    fn walk(value: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        match value {
            Value::String(_) => out.push(at.clone()),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    at.push(Step::Index(i));
                    walk(item, at, out);
                    at.pop();
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    at.push(Step::Key(key.clone()));
                    walk(item, at, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// A step of a path into a JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// `value` with a NUL put in the middle of the string at `path`.
pub fn with_nul_at(value: &Value, path: &[Step]) -> Value {
    let mut value = value.clone();
    let mut at = &mut value;
    for step in path {
        at = match step {
            Step::Key(k) => &mut at[k.as_str()],
            Step::Index(i) => &mut at[*i],
        };
    }
    if let Value::String(s) = at {
        let middle = s.chars().count() / 2;
        let (head, tail): (String, String) = (
            s.chars().take(middle).collect(),
            s.chars().skip(middle).collect(),
        );
        *s = format!("{head}\u{0}{tail}");
    }
    value
}

/// `value` with a NUL-bearing key added to each object of it, one at a time: `(where, body)`.
pub fn with_nul_keys(value: &Value) -> Vec<(String, Value)> {
    fn objects(value: &Value, at: String, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                out.push(at.clone());
                for (k, v) in map {
                    objects(v, format!("{at}/{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    objects(v, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut pointers = Vec::new();
    objects(value, String::new(), &mut pointers);
    pointers
        .into_iter()
        .map(|pointer| {
            let mut body = value.clone();
            if let Some(Value::Object(map)) = body.pointer_mut(&pointer) {
                map.insert("k\u{0}ey".to_owned(), json!("v"));
            }
            (format!("a key of {pointer:?}"), body)
        })
        .collect()
}

/// Fails when an operation of the OpenAPI document with a JSON body has no entry in [`table`],
/// or when a string property of its schema (at any depth, `$ref`s followed) is absent from the
/// entry's body: every string field of every request body is tried.
pub fn check_table_covers_the_document(document: &Value) {
    let table = table();
    let paths = document["paths"].as_object().expect("paths");
    for (path, operations) in paths {
        for (method, operation) in operations.as_object().expect("operations") {
            let Some(schema) = operation.pointer("/requestBody/content/application~1json/schema")
            else {
                continue;
            };
            let method = method.to_uppercase();
            let entry = table
                .iter()
                .find(|e| e.method == method && strip(e.path) == strip(path))
                .unwrap_or_else(|| panic!("no hostile-input entry for {method} {path}"));
            let mut wanted = BTreeSet::new();
            schema_strings(document, schema, String::new(), &mut wanted, 0);
            let have: BTreeSet<String> = string_paths(&entry.body)
                .iter()
                .map(|p| dotted(p))
                .collect();
            for field in wanted {
                assert!(
                    have.contains(&field),
                    "{method} {path}: the string field `{field}` is not in the table's body"
                );
            }
        }
    }
}

fn strip(path: &str) -> String {
    // `/v1/mowers/{id}/zones/{zone_id}` and `/v1/mowers/{mower}/zones/{zone}` are the same.
    path.split('/')
        .map(|s| if s.starts_with('{') { "*" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(_) => out.push_str("[]"),
        }
    }
    out
}

fn schema_strings(
    document: &Value,
    schema: &Value,
    at: String,
    out: &mut BTreeSet<String>,
    depth: usize,
) {
    if depth > 12 {
        return;
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = document
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("unresolved {reference}"));
        return schema_strings(document, target, at, out, depth + 1);
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for sub in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            schema_strings(document, sub, at.clone(), out, depth + 1);
        }
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"string") && !at.is_empty() {
        out.insert(at.clone());
    }
    if let Some(items) = schema.get("items") {
        schema_strings(document, items, format!("{at}[]"), out, depth + 1);
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let path = if at.is_empty() {
                name.clone()
            } else {
                format!("{at}.{name}")
            };
            schema_strings(document, property, path, out, depth + 1);
        }
    }
}

/// Replaces the `{site}`, `{mower}`, `{new_mower}`, `{account}`, `{zone}`, `{assignment}` and
/// `{webhook}` placeholders of a
/// path or of a body's string values.
pub fn fill(text: &str, ids: &Map<String, Value>) -> String {
    let mut text = text.to_owned();
    for (name, id) in ids {
        text = text.replace(&format!("{{{name}}}"), id.as_str().unwrap_or_default());
    }
    text
}

/// [`fill`] over every string value of a body.
pub fn fill_body(body: &Value, ids: &Map<String, Value>) -> Value {
    match body {
        Value::String(s) => Value::String(fill(s, ids)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill_body(v, ids)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill_body(v, ids)))
                .collect(),
        ),
        other => other.clone(),
    }
}
