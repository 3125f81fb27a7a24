//! CSV answers (issue 45, decision 193): RFC 4180 (`,` between cells, CRLF after each record, a
//! cell quoted when it holds `,`, `"`, CR or LF, its quotes doubled), UTF-8 without a byte order
//! mark, a header row first.
//!
//! A row type says what its cells are ([`CsvRow`]): **text** (a value a client or a gateway
//! chose: an error code, a name), neutralised against spreadsheet formulas (OWASP "CSV
//! injection": a text cell starting with `=`, `+`, `-`, `@`, a tab or a CR gets a leading `'`),
//! or a **value** Swath wrote itself (numbers, ids, instants, enumerations), written as it is: a
//! negative longitude stays the number `-13.4`, not the text `'-13.4`.
//!
//! A new CSV answer is a type implementing [`CsvRow`] and a call of [`csv_answer`] (one page) or
//! [`csv_stream`] (pages of an export).

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use std::borrow::Cow;
use std::fmt::Display;

/// The media type of every CSV answer.
pub const TEXT_CSV: &str = "text/csv; charset=utf-8; header=present";

/// The characters that make a spreadsheet read a cell as a formula (OWASP).
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A row of a CSV answer: its header and its cells, in the same order.
pub trait CsvRow {
    /// The header row's names, one per cell.
    const HEADER: &'static [&'static str];

    /// Writes the row's cells, in [`CsvRow::HEADER`]'s order.
    fn cells(&self, record: &mut Record<'_>);
}

/// `text` as a text cell shows it: with a leading `'` when it starts like a formula.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    if text.starts_with(FORMULA_STARTS) {
        Cow::Owned(format!("'{text}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// One record being written (see [`CsvRow::cells`]).
pub struct Record<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl Record<'_> {
    fn separate(&mut self) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
    }

    /// A cell as RFC 4180 writes it: quoted when it must be.
    fn raw(&mut self, cell: &str) {
        self.separate();
        if cell.contains([',', '"', '\r', '\n']) {
            self.out.push(b'"');
            for part in cell.split_inclusive('"') {
                self.out.extend_from_slice(part.as_bytes());
                if part.ends_with('"') {
                    self.out.push(b'"');
                }
            }
            self.out.push(b'"');
        } else {
            self.out.extend_from_slice(cell.as_bytes());
        }
    }

    /// A text cell (a value someone else chose), neutralised.
    pub fn text(&mut self, text: &str) {
        self.raw(&neutralise(text));
    }

    /// A text cell, empty for `None`.
    pub fn text_opt(&mut self, text: Option<&str>) {
        self.text(text.unwrap_or_default());
    }

    /// A value Swath wrote (a number, an id, an enumeration), as it displays.
    pub fn value(&mut self, value: impl Display) {
        self.raw(&value.to_string());
    }

    /// A value, empty for `None`.
    pub fn value_opt<V: Display>(&mut self, value: Option<V>) {
        match value {
            Some(v) => self.value(v),
            None => self.raw(""),
        }
    }

    /// An instant as the JSON answers write it (RFC 3339, UTC, the fraction only when there is
    /// one: decision 104).
    pub fn instant(&mut self, at: DateTime<Utc>) {
        self.raw(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true));
    }

    /// An enumeration as the JSON answers name it (its serde name).
    pub fn name(&mut self, value: &impl serde::Serialize) {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::String(name)) => self.raw(&name),
            _ => self.raw(""),
        }
    }
}

/// Appends the header row of `R`.
pub fn write_header<R: CsvRow>(out: &mut Vec<u8>) {
    let mut record = Record { out, first: true };
    for name in R::HEADER {
        record.raw(name);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends one record.
pub fn write_row<R: CsvRow>(out: &mut Vec<u8>, row: &R) {
    let mut record = Record {
        out: &mut *out,
        first: true,
    };
    row.cells(&mut record);
    out.extend_from_slice(b"\r\n");
}

/// The whole CSV document of `rows`, the header first.
pub fn document<R: CsvRow>(rows: &[R]) -> Vec<u8> {
    let mut out = Vec::new();
    write_header::<R>(&mut out);
    for row in rows {
        write_row(&mut out, row);
    }
    out
}

/// A `200` CSV answer of `rows` (one page).
pub fn csv_answer<R: CsvRow>(rows: &[R]) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_CSV))],
        document(rows),
    )
        .into_response()
}

/// The header naming the next page's cursor of a paged list answered as CSV (absent on the
/// last page): pass it as `cursor`, as the JSON page's `next_cursor`.
pub const NEXT_CURSOR: &str = "swath-next-cursor";

/// A `200` CSV answer of one page of a paged list, with its next cursor ([`NEXT_CURSOR`]).
pub fn csv_page<R: CsvRow>(rows: &[R], next_cursor: Option<&str>) -> Response {
    let mut response = csv_answer(rows);
    if let Some(value) = next_cursor.and_then(|c| HeaderValue::from_str(c).ok()) {
        response.headers_mut().insert(NEXT_CURSOR, value);
    }
    response
}

/// The pages of a running export as a body's stream: a page pulled when the body wants more,
/// so that an export whose body is dropped (its client went away) reads nothing more. An
/// export stopped by an error (its token revoked, a read failed) ends the stream with an error.
pub fn export_pages<S>(
    export: swath_application::Export<S>,
) -> impl futures::Stream<Item = Result<Vec<S::Row>, std::io::Error>> + Send + 'static
where
    S: swath_application::ExportSource,
{
    use futures::StreamExt;
    // Fused: a body's consumer (the compression layer's encoder) may poll once more after the
    // end, which an unfold answers with a panic. An error is the last item.
    futures::stream::unfold(Some(export), |export| async move {
        let mut export = export?;
        match export.next_page().await {
            Ok(Some(rows)) => Some((Ok(rows), Some(export))),
            Ok(None) => None,
            Err(e) => Some((Err(std::io::Error::other(e)), None)),
        }
    })
    .fuse()
}

/// A `200` CSV answer streamed from `pages` (the header first, then each page's records as one
/// chunk), downloaded as `filename`. An `Err` page ends the body with an error: the connection
/// is cut before the body's end, so that a client never takes a stopped export for a whole one.
pub fn csv_stream<R, S>(filename: &str, pages: S) -> Response
where
    R: CsvRow + Send + 'static,
    S: futures::Stream<Item = Result<Vec<R>, std::io::Error>> + Send + 'static,
{
    use futures::StreamExt;
    let mut head = Vec::new();
    write_header::<R>(&mut head);
    let head = futures::stream::once(async move { Ok(Bytes::from(head)) });
    let body = head.chain(pages.map(|page| {
        page.map(|rows| {
            let mut out = Vec::with_capacity(rows.len() * 64);
            for row in &rows {
                write_row(&mut out, row);
            }
            Bytes::from(out)
        })
    }));
    let disposition = format!("attachment; filename=\"{filename}\"");
    let mut response = Body::from_stream(body.fuse()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_CSV));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A row of one text cell and one value cell.
    struct Pair(String, f64);

    impl CsvRow for Pair {
        const HEADER: &'static [&'static str] = &["text", "number"];
        fn cells(&self, record: &mut Record<'_>) {
            record.text(&self.0);
            record.value(self.1);
        }
    }

    /// Parses `bytes` as Python's `csv` module does by default (the `csv` crate's reader with
    /// the same dialect: `,`, `"` doubled, records of any line ending).
    fn parse(bytes: &[u8]) -> Vec<Vec<String>> {
        ::csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(bytes)
            .records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect()
    }

    #[test]
    fn a_formula_gets_a_quote_and_a_number_stays_a_number() {
        let rows = [
            Pair("=HYPERLINK(\"x\")".into(), -13.4),
            Pair("@SUM(A1)".into(), 1.5),
            Pair("+1".into(), 0.0),
            Pair("-1".into(), -1.0),
            Pair("\tx".into(), 2.0),
            Pair("\rx".into(), 3.0),
            Pair("a,b".into(), 4.0),
            Pair("plain".into(), 5.0),
        ];
        let text = String::from_utf8(document(&rows)).unwrap();
        assert_eq!(
            text,
            "text,number\r\n\
             \"'=HYPERLINK(\"\"x\"\")\",-13.4\r\n\
             '@SUM(A1),1.5\r\n\
             '+1,0\r\n\
             '-1,-1\r\n\
             '\tx,2\r\n\
             \"'\rx\",3\r\n\
             \"a,b\",4\r\n\
             plain,5\r\n"
        );
    }

    proptest! {
        /// Any text survives the round trip: parsed back, a cell is the text, or the text with
        /// one leading `'` exactly when it starts like a formula; numbers parse back to
        /// themselves.
        #[test]
        fn any_text_survives_a_round_trip(
            texts in proptest::collection::vec(any::<String>(), 1..8),
            number in any::<f64>().prop_filter("finite", |n| n.is_finite()),
        ) {
            let rows: Vec<Pair> = texts.iter().map(|t| Pair(t.clone(), number)).collect();
            let parsed = parse(&document(&rows));
            prop_assert_eq!(parsed.len(), rows.len() + 1);
            prop_assert_eq!(&parsed[0], &vec!["text".to_owned(), "number".to_owned()]);
            for (text, record) in texts.iter().zip(&parsed[1..]) {
                prop_assert_eq!(record.len(), 2);
                let expected = if text.starts_with(FORMULA_STARTS) {
                    format!("'{text}")
                } else {
                    text.clone()
                };
                prop_assert_eq!(&record[0], &expected);
                prop_assert!(!record[0].starts_with(FORMULA_STARTS));
                prop_assert_eq!(record[1].parse::<f64>().unwrap(), number);
            }
        }
    }
}
