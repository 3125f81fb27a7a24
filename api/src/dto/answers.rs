//! The answers many operations share, stated once as the document gives them: a route names the
//! set in its `responses(...)` instead of repeating its lines. A refusal is stated by its status
//! and description only; `crate::document` gives it the problem body.

use super::params::IdPath;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::{ObjectBuilder, RefOr, Response, ResponseBuilder, Type};
use utoipa::IntoResponses;

/// The `400` of a paged list.
#[derive(IntoResponses)]
#[response(status = 400, description = "`limit` or `cursor` is not valid.")]
pub struct PageRefused;

/// The `406` of an operation that answers JSON or CSV.
#[derive(IntoResponses)]
#[response(
    status = 406,
    description = "The `Accept` header admits neither `application/json` nor `text/csv`."
)]
pub struct NotAcceptable;

/// The `400` of a feed (events, alerts): its filters or its paging.
#[derive(IntoResponses)]
#[response(status = 400, description = "A parameter or the cursor is not valid.")]
pub struct FeedRefused;

/// The `400` of an operation that reads a JSON body (its `413`, `415` and `422` are every JSON
/// body's, `crate::document`).
#[derive(IntoResponses)]
#[response(status = 400, description = "The body is not valid JSON.")]
pub struct NotJson;

/// The `422` of a site's body (adding or changing a site).
#[derive(IntoResponses)]
#[response(
    status = 422,
    description = "The body does not fit the schema, or `time_zone` is not an IANA time zone name."
)]
pub struct SiteInvalid;

/// The `422` of a mower's body (adding or changing a mower).
#[derive(IntoResponses)]
#[response(
    status = 422,
    description = "The body does not fit the schema, a value is out of range, or `site_id` names \
        no site visible to this token."
)]
pub struct MowerInvalid;

/// The `422` of a zone's body (adding or changing a zone).
#[derive(IntoResponses)]
#[response(status = 422, description = "The name or the polygon is not valid.")]
pub struct ZoneInvalid;

/// The `400` and `404` of an operation on the one resource its path's `P` names.
pub struct ById<P>(PhantomData<P>);

impl<P: IdPath> IntoResponses for ById<P> {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refusals([
            (400, format!("{} is not a UUID.", P::ID)),
            (404, P::NOT_VISIBLE.to_owned()),
        ])
    }
}

/// [`ById`] of an operation that also reads a JSON body: its `400` says both.
pub struct ByIdWithBody<P>(PhantomData<P>);

impl<P: IdPath> IntoResponses for ByIdWithBody<P> {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refusals([
            (
                400,
                format!("{} is not a UUID, or the body is not valid JSON.", P::ID),
            ),
            (404, P::NOT_VISIBLE.to_owned()),
        ])
    }
}

/// The `400` and `404` of a read of what a mower reported last: the mower may be invisible, or
/// not have reported yet.
#[derive(IntoResponses)]
pub enum StateById {
    #[response(status = 400, description = "The id is not a UUID.")]
    _BadId,
    #[response(
        status = 404,
        description = "No such mower is visible to this token (type `not-found`), or it has not \
            reported a state yet (type `no-state-yet`)."
    )]
    _NotFound,
}

/// The `400` and `404` of a read of a window of a mower's states (history, track).
#[derive(IntoResponses)]
pub enum WindowRefused {
    #[response(
        status = 400,
        description = "The id is not a UUID, a parameter is not valid, `from` is after `to`, or \
            `cursor` is not a cursor of this list."
    )]
    _Refused,
    #[response(status = 404, description = "No such mower is visible to this token.")]
    _NotFound,
}

/// Answers of a status and a description each.
fn refusals<const N: usize>(answers: [(u16, String); N]) -> BTreeMap<String, RefOr<Response>> {
    answers
        .into_iter()
        .map(|(status, description)| {
            let response = ResponseBuilder::new().description(description).build();
            (status.to_string(), response.into())
        })
        .collect()
}

/// The `304` of a document read with `If-None-Match`, as the document states it for most.
pub struct NotModified;

impl IntoResponses for NotModified {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        not_modified(
            "The document has not changed since the `ETag` given in `If-None-Match`.",
            "The entity tag of the current document.",
        )
    }
}

/// The `304` of a live view, as the document states it for the three.
pub struct LiveNotModified;

impl IntoResponses for LiveNotModified {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        not_modified(
            "Nothing but `generated_at` has changed since the `ETag` given in `If-None-Match`.",
            "The entity tag of the current document.",
        )
    }
}

/// The conditional GET's `304` with `description`, and its `ETag` header with `etag`.
fn not_modified(description: &str, etag: &str) -> BTreeMap<String, RefOr<Response>> {
    let header = HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(etag))
        .build();
    let response = ResponseBuilder::new()
        .description(description)
        .header("ETag", header)
        .build();
    [("304".to_owned(), response.into())].into_iter().collect()
}
