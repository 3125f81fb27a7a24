//! What every live page carries inline (no external asset: a page renders with no network): the
//! style, the refresh script, the navigation and the document around the content; and the
//! Content-Security-Policy that lets the browser run that style and script and nothing else.

use super::{Page, REFRESH_SECONDS};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::fmt::Write;
use std::sync::LazyLock;

/// Status colours come with an icon and a word (never colour alone); the text colours keep a
/// contrast of at least 4.5:1 on white.
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1rem;line-height:1.4;color:#1f2328}\
nav a{margin-right:1rem}.cards{list-style:none;padding:0;display:grid;\
grid-template-columns:repeat(auto-fill,minmax(17rem,1fr));gap:.75rem}\
article{border:1px solid #888;border-left-width:.4rem;border-radius:.4rem;padding:.5rem}\
article h2,article h3{margin:.1rem 0 .3rem;font-size:1.1rem}\
dl{display:grid;grid-template-columns:auto 1fr;gap:0 .5rem;margin:.25rem 0}dd{margin:0}\
.notice,[role=status]{background:#fff4c2;color:#222;border-left:.3rem solid #b58900;padding:.3rem .6rem}\
.status{display:inline-flex;align-items:center;gap:.3rem;font-weight:600}\
.status svg{width:1.1em;height:1.1em;flex:none}\
.status-ok{color:#1a7f37}.status-low{color:#0969da}.status-normal{color:#7d5300}\
.status-high{color:#b34700}.status-critical{color:#c21d2a}.status-offline,.status-unknown{color:#59636e}\
article.status-ok{border-left-color:#1a7f37}article.status-low{border-left-color:#0969da}\
article.status-normal{border-left-color:#bf8700}article.status-high{border-left-color:#e16f24}\
article.status-critical{border-left-color:#cf222e}article.status-offline,article.status-unknown{border-left-color:#8c959f}\
article[class]{color:#1f2328}.battery{display:inline-flex;align-items:center;gap:.4rem}\
meter{width:6rem;height:1rem}.error{color:#c21d2a;font-weight:600}time[title]{text-decoration:underline dotted}\
.severity-critical{color:#c21d2a;font-weight:bold}.severity-high{color:#b34700}\
table{border-collapse:collapse}th,td{border-bottom:1px solid #ccc;padding:.2rem .5rem;text-align:left}\
.map-frame{position:relative;width:100%;max-width:60rem;aspect-ratio:960/540;overflow:hidden;\
border:1px solid #888;background:#eef1ea}.map-frame .tile{position:absolute;background-size:100% 100%}\
.map-frame svg{position:absolute;inset:0;width:100%;height:100%}.battery,.status{white-space:nowrap}\
.map-frame .track{fill:none;stroke-width:3;stroke-linejoin:round;stroke-linecap:round;opacity:.85}\
.map-frame .marker circle{stroke:#fff;stroke-width:2}.map-frame text{font-size:13px;paint-order:stroke;\
stroke:#fff;stroke-width:3px;fill:#1f2328}.map-frame .attribution{font-size:11px}\
.sites{display:flex;flex-wrap:wrap;gap:.5rem 1rem;padding:0;list-style:none}";

/// Patches `main` with a fresh fragment, node by node: unchanged nodes (and the notices among
/// them) are left alone, so nothing is announced again; only the notices are live regions. Places
/// the map's tiles from their `data-box` and `data-src`: through the style object, which the
/// security policy allows, where a `style` attribute in the markup would be refused (so `morph`
/// leaves the `style` it set alone).
const SCRIPT: &str = r#"(function(){
const main=document.getElementById('live');
function tiles(){
 for(const t of main.querySelectorAll('.tile[data-box]')){
  const b=t.dataset.box.split(' ');
  t.style.left=b[0]+'%';t.style.top=b[1]+'%';t.style.width=b[2]+'%';t.style.height=b[3]+'%';
  t.style.backgroundImage='url("'+t.dataset.src+'")';
 }
}
function morph(from,to){
 if(from.nodeType!==to.nodeType||from.nodeName!==to.nodeName){from.replaceWith(to.cloneNode(true));return;}
 if(from.nodeType===3){if(from.nodeValue!==to.nodeValue)from.nodeValue=to.nodeValue;return;}
 if(from.nodeType!==1)return;
 for(const a of Array.from(from.attributes))if(a.name!=='style'&&!to.hasAttribute(a.name))from.removeAttribute(a.name);
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
  if(r.ok){const next=document.createElement('main');next.innerHTML=await r.text();children(main,next);tiles();}
 }catch(e){}
 setTimeout(refresh,Number(main.dataset.refreshSeconds)*1000);
}
tiles();
setTimeout(refresh,Number(main.dataset.refreshSeconds)*1000);
})();"#;

/// `'sha256-…'`: how a policy names an inline script or style by its content.
fn source_hash(content: &str) -> String {
    format!(
        "'sha256-{}'",
        STANDARD.encode(Sha256::digest(content.as_bytes()))
    )
}

static SCRIPT_HASH: LazyLock<String> = LazyLock::new(|| source_hash(SCRIPT));
static STYLE_HASH: LazyLock<String> = LazyLock::new(|| source_hash(STYLE));

/// The origin the map's tiles come from (`https://tile.openstreetmap.org`), as a policy source;
/// `None` without tiles. A host with a placeholder other than `{s}` (which becomes `a`) is
/// allowed by its scheme alone.
fn tile_source(template: &str) -> Option<String> {
    let (scheme, rest) = template.split_once("://")?;
    let host = rest
        .split('/')
        .next()
        .unwrap_or_default()
        .replace("{s}", "a");
    if host.is_empty() {
        return None;
    }
    Some(if host.contains(['{', '}']) {
        format!("{scheme}:")
    } else {
        format!("{scheme}://{host}")
    })
}

/// The pages' Content-Security-Policy: nothing by default; the page's own inline script and
/// style by their hashes; images (the map's tiles) from the tile host only; requests (the poll)
/// to the page's origin; the sign-in form to the page's origin; no `<base>`; no framing.
pub(super) fn content_security_policy(tile_url: &str) -> String {
    let images = tile_source(tile_url).unwrap_or_else(|| "'none'".to_owned());
    format!(
        "default-src 'none'; script-src {script}; style-src {style}; img-src {images}; \
         connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        script = *SCRIPT_HASH,
        style = *STYLE_HASH,
    )
}

fn nav(page: Page) -> String {
    let mut out = String::from("<nav aria-label=\"Live views\">");
    for p in Page::ALL {
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

/// A live page: the content in `main`, refreshed by the script from `fragment` (the page's
/// address with `fragment=main`, already escaped for an attribute).
pub(super) fn document(page: Page, fragment: &str, content: &str) -> String {
    format!(
        "{head}<main id=\"live\" data-fragment=\"{fragment}\" \
         data-refresh-seconds=\"{REFRESH_SECONDS}\">{content}</main>\
         <noscript><p>This page refreshes itself with JavaScript; reload it to see new \
         states.</p></noscript><script>{SCRIPT}</script></body></html>",
        head = head(page),
    )
}

/// A page without refresh (signing in).
pub(super) fn document_static(page: Page, content: &str) -> String {
    format!(
        "{head}<main id=\"live\">{content}</main></body></html>",
        head = head(page)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_tile_host_only() {
        assert_eq!(
            tile_source("https://tile.openstreetmap.org/{z}/{x}/{y}.png").as_deref(),
            Some("https://tile.openstreetmap.org")
        );
        assert_eq!(
            tile_source("https://{s}.tiles.example:8443/{z}/{x}/{y}.png").as_deref(),
            Some("https://a.tiles.example:8443")
        );
        assert_eq!(
            tile_source("http://{z}.example/{x}/{y}.png").as_deref(),
            Some("http:")
        );
        assert_eq!(tile_source(""), None);
        let policy = content_security_policy("");
        assert!(policy.contains("img-src 'none'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
    }
}
