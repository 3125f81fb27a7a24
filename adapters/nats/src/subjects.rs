//! Which stream holds a subject filter. The subject and name checks both buses make are in
//! `swath_application::bus_rules`, so that what one bus refuses the other refuses too
//! (and NATS never sees a request it would answer with an obscure error).

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
}
