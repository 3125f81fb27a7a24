//! Request checks that list every problem, in the service's words (decision 121).
//!
//! A JSON body is checked against its schema in the OpenAPI document ([`crate::openapi`]) before
//! it is deserialised: serde stops at the first problem, the schema walk does not. The walk knows
//! the keywords the document uses for request bodies (`type`, `format`, `enum`, `required`,
//! `properties`, `additionalProperties`, `items`, `minItems`/`maxItems`,
//! `minLength`/`maxLength`, the pattern `\S`, `minimum`/`maximum`, `oneOf`/`anyOf`/`allOf` and
//! `$ref`); a test fails when the document starts using another. Query parameters are checked
//! against their parameters' schemas the same way, as the strings they are.
//!
//! The answer stays small whatever the body (issue 42): an array longer than its `maxItems` is
//! one problem (its items are not walked), and an array's items name their problems for the
//! first [`NAMED_IDS`] items that have any, then count the others (decision 180).

use crate::error::FieldProblem;
use serde_json::{Map, Value};
use std::sync::OnceLock;
use swath_application::visibility::NAMED_IDS;

/// The document's schemas, by name.
fn schemas() -> &'static Map<String, Value> {
    static SCHEMAS: OnceLock<Map<String, Value>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        serde_json::to_value(crate::openapi())
            .ok()
            .and_then(|doc| doc["components"]["schemas"].as_object().cloned())
            .unwrap_or_default()
    })
}

/// Every problem of `body` against the document's schema `name`; `None` when the document has
/// no such schema (the caller then relies on deserialisation alone).
pub fn body_problems(body: &Value, name: &str) -> Option<Vec<FieldProblem>> {
    let schema = schemas().get(name)?;
    let mut problems = Vec::new();
    check(body, schema, "", &mut problems);
    Some(problems)
}

/// `pointer` as the problems' texts name it: the body itself is "The body".
fn subject(pointer: &str) -> String {
    if pointer.is_empty() {
        "The body".to_owned()
    } else {
        format!("`{pointer}`")
    }
}

/// The schema a `$ref` names (itself when it is none).
fn resolve(schema: &Value) -> &Value {
    let mut schema = schema;
    for _ in 0..16 {
        let Some(name) = schema["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
        else {
            break;
        };
        match schemas().get(name) {
            Some(named) => schema = named,
            None => break,
        }
    }
    schema
}

/// The JSON types `schema` allows (empty: any).
fn types(schema: &Value) -> Vec<&str> {
    match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// "a string", "a UUID", "an integer"…: a type as the problems' texts say it.
fn type_words(t: &str, format: Option<&str>) -> &'static str {
    match (t, format) {
        ("string", Some("uuid")) => "a UUID",
        ("string", Some("date-time")) => "an RFC 3339 date-time (like `2026-06-01T12:00:00Z`)",
        ("string", Some("date")) => "a date (like `2026-06-01`)",
        ("string", _) => "a string",
        ("integer", _) => "an integer",
        ("number", _) => "a number",
        ("boolean", _) => "`true` or `false`",
        ("array", _) => "an array",
        ("object", _) => "an object",
        _ => "`null`",
    }
}

fn check(value: &Value, schema: &Value, pointer: &str, out: &mut Vec<FieldProblem>) {
    let schema = resolve(schema);
    for part in schema["allOf"].as_array().into_iter().flatten() {
        check(value, part, pointer, out);
    }
    if let Some(branches) = schema["oneOf"]
        .as_array()
        .or_else(|| schema["anyOf"].as_array())
    {
        one_of(value, branches, pointer, out);
    }
    let allowed = types(schema);
    let format = schema["format"].as_str();
    let actual = type_of(value);
    let fits = allowed.is_empty()
        || allowed.contains(&actual)
        || (actual == "integer" && allowed.contains(&"number"));
    if !fits {
        let words: Vec<&str> = allowed.iter().map(|t| type_words(t, format)).collect();
        out.push(FieldProblem::new(
            pointer,
            format!("{} must be {}.", subject(pointer), words.join(" or ")),
        ));
        return;
    }
    if let Some(options) = schema["enum"].as_array() {
        if !options.contains(value) {
            let names: Vec<String> = options
                .iter()
                .filter(|o| !o.is_null())
                .map(|o| format!("`{}`", o.as_str().map_or(o.to_string(), str::to_owned)))
                .collect();
            out.push(FieldProblem::new(
                pointer,
                format!("{} must be one of {}.", subject(pointer), names.join(", ")),
            ));
            return;
        }
    }
    match value {
        Value::String(s) => check_string(s, schema, pointer, out),
        Value::Number(n) => check_number(n, schema, pointer, out),
        Value::Array(items) => check_array(items, schema, pointer, out),
        Value::Object(fields) => check_object(fields, schema, pointer, out),
        Value::Null | Value::Bool(_) => {}
    }
}

/// `oneOf`/`anyOf`: `null` fits a `null` branch; otherwise the problems of the one branch that is
/// not `null` (an optional value), or one problem when several branches all fail.
fn one_of(value: &Value, branches: &[Value], pointer: &str, out: &mut Vec<FieldProblem>) {
    let is_null_branch = |b: &Value| types(resolve(b)) == ["null"];
    if value.is_null() && branches.iter().any(is_null_branch) {
        return;
    }
    let others: Vec<&Value> = branches.iter().filter(|b| !is_null_branch(b)).collect();
    if let [only] = others[..] {
        check(value, only, pointer, out);
        return;
    }
    let fits_one = others.iter().any(|b| {
        let mut problems = Vec::new();
        check(value, b, pointer, &mut problems);
        problems.is_empty()
    });
    if !fits_one {
        out.push(FieldProblem::new(
            pointer,
            format!("{} fits none of the shapes it may have.", subject(pointer)),
        ));
    }
}

fn check_string(s: &str, schema: &Value, pointer: &str, out: &mut Vec<FieldProblem>) {
    let chars = s.chars().count() as u64;
    let min = schema["minLength"].as_u64();
    let max = schema["maxLength"].as_u64();
    let length = match (min, max) {
        (Some(min), Some(max)) if chars < min || chars > max => {
            Some(format!("must have {min} to {max} characters"))
        }
        (Some(min), None) if chars < min => Some(format!("must have at least {min} characters")),
        (None, Some(max)) if chars > max => Some(format!("must have at most {max} characters")),
        _ => None,
    };
    if let Some(rule) = length {
        out.push(FieldProblem::new(
            pointer,
            format!("{} {rule}.", subject(pointer)),
        ));
        return;
    }
    if schema["pattern"].as_str() == Some(r"\S") && s.chars().all(char::is_whitespace) {
        out.push(FieldProblem::new(
            pointer,
            format!("{} must not be only spaces.", subject(pointer)),
        ));
        return;
    }
    let format = schema["format"].as_str();
    if !string_fits_format(s, format) {
        out.push(FieldProblem::new(
            pointer,
            format!(
                "{} must be {}.",
                subject(pointer),
                type_words("string", format)
            ),
        ));
    }
}

fn string_fits_format(s: &str, format: Option<&str>) -> bool {
    match format {
        Some("uuid") => uuid::Uuid::parse_str(s).is_ok(),
        Some("date-time") => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        Some("date") => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        _ => true,
    }
}

fn check_number(
    n: &serde_json::Number,
    schema: &Value,
    pointer: &str,
    out: &mut Vec<FieldProblem>,
) {
    let (low, high) = match schema["format"].as_str() {
        Some("int32") => (Some(i32::MIN as f64), Some(i32::MAX as f64)),
        Some("int64") => (Some(i64::MIN as f64), Some(i64::MAX as f64)),
        _ => (None, None),
    };
    let low = schema["minimum"].as_f64().or(low);
    let high = schema["maximum"].as_f64().or(high);
    let x = n.as_f64().unwrap_or(f64::NAN);
    if low.is_some_and(|l| x < l) || high.is_some_and(|h| x > h) {
        let rule = match (low, high) {
            (Some(l), Some(h)) => format!("must be from {l} to {h}"),
            (Some(l), None) => format!("must be at least {l}"),
            (None, _) => format!("must be at most {}", high.unwrap_or(f64::NAN)),
        };
        out.push(FieldProblem::new(
            pointer,
            format!("{} {rule}.", subject(pointer)),
        ));
    }
}

fn check_array(items: &[Value], schema: &Value, pointer: &str, out: &mut Vec<FieldProblem>) {
    let n = items.len() as u64;
    if let Some(min) = schema["minItems"].as_u64().filter(|&m| n < m) {
        let unit = if min == 1 { "item" } else { "items" };
        out.push(FieldProblem::new(
            pointer,
            format!("{} must have at least {min} {unit}.", subject(pointer)),
        ));
    }
    if let Some(max) = schema["maxItems"].as_u64().filter(|&m| n > m) {
        // Its items are not walked: a list far too long answers one problem, not one per item.
        out.push(FieldProblem::new(
            pointer,
            format!(
                "{} has {n} items; it must have at most {max}.",
                subject(pointer)
            ),
        ));
        return;
    }
    let Some(item) = schema.get("items").filter(|i| i.is_object()) else {
        return;
    };
    // The problems of the first few items that have any, then how many more have some.
    let mut bad = 0;
    for (i, value) in items.iter().enumerate() {
        let mut found = Vec::new();
        check(value, item, &format!("{pointer}/{i}"), &mut found);
        if !found.is_empty() {
            bad += 1;
            if bad <= NAMED_IDS {
                out.extend(found);
            }
        }
    }
    if bad > NAMED_IDS {
        out.push(FieldProblem::new(
            pointer,
            format!(
                "{} has {} more items with problems (only the first {NAMED_IDS} are listed).",
                subject(pointer),
                bad - NAMED_IDS
            ),
        ));
    }
}

/// A key as a JSON Pointer token (RFC 6901 §3).
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn check_object(
    fields: &Map<String, Value>,
    schema: &Value,
    pointer: &str,
    out: &mut Vec<FieldProblem>,
) {
    let empty = Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&empty);
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    // In the schema's order, then the unknown fields in the body's.
    for (name, property) in properties {
        let at = format!("{pointer}/{}", token(name));
        match fields.get(name) {
            Some(value) => check(value, property, &at, out),
            None if required.contains(&name.as_str()) => {
                out.push(FieldProblem::new(&at, format!("`{at}` is required.")));
            }
            None => {}
        }
    }
    if schema["additionalProperties"] == Value::Bool(false) {
        for name in fields.keys().filter(|k| !properties.contains_key(*k)) {
            let at = format!("{pointer}/{}", token(name));
            out.push(FieldProblem::new(
                &at,
                format!("`{at}` is not a field of {}.", object_name(pointer)),
            ));
        }
    }
}

fn object_name(pointer: &str) -> String {
    if pointer.is_empty() {
        "this body".to_owned()
    } else {
        format!("`{pointer}`")
    }
}

/// Every problem of a query string's `pairs` against the operation's query `parameters` (as the
/// document writes them): a required one missing, or a value that is not of its parameter's type,
/// format or values. Each names its parameter; the value itself is not repeated.
pub fn query_problems(pairs: &[(String, String)], parameters: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for parameter in parameters {
        let Some(name) = parameter["name"].as_str() else {
            continue;
        };
        let Some((_, value)) = pairs.iter().find(|(k, _)| k == name) else {
            if parameter["required"] == Value::Bool(true) {
                problems.push(format!("The query parameter `{name}` is required."));
            }
            continue;
        };
        if let Some(expected) = query_value_problem(value, &parameter["schema"]) {
            problems.push(format!("The query parameter `{name}` must be {expected}."));
        }
    }
    problems
}

/// What a query value should be when it is not what `schema` allows.
fn query_value_problem(value: &str, schema: &Value) -> Option<String> {
    let schema = resolve(schema);
    if let Some(branches) = schema["oneOf"].as_array() {
        // An optional value: the branch that is not `null`.
        let other = branches.iter().find(|b| types(resolve(b)) != ["null"])?;
        return query_value_problem(value, other);
    }
    if let Some(options) = schema["enum"].as_array() {
        if options.iter().any(|o| o.as_str() == Some(value)) {
            return None;
        }
        let names: Vec<String> = options
            .iter()
            .filter_map(Value::as_str)
            .map(|o| format!("`{o}`"))
            .collect();
        return Some(format!("one of {}", names.join(", ")));
    }
    let format = schema["format"].as_str();
    let t = types(schema).into_iter().find(|t| *t != "null")?;
    let fits = match t {
        "integer" => value.parse::<i64>().is_ok(),
        "number" => value.parse::<f64>().is_ok_and(f64::is_finite),
        "boolean" => matches!(value, "true" | "false"),
        "string" => string_fits_format(value, format),
        _ => true,
    };
    (!fits).then(|| type_words(t, format).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every keyword the request bodies and query parameters use is one the walk knows; a new one
    /// would be ignored without a word.
    #[test]
    fn the_walk_knows_every_keyword_of_the_request_schemas() {
        let known = [
            "type",
            "format",
            "enum",
            "required",
            "properties",
            "additionalProperties",
            "items",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "pattern",
            "minimum",
            "maximum",
            "oneOf",
            "anyOf",
            "allOf",
            "$ref",
            // Words for people and tools, no rule.
            "description",
            "example",
            "examples",
            "default",
            "title",
            "discriminator",
        ];
        let doc = serde_json::to_value(crate::openapi()).unwrap();
        let mut seen = Vec::new();
        for item in doc["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                if let Some(schema) = op["requestBody"]["content"]["application/json"].get("schema")
                {
                    seen.push(schema.clone());
                }
                for p in op["parameters"].as_array().into_iter().flatten() {
                    seen.push(p["schema"].clone());
                }
            }
        }
        let mut visited = std::collections::BTreeSet::new();
        while let Some(schema) = seen.pop() {
            if let Some(name) = schema["$ref"].as_str() {
                if !visited.insert(name.to_owned()) {
                    continue;
                }
            }
            let schema = resolve(&schema).clone();
            let Some(object) = schema.as_object() else {
                continue;
            };
            for (keyword, value) in object {
                assert!(
                    known.contains(&keyword.as_str()),
                    "unknown keyword {keyword}"
                );
                if keyword == "pattern" {
                    assert_eq!(value, r"\S", "a pattern the walk does not know");
                }
            }
            for p in object
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                seen.push(p.1.clone());
            }
            for key in ["oneOf", "anyOf", "allOf"] {
                seen.extend(
                    object
                        .get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
            if let Some(items) = object.get("items") {
                seen.push(items.clone());
            }
        }
        assert!(visited.len() >= 5, "{visited:?}");
    }

    /// Every array a request body may hold, at every depth, states how many items it takes.
    #[test]
    fn every_array_of_a_request_body_has_max_items() {
        let doc = serde_json::to_value(crate::openapi()).unwrap();
        let mut seen = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if let Some(schema) = op["requestBody"]["content"]["application/json"].get("schema")
                {
                    seen.push((format!("{method} {path}"), schema.clone()));
                }
            }
        }
        let mut arrays = 0;
        let mut visited = std::collections::BTreeSet::new();
        while let Some((at, schema)) = seen.pop() {
            if let Some(name) = schema["$ref"].as_str() {
                if !visited.insert(name.to_owned()) {
                    continue;
                }
            }
            let schema = resolve(&schema).clone();
            if types(&schema).contains(&"array") {
                arrays += 1;
                assert!(schema["maxItems"].is_u64(), "{at} has no maxItems");
            }
            for (name, p) in schema["properties"].as_object().into_iter().flatten() {
                seen.push((format!("{at}/{name}"), p.clone()));
            }
            for key in ["oneOf", "anyOf", "allOf"] {
                for branch in schema[key].as_array().into_iter().flatten() {
                    seen.push((at.clone(), branch.clone()));
                }
            }
            if schema["items"].is_object() {
                seen.push((format!("{at}/*"), schema["items"].clone()));
            }
        }
        assert!(arrays >= 12, "{arrays} arrays");
    }

    #[test]
    fn a_list_past_its_bound_is_one_problem_and_bad_items_are_named_ten_at_most() {
        let ids = |n: usize, id: &str| vec![json!(id); n];
        let long = json!({"url": "https://a.example", "kinds": ["error_raised"], "mowers": ids(50_000, "x")});
        assert_eq!(
            body_problems(&long, "NewWebhook").unwrap(),
            [FieldProblem::new(
                "/mowers",
                "`/mowers` has 50000 items; it must have at most 1000."
            )]
        );
        let bad = json!({"url": "https://a.example", "kinds": ["error_raised"], "mowers": ids(1000, "x")});
        let problems = body_problems(&bad, "NewWebhook").unwrap();
        assert_eq!(problems.len(), NAMED_IDS + 1);
        assert_eq!(problems[9].pointer, "/mowers/9");
        assert_eq!(
            problems[10],
            FieldProblem::new(
                "/mowers",
                "`/mowers` has 990 more items with problems (only the first 10 are listed)."
            )
        );
        let at_the_bound = json!({"url": "https://a.example", "kinds": ["error_raised"], "mowers": ids(1000, &uuid::Uuid::nil().to_string())});
        assert_eq!(body_problems(&at_the_bound, "NewWebhook").unwrap(), []);
    }

    #[test]
    fn a_body_with_several_problems_lists_each_in_schema_order() {
        let body = json!({
            "site_id": "nope",
            "name": "   ",
            "serial": "",
            "display_order": 1.5,
            "blade_threshold_seconds": 0,
            "colour": "red"
        });
        let problems = body_problems(&body, "NewMower").unwrap();
        let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(
            pointers,
            [
                "/site_id",
                "/name",
                "/model",
                "/serial",
                "/display_order",
                "/blade_threshold_seconds",
                "/colour"
            ]
        );
        assert_eq!(problems[0].detail, "`/site_id` must be a UUID.");
        assert_eq!(problems[1].detail, "`/name` must not be only spaces.");
        assert_eq!(problems[2].detail, "`/model` is required.");
        assert_eq!(
            problems[3].detail,
            "`/serial` must have 1 to 100 characters."
        );
        assert_eq!(problems[4].detail, "`/display_order` must be an integer.");
        assert_eq!(
            problems[5].detail,
            "`/blade_threshold_seconds` must be from 1 to 315360000."
        );
        assert_eq!(problems[6].detail, "`/colour` is not a field of this body.");
    }

    #[test]
    fn a_valid_body_has_no_problem_and_nested_ones_are_pointed_at() {
        let valid = json!({"site_id": uuid::Uuid::nil(), "name": "a", "model": "b", "serial": "c"});
        assert_eq!(body_problems(&valid, "NewMower").unwrap(), []);
        let nested =
            json!({"name": "Roses", "polygon": {"type": "Polygon", "coordinates": [[[1, "x"]]]}});
        let problems = body_problems(&nested, "ZoneBody").unwrap();
        assert_eq!(
            problems,
            [FieldProblem::new(
                "/polygon/coordinates/0/0/1",
                "`/polygon/coordinates/0/0/1` must be a number."
            )]
        );
        assert_eq!(
            body_problems(&json!([]), "NewSite").unwrap(),
            [FieldProblem::new("", "The body must be an object.")]
        );
    }

    #[test]
    fn query_values_are_checked_against_their_parameters() {
        let parameters = vec![
            json!({"name": "from", "required": true, "schema": {"type": "string", "format": "date"}}),
            json!({"name": "limit", "schema": {"type": "integer"}}),
            json!({"name": "kind", "schema": {"$ref": "#/components/schemas/EventKind"}}),
        ];
        let pairs = |q: &[(&str, &str)]| -> Vec<(String, String)> {
            q.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            query_problems(
                &pairs(&[("limit", "x"), ("kind", "blade_due")]),
                &parameters
            ),
            [
                "The query parameter `from` is required.",
                "The query parameter `limit` must be an integer."
            ]
        );
        let problems = query_problems(
            &pairs(&[("from", "2026-06-01"), ("kind", "x")]),
            &parameters,
        );
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with("The query parameter `kind` must be one of `error_raised`,")
        );
    }
}
