//! Content negotiation (RFC 9110 §12.5.1): which of the media types an operation answers in the
//! request's `Accept` header prefers. No `Accept` (or `*/*`) is JSON, the default; an `Accept`
//! that admits none of the operation's types is refused with `406 not-acceptable` (decision 193).
//!
//! A handler takes [`JsonOrCsv`] (JSON, or CSV on `Accept: text/csv`) or [`CsvOnly`] (the
//! exports) and answers in what it holds.

use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts, HeaderMap};

/// The media types an answer can be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    /// `application/json`.
    Json,
    /// `text/csv` (RFC 4180, `crate::csv`).
    Csv,
}

impl Representation {
    fn media_type(self) -> (&'static str, &'static str) {
        match self {
            Representation::Json => ("application", "json"),
            Representation::Csv => ("text", "csv"),
        }
    }
}

/// The representation of `offers` (in the operation's order of preference) that `headers`'
/// `Accept` prefers: the highest quality, the first offer on a tie.
pub fn choose(headers: &HeaderMap, offers: &[Representation]) -> Result<Representation, ApiError> {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let first = offers[0];
    if accept.iter().all(|v| v.trim().is_empty()) {
        return Ok(first);
    }
    let ranges: Vec<Range<'_>> = accept
        .iter()
        .flat_map(|v| v.split(','))
        .filter_map(Range::parse)
        .collect();
    let mut best: Option<(Representation, f32)> = None;
    for &offer in offers {
        let q = quality(&ranges, offer);
        if q > 0.0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((offer, q));
        }
    }
    best.map(|(offer, _)| offer).ok_or_else(|| {
        let names: Vec<String> = offers
            .iter()
            .map(|o| {
                let (t, s) = o.media_type();
                format!("`{t}/{s}`")
            })
            .collect();
        ApiError::NotAcceptable(format!(
            "This operation answers in {}; the `Accept` header admits none of them.",
            names.join(" or ")
        ))
    })
}

/// One media range of an `Accept` header.
struct Range<'a> {
    kind: &'a str,
    subtype: &'a str,
    q: f32,
}

impl<'a> Range<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        let mut parts = text.split(';');
        let (kind, subtype) = parts.next()?.trim().split_once('/')?;
        let mut q = 1.0;
        for parameter in parts {
            if let Some((name, value)) = parameter.split_once('=') {
                if name.trim().eq_ignore_ascii_case("q") {
                    q = value.trim().parse::<f32>().ok()?.clamp(0.0, 1.0);
                }
            }
        }
        Some(Range {
            kind: kind.trim(),
            subtype: subtype.trim(),
            q,
        })
    }

    /// How specific the range is for `kind/subtype`: `None` if it does not match.
    fn matches(&self, kind: &str, subtype: &str) -> Option<u8> {
        match (self.kind, self.subtype) {
            ("*", "*") => Some(0),
            (k, "*") if k.eq_ignore_ascii_case(kind) => Some(1),
            (k, s) if k.eq_ignore_ascii_case(kind) && s.eq_ignore_ascii_case(subtype) => Some(2),
            _ => None,
        }
    }
}

/// The quality of `offer`: that of the most specific range matching it, 0 if none does.
fn quality(ranges: &[Range<'_>], offer: Representation) -> f32 {
    let (kind, subtype) = offer.media_type();
    ranges
        .iter()
        .filter_map(|r| r.matches(kind, subtype).map(|s| (s, r.q)))
        .max_by_key(|(specificity, _)| *specificity)
        .map_or(0.0, |(_, q)| q)
}

/// The representation of an operation that answers JSON (the default) or CSV.
#[derive(Clone, Copy, Debug)]
pub struct JsonOrCsv(pub Representation);

impl<S: Send + Sync> FromRequestParts<S> for JsonOrCsv {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let offers = [Representation::Json, Representation::Csv];
        choose(&parts.headers, &offers).map(JsonOrCsv)
    }
}

/// An operation that answers CSV only (the exports): refuses any other `Accept`.
#[derive(Clone, Copy, Debug)]
pub struct CsvOnly;

impl<S: Send + Sync> FromRequestParts<S> for CsvOnly {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        choose(&parts.headers, &[Representation::Csv]).map(|_| CsvOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn pick(accept: Option<&str>) -> Result<Representation, ApiError> {
        let mut headers = HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(header::ACCEPT, HeaderValue::from_str(a).unwrap());
        }
        choose(&headers, &[Representation::Json, Representation::Csv])
    }

    #[test]
    fn picks_what_the_accept_header_prefers() {
        use Representation::{Csv, Json};
        assert_eq!(pick(None).unwrap(), Json);
        assert_eq!(pick(Some("*/*")).unwrap(), Json);
        assert_eq!(pick(Some("text/csv")).unwrap(), Csv);
        assert_eq!(pick(Some("text/*")).unwrap(), Csv);
        assert_eq!(pick(Some("Text/CSV; charset=utf-8")).unwrap(), Csv);
        assert_eq!(pick(Some("application/json, text/csv")).unwrap(), Json);
        assert_eq!(pick(Some("application/json;q=0.5, text/csv")).unwrap(), Csv);
        assert_eq!(pick(Some("*/*;q=0.1, text/csv;q=0.9")).unwrap(), Csv);
        assert_eq!(pick(Some("text/csv;q=0, */*")).unwrap(), Json);
        assert!(matches!(
            pick(Some("application/xml")),
            Err(ApiError::NotAcceptable(_))
        ));
        assert!(matches!(
            pick(Some("application/json;q=0, text/csv;q=0")),
            Err(ApiError::NotAcceptable(_))
        ));
    }
}
