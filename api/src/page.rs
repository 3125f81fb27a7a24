//! Cursor pagination, the one mechanism every paged list uses (the directory's sites and mowers,
//! tokens, history and track, the events feed, the open alerts, the imports, the webhooks and
//! their deliveries): the `limit` parameter, opaque cursors, the invalid-cursor error, and the
//! sentinel row. A list handler asks its page with [`ask`], fetches [`Ask::fetch`] rows after the
//! key it got, and makes the page document with [`Ask::page`] (or [`Ask::cut`]).
//!
//! A cursor is the base64url (no padding) of `<list>:<key>`, where the key ([`Key`]) is the last
//! item's ordering key: an instant in microseconds for history and track, `[display_order, name,
//! id]` for sites and mowers, the id for tokens, events, imports and webhooks, the queue place
//! for deliveries, `<severity rank>,<raised_at in microseconds>,<id>` for alerts. Clients treat
//! it as opaque; naming the list in it means a cursor of one list is refused by another instead
//! of silently meaning something else. Every list decodes it on the same path, so every list
//! refuses the same garbage with the same `400`, and an empty `cursor=` is the first page
//! everywhere, like no `cursor` at all.
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
    /// Mowing sessions, keyed by `<started_at µs>,<mower id>` (newest first).
    Sessions,
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
            List::Sessions => "sessions",
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

/// A page asked of a list: its limit, checked, and the list whose cursors name its rows. Every
/// list handler reads, fetches and cuts its page through it.
#[derive(Clone, Copy, Debug)]
pub struct Ask {
    list: List,
    /// The most items of the page.
    pub limit: usize,
}

/// The page `limit` and `cursor` ask of `list`, and the key it starts after (`None`: the first
/// page). The limit is checked before the cursor.
pub fn ask<K: Key>(
    list: List,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> Result<(Ask, Option<K>), ApiError> {
    let ask = Ask::new(list, limit)?;
    Ok((ask, after(list, cursor)?))
}

impl Ask {
    /// A page of `list` with the `limit` parameter, checked.
    pub fn new(list: List, limit: Option<u32>) -> Result<Self, ApiError> {
        Ok(Self {
            list,
            limit: self::limit(limit)?,
        })
    }

    /// How many rows to fetch: one more than the limit, the sentinel.
    pub fn fetch(&self) -> usize {
        with_sentinel(self.limit)
    }

    /// `rows` (fetched with [`Ask::fetch`]) cut to the page; a cut page is followed by the cursor
    /// of its last row's `key`.
    pub fn cut<R, K: Key>(&self, rows: Vec<R>, key: impl FnOnce(&R) -> K) -> Cut<R> {
        cut(rows, self.limit, |r| cursor(self.list, &key(r)))
    }

    /// The page document of `rows` (fetched with [`Ask::fetch`]), each row as `item` shows it.
    pub fn page<R, K: Key, P: Paged>(
        &self,
        rows: Vec<R>,
        key: impl FnOnce(&R) -> K,
        item: impl FnMut(R) -> P::Item,
    ) -> P {
        self.cut(rows, key).page(self.limit, item)
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

    /// The same cut with other rows in the place of its own (the same rows, shown otherwise).
    pub fn with_rows<U>(self, rows: Vec<U>) -> Cut<U> {
        Cut {
            rows,
            truncated: self.truncated,
            next_cursor: self.next_cursor,
        }
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

/// What a list's cursor holds: the ordering key of a page's last item, as text.
pub trait Key: Sized {
    /// The key as a cursor writes it.
    fn write(&self) -> String;
    /// The key a cursor wrote; `None` when the text is not one.
    fn read(text: &str) -> Option<Self>;
}

/// The cursor after `last`, an item of `list`.
pub fn cursor<K: Key>(list: List, last: &K) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", list.tag(), last.write()))
}

/// The key inside a cursor of `list`: the page starts after it (before it, for the lists that
/// are newest first). A `cursor=` without a value is the first page, like no `cursor` at all.
pub fn after<K: Key>(list: List, cursor: Option<&str>) -> Result<Option<K>, ApiError> {
    cursor
        .filter(|c| !c.is_empty())
        .map(|c| K::read(&decode(list, c)?).ok_or_else(invalid))
        .transpose()
}

fn invalid() -> ApiError {
    ApiError::BadRequest(
        "`cursor` is not a cursor of this list; pass the `next_cursor` of the previous page \
         unchanged."
            .to_owned(),
    )
}

/// The key inside a cursor of `list`, as text.
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

/// An instant in microseconds (history, track).
impl Key for DateTime<Utc> {
    fn write(&self) -> String {
        self.timestamp_micros().to_string()
    }

    fn read(text: &str) -> Option<Self> {
        // Only instants every store can compare (PostgreSQL's range is narrower than i64).
        DateTime::from_timestamp_micros(text.parse().ok()?)
            .filter(|at| swath_domain::text::instant_in_range(*at))
    }
}

/// `[display_order, name, id]` (sites, mowers).
impl Key for OrderKey {
    fn write(&self) -> String {
        serde_json::json!([self.display_order, self.name, self.id]).to_string()
    }

    fn read(text: &str) -> Option<Self> {
        let (display_order, name, id): (i32, String, Uuid) = serde_json::from_str(text).ok()?;
        (!swath_domain::text::has_nul(&name)).then_some(OrderKey {
            display_order,
            name,
            id,
        })
    }
}

/// Keys written as their text: an id (events and imports, newest first), a delivery's place in
/// its endpoint's queue (newest first).
macro_rules! text_key {
    ($($key:ty),*) => {
        $(impl Key for $key {
            fn write(&self) -> String {
                self.to_string()
            }

            fn read(text: &str) -> Option<Self> {
                text.parse().ok()
            }
        })*
    };
}

text_key!(Uuid, i64);

/// Keys that are ids of their own type over a UUID: a token's, an endpoint's.
macro_rules! id_key {
    ($($key:ident),*) => {
        $(impl Key for $key {
            fn write(&self) -> String {
                self.0.write()
            }

            fn read(text: &str) -> Option<Self> {
                Uuid::read(text).map($key)
            }
        })*
    };
}

id_key!(TokenId, WebhookId);

/// `<started_at in microseconds>,<mower id>` (mowing sessions, newest first).
impl Key for (DateTime<Utc>, swath_domain::MowerId) {
    fn write(&self) -> String {
        format!("{},{}", self.0.timestamp_micros(), self.1 .0)
    }

    fn read(text: &str) -> Option<Self> {
        let (micros, id) = text.split_once(',')?;
        Some((
            DateTime::<Utc>::read(micros)?,
            swath_domain::MowerId(id.parse().ok()?),
        ))
    }
}

/// `<severity rank>,<raised_at in microseconds>,<id>` (open alerts).
impl Key for AlertCursor {
    fn write(&self) -> String {
        format!(
            "{},{},{}",
            self.severity_rank,
            self.raised_at.timestamp_micros(),
            self.id
        )
    }

    fn read(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, ',');
        let (rank, micros, id) = (parts.next()?, parts.next()?, parts.next()?);
        Some(AlertCursor {
            severity_rank: rank.parse().ok()?,
            raised_at: DateTime::<Utc>::read(micros)?,
            id: id.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_belong_to_their_list() {
        let t: DateTime<Utc> = "2026-06-01T12:00:30.123456Z".parse().unwrap();
        let c = cursor(List::History, &t);
        assert!(c
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(after(List::History, Some(&c)).unwrap(), Some(t));
        assert!(after::<DateTime<Utc>>(List::Track, Some(&c)).is_err());

        let key = OrderKey {
            display_order: -3,
            name: "Lawn \"A\": ü".into(),
            id: Uuid::now_v7(),
        };
        let c = cursor(List::Mowers, &key);
        assert_eq!(after(List::Mowers, Some(&c)).unwrap(), Some(key));
        assert!(after::<OrderKey>(List::Sites, Some(&c)).is_err());

        let id = TokenId::new();
        let tokens = cursor(List::Tokens, &id);
        assert_eq!(after(List::Tokens, Some(&tokens)).unwrap(), Some(id));
        let events = cursor(List::Events, &id.0);
        assert_eq!(after(List::Events, Some(&events)).unwrap(), Some(id.0));
        let alert = AlertCursor {
            severity_rank: 4,
            raised_at: t,
            id: Uuid::now_v7(),
        };
        let alerts = cursor(List::Alerts, &alert);
        assert_eq!(after(List::Alerts, Some(&alerts)).unwrap(), Some(alert));
        assert!(after::<AlertCursor>(List::Alerts, Some(&events)).is_err());
        assert!(after::<Uuid>(List::Events, Some(&tokens)).is_err());
        let import = Uuid::now_v7();
        let c = cursor(List::Imports, &import);
        assert_eq!(after(List::Imports, Some(&c)).unwrap(), Some(import));
        assert!(after::<Uuid>(List::Events, Some(&c)).is_err());
        let events = cursor(List::Events, &import);
        assert!(after::<Uuid>(List::Imports, Some(&events)).is_err());
        // The feeds' cursors keep the format they always had.
        assert_eq!(
            after(
                List::Events,
                Some(&URL_SAFE_NO_PAD.encode(format!("events:{}", id.0)))
            )
            .unwrap(),
            Some(id.0)
        );
        assert_eq!(
            after::<AlertCursor>(List::Alerts, Some("YWxlcnRzOjQsMTc4MDMxNTIzMDEyMzQ1NiwwMTkwYTJiNC01YzNlLTdkMjEtOWYwMC0zYjFkMmM0ZTVmNjA"))
                .unwrap()
                .map(|a| (a.severity_rank, a.raised_at, a.id.to_string())),
            Some((4, t, "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60".to_owned()))
        );
        // An empty `cursor=` is the first page of every list.
        assert_eq!(
            after::<DateTime<Utc>>(List::History, Some("")).unwrap(),
            None
        );
        assert_eq!(after::<OrderKey>(List::Sites, Some("")).unwrap(), None);
        assert_eq!(after::<TokenId>(List::Tokens, Some("")).unwrap(), None);
        assert_eq!(after::<Uuid>(List::Events, Some("")).unwrap(), None);
        assert_eq!(after::<AlertCursor>(List::Alerts, Some("")).unwrap(), None);
        for bad in ["!!", "aGlzdG9yeTp4", "bW93ZXJzOg"] {
            assert!(
                after::<DateTime<Utc>>(List::History, Some(bad)).is_err(),
                "{bad}"
            );
            assert!(after::<OrderKey>(List::Mowers, Some(bad)).is_err(), "{bad}");
            assert!(after::<Uuid>(List::Events, Some(bad)).is_err(), "{bad}");
            assert!(
                after::<AlertCursor>(List::Alerts, Some(bad)).is_err(),
                "{bad}"
            );
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
        // The limit is checked before the cursor.
        let refused = ask::<Uuid>(List::Events, Some(0), Some("!!")).unwrap_err();
        assert!(refused.to_string().contains("limit"), "{refused}");
        let (asked, start) = ask::<i64>(List::Deliveries, Some(2), None).unwrap();
        assert_eq!((asked.limit, asked.fetch(), start), (2, 3, None));
        let page = asked.cut(vec![9_i64, 8, 7], |seq| *seq);
        assert_eq!(page.rows, vec![9, 8]);
        assert_eq!(
            after(List::Deliveries, page.next_cursor.as_deref()).unwrap(),
            Some(8_i64)
        );
    }
}
