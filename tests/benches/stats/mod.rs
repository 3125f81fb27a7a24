//! How the benches sum up their runs. A module of theirs (`mod stats;`), not a bench.

/// The median of the runs' figures (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
