//! Subject and name checks, the same the memory bus makes, so that what one bus refuses the other
//! refuses too (and NATS never sees a request it would answer with an obscure error).

use swath_application::ports::BusError;

/// A subject to publish on: non-empty tokens, no wildcards, no whitespace.
pub(crate) fn check_subject(subject: &str) -> Result<(), BusError> {
    let ok = !subject.is_empty()
        && subject
            .split('.')
            .all(|t| !t.is_empty() && t != "*" && t != ">" && !t.contains(char::is_whitespace));
    if ok {
        Ok(())
    } else {
        Err(BusError::Refused(format!(
            "invalid subject to publish on: {subject:?}"
        )))
    }
}

/// A subject filter: non-empty tokens, `>` only as the last token.
pub(crate) fn check_filter(filter: &str) -> Result<(), BusError> {
    let tokens: Vec<&str> = filter.split('.').collect();
    let last = tokens.len() - 1;
    let ok = !filter.is_empty()
        && tokens.iter().enumerate().all(|(i, t)| {
            !t.is_empty() && !t.contains(char::is_whitespace) && (*t != ">" || i == last)
        });
    if ok {
        Ok(())
    } else {
        Err(BusError::Refused(format!(
            "invalid subject filter: {filter:?}"
        )))
    }
}

/// A durable consumer name as JetStream accepts it: no dots, wildcards or whitespace.
pub(crate) fn check_consumer_name(name: &str) -> Result<(), BusError> {
    let ok = !name.is_empty()
        && !name.contains(|c: char| c == '.' || c == '*' || c == '>' || c.is_whitespace());
    if ok {
        Ok(())
    } else {
        Err(BusError::Refused(format!(
            "invalid durable consumer name: {name:?}"
        )))
    }
}

/// Whether every subject `filter` matches is also matched by `subjects` (a stream's subject):
/// the stream then holds everything a consumer with that filter needs.
pub(crate) fn covers(subjects: &str, filter: &str) -> bool {
    let mut outer = subjects.split('.');
    let mut inner = filter.split('.');
    loop {
        match (outer.next(), inner.next()) {
            // `>` covers one or more tokens, whatever they are.
            (Some(">"), Some(_)) => return true,
            // `*` covers any one token, a `*` included, but not a `>` (which may be several).
            (Some("*"), Some(t)) if t != ">" => {}
            (Some(o), Some(i)) if o == i && o != "*" && o != ">" => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_subject_covers_the_filters_inside_it() {
        assert!(covers("telemetry.>", "telemetry.m1.state"));
        assert!(covers("telemetry.>", "telemetry.*.state"));
        assert!(covers("telemetry.>", "telemetry.>"));
        assert!(!covers("telemetry.>", "telemetry"));
        assert!(!covers("telemetry.>", "other.>"));
        assert!(covers("a.*.c", "a.b.c"));
        assert!(covers("a.*.c", "a.*.c"));
        assert!(!covers("a.*", "a.>"));
        assert!(!covers("a.b", "a.*"));
        assert!(covers("a.b", "a.b"));
        assert!(!covers("a.b", "a.b.c"));
        assert!(covers(">", "a.b.c"));
    }

    #[test]
    fn invalid_subjects_and_names_are_refused() {
        assert!(check_subject("a.b").is_ok());
        assert!(check_subject("a.*").is_err());
        assert!(check_subject("a..b").is_err());
        assert!(check_subject("a b").is_err());
        assert!(check_subject("").is_err());
        assert!(check_filter("a.>").is_ok());
        assert!(check_filter("a.*.b").is_ok());
        assert!(check_filter("a.>.b").is_err());
        assert!(check_filter("a.").is_err());
        assert!(check_consumer_name("swath-ingest").is_ok());
        assert!(check_consumer_name("swath.ingest").is_err());
        assert!(check_consumer_name("").is_err());
    }
}
