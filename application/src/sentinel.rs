//! The sentinel row, the one way every bounded read learns whether it was cut: it asks its store
//! for one row beyond its limit ([`with_sentinel`]); when that row comes back, the read was cut
//! and says so (`truncated`), and the row is dropped ([`cut`]). Nothing is ever counted.
//!
//! The HTTP lists (`swath_api::page`) and the live projections ([`crate::projections`]) both
//! use it, so the two can never disagree about what `truncated` means.

/// How many rows to ask a store for to fill `limit` items and learn whether more exist.
pub fn with_sentinel(limit: usize) -> usize {
    // Saturating: a limit of `usize::MAX` (an unbounded window) has no sentinel to ask for.
    limit.saturating_add(1)
}

/// Cuts `rows`, fetched with [`with_sentinel`], to at most `limit` items, and says whether they
/// were cut (whether the sentinel came back).
pub fn cut<T>(mut rows: Vec<T>, limit: usize) -> (Vec<T>, bool) {
    let truncated = rows.len() > limit;
    rows.truncate(limit);
    (rows, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentinel_says_whether_a_read_was_cut() {
        assert_eq!(with_sentinel(100), 101);
        assert_eq!(with_sentinel(usize::MAX), usize::MAX);
        assert_eq!(cut(vec![1, 2, 3], 2), (vec![1, 2], true));
        assert_eq!(cut(vec![1, 2], 2), (vec![1, 2], false));
        assert_eq!(cut(Vec::<u8>::new(), 2), (Vec::new(), false));
    }
}
