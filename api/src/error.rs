//! Every error the API answers, mapped to an RFC 9457 problem in exactly one place
//! ([`ApiError`]'s `IntoResponse`), so that status codes, `type` URIs and headers cannot drift
//! between routes.
//!
//! Internal failures (a store or token store that failed) are logged here, with their cause, and
//! answered with a generic body: a client never sees internals.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use swath_application::ports::{
    chain, AssignmentError, DirectoryError, ProjectionError, StoreError, TokenError, WatchError,
    WebhookError,
};
use swath_application::{
    AccessError, Hidden, MowerReadsError, MowerSettingsError, SubmissionError, WebhooksError,
};
use utoipa::ToSchema;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The prefix of every problem `type`. The URIs are stable identifiers: clients match on them.
pub const PROBLEM_BASE: &str = "https://swath.dev/problems/";

/// An RFC 9457 problem document: the body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "type": "https://swath.dev/problems/not-found",
    "title": "Not found",
    "status": 404,
    "detail": "The mower does not exist or is not visible to this token."
}))]
pub struct Problem {
    /// A stable URI that identifies the kind of problem; clients match on it. One of
    /// `https://swath.dev/problems/` followed by `unauthorized`, `forbidden`, `not-found`,
    /// `no-state-yet`, `bad-request`, `validation-failed`, `conflict`, `payload-too-large`,
    /// `unsupported-media-type`, `not-acceptable`, `method-not-allowed`, `uri-too-long`,
    /// `headers-too-large`, `too-many-requests`, `unavailable` or `internal`.
    #[serde(rename = "type")]
    #[schema(example = "https://swath.dev/problems/not-found")]
    pub type_uri: String,
    /// A short summary of the kind of problem; the same for every occurrence of a `type`.
    #[schema(example = "Not found")]
    pub title: String,
    /// The HTTP status code, repeated for clients that only keep the body.
    #[schema(example = 404)]
    pub status: u16,
    /// What went wrong with this request, for people.
    #[schema(example = "The mower does not exist or is not visible to this token.")]
    pub detail: String,
    /// `validation-failed` only (absent from the other types): every problem found in the
    /// request, each with where it is, in the order of the operation's schema. A body is checked
    /// whole before it is refused, so fixing what this lists fixes the body's shape at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(example = json!([
        {"pointer": "/name", "detail": "`/name` must not be only spaces."},
        {"pointer": "/time_zone", "detail": "`/time_zone` is required."}
    ]))]
    pub errors: Vec<FieldProblem>,
}

/// One problem of a refused request: where it is and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FieldProblem {
    /// Where the problem is: a JSON Pointer (RFC 6901) into the request body, like `/name` or
    /// `/polygon/coordinates/0/1`; `""` for the body as a whole.
    #[schema(example = "/name")]
    pub pointer: String,
    /// What is wrong there, for people; it names the pointer.
    #[schema(example = "`/name` must not be only spaces.")]
    pub detail: String,
}

impl FieldProblem {
    pub fn new(pointer: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            detail: detail.into(),
        }
    }
}

/// The kinds of resource a path can name. Each answers one `404` for "unknown", "another
/// account's" and "hidden from this token", so that ids of other tenants cannot be probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Account,
    Site,
    Mower,
    Token,
    Geofence,
    Zone,
    Assignment,
    Import,
    Webhook,
    Delivery,
}

impl Resource {
    fn name(self) -> &'static str {
        match self {
            Resource::Account => "account",
            Resource::Site => "site",
            Resource::Mower => "mower",
            Resource::Token => "token",
            Resource::Geofence => "geofence",
            Resource::Zone => "zone",
            Resource::Assignment => "assignment",
            Resource::Import => "import",
            Resource::Webhook => "webhook",
            Resource::Delivery => "delivery",
        }
    }
}

/// Why a request was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No `Authorization: Bearer` header.
    #[error("no bearer token was given")]
    MissingToken,
    /// A bearer token was given but is malformed, unknown or revoked.
    #[error("the bearer token is not valid")]
    InvalidToken,
    /// The token is valid but lacks a scope the route needs.
    #[error("the token lacks the `{0}` scope")]
    MissingScope(&'static str),
    /// The token has the scope but may still not do this (e.g. a token limited to some sites
    /// creating a site, or a token stronger than itself).
    #[error("{0}")]
    Forbidden(String),
    /// The resource does not exist, belongs to another account or to a site the principal may
    /// not see. One variant for the three cases, so that they answer byte for byte the same.
    #[error("the {} does not exist or is not visible to this token", .0.name())]
    NotFound(Resource),
    /// The mower is visible but has not reported a state yet.
    #[error("the mower has not reported a state yet")]
    NoStateYet,
    /// No route matches the path.
    #[error("no route matches the path")]
    RouteNotFound,
    /// The path exists, but not with this method.
    #[error("the method is not allowed on this path")]
    MethodNotAllowed,
    /// A path or query parameter, a cursor or the JSON body could not be read.
    #[error("{0}")]
    BadRequest(String),
    /// The body is JSON but does not fit the operation's schema, or a value is out of range:
    /// every problem found (at least one).
    #[error("{}", validation_detail(.0))]
    Validation(Vec<FieldProblem>),
    /// The request conflicts with the current state (a taken id, a site that still has mowers).
    #[error("{0}")]
    Conflict(String),
    /// The body is larger than the operation accepts.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The body is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The `Accept` header names no media type the operation answers in.
    #[error("{0}")]
    NotAcceptable(String),
    /// The request URI is longer than the server accepts.
    #[error("{0}")]
    UriTooLong(String),
    /// The request head has more or larger header fields than the server accepts.
    #[error("{0}")]
    HeadersTooLarge(String),
    /// The client holds as much of the service as it may (its live streams), or its account
    /// created as many accounts or tokens as it may for now; it may try again after
    /// `retry_after` seconds (the `Retry-After` header).
    #[error("{detail}")]
    TooManyRequests { detail: String, retry_after: u64 },
    /// The token was valid when the request began and was revoked while it ran (an import
    /// stopped): a `401` that says what became of the request.
    #[error("{0}")]
    RevokedWhileRunning(String),
    /// A backing service could not be reached; the client may retry. The cause is logged.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A bug or corrupt data. The cause is logged.
    #[error("internal: {0}")]
    Internal(String),
}

/// The `detail` of a `validation-failed` problem: its one problem's, or how many and each.
fn validation_detail(problems: &[FieldProblem]) -> String {
    match problems {
        [] => "The request is not valid.".to_owned(),
        [one] => one.detail.clone(),
        many => {
            let each: Vec<&str> = many.iter().map(|p| p.detail.as_str()).collect();
            format!(
                "The request has {} problems: {}",
                many.len(),
                each.join(" ")
            )
        }
    }
}

impl ApiError {
    /// A `422` for one problem at `pointer` (see [`FieldProblem`]).
    pub fn invalid(pointer: impl Into<String>, detail: impl Into<String>) -> Self {
        ApiError::Validation(vec![FieldProblem::new(pointer, detail)])
    }

    /// A `422` for the `(pointer, detail)` problems the use cases answer.
    pub fn problems(problems: Vec<(String, String)>) -> Self {
        ApiError::Validation(
            problems
                .into_iter()
                .map(|(pointer, detail)| FieldProblem::new(pointer, detail))
                .collect(),
        )
    }

    /// The status, the `type` slug and the title of each variant.
    fn kind(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            ApiError::MissingToken | ApiError::InvalidToken | ApiError::RevokedWhileRunning(_) => {
                (StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized")
            }
            ApiError::MissingScope(_) | ApiError::Forbidden(_) => {
                (StatusCode::FORBIDDEN, "forbidden", "Forbidden")
            }
            ApiError::NotFound(_) | ApiError::RouteNotFound => {
                (StatusCode::NOT_FOUND, "not-found", "Not found")
            }
            ApiError::NoStateYet => (StatusCode::NOT_FOUND, "no-state-yet", "No state yet"),
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "Method not allowed",
            ),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad-request", "Bad request"),
            ApiError::Validation(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation-failed",
                "Validation failed",
            ),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict", "Conflict"),
            ApiError::PayloadTooLarge(_) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                "Payload too large",
            ),
            ApiError::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
            ),
            ApiError::NotAcceptable(_) => (
                StatusCode::NOT_ACCEPTABLE,
                "not-acceptable",
                "Not acceptable",
            ),
            ApiError::UriTooLong(_) => (StatusCode::URI_TOO_LONG, "uri-too-long", "URI too long"),
            ApiError::HeadersTooLarge(_) => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers-too-large",
                "Request header fields too large",
            ),
            ApiError::TooManyRequests { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "too-many-requests",
                "Too many requests",
            ),
            ApiError::Unavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
            ),
            ApiError::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal server error",
            ),
        }
    }

    /// The problem document of this error. Internal details never reach it.
    pub fn problem(&self) -> Problem {
        let (status, slug, title) = self.kind();
        let detail = match self {
            ApiError::MissingToken => {
                "Send an API token in an `Authorization: Bearer <token>` header.".to_owned()
            }
            ApiError::InvalidToken => "The bearer token is unknown or revoked.".to_owned(),
            ApiError::MissingScope(scope) => {
                format!("The token does not have the `{scope}` scope this route needs.")
            }
            ApiError::NotFound(resource) => format!(
                "The {} does not exist or is not visible to this token.",
                resource.name()
            ),
            ApiError::NoStateYet => "The mower has not reported a state yet.".to_owned(),
            ApiError::RouteNotFound => "No route matches this path.".to_owned(),
            ApiError::MethodNotAllowed => {
                "This path does not accept this method; see the `Allow` header.".to_owned()
            }
            ApiError::Validation(problems) => validation_detail(problems),
            ApiError::Forbidden(detail)
            | ApiError::BadRequest(detail)
            | ApiError::Conflict(detail)
            | ApiError::PayloadTooLarge(detail)
            | ApiError::UnsupportedMediaType(detail)
            | ApiError::NotAcceptable(detail)
            | ApiError::UriTooLong(detail)
            | ApiError::HeadersTooLarge(detail)
            | ApiError::RevokedWhileRunning(detail)
            | ApiError::TooManyRequests { detail, .. } => detail.clone(),
            ApiError::Unavailable(_) => {
                "A service Swath depends on is unavailable; try again later.".to_owned()
            }
            ApiError::Internal(_) => "Swath failed to answer this request.".to_owned(),
        };
        Problem {
            type_uri: format!("{PROBLEM_BASE}{slug}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail,
            errors: match self {
                ApiError::Validation(problems) => problems.clone(),
                _ => Vec::new(),
            },
        }
    }
}

/// The `Retry-After` of a 503, in seconds: about the time a store failover takes.
pub const UNAVAILABLE_RETRY_AFTER: u64 = 5;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            ApiError::Unavailable(cause) => {
                tracing::error!(error = %cause, "A request failed because a backing service is unavailable.");
            }
            ApiError::Internal(cause) => {
                tracing::error!(error = %cause, "A request failed with an internal error.");
            }
            _ => {}
        }
        let problem = self.problem();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        // Serialising four strings cannot fail; the fallback only avoids a panic path.
        let body = serde_json::to_vec(&problem).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        // RFC 6750 §3: a 401 names the scheme (and why the token failed), a 403 the scope.
        let challenge = match &self {
            ApiError::MissingToken => Some("Bearer realm=\"swath\""),
            ApiError::InvalidToken | ApiError::RevokedWhileRunning(_) => {
                Some("Bearer realm=\"swath\", error=\"invalid_token\"")
            }
            ApiError::MissingScope("read") => {
                Some("Bearer realm=\"swath\", error=\"insufficient_scope\", scope=\"read\"")
            }
            ApiError::MissingScope("write") => {
                Some("Bearer realm=\"swath\", error=\"insufficient_scope\", scope=\"write\"")
            }
            ApiError::MissingScope("admin") => {
                Some("Bearer realm=\"swath\", error=\"insufficient_scope\", scope=\"admin\"")
            }
            ApiError::MissingScope(_) => {
                Some("Bearer realm=\"swath\", error=\"insufficient_scope\"")
            }
            _ => None,
        };
        if let ApiError::TooManyRequests { retry_after, .. } = &self {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        // A store failing over answers again within seconds (docs/operations.md, "A highly
        // available PostgreSQL"): a client may try again then rather than at once.
        if let ApiError::Unavailable(_) = &self {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(UNAVAILABLE_RETRY_AFTER),
            );
        }
        if let Some(challenge) = challenge {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        response
    }
}

/// The innermost cause of a rejection, in its own words: axum's outer text ("Failed to parse the
/// request body as JSON: …") describes the framework's step, not the client's mistake, which the
/// parser's error underneath names.
/// A body that does not parse as JSON, in the service's words: where the parser stopped and
/// why in a few words, never the parser's own sentence.
pub(crate) fn not_json(e: &serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let (line, column) = (e.line(), e.column());
    ApiError::BadRequest(match e.classify() {
        Category::Eof => format!(
            "The body is not valid JSON: it ends (line {line}, column {column}) before its value \
             is complete."
        ),
        Category::Syntax => format!(
            "The body is not valid JSON: line {line}, column {column} holds a character JSON does \
             not allow there."
        ),
        Category::Data | Category::Io => "The body is not valid JSON.".to_owned(),
    })
}

impl From<PathRejection> for ApiError {
    /// What `ApiPath` does not word itself: missing path parameters mean a route and its handler
    /// disagree, a bug, not the client's.
    fn from(rejection: PathRejection) -> Self {
        ApiError::Internal(rejection.body_text())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
                "Send the body as JSON, with `Content-Type: application/json`.".to_owned(),
            ),
            JsonRejection::JsonSyntaxError(e) => {
                // The parser's error is somewhere in axum's chain, bare or with its path.
                let mut next: Option<&dyn std::error::Error> = Some(&e);
                while let Some(error) = next {
                    if let Some(e) = error.downcast_ref::<serde_json::Error>() {
                        return not_json(e);
                    }
                    if let Some(e) =
                        error.downcast_ref::<serde_path_to_error::Error<serde_json::Error>>()
                    {
                        return not_json(e.inner());
                    }
                    next = error.source();
                }
                ApiError::BadRequest("The body is not valid JSON.".to_owned())
            }
            // Only `ApiJsonElements` reads through `axum::Json`, into an array of values: what
            // does not deserialise is JSON that is no array.
            JsonRejection::JsonDataError(_) => {
                ApiError::invalid("", "The body must be a JSON array.")
            }
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge(format!(
                    "The body is larger than the {} bytes this service accepts.",
                    crate::BODY_LIMIT_BYTES
                ))
            }
            other => ApiError::BadRequest(format!(
                "The body could not be read: {}.",
                other.body_text()
            )),
        }
    }
}

impl From<DirectoryError> for ApiError {
    /// For failures a handler did not expect: a `NotFound`, `Conflict` or `InUse` that a route can
    /// cause is mapped by that route, which knows what it means there.
    fn from(e: DirectoryError) -> Self {
        match e {
            DirectoryError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            DirectoryError::NotFound(_)
            | DirectoryError::Conflict(_)
            | DirectoryError::InUse(_) => ApiError::Internal(chain(&e).to_string()),
        }
    }
}

/// The one translation of visibility to HTTP: an invisible mower or site answers what an unknown
/// id answers (`404`), an invisible site named in a body a `422`.
impl From<AccessError> for ApiError {
    fn from(e: AccessError) -> Self {
        match e {
            AccessError::NotVisible(Hidden::Mower) => ApiError::NotFound(Resource::Mower),
            AccessError::NotVisible(Hidden::Site) => ApiError::NotFound(Resource::Site),
            AccessError::NotVisible(Hidden::ReferencedSite) => ApiError::invalid(
                "/site_id",
                "`/site_id` names no site visible to this token.",
            ),
            AccessError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
        }
    }
}

impl From<MowerReadsError> for ApiError {
    fn from(e: MowerReadsError) -> Self {
        match e {
            MowerReadsError::Access(e) => e.into(),
            MowerReadsError::Directory(e) => e.into(),
            MowerReadsError::Telemetry(e) => e.into(),
            MowerReadsError::Watch(e) => e.into(),
            MowerReadsError::NoNotifications => {
                ApiError::Unavailable("no notification store is configured".into())
            }
            MowerReadsError::Range(why) => ApiError::BadRequest(why),
        }
    }
}

impl From<swath_application::SessionsError> for ApiError {
    fn from(e: swath_application::SessionsError) -> Self {
        use swath_application::SessionsError;
        match e {
            SessionsError::Invalid(problems) => ApiError::problems(problems),
            SessionsError::NotFound(hidden) => AccessError::NotVisible(hidden).into(),
            SessionsError::Unavailable(cause) => ApiError::Unavailable(cause),
        }
    }
}

impl From<swath_application::ExportError> for ApiError {
    fn from(e: swath_application::ExportError) -> Self {
        use swath_application::ExportError;
        match e {
            ExportError::Invalid(problems) => ApiError::problems(problems),
            ExportError::Access(e) => e.into(),
            ExportError::Directory(e) => e.into(),
            ExportError::Store(e) => e.into(),
            ExportError::Revoked => ApiError::InvalidToken,
        }
    }
}

impl From<MowerSettingsError> for ApiError {
    fn from(e: MowerSettingsError) -> Self {
        match e {
            MowerSettingsError::Access(e) => e.into(),
            MowerSettingsError::Watch(e) => e.into(),
            MowerSettingsError::Assignment(e) => e.into(),
            MowerSettingsError::NoNotifications | MowerSettingsError::NoAssignments => {
                ApiError::Unavailable(e.to_string())
            }
        }
    }
}

impl From<SubmissionError> for ApiError {
    fn from(e: SubmissionError) -> Self {
        match e {
            SubmissionError::Access(e) => e.into(),
            SubmissionError::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            StoreError::Corrupt(_) => ApiError::Internal(chain(&e).to_string()),
            // Validation at the door keeps what a store cannot keep out; what still gets refused
            // would be refused again: not a "try again".
            StoreError::Rejected(_) => {
                tracing::warn!(error = %chain(&e), "The store refused a request's data.");
                ApiError::invalid("", "The store refused a value of this request.")
            }
        }
    }
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        match e {
            TokenError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            TokenError::Conflict | TokenError::UnknownAccount(_) => {
                ApiError::Internal(chain(&e).to_string())
            }
        }
    }
}

impl From<swath_application::RateLimited> for ApiError {
    fn from(e: swath_application::RateLimited) -> Self {
        ApiError::TooManyRequests {
            detail: e.to_string(),
            retry_after: e.retry_after_seconds,
        }
    }
}

impl From<swath_application::IssueError> for ApiError {
    fn from(e: swath_application::IssueError) -> Self {
        use swath_application::IssueError;
        match e {
            IssueError::Invalid(problems) => ApiError::problems(problems),
            IssueError::NotCovered => {
                ApiError::Forbidden(swath_application::token_admin::NOT_COVERED.to_owned())
            }
            IssueError::RateLimited(e) => e.into(),
            IssueError::Access(e) => e.into(),
            IssueError::Store(e) => e.into(),
        }
    }
}

impl From<swath_application::FleetError> for ApiError {
    fn from(e: swath_application::FleetError) -> Self {
        use swath_application::FleetError;
        match e {
            FleetError::Access(e) => e.into(),
            FleetError::Forbidden(why) => ApiError::Forbidden(why.to_owned()),
            FleetError::Invalid(problems) => ApiError::problems(problems),
            FleetError::MowerTaken(id) => {
                ApiError::Conflict(format!("A mower with the id {id} exists already."))
            }
            FleetError::SiteInUse => ApiError::Conflict(
                "The site still has mowers; move them to another site or delete them first."
                    .to_owned(),
            ),
            FleetError::RateLimited(e) => e.into(),
            FleetError::FirstToken(e) => e.into(),
            FleetError::Store(e) => e.into(),
        }
    }
}

impl From<swath_application::live_streams::LiveStreamError> for ApiError {
    /// A refusal for want of a slot is the route's to answer (it counts and says which limit).
    fn from(e: swath_application::live_streams::LiveStreamError) -> Self {
        use swath_application::live_streams::LiveStreamError;
        match e {
            LiveStreamError::Access(e) => e.into(),
            LiveStreamError::Feed(e) => ApiError::Unavailable(e.to_string()),
            LiveStreamError::Refused(_) => ApiError::Internal(chain(&e).to_string()),
        }
    }
}

/// A value of a request the domain refused: a `422` at its field.
impl From<swath_domain::valid::Invalid> for ApiError {
    fn from(e: swath_domain::valid::Invalid) -> Self {
        ApiError::invalid(e.pointer, e.detail)
    }
}

impl From<WatchError> for ApiError {
    fn from(e: WatchError) -> Self {
        match e {
            WatchError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            WatchError::Corrupt(_) => ApiError::Internal(chain(&e).to_string()),
            WatchError::Limit(detail) => ApiError::Conflict(detail),
        }
    }
}

impl From<ProjectionError> for ApiError {
    fn from(e: ProjectionError) -> Self {
        match e {
            ProjectionError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            ProjectionError::Corrupt(_) => ApiError::Internal(chain(&e).to_string()),
        }
    }
}

impl From<AssignmentError> for ApiError {
    fn from(e: AssignmentError) -> Self {
        match e {
            AssignmentError::Unavailable(_) => ApiError::Unavailable(chain(&e).to_string()),
            AssignmentError::Limit(detail) => ApiError::Conflict(detail),
            AssignmentError::Conflict(_) => ApiError::Conflict(
                "An assignment with this id exists already; try again.".to_owned(),
            ),
            // The mower was deleted between the visibility check and the insert.
            AssignmentError::NotFound(_) => ApiError::NotFound(Resource::Mower),
        }
    }
}

/// The fallback for paths no route matches.
pub async fn route_not_found() -> ApiError {
    ApiError::RouteNotFound
}

/// The fallback for a known path asked with a method it does not accept. axum adds the `Allow`
/// header.
pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Answers a panic in a handler like any internal error: logged, generic problem, no internals.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    ApiError::Internal(format!("a handler panicked: {message}")).into_response()
}

impl From<WebhooksError> for ApiError {
    fn from(e: WebhooksError) -> Self {
        match e {
            WebhooksError::Forbidden(why) => ApiError::Forbidden(why),
            WebhooksError::NotFound => ApiError::NotFound(Resource::Webhook),
            WebhooksError::Invalid(problems) => ApiError::problems(problems),
            WebhooksError::TooManyEndpoints(at_most) => ApiError::Conflict(format!(
                "The account has {at_most} webhook endpoints, the most it may have: delete one \
                 before creating another."
            )),
            WebhooksError::TooManyTests {
                retry_after_seconds,
            } => ApiError::TooManyRequests {
                detail: "This webhook was sent as many test messages as it may be in a minute; \
                    `Retry-After` says when the next is allowed."
                    .to_owned(),
                retry_after: retry_after_seconds,
            },
            WebhooksError::Access(e) => e.into(),
            WebhooksError::Store(WebhookError::Unavailable(_)) => {
                ApiError::Unavailable(chain(&e).to_string())
            }
            WebhooksError::Store(_) => ApiError::Internal(chain(&e).to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;

    #[tokio::test]
    async fn an_unavailable_store_is_503_with_retry_after() {
        let response = ApiError::Unavailable("store unavailable".into()).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "5");
    }

    async fn body_of(error: ApiError) -> (StatusCode, String, String) {
        let response = error.into_response();
        let status = response.status();
        let content_type = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    #[tokio::test]
    async fn internal_errors_answer_a_generic_problem_without_their_cause() {
        for (error, status) in [
            (
                ApiError::Internal("secret table name".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (
                ApiError::Unavailable("secret host name".into()),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
        ] {
            let (got, content_type, body) = body_of(error).await;
            assert_eq!(got, status);
            assert_eq!(content_type, PROBLEM_JSON);
            assert!(!body.contains("secret"), "{body}");
        }
    }

    #[tokio::test]
    async fn a_panic_is_an_internal_problem() {
        let response = panic_response(Box::new("boom at secret.rs:1"));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("secret"));
    }
}
