//! Authentication, tenant isolation and the problem answers: every refusal is an RFC 9457
//! problem, and another tenant's id is indistinguishable from an unknown one.

mod helpers;

use axum::http::{Method, StatusCode};
use helpers::{TestApp, TOKEN_A, TOKEN_A_SOUTH, TOKEN_A_WRITE_ONLY};
use swath_api::error::FieldProblem;
use uuid::Uuid;

#[tokio::test]
async fn a_missing_or_unknown_token_is_401_with_a_bearer_challenge() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    for path in [
        "/v1/mowers".to_owned(),
        format!("/v1/mowers/{bravo}/state"),
        format!("/v1/mowers/{bravo}/health"),
    ] {
        let missing = app.get(&path, None).await;
        assert_eq!(missing.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(missing.problem_type(), "unauthorized");
        assert!(missing
            .header("www-authenticate")
            .unwrap()
            .starts_with("Bearer"));

        let unknown = app.get(&path, Some("not-a-token")).await;
        assert_eq!(unknown.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(unknown.problem_type(), "unauthorized");
        let challenge = unknown.header("www-authenticate").unwrap();
        assert!(challenge.starts_with("Bearer") && challenge.contains("invalid_token"));
    }
    let basic = app
        .get_with(
            "/v1/mowers",
            None,
            &[("authorization", "Basic dXNlcjpwYXNz")],
        )
        .await;
    assert_eq!(basic.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn authentication_comes_before_the_path_is_read() {
    let app = TestApp::spawn().await;
    let response = app.get("/v1/mowers/not-a-uuid/state", None).await;
    assert_eq!(response.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_token_without_the_read_scope_is_403() {
    let app = TestApp::spawn().await;
    let response = app.get("/v1/mowers", Some(TOKEN_A_WRITE_ONLY)).await;
    assert_eq!(response.status, StatusCode::FORBIDDEN);
    assert_eq!(response.problem_type(), "forbidden");
    assert!(response
        .header("www-authenticate")
        .unwrap()
        .contains("insufficient_scope"));
}

#[tokio::test]
async fn another_accounts_mower_answers_exactly_like_an_unknown_id() {
    let app = TestApp::spawn().await;
    let delta = app.b.mowers[0];
    let unknown = Uuid::now_v7();
    for route in ["state", "health"] {
        let foreign = app
            .get(&format!("/v1/mowers/{delta}/{route}"), Some(TOKEN_A))
            .await;
        let missing = app
            .get(&format!("/v1/mowers/{unknown}/{route}"), Some(TOKEN_A))
            .await;
        assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{route}");
        assert_eq!(foreign.status, missing.status, "{route}");
        assert_eq!(foreign.body, missing.body, "{route}");
        assert_eq!(foreign.content_type(), missing.content_type(), "{route}");
        assert_eq!(foreign.problem_type(), "not-found");
    }
}

#[tokio::test]
async fn a_mower_of_a_site_the_token_may_not_see_answers_like_an_unknown_id() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0]; // North; the token sees South only.
    let unknown = Uuid::now_v7();
    let hidden = app
        .get(&format!("/v1/mowers/{bravo}/state"), Some(TOKEN_A_SOUTH))
        .await;
    let missing = app
        .get(&format!("/v1/mowers/{unknown}/state"), Some(TOKEN_A_SOUTH))
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    assert_eq!(hidden.body, missing.body);
}

#[tokio::test]
async fn a_malformed_id_is_a_400_problem() {
    let app = TestApp::spawn().await;
    for path in ["/v1/mowers/not-a-uuid/state", "/v1/mowers/123/health"] {
        let response = app.get(path, Some(TOKEN_A)).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{path}");
        let problem = response.problem();
        assert_eq!(problem.type_uri, "https://swath.dev/problems/bad-request");
        assert!(problem.detail.contains("UUID"), "{}", problem.detail);
    }
}

#[tokio::test]
async fn an_unknown_route_is_a_404_problem() {
    let app = TestApp::spawn().await;
    for token in [None, Some(TOKEN_A)] {
        let response = app.get("/v1/lawnmowers", token).await;
        assert_eq!(response.status, StatusCode::NOT_FOUND);
        assert_eq!(response.problem_type(), "not-found");
    }
}

#[tokio::test]
async fn a_wrong_method_is_a_405_problem_with_allow() {
    let app = TestApp::spawn().await;
    let response = app
        .send(Method::DELETE, "/v1/mowers", Some(TOKEN_A), &[])
        .await;
    assert_eq!(response.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(response.problem_type(), "method-not-allowed");
    assert!(response.header("allow").unwrap().contains("GET"));
}

#[tokio::test]
async fn operations_routes_need_no_token() {
    let app = TestApp::spawn().await;
    let health = app.get("/healthz", None).await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(&health.body[..], b"ok");

    let document = app.get("/openapi.json", None).await;
    assert_eq!(document.status, StatusCode::OK);
    assert_eq!(
        document.json(),
        serde_json::to_value(swath_api::openapi()).unwrap()
    );

    let docs = app.get("/docs/", None).await;
    assert_eq!(docs.status, StatusCode::OK);
    assert!(docs.content_type().unwrap().starts_with("text/html"));
}

#[tokio::test]
async fn malformed_bodies_are_problems_with_stable_types() {
    let app = TestApp::spawn().await;
    let token = Some(helpers::TOKEN_A_ADMIN);
    let json = [("content-type", "application/json")];
    for (headers, body, status, slug) in [
        (
            &json[..],
            "{\"name\": ",
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (&json[..], "", StatusCode::BAD_REQUEST, "bad-request"),
        (
            &[][..],
            "{}",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
        ),
        (
            &[("content-type", "text/plain")][..],
            "{}",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
        ),
        (
            &json[..],
            "[1, 2]",
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation-failed",
        ),
        (
            &json[..],
            "{\"name\": 7}",
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation-failed",
        ),
    ] {
        let response = app
            .send_body(Method::POST, "/v1/sites", token, headers, body)
            .await;
        assert_eq!(response.status, status, "{headers:?} {body}");
        let problem = response.problem();
        assert_eq!(
            problem.type_uri,
            format!("https://swath.dev/problems/{slug}"),
            "{body}"
        );
        // The service's words and the parser's cause, not the framework's step.
        assert!(!problem.detail.contains("Failed to"), "{}", problem.detail);
    }
    let response = app
        .send_body(Method::POST, "/v1/sites", token, &json, "{\"name\": 7}")
        .await;
    let problem = response.problem();
    assert_eq!(
        problem.detail,
        "The request has 2 problems: `/name` must be a string. `/time_zone` is required."
    );
    assert_eq!(
        problem.errors,
        [
            FieldProblem::new("/name", "`/name` must be a string."),
            FieldProblem::new("/time_zone", "`/time_zone` is required.")
        ]
    );
    // The same for the batch of states: not an array is 422, not JSON 400.
    let response = app
        .send_body(Method::POST, "/v1/states", token, &json, "{\"a\": 1}")
        .await;
    assert_eq!(response.status, StatusCode::UNPROCESSABLE_ENTITY);
    let response = app
        .send_body(Method::POST, "/v1/states", token, &json, "[{]")
        .await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        response.problem().detail,
        "The body is not valid JSON: line 1, column 3 holds a character JSON does not allow there."
    );
    // Where the parser stopped, in the service's words, never the parser's sentence ("EOF while
    // parsing an object", "key must be a string").
    for (path, body, detail) in [
        (
            "/v1/sites",
            "{\"name\": ",
            "The body is not valid JSON: it ends (line 1, column 9) before its value is complete.",
        ),
        (
            "/v1/sites",
            "",
            "The body is not valid JSON: it ends (line 1, column 0) before its value is complete.",
        ),
        (
            "/v1/sites",
            "{\n  \"name\": \"North\",\n  time_zone: 1\n}",
            "The body is not valid JSON: line 3, column 3 holds a character JSON does not allow there.",
        ),
        (
            "/v1/states",
            "[{\"a\": 1}",
            "The body is not valid JSON: it ends (line 1, column 9) before its value is complete.",
        ),
    ] {
        let response = app.send_body(Method::POST, path, token, &json, body).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(response.problem().detail, detail, "{body}");
    }
}

#[tokio::test]
async fn bad_query_strings_are_400_problems() {
    let app = TestApp::spawn().await;
    for path in [
        "/v1/mowers?limit=-1",
        "/v1/mowers?limit=abc",
        "/v1/mowers?cursor=abc",
        "/v1/sites?limit=100000",
        "/v1/tokens?cursor=bW93ZXJzOg",
    ] {
        let response = app.get(path, Some(helpers::TOKEN_A_ADMIN)).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(response.problem_type(), "bad-request");
    }
}

#[tokio::test]
async fn every_problem_type_of_the_document_is_one_the_service_answers() {
    // The examples of the document are built by the service's own error mapping.
    let doc = serde_json::to_value(swath_api::openapi()).unwrap();
    let mut types = std::collections::BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for operation in item.as_object().unwrap().values() {
            for (status, response) in operation["responses"].as_object().unwrap() {
                let example = &response["content"]["application/problem+json"]["example"];
                if example.is_null() {
                    continue;
                }
                assert_eq!(example["status"].to_string(), *status);
                types.insert(example["type"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(types.len() >= 10, "{types:?}");
}

/// A 400 says what is wrong in the service's words, naming the parameter, never the framework's
/// ("Failed to deserialize query string: …", "Invalid URL: …").
#[tokio::test]
async fn bad_parameters_are_named_without_framework_text() {
    let app = TestApp::spawn().await;
    let mower = app.a.mowers[0].0;
    for (path, names) in [
        (format!("/v1/mowers/{mower}/days"), "`from`"),
        (format!("/v1/mowers/{mower}/days?from=2026-06-01"), "`to`"),
        (
            format!("/v1/mowers/{mower}/days?from=yesterday&to=2026-06-02"),
            "from",
        ),
        ("/v1/mowers?limit=abc".to_owned(), "limit"),
        (format!("/v1/mowers/{mower}/history?from=noon"), "from"),
        ("/v1/mowers/not-a-uuid/state".to_owned(), "UUID"),
    ] {
        let response = app.get(&path, Some(TOKEN_A)).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{path}");
        let detail = response.problem().detail;
        assert!(detail.contains(names), "{path}: {detail}");
        for framework in ["Failed to deserialize", "Invalid URL", "Failed to parse"] {
            assert!(!detail.contains(framework), "{path}: {detail}");
        }
    }
}

/// A `422` lists every problem of the body, each with its JSON Pointer, in the schema's order,
/// in the service's words (decision 121).
#[tokio::test]
async fn a_body_with_several_problems_lists_each_of_them() {
    let app = TestApp::spawn().await;
    let response = app
        .post(
            "/v1/mowers",
            Some(helpers::TOKEN_A_ADMIN),
            &serde_json::json!({
                "site_id": "north",
                "name": "   ",
                "serial": "SN-1",
                "display_order": "first",
                "blade_threshold_seconds": 0,
                "colour": "red"
            }),
        )
        .await;
    assert_eq!(response.status, StatusCode::UNPROCESSABLE_ENTITY);
    let problem = response.problem();
    let pointers: Vec<&str> = problem.errors.iter().map(|e| e.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/site_id",
            "/name",
            "/model",
            "/display_order",
            "/blade_threshold_seconds",
            "/colour"
        ]
    );
    assert!(problem.detail.starts_with("The request has 6 problems: "));
    for error in &problem.errors {
        assert!(problem.detail.contains(&error.detail), "{}", problem.detail);
    }
    insta::assert_json_snapshot!("several_problems", response.json());

    // What the schema cannot say is gathered too: a nil id and a site the token may not see.
    let response = app
        .post(
            "/v1/mowers",
            Some(helpers::TOKEN_A_ADMIN),
            &serde_json::json!({
                "id": Uuid::nil(),
                "site_id": Uuid::now_v7(),
                "name": "Front",
                "model": "M",
                "serial": "S"
            }),
        )
        .await;
    assert_eq!(response.status, StatusCode::UNPROCESSABLE_ENTITY);
    let pointers: Vec<String> = response
        .problem()
        .errors
        .into_iter()
        .map(|e| e.pointer)
        .collect();
    assert_eq!(pointers, ["/id", "/site_id"]);

    // A key given twice is refused, not the last one kept.
    let response = app
        .send_body(
            Method::POST,
            "/v1/sites",
            Some(helpers::TOKEN_A_ADMIN),
            &[("content-type", "application/json")],
            r#"{"name": "A", "time_zone": "Europe/Berlin", "name": "B"}"#,
        )
        .await;
    assert_eq!(response.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        response.problem().errors,
        [FieldProblem::new(
            "/name",
            "`/name` is given more than once."
        )]
    );
}

/// A missing or malformed query parameter is named in the service's words, every one of them,
/// with nothing of serde's or axum's ("missing field", "Failed to deserialize").
#[tokio::test]
async fn a_400_names_each_parameter_in_the_services_words() {
    let app = TestApp::spawn().await;
    let mower = app.a.mowers[0].0;
    for (path, detail) in [
        (
            format!("/v1/mowers/{mower}/days"),
            "The query parameter `from` is required. The query parameter `to` is required.",
        ),
        (
            format!("/v1/mowers/{mower}/days?from=2026-06-01"),
            "The query parameter `to` is required.",
        ),
        (
            format!("/v1/mowers/{mower}/days?from=yesterday&to=2026-06-02"),
            "The query parameter `from` must be a date (like `2026-06-01`).",
        ),
        (
            "/v1/mowers?limit=abc".to_owned(),
            "The query parameter `limit` must be an integer.",
        ),
        (
            "/v1/events?kind=blade&mower_id=7".to_owned(),
            "The query parameter `mower_id` must be a UUID. The query parameter `kind` must be \
             one of `error_raised`, `error_cleared`, `geofence_left`, `geofence_returned`, \
             `battery_low`, `mowing_started`, `mowing_finished`, `blade_due`, `zone_entered`, \
             `zone_left`, `went_offline`, `came_online`, `session_ended`.",
        ),
        (
            "/v1/mowers/not-a-uuid/state".to_owned(),
            "The path parameter `id` must be a UUID.",
        ),
    ] {
        let response = app.get(&path, Some(TOKEN_A)).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{path}");
        let problem = response.problem();
        assert_eq!(problem.detail, detail, "{path}");
        assert!(problem.errors.is_empty(), "{path}");
    }
}
