//! Random traces of state reports for property tests: in-order runs, duplicates (redeliveries),
//! out-of-order states, gaps around and beyond five minutes, unknown mowers, account mismatches
//! and invalid reports, with sub-microsecond timestamps that every store must truncate alike.

use crate::support::{trace_start, Fleet};
use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::{json, Value};
use swath_domain::Activity;

/// One step of a trace, as proptest generates it; [`build_trace`] turns steps into reports.
#[derive(Clone, Debug)]
pub struct Step {
    /// 0..=2: a mower of the fleet; 3: a mower in no directory.
    pub mower: usize,
    /// 0..100: what kind of step (see [`build_trace`]).
    pub kind: u8,
    /// Milliseconds to move the mower's clock by (its meaning depends on `kind`).
    pub dt_ms: i64,
    pub nanos: u32,
    pub activity: usize,
    pub blade_on: bool,
    /// Offset from the lawn's corner in 1e-5 degrees, if the state has a position.
    pub position: Option<(i32, i32)>,
    pub battery: Option<u8>,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![8 => 0usize..3, 1 => Just(3usize)],
        0u8..100,
        1_000i64..90_000,
        prop_oneof![3 => Just(0u32), 1 => 0u32..1_000_000_000],
        0usize..Activity::ALL.len(),
        any::<bool>(),
        proptest::option::weighted(0.8, (0i32..500, 0i32..500)),
        proptest::option::weighted(0.9, 0u8..=100),
    )
        .prop_map(
            |(mower, kind, dt_ms, nanos, activity, blade_on, position, battery)| Step {
                mower,
                kind,
                dt_ms,
                nanos,
                activity,
                blade_on,
                position,
                battery,
            },
        )
}

/// Traces of up to `max_len` steps.
pub fn trace(max_len: usize) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(step(), 1..=max_len)
}

/// Batch sizes to split a trace into.
pub fn splits() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1usize..24, 1..40)
}

/// Splits `items` into consecutive batches of the given sizes (cycled), covering every item.
pub fn split<T: Clone>(items: &[T], sizes: &[usize]) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut rest = items;
    let mut sizes = sizes.iter().cycle();
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

/// `reports` stored two ways: by `batched`, in the batches `sizes` cut them into ([`split`]), and
/// by `single`, one at a time; the outcomes of each way, in order.
pub async fn batched_and_single<O>(
    reports: &[Value],
    sizes: &[usize],
    batched: impl AsyncFn(&[Value]) -> Vec<O>,
    single: impl AsyncFn(&[Value]) -> Vec<O>,
) -> (Vec<O>, Vec<O>) {
    let mut batched_outcomes = Vec::new();
    for batch in split(reports, sizes) {
        batched_outcomes.extend(batched(&batch).await);
    }
    let mut single_outcomes = Vec::new();
    for report in reports {
        single_outcomes.extend(single(std::slice::from_ref(report)).await);
    }
    (batched_outcomes, single_outcomes)
}

/// The clock at which a trace is ingested: a day after it starts, so that only the steps made
/// to be in the future are.
pub fn ingest_clock() -> DateTime<Utc> {
    trace_start() + Duration::days(1)
}

/// Turns steps into JSON reports. Step kinds: 0–69 the mower's clock moves on by `dt_ms`; 70–77
/// a gap of 299–301 s or 10 min; 78–84 a state from up to 2 min in the past (out of order);
/// 85–89 the same `observed_at` as the mower's previous state (a redelivery with other content);
/// 90–93 the other account's id (account mismatch); 94–96 battery 150; 97–99 observed 10 min
/// after the ingest clock.
pub fn build_trace(fleet: &Fleet, steps: &[Step]) -> Vec<Value> {
    let mut clocks = [trace_start(); 4];
    steps
        .iter()
        .map(|s| {
            let mower_id = if s.mower < 3 {
                fleet.mowers[s.mower]
            } else {
                fleet.unknown_mower
            };
            let mut account_id = fleet.account_of(mower_id);
            let clock = &mut clocks[s.mower];
            let mut battery = s.battery.map(i64::from);
            let observed_at = match s.kind {
                0..=69 => {
                    *clock += Duration::milliseconds(s.dt_ms);
                    *clock
                }
                70..=77 => {
                    let gap = match s.dt_ms % 4 {
                        0 => 299_999,
                        1 => 300_000,
                        2 => 300_001,
                        _ => 600_000,
                    };
                    *clock += Duration::milliseconds(gap);
                    *clock
                }
                78..=84 => *clock - Duration::milliseconds(s.dt_ms % 120_000),
                85..=89 => *clock,
                90..=93 => {
                    account_id = if account_id == fleet.account_a {
                        fleet.account_b
                    } else {
                        fleet.account_a
                    };
                    *clock += Duration::milliseconds(s.dt_ms);
                    *clock
                }
                94..=96 => {
                    battery = Some(150);
                    *clock += Duration::milliseconds(s.dt_ms);
                    *clock
                }
                _ => ingest_clock() + Duration::minutes(10),
            };
            let observed_at = observed_at + Duration::nanoseconds(i64::from(s.nanos));
            let mut report = json!({
                "mower_id": mower_id,
                "account_id": account_id,
                "observed_at": observed_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                "activity": Activity::ALL[s.activity].as_str(),
                "blade_on": s.blade_on,
                "vendor_state": format!("v{}", s.kind),
            });
            if let Some(b) = battery {
                report["battery_percent"] = json!(b);
            }
            if let Some((dlat, dlon)) = s.position {
                report["position"] = json!({
                    "lat": 52.5 + f64::from(dlat) * 1e-5,
                    "lon": 13.4 + f64::from(dlon) * 1e-5,
                    "accuracy_m": 0.4,
                });
            }
            if s.activity == 7 {
                report["error_code"] = json!("E_STUCK");
            }
            report
        })
        .collect()
}

/// One state of a trace of distinct states, as proptest generates it (see [`distinct_trace`]).
#[derive(Clone, Debug)]
pub struct DistinctStep {
    /// 0..=2: a mower of the fleet.
    pub mower: usize,
    /// 0..100: how the mower's clock moves (see [`build_distinct_trace`]).
    pub kind: u8,
    pub dt_ms: i64,
    pub activity: usize,
    pub blade_on: bool,
    /// Offset from the lawn's corner in 1e-5 degrees, if the state has a position.
    pub position: Option<(i32, i32)>,
}

/// Traces of up to `max_len` distinct states of the fleet's mowers, plus up to `max_len / 8`
/// redeliveries (indices of states to send again, identical), in some order: the arrival order
/// is a permutation of the whole, to be split into batches with [`splits`].
pub fn distinct_trace(
    max_len: usize,
) -> impl Strategy<Value = (Vec<DistinctStep>, Vec<usize>, Vec<usize>)> {
    let step = (
        0usize..3,
        0u8..100,
        1_000i64..90_000,
        0usize..Activity::ALL.len(),
        any::<bool>(),
        proptest::option::weighted(0.8, (0i32..500, 0i32..500)),
    )
        .prop_map(
            |(mower, kind, dt_ms, activity, blade_on, position)| DistinctStep {
                mower,
                kind,
                dt_ms,
                activity,
                blade_on,
                position,
            },
        );
    proptest::collection::vec(step, 1..=max_len)
        .prop_flat_map(move |steps| {
            let n = steps.len();
            (
                Just(steps),
                proptest::collection::vec(0..n, 0..=(max_len / 8).max(1)),
            )
        })
        .prop_flat_map(|(steps, redeliveries)| {
            let order: Vec<usize> = (0..steps.len() + redeliveries.len()).collect();
            (Just(steps), Just(redeliveries), Just(order).prop_shuffle())
        })
}

/// The reports as they arrive: `reports`, then the redeliveries (indexes into `reports`), all
/// in `order` (indexes into that sequence).
pub fn arrival(reports: &[Value], redeliveries: &[usize], order: &[usize]) -> Vec<Value> {
    let sent: Vec<&Value> = reports
        .iter()
        .chain(redeliveries.iter().map(|i| &reports[*i]))
        .collect();
    order.iter().map(|i| sent[*i].clone()).collect()
}

/// Turns distinct steps into JSON reports, in time order per mower (every state of a mower has
/// its own `observed_at`, in milliseconds). Step kinds: 0–79 the mower's clock moves on by
/// `dt_ms`; 80–91 a gap of 299.999 s, 300 s, 300.001 s or 10 min; 92–99 a jump of 1–4 hours, so
/// that traces cross local midnight in the fleet's time zones (Berlin's midnight is 2 h after
/// the trace starts, New York's 8 h). Activities include error and charging; about one state in
/// five has no position.
pub fn build_distinct_trace(fleet: &Fleet, steps: &[DistinctStep]) -> Vec<Value> {
    let mut clocks = [trace_start(); 3];
    steps
        .iter()
        .map(|s| {
            let mower_id = fleet.mowers[s.mower];
            let clock = &mut clocks[s.mower];
            *clock += match s.kind {
                0..=79 => Duration::milliseconds(s.dt_ms),
                80..=91 => Duration::milliseconds(match s.dt_ms % 4 {
                    0 => 299_999,
                    1 => 300_000,
                    2 => 300_001,
                    _ => 600_000,
                }),
                // Within the day before the ingest clock, so that no state is in its future.
                _ if *clock - trace_start() < Duration::hours(18) => {
                    Duration::milliseconds(3_600_000 + (s.dt_ms % 4) * 3_600_000)
                }
                _ => Duration::milliseconds(s.dt_ms),
            };
            let mut report = json!({
                "mower_id": mower_id,
                "account_id": fleet.account_of(mower_id),
                "observed_at": clock.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "activity": Activity::ALL[s.activity].as_str(),
                "blade_on": s.blade_on,
                "battery_percent": 60,
            });
            if let Some((dlat, dlon)) = s.position {
                report["position"] = json!({
                    "lat": 52.5 + f64::from(dlat) * 1e-5,
                    "lon": 13.4 + f64::from(dlon) * 1e-5,
                });
            }
            if Activity::ALL[s.activity] == Activity::Error {
                report["error_code"] = json!("E_STUCK");
            }
            report
        })
        .collect()
}
