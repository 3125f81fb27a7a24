//! The benches' command-line figures (states per run, runs, …): each bench reads its own by
//! position, with a default. A module they include (`mod args;`), not a bench.

use std::str::FromStr;

/// The arguments a bench reads, in order.
pub struct Args(Vec<String>);

impl Args {
    /// The arguments `keep` accepts (each bench sets aside the flags: cargo passes `--bench`).
    pub fn new(keep: impl Fn(&String) -> bool) -> Args {
        Args(std::env::args().skip(1).filter(keep).collect())
    }

    /// The `i`-th argument, or `default` when it is missing or does not parse.
    pub fn get<T: FromStr>(&self, i: usize, default: T) -> T {
        self.0
            .get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    }
}
