//! Server-rendered live pages: `/live/fleet`, `/live/wall` and `/live/health`, the HTML faces of
//! the bounded projections, for browsers and display-wall kiosks.
//!
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
//!   `Authorization: Bearer`, or a cookie set by opening it once with `?token=<API token>` (the
//!   answer is a redirect to the same page without the token, so it leaves the address bar and
//!   the history). The cookie holds the token's SHA-256 hash, never the token: it is no bearer
//!   token for the API, it opens only these read-only pages, and it stops working when the
//!   token is revoked (every poll authenticates it again). It is `HttpOnly`, `SameSite=Lax`,
//!   limited to `/live`, and `Secure` when the service is behind TLS (`SWATH_BEHIND_TLS`, or a
//!   proxy's `X-Forwarded-Proto: https`). Without either, the page answers `401` with a form
//!   asking for a token.

use crate::auth::authenticate;
use crate::error::ApiError;
use crate::routes::projections::views;
use crate::server::BehindTls;
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Extension;
use axum::Router;
use serde::Deserialize;
use std::fmt::Write;
use swath_application::ports::{hash_token, AlertCard, MowerCard, SiteCard, TokenHash};
use swath_application::projections::{
    FleetSnapshot, HealthMower, HealthSite, HealthSnapshot, HealthStatus, LiveMower, WallSite,
    WallSnapshot, Window,
};
use swath_domain::{Assignment, Principal, Scope, SiteId};

/// The cookie that keeps a browser signed in to the live pages.
pub const COOKIE: &str = "swath_live";
/// How often a page polls for a new snapshot.
pub const REFRESH_SECONDS: u32 = 5;

/// The live pages' routes (not part of the OpenAPI document: they answer HTML).
pub fn routes() -> Router<AppState> {
    // One handler for the three: each route hands it its page as an extension.
    [Page::Fleet, Page::Wall, Page::Health]
        .into_iter()
        .fold(Router::new(), |router, page| {
            router.route(page.path(), get(serve).layer(Extension(page)))
        })
}

/// The query of a page: a token to sign in with, or the fragment to poll.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    token: Option<String>,
    fragment: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Page {
    Fleet,
    Wall,
    Health,
}

impl Page {
    fn path(self) -> &'static str {
        match self {
            Page::Fleet => "/live/fleet",
            Page::Wall => "/live/wall",
            Page::Health => "/live/health",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Page::Fleet => "Fleet dashboard",
            Page::Wall => "Site wall",
            Page::Health => "Health wall",
        }
    }
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn serve(
    Extension(page): Extension<Page>,
    State(state): State<AppState>,
    tls: Option<Extension<BehindTls>>,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Response {
    let behind_tls = tls.is_some();
    // Signing in: keep a value derived from the token in a cookie, and take the token out of the
    // address bar.
    if let Some(token) = query.token.as_deref().map(str::trim) {
        let valid = !token.is_empty()
            && token.len() <= 512
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if valid {
            let secure = if behind_tls || forwarded_https(&headers) {
                "; Secure"
            } else {
                ""
            };
            let session = hash_token(token).0;
            let cookie = format!(
                "{COOKIE}={session}; Path=/live; HttpOnly; SameSite=Lax; Max-Age=43200{secure}"
            );
            if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                let mut response =
                    (StatusCode::SEE_OTHER, [(header::LOCATION, page.path())]).into_response();
                response.headers_mut().insert(header::SET_COOKIE, cookie);
                return response;
            }
        }
        return sign_in(page, "That is not an API token.");
    }
    let principal = match principal(&state, &headers).await {
        Ok(Some(p)) => p,
        Ok(None) => return sign_in(page, ""),
        Err(e) => return e.into_response(),
    };
    if !principal.has_scope(Scope::Read) {
        return sign_in(page, "This token does not have the `read` scope.");
    }
    let content = match content(page, &state, &principal).await {
        Ok(content) => content,
        Err(e) => return e.into_response(),
    };
    if query.fragment.as_deref() == Some("main") {
        return html(StatusCode::OK, content);
    }
    html(StatusCode::OK, document(page, &content))
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
    let token = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned());
    // The cookie holds the token's hash (what the token store is keyed by), never the token.
    match token {
        Some(session) if session.len() == 64 && session.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(state
                .access
                .principal(&TokenHash(session.to_ascii_lowercase()))
                .await?)
        }
        _ => Ok(None),
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

fn sign_in(page: Page, problem: &str) -> Response {
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
        "<form method=\"get\" action=\"{path}\">\
         <label for=\"token\">API token with the <code>read</code> scope</label> \
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required> \
         <button type=\"submit\">Show</button></form>\
         <p>The token is kept in a cookie of this browser for 12 hours.</p></section>",
        path = page.path()
    );
    html(StatusCode::UNAUTHORIZED, document_static(page, &body))
}

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The overflow notice of a cut list: rendered from the flag, never from a count.
fn notice<T>(out: &mut String, window: &Window<T>, what: &str, of: Option<&str>) {
    if !window.truncated {
        return;
    }
    let of = of.map(|o| format!(" of {}", escape(o))).unwrap_or_default();
    let _ = write!(
        out,
        "<p role=\"status\">Showing the first {limit} {what}{of}. Additional \
         {what} are not shown.</p>",
        limit = window.limit
    );
}

async fn content(page: Page, state: &AppState, principal: &Principal) -> Result<String, ApiError> {
    let live = views(state)?;
    let mut out = String::new();
    let _ = write!(out, "<h1 id=\"title\">{}</h1>", page.title());
    match page {
        Page::Fleet => fleet(&mut out, live.projections.fleet(principal).await?),
        Page::Wall => wall(&mut out, live.projections.wall(principal).await?),
        Page::Health => health(&mut out, live.projections.health(principal).await?),
    }
    let _ = write!(
        out,
        "<p class=\"updated\">Updated {}.</p>",
        state.clock.now().format("%Y-%m-%d %H:%M:%S UTC")
    );
    Ok(out)
}

fn fleet(out: &mut String, s: FleetSnapshot) {
    notice(out, &s.mowers, "mowers", None);
    if s.mowers.items.is_empty() {
        out.push_str("<p>No mowers are visible to this token.</p>");
        return;
    }
    out.push_str("<ul class=\"cards\" aria-labelledby=\"title\">");
    for m in &s.mowers.items {
        live_mower(out, m, "h2");
    }
    out.push_str("</ul>");
}

fn wall(out: &mut String, s: WallSnapshot) {
    site_sections(out, &s.sites, |out, id, mowers| {
        let _ = write!(out, "<ul class=\"cards\" aria-labelledby=\"site-{id}\">");
        for m in mowers {
            live_mower(out, m, "h3");
        }
        out.push_str("</ul>");
    });
}

fn health(out: &mut String, s: HealthSnapshot) {
    site_sections(out, &s.sites, |out, id, mowers| {
        let _ = write!(
            out,
            "<table aria-labelledby=\"site-{id}\"><thead><tr><th scope=\"col\">Mower</th>\
             <th scope=\"col\">Status</th><th scope=\"col\">Open alerts</th>\
             <th scope=\"col\">Activity</th><th scope=\"col\">Blade</th>\
             <th scope=\"col\">Operator on duty</th></tr></thead><tbody>"
        );
        for m in mowers {
            let h = &m.health;
            let blade = if h.blade_threshold_ms > 0 {
                format!(
                    "{:.0} % of its life",
                    100.0 * h.blade_since_reset_ms as f64 / h.blade_threshold_ms as f64
                )
            } else {
                "—".to_owned()
            };
            let _ = write!(
                out,
                "<tr><th scope=\"row\">{name}</th><td class=\"status-{status}\">{status}</td>\
                 <td>{c} critical, {hi} high, {n} normal, {l} low</td><td>{activity}</td>\
                 <td>{blade}</td><td>{operator}</td></tr>",
                name = escape(&m.mower.name),
                status = status_text(m.status),
                c = h.critical,
                hi = h.high,
                n = h.normal,
                l = h.low,
                activity = activity_text(&m.mower),
                operator = operator_text(&m.operator),
            );
        }
        out.push_str("</tbody></table>");
    });
}

/// The sites of the wall and the health page, which differ only in how a site's mowers are
/// listed: the sites' overflow notice (or a line when no site is visible), then per site a
/// section labelled by its heading, its mowers' notice, and a line when it has none, else what
/// `list` writes (given the site's id, which labels the list).
fn site_sections<S: SiteOf>(
    out: &mut String,
    sites: &Window<S>,
    mut list: impl FnMut(&mut String, SiteId, &[S::Mower]),
) {
    notice(out, sites, "sites", None);
    if sites.items.is_empty() {
        out.push_str("<p>No sites are visible to this token.</p>");
        return;
    }
    for w in &sites.items {
        let (site, window) = w.parts();
        let id = site.id;
        let _ = write!(
            out,
            "<section class=\"site\" aria-labelledby=\"site-{id}\">\
             <h2 id=\"site-{id}\">{}</h2>",
            escape(&site.name)
        );
        notice(out, window, S::MOWERS, Some(&site.name));
        if window.items.is_empty() {
            out.push_str(S::NONE);
        } else {
            list(out, id, &window.items);
        }
        out.push_str("</section>");
    }
}

/// A site of a page's snapshot: its card, its window of mowers, and how the page names them.
trait SiteOf {
    type Mower;
    /// The mowers, in the overflow notice.
    const MOWERS: &'static str;
    /// The line of a site without mowers.
    const NONE: &'static str;
    fn parts(&self) -> (&SiteCard, &Window<Self::Mower>);
}

/// `SiteOf` for a snapshot's site type (fields `site` and `mowers`): its mowers' type and how
/// the page names them.
macro_rules! site_of {
    ($site:ty, $mower:ty, $mowers:literal, $none:literal) => {
        impl SiteOf for $site {
            type Mower = $mower;
            const MOWERS: &'static str = $mowers;
            const NONE: &'static str = $none;
            fn parts(&self) -> (&SiteCard, &Window<$mower>) {
                (&self.site, &self.mowers)
            }
        }
    };
}

site_of!(
    WallSite,
    LiveMower,
    "mowers in the field",
    "<p>No mower is in the field.</p>"
);
site_of!(HealthSite, HealthMower, "mowers", "<p>No mowers.</p>");

fn status_text(s: HealthStatus) -> &'static str {
    s.as_str()
}

fn activity_text(m: &MowerCard) -> String {
    let activity = m.activity.map(|a| a.as_str()).unwrap_or("never reported");
    if m.offline {
        format!("offline (last: {activity})")
    } else {
        activity.to_owned()
    }
}

fn operator_text(a: &Option<Assignment>) -> String {
    match a {
        Some(a) => format!("{} ({})", escape(&a.operator), a.priority.as_str()),
        None => "none".to_owned(),
    }
}

fn live_mower(out: &mut String, m: &LiveMower, heading: &str) {
    let id = m.mower.id;
    let battery = m
        .mower
        .battery_percent
        .map(|b| format!("{b} %"))
        .unwrap_or_else(|| "—".to_owned());
    let _ = write!(
        out,
        "<li><article aria-labelledby=\"mower-{id}\"><{heading} id=\"mower-{id}\">{name}</{heading}>\
         <dl><dt>Activity</dt><dd>{activity}</dd><dt>Battery</dt><dd>{battery}</dd>\
         <dt>Operator on duty</dt><dd>{operator}</dd></dl>",
        name = escape(&m.mower.name),
        activity = activity_text(&m.mower),
        operator = operator_text(&m.operator),
    );
    notice(out, &m.alerts, "open alerts", Some(&m.mower.name));
    if m.alerts.items.is_empty() {
        out.push_str("<p>No open alerts.</p>");
    } else {
        let _ = write!(
            out,
            "<ul class=\"alerts\" aria-label=\"Open alerts of {}\">",
            escape(&m.mower.name)
        );
        for a in &m.alerts.items {
            alert(out, a);
        }
        out.push_str("</ul>");
    }
    out.push_str("</article></li>");
}

fn alert(out: &mut String, a: &AlertCard) {
    let code = a
        .code
        .as_deref()
        .map(|c| format!(" ({})", escape(c)))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<li class=\"severity-{severity}\">{severity}: {kind}{code}, since {at}</li>",
        severity = a.severity.as_str(),
        kind = a.kind.as_str().replace('_', " "),
        at = a.raised_at.format("%Y-%m-%d %H:%M UTC"),
    );
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1rem;line-height:1.4}\
nav a{margin-right:1rem}.cards{list-style:none;padding:0;display:grid;\
grid-template-columns:repeat(auto-fill,minmax(16rem,1fr));gap:.75rem}\
article{border:1px solid #888;border-radius:.4rem;padding:.5rem}\
dl{display:grid;grid-template-columns:auto 1fr;gap:0 .5rem;margin:.25rem 0}dd{margin:0}\
.notice,[role=status]{background:#fff4c2;color:#222;border-left:.3rem solid #b58900;padding:.3rem .6rem}\
.severity-critical,.status-critical{color:#a00;font-weight:bold}.severity-high,.status-high{color:#a40}\
table{border-collapse:collapse}th,td{border-bottom:1px solid #ccc;padding:.2rem .5rem;text-align:left}";

/// Patches `main` with a fresh fragment, node by node: unchanged nodes (and the notices among
/// them) are left alone, so nothing is announced again; only the notices are live regions.
const SCRIPT: &str = r#"(function(){
const main=document.getElementById('live');
function morph(from,to){
 if(from.nodeType!==to.nodeType||from.nodeName!==to.nodeName){from.replaceWith(to.cloneNode(true));return;}
 if(from.nodeType===3){if(from.nodeValue!==to.nodeValue)from.nodeValue=to.nodeValue;return;}
 if(from.nodeType!==1)return;
 for(const a of Array.from(from.attributes))if(!to.hasAttribute(a.name))from.removeAttribute(a.name);
 for(const a of Array.from(to.attributes))if(from.getAttribute(a.name)!==a.value)from.setAttribute(a.name,a.value);
 children(from,to);
}
function children(from,to){
 const f=Array.from(from.childNodes),t=Array.from(to.childNodes);
 for(let i=0;i<t.length;i++){if(i<f.length)morph(f[i],t[i]);else from.appendChild(t[i].cloneNode(true));}
 for(let i=t.length;i<f.length;i++)f[i].remove();
}
async function refresh(){
 try{
  const r=await fetch(main.dataset.fragment,{credentials:'same-origin',cache:'no-store'});
  if(r.status===401){location.reload();return;}
  if(r.ok){const next=document.createElement('main');next.innerHTML=await r.text();children(main,next);}
 }catch(e){}
 setTimeout(refresh,Number(main.dataset.refreshSeconds)*1000);
}
setTimeout(refresh,Number(main.dataset.refreshSeconds)*1000);
})();"#;

fn nav(page: Page) -> String {
    let mut out = String::from("<nav aria-label=\"Live views\">");
    for p in [Page::Fleet, Page::Wall, Page::Health] {
        let current = if p == page {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(out, "<a href=\"{}\"{current}>{}</a>", p.path(), p.title());
    }
    out.push_str("</nav>");
    out
}

fn head(page: Page) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · Swath</title><style>{STYLE}</style></head><body><header>{}</header>",
        page.title(),
        nav(page)
    )
}

/// A live page: the content in `main`, refreshed by the script.
fn document(page: Page, content: &str) -> String {
    format!(
        "{head}<main id=\"live\" data-fragment=\"{path}?fragment=main\" \
         data-refresh-seconds=\"{REFRESH_SECONDS}\">{content}</main>\
         <noscript><p>This page refreshes itself with JavaScript; reload it to see new \
         states.</p></noscript><script>{SCRIPT}</script></body></html>",
        head = head(page),
        path = page.path(),
    )
}

/// A page without refresh (signing in).
fn document_static(page: Page, content: &str) -> String {
    format!(
        "{head}<main id=\"live\">{content}</main></body></html>",
        head = head(page)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_come_from_the_flag() {
        let mut out = String::new();
        let cut: Window<u8> = Window::cut(vec![1, 2, 3], 2);
        notice(&mut out, &cut, "mowers", None);
        assert_eq!(
            out,
            "<p role=\"status\">Showing the first 2 mowers. Additional mowers \
             are not shown.</p>"
        );
        let mut none = String::new();
        notice(&mut none, &Window::cut(vec![1, 2], 2), "mowers", None);
        assert!(none.is_empty());
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
