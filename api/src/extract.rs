//! Extractors that answer their rejections as problems. axum's own `Path`, `Query` and `Json`
//! reject with `text/plain`; these wrap them so that a malformed id or body is a problem like any
//! other error (see [`ApiError`]).

use crate::error::{ApiError, FieldProblem};
use crate::validate;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;
use utoipa::openapi::path::ParameterIn;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// `axum::extract::Path`, rejected with a `400` problem in the service's words that names the
/// parameter: every path parameter of the API is a UUID, so a parameter that is not one is named
/// as such.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => {
                tracing::debug!(error = %e, "A path parameter was refused.");
                let raw = RawPathParams::from_request_parts(parts, state).await.ok();
                let problems: Vec<String> = raw
                    .iter()
                    .flat_map(|raw| raw.iter())
                    .filter(|(_, value)| Uuid::parse_str(value).is_err())
                    .map(|(key, _)| format!("The path parameter `{key}` must be a UUID."))
                    .collect();
                Err(ApiError::BadRequest(if problems.is_empty() {
                    "A path parameter is not valid.".to_owned()
                } else {
                    problems.join(" ")
                }))
            }
            Err(other) => Err(other.into()),
        }
    }
}

/// `axum::extract::Query` read by the service itself, rejected with a `400` problem in its own
/// words: every parameter that is missing or not of its type is named (against the parameters
/// the operation documents, [`validate::query_problems`]); also when the query string holds a
/// NUL character (`%00`), which no store can keep or compare.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned + IntoParams,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        if query.contains("%00") {
            return Err(ApiError::BadRequest(
                "The query string holds a NUL character (`%00`); no parameter may contain one."
                    .to_owned(),
            ));
        }
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let parameters: Vec<Value> = T::into_params(|| Some(ParameterIn::Query))
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .collect();
        let problems = validate::query_problems(&pairs, &parameters);
        if !problems.is_empty() {
            return Err(ApiError::BadRequest(problems.join(" ")));
        }
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(ApiQuery)
            .map_err(|e| {
                // What the documented parameters do not say (an undocumented one, a range):
                // named when serde knows which.
                tracing::debug!(error = %e, "A query string was refused.");
                let name = e.path().to_string();
                ApiError::BadRequest(if name.is_empty() || name == "?" || name.contains('.') {
                    "A query parameter is not valid; see the operation's parameters.".to_owned()
                } else {
                    format!("The query parameter `{name}` is not valid.")
                })
            })
    }
}

/// A JSON body, read by the service itself and refused with a problem: `415` without a JSON
/// content type, `400` for JSON that does not parse, `413` beyond the body limit, and `422`
/// listing every problem (`errors`) of a body that does not fit the operation's schema
/// ([`validate::body_problems`]) or holds a NUL character (`\u0000`) in any string, key or
/// value, at any depth: no store can keep one, and every store must answer alike
/// (`swath_domain::text`).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned + ToSchema,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = json_content_type(request.headers());
        // The bytes once, within the body limit (a `413` comes before a `415`).
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(bytes_rejection)?;
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(
                "Send the body as JSON, with `Content-Type: application/json`.".to_owned(),
            ));
        }
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|e| crate::error::not_json(&e))?;
        let mut problems = validate::body_problems(&value, &T::name()).unwrap_or_default();
        if swath_domain::text::json_has_nul(&bytes) {
            let at = swath_domain::text::nul_in_value(&value).unwrap_or_default();
            problems.push(FieldProblem::new(
                &at,
                format!(
                    "{} holds a NUL character (\\u0000); no text may contain one.",
                    if at.is_empty() {
                        "The body".to_owned()
                    } else {
                        format!("`{at}`")
                    }
                ),
            ));
        }
        if !problems.is_empty() {
            return Err(ApiError::Validation(problems));
        }
        // From the bytes, not the value: a key given twice is refused, not the last one kept.
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(&mut deserializer)
            .map(ApiJson)
            .map_err(|e| {
                let mut at = String::new();
                for segment in e.path().iter() {
                    match segment {
                        Segment::Seq { index } => at.push_str(&format!("/{index}")),
                        Segment::Map { key } | Segment::Enum { variant: key } => {
                            at.push_str(&format!("/{}", key.replace('~', "~0").replace('/', "~1")))
                        }
                        Segment::Unknown => at.push_str("/?"),
                    }
                }
                let message = e.inner().to_string();
                if let Some(key) = message
                    .strip_prefix("duplicate field `")
                    .and_then(|rest| rest.split('`').next())
                {
                    let at = format!("{at}/{key}");
                    return ApiError::invalid(&at, format!("`{at}` is given more than once."));
                }
                // The schema walk let it through: the schema says less than the type. Logged, so
                // that the gap gets closed.
                tracing::warn!(error = %e, schema = %T::name(), "A body fit its schema but not its type.");
                let subject = if at.is_empty() { "The body".to_owned() } else { format!("`{at}`") };
                ApiError::invalid(&at, format!("{subject} is not valid here."))
            })
    }
}

/// Whether the request says its body is JSON (`application/json` or `application/*+json`), as
/// `axum::Json` requires.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(mime) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
    else {
        return false;
    };
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(format!(
            "The body is larger than the {} bytes this service accepts.",
            crate::BODY_LIMIT_BYTES
        ))
    } else {
        ApiError::BadRequest(format!(
            "The body could not be read: {}.",
            rejection.body_text()
        ))
    }
}

/// `axum::Json` as [`ApiJson`] rejects it, but without the NUL check: for bodies whose every
/// element the domain validates alone (state reports, where a NUL drops that report as
/// `invalid_text` and the others are stored).
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJsonElements<T>(pub T);
