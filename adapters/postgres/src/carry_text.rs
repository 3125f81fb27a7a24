//! The one-text carries of W8's folds (decisions 210 and 211): a row keeps what a fold carries
//! between batches as `|`-separated fields instead of a column each, because PostgreSQL's cost of
//! reading and rewriting a row per mower per batch grows with the number of values, not their
//! bytes.
//!
//! A carry is its layout's version, then fixed fields (an empty field for an absent value;
//! numbers as Rust prints them, a float as its shortest round-trip decimal, so each reads back
//! exactly), then last the one free text (an error code) after a `+`: the only field that may
//! hold a `|`, so it needs no escaping.

use std::fmt::{Display, Write};
use std::str::FromStr;

/// Writes a carry's fields in order.
pub(crate) struct CarryWriter {
    out: String,
}

impl CarryWriter {
    pub(crate) fn new(layout: &str) -> Self {
        let mut out = String::with_capacity(192);
        out.push_str(layout);
        Self { out }
    }

    /// A number (or a name without `|`), or an empty field.
    pub(crate) fn field<T: Display>(&mut self, value: Option<T>) {
        self.out.push('|');
        if let Some(v) = value {
            let _ = write!(self.out, "{v}");
        }
    }

    /// The free text last, and the carry.
    pub(crate) fn finish(mut self, free: Option<&str>) -> String {
        self.out.push('|');
        if let Some(text) = free {
            self.out.push('+');
            self.out.push_str(text);
        }
        self.out
    }
}

/// Reads a carry's fields in the order they were written; each error says what is wrong.
pub(crate) struct CarryReader<'a> {
    fields: std::str::SplitN<'a, char>,
}

impl<'a> CarryReader<'a> {
    /// `fixed`: the fields before the free text, the version included.
    pub(crate) fn new(text: &'a str, layout: &str, fixed: usize) -> Result<Self, String> {
        let mut reader = Self {
            fields: text.splitn(fixed + 1, '|'),
        };
        if reader.next()? != layout {
            return Err("of an unknown layout".to_owned());
        }
        Ok(reader)
    }

    /// The next field as it is written.
    pub(crate) fn next(&mut self) -> Result<&'a str, String> {
        self.fields.next().ok_or_else(|| "cut short".to_owned())
    }

    /// The next field parsed, `None` when empty; `what` names it in the error.
    pub(crate) fn parsed<T: FromStr>(&mut self, what: &str) -> Result<Option<T>, String> {
        match self.next()? {
            "" => Ok(None),
            field => field
                .parse()
                .map(Some)
                .map_err(|_| format!("with a bad {what}")),
        }
    }

    /// The free text, the last field.
    pub(crate) fn free(&mut self) -> Result<Option<String>, String> {
        match self.next()? {
            "" => Ok(None),
            field => field
                .strip_prefix('+')
                .map(|text| Some(text.to_owned()))
                .ok_or_else(|| "with a bad error code".to_owned()),
        }
    }
}

/// What both carries' property tests draw: the fields a session's carry holds in either row.
#[cfg(test)]
pub(crate) mod strategies {
    use chrono::{DateTime, Duration, TimeZone, Utc};
    use proptest::prelude::*;
    use swath_domain::sessions::EndReason;

    /// A latitude or longitude, or none: zero of either sign and a tiny value among them, which
    /// a text form could lose.
    pub(crate) fn position() -> impl Strategy<Value = Option<f64>> {
        prop::option::of(prop_oneof![
            -180.0..180.0f64,
            Just(0.0),
            Just(-0.0),
            Just(1e-7)
        ])
    }

    prop_compose! {
        /// A session's start, its end (none while open), end reason and error code, the codes
        /// among them holding the carry's separators.
        pub(crate) fn session_ends()(
            start in -2_000_000_000_000_000i64..8_000_000_000_000_000,
            length in prop::option::of(0i64..1_000_000_000),
            reason in prop::option::of(prop_oneof![
                Just(EndReason::Docked), Just(EndReason::Stopped), Just(EndReason::Error),
                Just(EndReason::Silent)
            ]),
            error_code in prop::option::of(prop_oneof![
                Just(String::new()), Just("E|12".to_owned()), Just("+x".to_owned()),
                "\\PC{0,12}"
            ]),
        ) -> (DateTime<Utc>, Option<DateTime<Utc>>, Option<EndReason>, Option<String>) {
            let started_at = Utc.timestamp_micros(start).unwrap();
            (started_at, length.map(|l| started_at + Duration::microseconds(l)), reason, error_code)
        }
    }
}
