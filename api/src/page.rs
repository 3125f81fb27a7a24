//! Cursor pagination, the one module every paged list uses (the directory's sites and mowers,
//! tokens, history and track, the events feed, the open alerts, the imports, the webhooks and
//! their deliveries): the `limit` parameter, opaque
//! cursors, the invalid-cursor error, and the sentinel row.
//!
//! A cursor is the base64url (no padding) of `<list>:<key>`, where the key is the last item's
//! ordering key: an instant in microseconds for history and track, `[display_order, name, id]`
//! for sites and mowers, the id for tokens, events, imports and webhooks, the queue place for
//! deliveries, `<severity rank>,<raised_at in
//! microseconds>,<id>` for alerts. Clients treat it as opaque; naming the list in it means a
//! cursor of one list is refused by another instead of silently meaning something else. Every
//! list decodes it on the same path, so every list refuses the same garbage with the same `400`,
//! and an empty `cursor=` is the first page everywhere, like no `cursor` at all.
//!
//! A page fetches one row more than its limit (the sentinel, [`with_sentinel`]): if it comes back,
//! the page was cut ([`cut`]), `truncated` is `true` and `next_cursor` names the page's last item.
//! Never a count.

use crate::error::ApiError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use swath_application::ports::{AlertCursor, TokenId};
use swath_application::sentinel;
use swath_domain::webhook::WebhookId;
use swath_domain::OrderKey;
use uuid::Uuid;

pub use swath_application::sentinel::with_sentinel;

/// Items per page when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit` accepted.
pub const MAX_LIMIT: u32 = 1000;

/// The lists that have cursors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// `GET /v1/sites`, keyed by `[display_order, name, id]`.
    Sites,
    /// `GET /v1/mowers`, keyed by `[display_order, name, id]`.
    Mowers,
    /// `GET /v1/tokens`, keyed by the token id.
    Tokens,
    /// A mower's history, keyed by the instant in microseconds.
    History,
    /// A mower's track, keyed by the instant in microseconds.
    Track,
    /// The events feed, keyed by the event id (newest first).
    Events,
    /// The open alerts, keyed by `<severity rank>,<raised_at µs>,<id>`.
    Alerts,
    /// This replica's imports, keyed by the import id (newest first).
    Imports,
    /// `GET /v1/webhooks`, keyed by the endpoint id.
    Webhooks,
    /// An endpoint's deliveries, keyed by their place in its queue (newest first).
    Deliveries,
}

impl List {
    fn tag(self) -> &'static str {
        match self {
            List::Sites => "sites",
            List::Mowers => "mowers",
            List::Tokens => "tokens",
            List::History => "history",
            List::Track => "track",
            List::Events => "events",
            List::Alerts => "alerts",
            List::Imports => "imports",
            List::Webhooks => "webhooks",
            List::Deliveries => "deliveries",
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

/// A page cut at the sentinel.
#[derive(Debug, PartialEq)]
pub struct Cut<T> {
    /// At most `limit` rows.
    pub rows: Vec<T>,
    /// Whether the sentinel came back: more rows follow.
    pub truncated: bool,
    /// The cursor after the last row when the page was cut, `None` on the last page.
    pub next_cursor: Option<String>,
}

/// A page document (every list of the API, declared by `list_page!`): made from a [`Cut`] by
/// [`Cut::page`].
pub trait Paged {
    type Item;
    fn of(
        items: Vec<Self::Item>,
        limit: usize,
        truncated: bool,
        next_cursor: Option<String>,
    ) -> Self;
}

impl<T> Cut<T> {
    /// The page document of this cut of a list asked with `limit`, each row as `item` shows it.
    pub fn page<P: Paged>(self, limit: usize, item: impl FnMut(T) -> P::Item) -> P {
        let items = self.rows.into_iter().map(item).collect();
        P::of(items, limit, self.truncated, self.next_cursor)
    }
}

/// Cuts `rows` (fetched with [`with_sentinel`]`(limit)`) to the page, and names the next page
/// with `cursor` of its last row when it was cut.
pub fn cut<T>(rows: Vec<T>, limit: usize, cursor: impl FnOnce(&T) -> String) -> Cut<T> {
    let (rows, truncated) = sentinel::cut(rows, limit);
    let next_cursor = truncated.then(|| rows.last().map(cursor)).flatten();
    Cut {
        rows,
        truncated,
        next_cursor,
    }
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

/// The cursor after a webhook endpoint.
pub fn webhook_cursor(last: WebhookId) -> String {
    encode(List::Webhooks, &last.0.to_string())
}

/// The endpoint id inside a webhooks cursor.
pub fn webhook_after(cursor: Option<&str>) -> Result<Option<WebhookId>, ApiError> {
    given(cursor)
        .map(|c| {
            decode(List::Webhooks, c)?
                .parse()
                .map(WebhookId)
                .map_err(|_| invalid())
        })
        .transpose()
}

/// The cursor after a delivery (newest first): its place in the endpoint's queue.
pub fn delivery_cursor(last_seq: i64) -> String {
    encode(List::Deliveries, &last_seq.to_string())
}

/// The place inside a deliveries cursor: the next page holds older deliveries.
pub fn delivery_before(cursor: Option<&str>) -> Result<Option<i64>, ApiError> {
    given(cursor)
        .map(|c| decode(List::Deliveries, c)?.parse().map_err(|_| invalid()))
        .transpose()
}

/// The cursor after an item of a list keyed by a UUIDv7 id, newest first (the events feed, the
/// imports).
pub fn id_cursor(list: List, last: Uuid) -> String {
    encode(list, &last.to_string())
}

/// The id inside a cursor of such a list: the next page holds older items.
pub fn id_before(list: List, cursor: Option<&str>) -> Result<Option<Uuid>, ApiError> {
    given(cursor)
        .map(|c| decode(list, c)?.parse().map_err(|_| invalid()))
        .transpose()
}

/// The cursor after an event (events feed, newest first).
pub fn event_cursor(last: Uuid) -> String {
    id_cursor(List::Events, last)
}

/// The event id inside an events cursor: the next page holds older events.
pub fn event_before(cursor: Option<&str>) -> Result<Option<Uuid>, ApiError> {
    id_before(List::Events, cursor)
}

/// The cursor after an open alert.
pub fn alert_cursor(last: &AlertCursor) -> String {
    let key = format!(
        "{},{},{}",
        last.severity_rank,
        last.raised_at.timestamp_micros(),
        last.id
    );
    encode(List::Alerts, &key)
}

/// The ordering key inside an alerts cursor.
pub fn alert_after(cursor: Option<&str>) -> Result<Option<AlertCursor>, ApiError> {
    given(cursor)
        .map(|c| {
            let key = decode(List::Alerts, c)?;
            let mut parts = key.splitn(3, ',');
            let (Some(rank), Some(micros), Some(id)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(invalid());
            };
            Ok(AlertCursor {
                severity_rank: rank.parse().map_err(|_| invalid())?,
                raised_at: micros
                    .parse()
                    .ok()
                    .and_then(DateTime::from_timestamp_micros)
                    .filter(|at| swath_domain::text::instant_in_range(*at))
                    .ok_or_else(invalid)?,
                id: id.parse().map_err(|_| invalid())?,
            })
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
        assert_eq!(event_before(Some(&event_cursor(id.0))).unwrap(), Some(id.0));
        let alert = AlertCursor {
            severity_rank: 4,
            raised_at: t,
            id: Uuid::now_v7(),
        };
        assert_eq!(
            alert_after(Some(&alert_cursor(&alert))).unwrap(),
            Some(alert)
        );
        assert!(alert_after(Some(&event_cursor(id.0))).is_err());
        assert!(event_before(Some(&token_cursor(id))).is_err());
        let import = Uuid::now_v7();
        let c = id_cursor(List::Imports, import);
        assert_eq!(id_before(List::Imports, Some(&c)).unwrap(), Some(import));
        assert!(event_before(Some(&c)).is_err());
        assert!(id_before(List::Imports, Some(&event_cursor(import))).is_err());
        // The feeds' cursors keep the format they always had.
        assert_eq!(
            event_before(Some(&URL_SAFE_NO_PAD.encode(format!("events:{}", id.0)))).unwrap(),
            Some(id.0)
        );
        assert_eq!(
            alert_after(Some("YWxlcnRzOjQsMTc4MDMxNTIzMDEyMzQ1NiwwMTkwYTJiNC01YzNlLTdkMjEtOWYwMC0zYjFkMmM0ZTVmNjA"))
                .unwrap()
                .map(|a| (a.severity_rank, a.raised_at, a.id.to_string())),
            Some((4, t, "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60".to_owned()))
        );
        // An empty `cursor=` is the first page of every list.
        assert_eq!(time_after(List::History, Some("")).unwrap(), None);
        assert_eq!(order_after(List::Sites, Some("")).unwrap(), None);
        assert_eq!(token_after(Some("")).unwrap(), None);
        assert_eq!(event_before(Some("")).unwrap(), None);
        assert_eq!(id_before(List::Imports, Some("")).unwrap(), None);
        assert_eq!(alert_after(Some("")).unwrap(), None);
        for bad in ["!!", "aGlzdG9yeTp4", "bW93ZXJzOg"] {
            assert!(time_after(List::History, Some(bad)).is_err(), "{bad}");
            assert!(order_after(List::Mowers, Some(bad)).is_err(), "{bad}");
            assert!(event_before(Some(bad)).is_err(), "{bad}");
            assert!(alert_after(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_are_checked_and_pages_cut_at_the_sentinel() {
        assert_eq!(limit(None).unwrap(), 100);
        assert_eq!(limit(Some(1000)).unwrap(), 1000);
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(1001)).is_err());
        assert_eq!(with_sentinel(100), 101);
        let page = cut(vec![1, 2, 3], 2, |n| n.to_string());
        assert_eq!((page.rows, page.truncated), (vec![1, 2], true));
        assert_eq!(page.next_cursor.as_deref(), Some("2"));
        let last = cut(vec![1, 2], 2, |n| n.to_string());
        assert_eq!((last.rows, last.truncated), (vec![1, 2], false));
        assert_eq!(last.next_cursor, None);
    }
}
