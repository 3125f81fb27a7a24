//! Server-rendered live pages: `/live/fleet`, `/live/wall`, `/live/health` and `/live/map`, the
//! HTML faces of the bounded projections, for browsers and display-wall kiosks.
//!
//! Layout: this file holds the routes, signing in and the dispatch; `render` the fleet dashboard,
//! the walls and what every page shares (notices, status badges, battery gauges, "last seen");
//! `map` the site map (decision 117); `assets` the inline style, script and document.
//!
//! - **Operator-grade.** Each mower shows its status as a colour, an icon *and* a word (never
//!   colour alone), a battery gauge (`<meter>`) with the percentage as text, its site, the
//!   latest state's error code, and "Last seen 2 min ago" rendered by the server against its
//!   clock, with the site's local time in the `title` (decision 116).
//! - **Rendered from the snapshots' flags.** A cut list gets an overflow notice,
//!   `<p role="status">Showing the first 64 mowers. Additional mowers are not shown.</p>`, at the
//!   level that was cut; nothing is counted.
//! - **Labelled regions.** The page is a `main` landmark; each site, mower and alert list is a
//!   region named by its heading (`aria-labelledby`), so screen-reader users can jump between
//!   them.
//! - **Refreshing without re-announcing.** The page polls `?fragment=main` every few seconds and
//!   patches the DOM node by node: only text that changed is replaced. The content is not a live
//!   region; the notices are (`role="status"` is polite), so an assistive technology hears a
//!   notice when it appears or changes, never the whole page on every refresh.
//! - **Signing in.** Browsers do not send bearer headers on navigation: a page accepts the usual
//!   `Authorization: Bearer`, or a session cookie set by its sign-in form (decision 189). The
//!   form POSTs the token (`application/x-www-form-urlencoded`) to the page's own address; a POST
//!   whose `Origin` is not this server's (its `Host`), or, without an `Origin`, whose
//!   `Sec-Fetch-Site` is not `same-origin`, is refused (`403`), so another site cannot sign a
//!   browser in (login CSRF). A token in the address (`?token=`) signs nothing in. The token is
//!   checked next: an unknown, revoked or read-less token gets the sign-in page (`401`) and no
//!   cookie. A valid one gets `303` to the page and a session cookie: the token's id and an
//!   expiry, signed byte for byte with the server's key ([`session`]), never the token and never
//!   its hash. It opens only these read-only pages, for 12 hours, and stops working when the token
//!   is revoked (every poll looks the token up again by its id). It is `HttpOnly`,
//!   `SameSite=Lax`, limited to `/live`, and `Secure` when the service is behind TLS
//!   (`SWATH_BEHIND_TLS`, or a proxy's `X-Forwarded-Proto: https`). Without either, the page
//!   answers `401` with the form.
//! - **Locked down.** Every page answer carries a Content-Security-Policy that lets the browser
//!   run only the page's own inline script and style (by their hashes), load images only from
//!   the map's tile host, fetch only from the page's origin, and be framed by no one, with
//!   `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`
//!   ([`assets::content_security_policy`]).
mod assets;
pub mod map;
mod render;
pub mod session;

pub use render::escape;

use crate::auth::authenticate;
use crate::error::ApiError;
use crate::routes::projections::views;
use crate::server::BehindTls;
use crate::state::AppState;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Extension;
use axum::Router;
use render::Times;
use serde::Deserialize;
use session::SESSION_SECONDS;
use std::fmt::Write;
use swath_application::ports::hash_token;
use swath_domain::{Principal, Scope, SiteId};

/// The cookie that keeps a browser signed in to the live pages.
pub const COOKIE: &str = "swath_live";
/// How often a page polls for a new snapshot.
pub const REFRESH_SECONDS: u32 = 5;

/// The live pages' routes (not part of the OpenAPI document: they answer HTML).
pub fn routes() -> Router<AppState> {
    // One handler for the four: each route hands it its page as an extension.
    Page::ALL.into_iter().fold(Router::new(), |router, page| {
        router.route(
            page.path(),
            get(serve).post(sign_in_form).layer(Extension(page)),
        )
    })
}

/// The query of a page: the fragment to poll; the map's site; a token, which no longer signs in
/// (the sign-in page says so).
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    token: Option<String>,
    fragment: Option<String>,
    site: Option<String>,
}

/// What the sign-in form posts.
#[derive(Debug, Deserialize)]
pub struct SignInForm {
    token: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Page {
    Fleet,
    Wall,
    Health,
    Map,
}

impl Page {
    const ALL: [Page; 4] = [Page::Fleet, Page::Wall, Page::Health, Page::Map];

    fn path(self) -> &'static str {
        match self {
            Page::Fleet => "/live/fleet",
            Page::Wall => "/live/wall",
            Page::Health => "/live/health",
            Page::Map => "/live/map",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Page::Fleet => "Fleet dashboard",
            Page::Wall => "Site wall",
            Page::Health => "Health wall",
            Page::Map => "Site map",
        }
    }
}

/// The page's address, with the map's site when one was asked for.
fn address(page: Page, site: Option<SiteId>) -> String {
    match site {
        Some(site) => format!("{}?site={site}", page.path()),
        None => page.path().to_owned(),
    }
}

/// An HTML answer with the pages' headers: no caching, and the security policy `csp`.
fn html(status: StatusCode, csp: &str, body: String) -> Response {
    let mut response = (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response();
    let headers = response.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(csp) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// What the sign-in form says to a token without the `read` scope, signing in or signed in.
const NO_READ_SCOPE: &str = "This token does not have the `read` scope.";

/// What the sign-in page says to a token in the address, which signs nothing in.
const TOKEN_IN_ADDRESS: &str =
    "A token in the address does not sign in: enter it here (and take it out of your bookmark).";

/// The map's site of a page's query: a malformed id shows the first site (as no id does).
fn site_of(page: Page, query: &PageQuery) -> Option<SiteId> {
    match page {
        Page::Map => query
            .site
            .as_deref()
            .and_then(|s| s.trim().parse().ok())
            .map(SiteId),
        _ => None,
    }
}

/// Signing in: the form's POST. The request must come from this server's own page, then the
/// token is checked before any cookie is set; a signed session of the token's id is kept in a
/// cookie, and the browser sent to the page.
async fn sign_in_form(
    Extension(page): Extension<Page>,
    State(state): State<AppState>,
    tls: Option<Extension<BehindTls>>,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
    form: Result<Form<SignInForm>, FormRejection>,
) -> Response {
    let site = site_of(page, &query);
    let csp = assets::content_security_policy(&state.map_tile_url);
    if !same_origin(&headers, &uri) {
        return sign_in_answer(
            StatusCode::FORBIDDEN,
            page,
            site,
            &csp,
            "This sign-in did not come from this page: sign in here.",
        );
    }
    let Ok(Form(form)) = form else {
        return sign_in(page, site, &csp, "That is not an API token.");
    };
    let token = form.token.trim();
    let well_formed = !token.is_empty()
        && token.len() <= 512
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !well_formed {
        return sign_in(page, site, &csp, "That is not an API token.");
    }
    let found = match state.access.token_by_hash(&hash_token(token)).await {
        Ok(Some(found)) => found,
        Ok(None) => return sign_in(page, site, &csp, "That token is unknown or revoked."),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if !found.principal.has_scope(Scope::Read) {
        return sign_in(page, site, &csp, NO_READ_SCOPE);
    }
    let secure = if tls.is_some() || forwarded_https(&headers) {
        "; Secure"
    } else {
        ""
    };
    let session = state.sessions.issue(found.id, state.clock.now());
    let cookie = format!(
        "{COOKIE}={session}; Path=/live; HttpOnly; SameSite=Lax; Max-Age={SESSION_SECONDS}{secure}"
    );
    let Ok(cookie) = HeaderValue::from_str(&cookie) else {
        return sign_in(page, site, &csp, "That is not an API token.");
    };
    let mut response = (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, address(page, site))],
    )
        .into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

/// Whether a POST comes from this server's own pages: its `Origin`, when sent, names this
/// server (the host and port of `Host`, or of the address for HTTP/2); without one, a browser's
/// `Sec-Fetch-Site`, when sent, says `same-origin` (or `none`: the user's own action). A client
/// that sends neither is no browser a cross-site page could drive. The scheme is not compared:
/// behind a proxy that ends TLS the server cannot always know it, and the host is what another
/// site cannot take.
fn same_origin(headers: &HeaderMap, uri: &Uri) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    if let Some(origin) = headers.get(header::ORIGIN) {
        let Some(authority) = origin.to_str().ok().and_then(|o| {
            o.strip_prefix("https://")
                .or_else(|| o.strip_prefix("http://"))
        }) else {
            // `null` (a sandboxed or file page) or anything else: not this server.
            return false;
        };
        return host.is_some_and(|host| authority.eq_ignore_ascii_case(host));
    }
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        Some(site) => site == b"same-origin" || site == b"none",
        None => true,
    }
}

async fn serve(
    Extension(page): Extension<Page>,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Response {
    let site = site_of(page, &query);
    let csp = assets::content_security_policy(&state.map_tile_url);
    let principal = match principal(&state, &headers).await {
        Ok(Some(p)) => p,
        Ok(None) if query.token.is_some() => {
            return sign_in(page, site, &csp, TOKEN_IN_ADDRESS);
        }
        Ok(None) => return sign_in(page, site, &csp, ""),
        Err(e) => return e.into_response(),
    };
    if !principal.has_scope(Scope::Read) {
        return sign_in(page, site, &csp, NO_READ_SCOPE);
    }
    let content = match content(page, &state, &principal, site).await {
        Ok(content) => content,
        Err(e) => return e.into_response(),
    };
    if query.fragment.as_deref() == Some("main") {
        return html(StatusCode::OK, &csp, content);
    }
    let location = address(page, site);
    let fragment = if location.contains('?') {
        format!("{location}&amp;fragment=main")
    } else {
        format!("{location}?fragment=main")
    };
    html(
        StatusCode::OK,
        &csp,
        assets::document(page, &fragment, &content),
    )
}

/// The principal of the bearer header, else of the cookie; `None` without a valid token.
async fn principal(state: &AppState, headers: &HeaderMap) -> Result<Option<Principal>, ApiError> {
    if headers.contains_key(header::AUTHORIZATION) {
        return match authenticate(headers, state).await {
            Ok(p) => Ok(Some(p)),
            Err(ApiError::MissingToken | ApiError::InvalidToken) => Ok(None),
            Err(e) => Err(e),
        };
    }
    let now = state.clock.now();
    // The first cookie of ours that is a valid session (a browser may send a stale one too).
    let id = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .find_map(|(_, value)| state.sessions.verify(value, now));
    match id {
        Some(id) => Ok(state.access.principal_of_token(id).await?),
        None => Ok(None),
    }
}

/// Whether a proxy in front says the client came over HTTPS (`X-Forwarded-Proto: https`, or
/// `proto=https` in `Forwarded`, RFC 7239). Only used to add `Secure` to a cookie, which a
/// client gains nothing by asking for.
fn forwarded_https(headers: &HeaderMap) -> bool {
    let says_https = |name: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split([',', ';']).map(str::trim).any(|part| {
                    part.eq_ignore_ascii_case("https")
                        || part.eq_ignore_ascii_case("proto=https")
                        || part.eq_ignore_ascii_case("proto=\"https\"")
                })
            })
    };
    says_https("x-forwarded-proto") || says_https("forwarded")
}

/// The sign-in page (`401`), saying `problem` if not empty.
fn sign_in(page: Page, site: Option<SiteId>, csp: &str, problem: &str) -> Response {
    sign_in_answer(StatusCode::UNAUTHORIZED, page, site, csp, problem)
}

fn sign_in_answer(
    status: StatusCode,
    page: Page,
    site: Option<SiteId>,
    csp: &str,
    problem: &str,
) -> Response {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1 id=\"title\">{title}</h1>\
         <section aria-labelledby=\"sign-in\"><h2 id=\"sign-in\">Sign in</h2>",
        title = page.title()
    );
    if !problem.is_empty() {
        let _ = write!(body, "<p role=\"alert\">{}</p>", escape(problem));
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"{action}\">\
         <label for=\"token\">API token with the <code>read</code> scope</label> \
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required> \
         <button type=\"submit\">Show</button></form>\
         <p>This browser stays signed in for 12 hours (a cookie; the token itself is not kept).</p></section>",
        action = escape(&address(page, site)),
    );
    html(status, csp, assets::document_static(page, &body))
}

async fn content(
    page: Page,
    state: &AppState,
    principal: &Principal,
    site: Option<SiteId>,
) -> Result<String, ApiError> {
    let live = views(state)?;
    let now = state.clock.now();
    let mut out = String::new();
    let _ = write!(out, "<h1 id=\"title\">{}</h1>", page.title());
    match page {
        Page::Fleet => {
            let snapshot = live.fleet(principal).await?;
            // The sites of the window's mowers, for their names and time zones: one read.
            let ids: Vec<SiteId> = snapshot
                .mowers
                .items
                .iter()
                .map(|m| m.mower.site_id)
                .collect();
            let sites = live.site_cards(principal, &ids).await?;
            let times = Times::new(now, &sites.iter().collect::<Vec<_>>());
            render::fleet(&mut out, &snapshot, &times);
        }
        Page::Wall => {
            let snapshot = live.wall(principal).await?;
            let sites: Vec<_> = snapshot.sites.items.iter().map(|s| &s.site).collect();
            render::wall(&mut out, &snapshot, &Times::new(now, &sites));
        }
        Page::Health => {
            let snapshot = live.health(principal).await?;
            let sites: Vec<_> = snapshot.sites.items.iter().map(|s| &s.site).collect();
            render::health(&mut out, &snapshot, &Times::new(now, &sites));
        }
        Page::Map => map::content(&mut out, state, principal, site).await?,
    }
    let _ = write!(
        out,
        "<p class=\"updated\">Updated {}.</p>",
        now.format("%Y-%m-%d %H:%M:%S UTC")
    );
    Ok(out)
}
