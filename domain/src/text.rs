//! What every store can keep, checked at the door so that all stores agree (decision 40).
//!
//! PostgreSQL refuses a NUL character (U+0000) in `text` and anywhere in `jsonb` (keys
//! included), and an instant outside its `timestamptz` range; the memory store would take both.
//! A value that one store refuses would answer differently per store (a `503` "try again" that
//! never succeeds, a bus message redelivered for ever), so the API and the ingest path refuse
//! them before any store sees them: a NUL in any string of a request body, a state report or a
//! cursor; an instant outside [`EARLIEST_INSTANT`]`..=`[`LATEST_INSTANT`].

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;

/// The earliest instant a query or cursor may name: 0000-01-01T00:00:00Z (RFC 3339 has four
/// digit years; PostgreSQL's `timestamptz` reaches back to 4713 BC).
pub fn earliest_instant() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(0, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The latest instant a query or cursor may name: 9999-12-31T23:59:59.999999Z.
pub fn latest_instant() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|d| d.and_hms_micro_opt(23, 59, 59, 999_999))
        .map(|t| t.and_utc())
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Doc alias: the range is `0000-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999Z`.
pub const EARLIEST_INSTANT: &str = "0000-01-01T00:00:00Z";
/// Doc alias of [`latest_instant`].
pub const LATEST_INSTANT: &str = "9999-12-31T23:59:59.999999Z";

/// Whether every store can keep and compare this instant.
pub fn instant_in_range(at: DateTime<Utc>) -> bool {
    (earliest_instant()..=latest_instant()).contains(&at)
}

/// Whether a string holds a NUL character.
pub fn has_nul(text: &str) -> bool {
    text.contains('\0')
}

/// The first string of `value` (an object key or a string value, at any depth) that holds a NUL
/// character, as a JSON Pointer (RFC 6901) of where it is: `/extra/zone` for a value, the same
/// pointer for a key (the key is named in it). `None` when there is none.
pub fn nul_in_value(value: &Value) -> Option<String> {
    fn walk(value: &Value, path: &mut String) -> bool {
        match value {
            Value::String(s) => has_nul(s),
            Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                let found = walk(item, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            Value::Object(map) => map.iter().any(|(key, item)| {
                let len = path.len();
                path.push('/');
                // RFC 6901 escapes; a NUL in the key shows as `\u0000`.
                path.push_str(
                    &key.replace('~', "~0")
                        .replace('/', "~1")
                        .replace('\0', "\\u0000"),
                );
                let found = has_nul(key) || walk(item, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            _ => false,
        }
    }
    let mut path = String::new();
    walk(value, &mut path).then_some(path)
}

/// Whether JSON text holds a NUL character in a string (it can only be written as the escape
/// `\u0000`: a raw control character is not JSON). A fast scan of the bytes, without parsing:
/// an escape counts when the backslash before `u0000` is not itself escaped.
pub fn json_has_nul(json: &[u8]) -> bool {
    const ESCAPE: &[u8] = b"u0000";
    let mut from = 0;
    while let Some(at) = json[from..]
        .windows(ESCAPE.len())
        .position(|w| w == ESCAPE)
        .map(|i| from + i)
    {
        let backslashes = json[..at].iter().rev().take_while(|&&b| b == b'\\').count();
        if backslashes % 2 == 1 {
            return true;
        }
        from = at + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nul_is_found_in_keys_and_values_at_any_depth() {
        assert_eq!(nul_in_value(&json!({"a": "x"})), None);
        assert_eq!(nul_in_value(&json!({"a": "x\u{0}"})).as_deref(), Some("/a"));
        assert_eq!(
            nul_in_value(&json!({"a": [1, {"b/c": ["ok", "n\u{0}"]}]})).as_deref(),
            Some("/a/1/b~1c/1")
        );
        assert_eq!(
            nul_in_value(&json!({"a": {"k\u{0}": 1}})).as_deref(),
            Some("/a/k\\u0000")
        );
        assert_eq!(nul_in_value(&json!("\u{0}")).as_deref(), Some(""));
    }

    #[test]
    fn the_byte_scan_agrees_with_the_parsed_value() {
        for (text, nul) in [
            (r#"{"a":"x\u0000"}"#, true),
            (r#"{"a\u0000":1}"#, true),
            (r#"{"a":"x\\u0000"}"#, false),
            (r#"{"a":"x\\\u0000"}"#, true),
            (r#"{"a":"u0000"}"#, false),
            (r#"{"a":"\u0001"}"#, false),
            (r#"{}"#, false),
        ] {
            assert_eq!(json_has_nul(text.as_bytes()), nul, "{text}");
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(nul_in_value(&value).is_some(), nul, "{text}");
        }
    }

    #[test]
    fn the_instant_range_is_four_digit_years() {
        assert!(instant_in_range(earliest_instant()));
        assert!(instant_in_range(latest_instant()));
        assert!(!instant_in_range(
            earliest_instant() - chrono::Duration::microseconds(1)
        ));
        assert!(!instant_in_range(
            latest_instant() + chrono::Duration::microseconds(1)
        ));
        assert_eq!(
            earliest_instant().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            EARLIEST_INSTANT
        );
        assert_eq!(
            latest_instant().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            LATEST_INSTANT
        );
    }
}
