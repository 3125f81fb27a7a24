//! Cursor pagination: the `limit` parameter, opaque cursors, and the sentinel row.
//!
//! A cursor is the base64url (no padding) of `<list>:<key>`, where the key is the last item's
//! ordering key: an instant in microseconds for history and track, `[display_order, name, id]`
//! for sites and mowers, the id for tokens. Clients treat it as opaque; naming the list in it
//! means a cursor of one list is refused by another instead of silently meaning something else.
//!
//! A page fetches one row more than its limit (the sentinel): if it comes back, the page was cut
//! and `truncated` is `true`. Never a count.

use crate::error::ApiError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use swath_application::ports::{OrderKey, TokenId};
use uuid::Uuid;

/// Items per page when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit` accepted.
pub const MAX_LIMIT: u32 = 1000;

/// The lists that have cursors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    Sites,
    Mowers,
    Tokens,
    History,
    Track,
}

impl List {
    fn tag(self) -> &'static str {
        match self {
            List::Sites => "sites",
            List::Mowers => "mowers",
            List::Tokens => "tokens",
            List::History => "history",
            List::Track => "track",
        }
    }
}

/// The `limit` query parameter: 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent.
pub fn limit(param: Option<u32>) -> Result<usize, ApiError> {
    match param.unwrap_or(DEFAULT_LIMIT) {
        n @ 1..=MAX_LIMIT => Ok(n as usize),
        n => Err(ApiError::BadRequest(format!(
            "`limit` is {n}; it must be between 1 and {MAX_LIMIT}."
        ))),
    }
}

/// Cuts `rows` (fetched with one sentinel row beyond `limit`) to the page, and says whether it
/// was cut.
pub fn cut<T>(mut rows: Vec<T>, limit: usize) -> (Vec<T>, bool) {
    let truncated = rows.len() > limit;
    rows.truncate(limit);
    (rows, truncated)
}

fn encode(list: List, key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{key}", list.tag()))
}

fn invalid() -> ApiError {
    ApiError::BadRequest(
        "`cursor` is not a cursor of this list; pass the `next_cursor` of the previous page \
         unchanged."
            .to_owned(),
    )
}

/// The key inside a cursor of `list`.
fn decode(list: List, cursor: &str) -> Result<String, ApiError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor.trim_end_matches('='))
        .map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    if swath_domain::text::has_nul(&text) {
        return Err(invalid());
    }
    let key = text
        .strip_prefix(list.tag())
        .and_then(|rest| rest.strip_prefix(':'))
        .ok_or_else(invalid)?;
    Ok(key.to_owned())
}

/// The cursor after an instant (history, track).
pub fn time_cursor(list: List, last: DateTime<Utc>) -> String {
    encode(list, &last.timestamp_micros().to_string())
}

/// A `cursor=` without a value is the first page, like no `cursor` at all.
fn given(cursor: Option<&str>) -> Option<&str> {
    cursor.filter(|c| !c.is_empty())
}

/// The instant inside a history or track cursor.
pub fn time_after(list: List, cursor: Option<&str>) -> Result<Option<DateTime<Utc>>, ApiError> {
    given(cursor)
        .map(|c| {
            let micros: i64 = decode(list, c)?.parse().map_err(|_| invalid())?;
            // Only instants every store can compare (PostgreSQL's range is narrower than i64).
            DateTime::from_timestamp_micros(micros)
                .filter(|at| swath_domain::text::instant_in_range(*at))
                .ok_or_else(invalid)
        })
        .transpose()
}

/// The cursor after a site or mower.
pub fn order_cursor(list: List, last: &OrderKey) -> String {
    let key = serde_json::json!([last.display_order, last.name, last.id]);
    encode(list, &key.to_string())
}

/// The ordering key inside a site or mower cursor.
pub fn order_after(list: List, cursor: Option<&str>) -> Result<Option<OrderKey>, ApiError> {
    given(cursor)
        .map(|c| {
            let (display_order, name, id): (i32, String, Uuid) =
                serde_json::from_str(&decode(list, c)?).map_err(|_| invalid())?;
            if swath_domain::text::has_nul(&name) {
                return Err(invalid());
            }
            Ok(OrderKey {
                display_order,
                name,
                id,
            })
        })
        .transpose()
}

/// The cursor after a token.
pub fn token_cursor(last: TokenId) -> String {
    encode(List::Tokens, &last.0.to_string())
}

/// The token id inside a token cursor.
pub fn token_after(cursor: Option<&str>) -> Result<Option<TokenId>, ApiError> {
    given(cursor)
        .map(|c| {
            decode(List::Tokens, c)?
                .parse()
                .map(TokenId)
                .map_err(|_| invalid())
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_belong_to_their_list() {
        let t: DateTime<Utc> = "2026-06-01T12:00:30.123456Z".parse().unwrap();
        let c = time_cursor(List::History, t);
        assert!(c
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(time_after(List::History, Some(&c)).unwrap(), Some(t));
        assert!(time_after(List::Track, Some(&c)).is_err());

        let key = OrderKey {
            display_order: -3,
            name: "Lawn \"A\": ü".into(),
            id: Uuid::now_v7(),
        };
        let c = order_cursor(List::Mowers, &key);
        assert_eq!(order_after(List::Mowers, Some(&c)).unwrap(), Some(key));
        assert!(order_after(List::Sites, Some(&c)).is_err());

        let id = TokenId::new();
        assert_eq!(token_after(Some(&token_cursor(id))).unwrap(), Some(id));
        assert_eq!(time_after(List::History, Some("")).unwrap(), None);
        for bad in ["!!", "aGlzdG9yeTp4", "bW93ZXJzOg"] {
            assert!(time_after(List::History, Some(bad)).is_err(), "{bad}");
            assert!(order_after(List::Mowers, Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_are_checked_and_pages_cut_at_the_sentinel() {
        assert_eq!(limit(None).unwrap(), 100);
        assert_eq!(limit(Some(1000)).unwrap(), 1000);
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(1001)).is_err());
        assert_eq!(cut(vec![1, 2, 3], 2), (vec![1, 2], true));
        assert_eq!(cut(vec![1, 2], 2), (vec![1, 2], false));
    }
}
