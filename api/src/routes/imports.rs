//! `POST /v1/imports`, `GET /v1/imports` and `GET /v1/imports/{id}`: history imports over HTTP, through the same
//! import as `swath import` (`swath_application::import_lines`), on behalf of the token's principal
//! (`swath_application::Imports`).
//!
//! The handler only translates: it checks the media type and the declared length, hands the body
//! to the use case as a stream of lines (never the whole body in memory: each line at most
//! 64 KiB, the body at most [`MAX_IMPORT_BYTES`]), and answers the import's record.

use crate::dto::answers::PageRefused;
use crate::dto::imports::{ImportDocument, ImportPage};
use crate::dto::params::{ImportPath, PageParams};
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};
use crate::page::{self, List};
use crate::routes::location;
use crate::state::AppState;
use axum::body::{Body, BodyDataStream};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::{Buf, Bytes};
use futures::StreamExt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use swath_application::hash_token;
use swath_application::ImportFailure;
use swath_domain::{Principal, Scope};
use uuid::Uuid;

/// The OpenAPI tag of these routes.
pub const TAG: &str = "imports";

/// The media type of an import's body: one JSON state report per line.
pub const NDJSON: &str = "application/x-ndjson";

/// The largest body of one import (256 MiB: some 600 000 reports of a usual size). Larger
/// histories are split into several imports, or imported with `swath import`.
pub const MAX_IMPORT_BYTES: u64 = 256 * 1024 * 1024;

/// The example body of the document: two reports, one per line.
const IMPORT_EXAMPLE: &str = concat!(
    r#"{"mower_id":"0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60","account_id":"0190a2b4-5c3e-7d21-9f00-0000000000a0","observed_at":"2026-06-01T12:00:00Z","activity":"mowing","battery_percent":87,"blade_on":true}"#,
    "\n",
    r#"{"mower_id":"0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60","account_id":"0190a2b4-5c3e-7d21-9f00-0000000000a0","observed_at":"2026-06-01T12:00:01Z","activity":"mowing","battery_percent":87,"blade_on":true}"#,
    "\n",
);

/// A principal with the `write` or the `admin` scope: an import stores states like a gateway
/// (`write`), and an administrator may import an account's history (`admin`).
#[derive(Clone, Debug)]
pub struct Importer(pub Principal);

impl FromRequestParts<AppState> for Importer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let principal = crate::auth::authenticate(&parts.headers, state).await?;
        if !principal.has_scope(Scope::Write) && !principal.has_scope(Scope::Admin) {
            return Err(scope_error());
        }
        Ok(Importer(principal))
    }
}

/// The refusal of a token without `write` or `admin`.
pub(crate) fn scope_error() -> ApiError {
    ApiError::Forbidden(
        "The token has neither the `write` nor the `admin` scope; imports need one of them."
            .to_owned(),
    )
}

/// The refusal of a body that is not NDJSON.
pub(crate) fn media_type_error() -> ApiError {
    ApiError::UnsupportedMediaType(format!(
        "Send the body as NDJSON (one state report per line), with `Content-Type: {NDJSON}`."
    ))
}

/// The refusal of a body longer than [`MAX_IMPORT_BYTES`], declared (`stopped`: `None`) or found
/// while reading (the import that stopped, and its last line stored).
pub(crate) fn too_large_error(stopped: Option<(Uuid, u64)>) -> ApiError {
    let limit = format!(
        "The body is larger than the {MAX_IMPORT_BYTES} bytes an import accepts; split it into \
         several imports."
    );
    ApiError::PayloadTooLarge(match stopped {
        None => limit,
        Some((id, lines)) => format!(
            "{limit} Import {id} stopped there: its first {lines} lines are stored (`GET \
             /v1/imports/{id}`), and importing them again is safe."
        ),
    })
}

/// Import state reports (NDJSON)
#[utoipa::path(
    post,
    path = "/v1/imports",
    tag = TAG,
    description = "History in bulk: one state report per line (the JSON a gateway publishes; \
        docs/rules.md §2), read as the body streams in and stored 200 reports per unit of work \
        through the same validation and write rules as live ingestion, exactly as `swath \
        import` stores a file. States older than a mower's newest (a backfill) are merged into \
        its health and day totals. Each line is judged alone: a refused line is counted by \
        reason and named by its line number (the first 100), and the others are stored all \
        the same. A report of another account than the token's is refused as \
        `account_mismatch`, a mower the token cannot see (unknown, another account's, or on a \
        site the token is not limited to) as `unknown_mower`: nothing of them is stored. \
        Importing the same lines again is safe: stored states count as duplicates and change \
        nothing. An import stores history: the `blade_due` events it raises are stored (the \
        events feed) but not published, and virtual zones are not evaluated.\n\n\
        Empty lines are skipped (and counted as lines). A line may have at most 64 KiB (a \
        longer one is refused as `too_large`); the body at most 256 MiB.\n\n\
        The answer comes once the body is read and stored: `202` with the import's document \
        and its `Location`, `GET /v1/imports/{id}`, which answers the same document afterwards \
        (on this replica); while the body is read, `GET /v1/imports` lists the import, \
        `running`, with its counts so far. Check `status` and the counts: an import whose every line was \
        refused is `done` too, with `stored` 0.\n\n\
        The import checks its token before each unit of work, and at once when a token is revoked \
        through this replica: a token revoked meanwhile stops it (`failed`, `failure_reason` \
        `token_revoked`, answered `401`); what it stored before stays stored. A body that sends \
        no byte for 30 s (`SWATH_HTTP_BODY_IDLE_TIMEOUT_SECONDS`) is cut: the import is \
        `failed` and says so.",
    security(("bearer" = ["write"]), ("bearer" = ["admin"])),
    request_body(content = String, description = "State reports, one JSON object per line \
        (NDJSON).", content_type = "application/x-ndjson", example = json!(IMPORT_EXAMPLE)),
    responses(
        (status = 202, description = "The import, read to its end: its counts and its first \
            refused lines.", body = ImportDocument,
            headers(("Location" = String, description = "`/v1/imports/{id}`: the import."))),
        (status = 400, description = "The body could not be read to its end (the client \
            stopped sending it, or sent no byte for the body idle timeout). The import is \
            `failed`; what it stored before stays stored."),
        (status = 403, description = "The token has neither the `write` nor the `admin` scope."),
        (status = 413, description = "The body is larger than 256 MiB: refused before anything \
            is read when `Content-Length` says so, otherwise once the limit is passed (then the \
            import is `failed`, and its lines before the limit are stored)."),
        (status = 415, description = "The body is not `application/x-ndjson`."),
        (status = 503, description = "The store failed during the import. The import is \
            `failed` (see `Location`); what it stored before stays stored, and importing the \
            same lines again is safe."),
    ),
)]
pub async fn create_import(
    Importer(principal): Importer,
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if !is_ndjson(&headers) {
        return Err(media_type_error());
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_IMPORT_BYTES) {
        return Err(too_large_error(None));
    }
    let over_limit = Arc::new(AtomicBool::new(false));
    let input = BodyLines {
        stream: body.into_data_stream(),
        chunk: Bytes::new(),
        read: 0,
        over_limit: Arc::clone(&over_limit),
    };
    let token = hash_token(crate::auth::bearer_token(&headers)?);
    let record = state.imports.run(&principal, &token, input).await;
    let id = record.id;
    let at = location(format!("/v1/imports/{id}"))?;
    let lines = record.summary.lines;
    let failure = record.failure.clone();
    let document = ImportDocument::from(record);
    // A failed import answers a problem (its record says the same at `Location`).
    let response = match failure {
        None => (StatusCode::ACCEPTED, at, Json(document)).into_response(),
        Some(ImportFailure::Input(_)) if over_limit.load(Ordering::Relaxed) => {
            (at, too_large_error(Some((id, lines)))).into_response()
        }
        Some(ImportFailure::Input(_)) => {
            (at, ApiError::BadRequest(document.error.unwrap_or_default())).into_response()
        }
        Some(ImportFailure::TokenRevoked) => (
            at,
            ApiError::RevokedWhileRunning(format!(
                "The token was revoked while import {id} ran: its first {lines} lines are stored \
                 (`GET /v1/imports/{id}` with another token of the account), nothing after them; \
                 importing them again is safe."
            )),
        )
            .into_response(),
        // Logged with the import's id by the use case; the problem is the generic `503`.
        Some(ImportFailure::Store) => (
            at,
            ApiError::Unavailable(format!("import {id} failed after {lines} lines")),
        )
            .into_response(),
    };
    Ok(response)
}

/// An import
#[utoipa::path(
    get,
    path = "/v1/imports/{id}",
    tag = TAG,
    description = "Where an import is (`running`, `done` or `failed`), how its reports counted \
        so far, and its first 100 refused lines with their line numbers. While it runs, the \
        counts grow after each batch of 200 reports.\n\n\
        Each replica keeps the records of the last 100 imports it ran, in memory (the oldest \
        finished ones go first; a restart forgets them all): ask the replica that answered the \
        `POST`, soon. An import of another account, one forgotten, one of another replica, or \
        one made by a token limited to sites this token does not see answers `404`, like an \
        unknown id.",
    security(("bearer" = ["write"]), ("bearer" = ["admin"])),
    params(ImportPath),
    responses(
        (status = 200, description = "The import.", body = ImportDocument),
        (status = 403, description = "The token has neither the `write` nor the `admin` scope."),
        (status = 404, description = "No import with this id is known to this replica for this \
            token."),
    ),
)]
pub async fn get_import(
    Importer(principal): Importer,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<ImportDocument>, ApiError> {
    state
        .imports
        .get(&principal, id)
        .map(|record| Json(record.into()))
        .ok_or(ApiError::NotFound(crate::error::Resource::Import))
}

/// List this replica's imports
#[utoipa::path(
    get,
    path = "/v1/imports",
    tag = TAG,
    description = "The imports this replica keeps (the last 100 it ran, in memory) that this \
        token may read, newest first, each as `GET /v1/imports/{id}` answers it. An import is \
        listed from the moment its `POST` starts to be read, `running` with its counts so far: \
        a client sending a long body can follow its progress from another connection (the \
        `POST` answers only once the body is read). Imports of another account, of another \
        replica, or made by a token limited to sites this token does not see are not listed. \
        Page with `limit` and `cursor`.",
    security(("bearer" = ["write"]), ("bearer" = ["admin"])),
    params(PageParams),
    responses(
        (status = 200, description = "A page of imports.", body = ImportPage),
        PageRefused,
        (status = 403, description = "The token has neither the `write` nor the `admin` scope."),
    ),
)]
pub async fn list_imports(
    Importer(principal): Importer,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Json<ImportPage>, ApiError> {
    let (ask, before) = page::ask(List::Imports, params.limit, params.cursor.as_deref())?;
    let records = state.imports.list(&principal, before, ask.fetch());
    Ok(Json(ask.page(records, |r| r.id, ImportDocument::from)))
}

/// Whether the request's media type is NDJSON (parameters such as `charset` allowed).
fn is_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(NDJSON))
}

/// The request body as buffered input, one chunk at a time, failing once more than
/// [`MAX_IMPORT_BYTES`] came (and saying so in `over_limit`).
struct BodyLines {
    stream: BodyDataStream,
    chunk: Bytes,
    read: u64,
    over_limit: Arc<AtomicBool>,
}

impl tokio::io::AsyncRead for BodyLines {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        use tokio::io::AsyncBufRead;
        let n = match self.as_mut().poll_fill_buf(cx) {
            Poll::Ready(Ok(data)) => {
                let n = data.len().min(buf.remaining());
                buf.put_slice(&data[..n]);
                n
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        self.consume(n);
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncBufRead for BodyLines {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<&[u8]>> {
        let this = self.get_mut();
        while this.chunk.is_empty() {
            match this.stream.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(Ok(&[])),
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Err(std::io::Error::other(e.to_string())))
                }
                Poll::Ready(Some(Ok(chunk))) => {
                    this.read += chunk.len() as u64;
                    if this.read > MAX_IMPORT_BYTES {
                        this.over_limit.store(true, Ordering::Relaxed);
                        return Poll::Ready(Err(std::io::Error::other(format!(
                            "the body is larger than {MAX_IMPORT_BYTES} bytes"
                        ))));
                    }
                    this.chunk = chunk;
                }
            }
        }
        Poll::Ready(Ok(&this.chunk))
    }

    fn consume(self: Pin<&mut Self>, amount: usize) {
        self.get_mut().chunk.advance(amount);
    }
}
