//! W8 mowing sessions, recomputed from scratch from the rule text (docs/rules.md §3, W8; decision
//! 190), in the rule's own three steps over the whole sorted sequence: find the stretches, merge
//! them into sessions, then give each session what lies in its span. It shares no rule code with
//! `swath_domain::sessions`: only the data types ([`Session`], [`EndReason`], [`SessionPoint`])
//! and the id derivation ([`session_id`], like `Event::new` for events).

use super::telemetry::haversine_m;
use super::LONGEST_COUNTED;
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use swath_domain::sessions::{session_id, EndReason, Session, SessionPoint};
use swath_domain::{Activity, MowerId};

/// How a stretch ends: the index of its closing state and the reason; `None` while open.
type End = Option<(usize, EndReason)>;

/// A stretch: the index of its first working state, and how it ends.
struct Stretch {
    first: usize,
    end: End,
}

/// The sessions of one mower's distinct states (`points` in `observed_at` order), oldest first.
pub fn sessions(
    mower_id: MowerId,
    zone: Tz,
    merge_gap: Duration,
    points: &[SessionPoint],
) -> Vec<Session> {
    let working = |i: usize| {
        matches!(
            points[i].activity,
            Activity::Leaving | Activity::Mowing | Activity::Returning | Activity::Paused
        )
    };
    let gap = |i: usize| points[i + 1].observed_at - points[i].observed_at;

    // Step 1: maximal runs of consecutive working states, no gap longer than 5 minutes.
    let mut stretches: Vec<Stretch> = Vec::new();
    let mut i = 0;
    while i < points.len() {
        if !working(i) {
            i += 1;
            continue;
        }
        let first = i;
        while i + 1 < points.len() && working(i + 1) && gap(i) <= LONGEST_COUNTED {
            i += 1;
        }
        let last = i;
        let end = if last + 1 == points.len() {
            None
        } else if gap(last) > LONGEST_COUNTED {
            Some((last, EndReason::Silent))
        } else {
            let reason = match points[last + 1].activity {
                Activity::Docked | Activity::Charging => EndReason::Docked,
                Activity::Idle => EndReason::Stopped,
                Activity::Error => EndReason::Error,
                other => unreachable!("{other} is working"),
            };
            Some((last + 1, reason))
        };
        stretches.push(Stretch { first, end });
        i = last + 1;
    }

    // Step 2: a stretch starting at most the merge gap after the previous session ended joins
    // it. A session: its first stretch's first state, its last stretch's end, its stretch count.
    let mut groups: Vec<(usize, End, i64)> = Vec::new();
    for s in &stretches {
        let joins = groups.last().is_some_and(|(_, end, _)| {
            end.is_some_and(|(closing, _)| {
                points[s.first].observed_at - points[closing].observed_at <= merge_gap
            })
        });
        match groups.last_mut() {
            Some(group) if joins => {
                group.1 = s.end;
                group.2 += 1;
            }
            _ => groups.push((s.first, s.end, 1)),
        }
    }

    // Step 3: each session's values from the states of its span.
    groups
        .into_iter()
        .map(|(first, end, stretch_count)| {
            let started_at = points[first].observed_at;
            let ended_at = end.map(|(closing, _)| points[closing].observed_at);
            let through = end.map_or(points.len() - 1, |(closing, _)| closing);
            let in_span = |at: DateTime<Utc>| at >= started_at && ended_at.is_none_or(|e| at < e);
            let (mut mowing_ms, mut blade_ms, mut distance_mm) = (0, 0, 0);
            for pair in points.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                let length = b.observed_at - a.observed_at;
                if !in_span(a.observed_at) || length > LONGEST_COUNTED {
                    continue;
                }
                let ms = length.num_milliseconds();
                if a.activity == Activity::Mowing {
                    mowing_ms += ms;
                    if let (Some(la), Some(lo), Some(lb), Some(lob)) = (a.lat, a.lon, b.lat, b.lon)
                    {
                        distance_mm += (haversine_m(la, lo, lb, lob) * 1000.0).round() as i64;
                    }
                }
                if a.blade_on {
                    blade_ms += ms;
                }
            }
            let span = &points[first..=through];
            let positioned: Vec<(f64, f64)> =
                span.iter().filter_map(|p| Some((p.lat?, p.lon?))).collect();
            let batteries: Vec<u8> = span.iter().filter_map(|p| p.battery_percent).collect();
            let reason = end.map(|(_, r)| r);
            Session {
                id: session_id(mower_id, started_at),
                mower_id,
                started_at,
                ended_at,
                end_reason: reason,
                error_code: match (reason, end) {
                    (Some(EndReason::Error), Some((closing, _))) => {
                        points[closing].error_code.clone()
                    }
                    _ => None,
                },
                mowing_ms,
                blade_ms,
                distance_mm,
                breaks: stretch_count - 1,
                states: span.len() as i64,
                first_lat: positioned.first().map(|p| p.0),
                first_lon: positioned.first().map(|p| p.1),
                last_lat: positioned.last().map(|p| p.0),
                last_lon: positioned.last().map(|p| p.1),
                first_battery_percent: batteries.first().copied(),
                last_battery_percent: batteries.last().copied(),
                local_date: started_at.with_timezone(&zone).date_naive(),
            }
        })
        .collect()
}
