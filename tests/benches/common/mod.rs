//! What the ingest benches (`ingest_memory`, `ingest_postgres`) share: the states they store. A
//! module of theirs (`mod common;`), not a bench.

use chrono::Duration;
use serde_json::json;
use swath_domain::{AccountId, MowerId};
use swath_tests::support::trace_start;

/// `states` reports of `account`'s `mowers`, which report in turn, each one state a second,
/// mowing with a position: every rule runs.
pub fn mowing_payloads(account: AccountId, mowers: &[MowerId], states: usize) -> Vec<Vec<u8>> {
    (0..states)
        .map(|i| {
            let tick = (i / mowers.len()) as i64;
            serde_json::to_vec(&json!({
                "mower_id": mowers[i % mowers.len()],
                "account_id": account,
                "observed_at": (trace_start() + Duration::seconds(tick)).to_rfc3339(),
                "activity": "mowing",
                "battery_percent": 80,
                "blade_on": true,
                "position": {"lat": 52.5 + tick as f64 * 1e-6, "lon": 13.4, "accuracy_m": 0.3},
                "vendor_state": "MOWING",
            }))
            .unwrap()
        })
        .collect()
}
