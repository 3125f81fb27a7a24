//! The one shape in which a port error carries the failure underneath it (decision 98): a
//! variant that wraps a failure holds it as a [`Cause`], marked `#[source]`, so the adapter's own
//! error (`sqlx::Error`, an async-nats error, a serde error...) survives the port and can be
//! logged with its whole chain ([`chain`]) or downcast by a caller that knows the adapter.

use std::error::Error;
use std::fmt;

/// The failure underneath a port error: the adapter's error itself, boxed. A plain message
/// (`"...".into()`) is a cause too, for failures that have no error value (a timeout the adapter
/// measured, a test's fake).
pub type Cause = Box<dyn Error + Send + Sync + 'static>;

/// A cause with what was being done when it happened: displays as `context: source`, and its
/// `source()` is the underlying error.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct Context {
    context: String,
    #[source]
    source: Cause,
}

/// `source`, said to have happened while doing `context` (`"connecting to NATS at {url}"`).
pub fn context(context: impl Into<String>, source: impl Into<Cause>) -> Cause {
    Box::new(Context {
        context: context.into(),
        source: source.into(),
    })
}

/// An error and every `source()` under it, on one line, for logs: `a: b: c`. A source whose text
/// the line holds already (many errors display their source too) is not repeated.
pub fn chain<'a>(error: &'a (dyn Error + 'static)) -> Chain<'a> {
    Chain(error)
}

/// See [`chain`].
#[derive(Clone, Copy)]
pub struct Chain<'a>(&'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = self.0.to_string();
        let mut next = self.0.source();
        while let Some(source) = next {
            let text = source.to_string();
            if !text.is_empty() && !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            next = source.source();
        }
        f.write_str(&line)
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Cause);

    #[test]
    fn a_chain_names_every_source_once() {
        let io = std::io::Error::other("connection reset");
        let error = Outer(context("reading the consumer", io));
        assert_eq!(
            chain(&error).to_string(),
            "outer: reading the consumer: connection reset"
        );
    }

    #[test]
    fn a_context_keeps_its_source() {
        let cause = context("flushing", std::io::Error::other("broken pipe"));
        let source = cause.source().expect("a source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(cause.to_string(), "flushing: broken pipe");
    }

    /// Every port's failure variant hands its cause back as `source()`, the adapter's error
    /// itself (downcast), and displays as it did when it held the cause's text.
    #[test]
    fn every_port_error_keeps_its_source() {
        use crate::ports::*;
        fn io() -> Cause {
            Box::new(std::io::Error::other("connection reset"))
        }
        let errors: Vec<(Box<dyn Error>, &str)> = vec![
            (Box::new(StoreError::Unavailable(io())), "store unavailable"),
            (
                Box::new(StoreError::Corrupt(io())),
                "stored data is corrupt",
            ),
            (
                Box::new(StoreError::Rejected(io())),
                "the store refused the data",
            ),
            (
                Box::new(WatchError::Unavailable(io())),
                "watch store unavailable",
            ),
            (
                Box::new(WatchError::Corrupt(io())),
                "stored watch data is corrupt",
            ),
            (
                Box::new(DirectoryError::Unavailable(io())),
                "directory unavailable",
            ),
            (
                Box::new(TokenError::Unavailable(io())),
                "token store unavailable",
            ),
            (
                Box::new(ProjectionError::Unavailable(io())),
                "projection store unavailable",
            ),
            (
                Box::new(ProjectionError::Corrupt(io())),
                "stored data is corrupt",
            ),
            (
                Box::new(AssignmentError::Unavailable(io())),
                "assignment store unavailable",
            ),
            (
                Box::new(RetentionError::Unavailable(io())),
                "store unavailable",
            ),
            (Box::new(BusError::Unavailable(io())), "bus unavailable"),
            (Box::new(HandlerError(io())), ""),
        ];
        for (error, prefix) in errors {
            let source = error.source().expect("a source");
            assert!(source.downcast_ref::<std::io::Error>().is_some(), "{error}");
            let text = if prefix.is_empty() {
                "connection reset".to_owned()
            } else {
                format!("{prefix}: connection reset")
            };
            assert_eq!(error.to_string(), text);
            assert_eq!(chain(&*error).to_string(), text);
        }
    }

    #[test]
    fn a_message_is_a_cause_without_source() {
        let cause: Cause = "timed out".into();
        assert_eq!(cause.to_string(), "timed out");
        assert!(cause.source().is_none());
    }
}
