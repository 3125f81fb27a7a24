//! The plan's own tests: fixed by its seed, every rule given work, silences that end and merge
//! sessions, and the two references agreeing.

use super::*;

#[test]
fn a_plan_is_fixed_by_its_seed() {
    let (a, b) = (Plan::new(1, 50, 500), Plan::new(1, 50, 500));
    assert_eq!(a.mower_ids(), b.mower_ids());
    assert_eq!(a.state(123), b.state(123));
    assert_eq!(a.message(7), b.message(7));
    let mut ids = a.mower_ids();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 50, "mower ids are distinct");
    let other = Plan::new(2, 50, 500);
    assert!(other.mower_ids().iter().all(|m| !a.mower_ids().contains(m)));
    assert_ne!(other.account(), a.account());
}

#[test]
fn each_mower_reports_in_turn_one_second_apart() {
    let plan = Plan::new(3, 4, 12);
    let at = |n| plan.state(n)["observed_at"].as_str().unwrap().to_owned();
    assert_eq!(plan.state(1)["mower_id"], json!(plan.mower(1)));
    assert_eq!(plan.state(5)["mower_id"], json!(plan.mower(1)));
    assert_eq!(at(0), at(3));
    let (t0, t1): (DateTime<Utc>, DateTime<Utc>) = (at(1).parse().unwrap(), at(5).parse().unwrap());
    assert_eq!(t1 - t0, Duration::seconds(1));
}

#[test]
fn a_steady_plan_keeps_activities_for_runs() {
    let plan = Plan::new(4, 10, 10 * 1200).with_steady(true);
    let changes = (10..plan.states)
        .filter(|n| plan.state(*n)["activity"] != plan.state(n - 10)["activity"])
        .count();
    // Ten mowers, 1 200 reports each: about two run boundaries per mower.
    assert!(changes <= 30, "{changes} activity changes");
    let volatile = Plan::new(4, 10, 10 * 1200);
    let churn = (10..volatile.states)
        .filter(|n| volatile.state(*n)["activity"] != volatile.state(n - 10)["activity"])
        .count();
    assert!(churn > 1000, "{churn}");
}

/// The end-to-end plans give every rule of the watcher, W6, W7 and W8 work: the independent
/// reference derives many events of each kind (`session_ended` included), open and closed
/// alerts, occupied zones. (The end-to-end verifier asserts the same on its own plans.)
#[test]
fn a_plan_with_fences_gives_every_rule_work() {
    let plan = crate::e2e::scenario::plan(7, 20, 20 * 200);
    let expected = plan.expected(BusyClock::Fixed(Utc::now()));
    let census = reference::census(&expected.watch);
    eprintln!("{census:?}");
    let alerts = [
        "closed error alerts",
        "closed geofence alerts",
        "closed battery_low alerts",
        "open blade_due alerts",
    ];
    for kind in reference::DERIVED_EVENT_KINDS.into_iter().chain(alerts) {
        let n = census.get(kind).copied().unwrap_or(0);
        assert!(n >= plan.mowers / 4, "{n} {kind}: {census:?}");
    }
    assert!(census["zone occupancies"] > 0, "{census:?}");
    assert_eq!(census["watch rows"], 20);
    assert_eq!(census["busy statuses"], 20);
    // Without fences: no geofence or zone event at all; without silences, at the default
    // gap, no session ends for good.
    let bare = Plan::new(7, 20, 20 * 200).expected(BusyClock::Wall);
    let bare = reference::census(&bare.watch);
    assert!(!bare.contains_key("geofence_left") && !bare.contains_key("zone_entered"));
    assert!(!bare.contains_key("session_ended"), "{bare:?}");
}

/// With silences and the end-to-end merge gap, W8 has every case: stretches ending `silent`,
/// sessions merged across a short silence and across short rests, sessions that can no
/// longer merge once a long silence passed (their `session_ended` raised by the next state).
#[test]
fn silences_end_sessions_for_good_or_merge_across_them() {
    let plan = crate::e2e::scenario::plan(11, 20, 20 * 300);
    let expected = plan.expected(BusyClock::Wall);
    let sessions: Vec<_> = expected
        .telemetry
        .sessions
        .iter()
        .map(|r| &r.session)
        .collect();
    let silent = sessions
        .iter()
        .filter(|s| s.end_reason == Some(swath_domain::sessions::EndReason::Silent))
        .count();
    assert!(silent >= plan.mowers / 4, "{silent} sessions end silent");
    // A session whose span holds a short silence merged across it.
    let across = sessions
        .iter()
        .filter(|s| {
            s.ended_at.is_some_and(|end| {
                end - s.started_at >= SHORT_SILENCE && end - s.started_at < LONG_SILENCE
            })
        })
        .count();
    assert!(
        across >= plan.mowers / 4,
        "{across} sessions across a silence"
    );
    // Every session that ended at least the gap before its mower's newest state has its
    // event, and no other.
    let ended = reference::census(&expected.watch)["session_ended"];
    let newest: BTreeMap<MowerId, DateTime<Utc>> = expected
        .telemetry
        .latest
        .iter()
        .map(|l| (l.mower_id, l.observed_at))
        .collect();
    let final_ = sessions
        .iter()
        .filter(|s| {
            s.ended_at
                .is_some_and(|end| newest[&s.mower_id] - end >= plan.merge_gap)
        })
        .count();
    assert_eq!(ended, final_);
    assert!(ended >= plan.mowers, "{ended} session_ended");
    assert!(plan.last_observed_at() < Utc::now());
}

/// docs/e2e.md's argument that the sweep cannot end a session early in a scenario: while a
/// session that a later stretch will join is pending, and after a mower's last state, at
/// least 8 minutes of its merge gap are left, on the mower's clock, which the sweep
/// translates one to one onto the wall clock (decision 203). A watcher would have to lag
/// that long behind its backlog, or the verdict come that late after the run.
#[test]
fn a_mergeable_session_keeps_most_of_its_gap_at_every_state() {
    let plan = crate::e2e::scenario::plan(13, 200, 200 * 500);
    let least = least_gap_left(&plan);
    assert!(least >= Duration::minutes(8), "{least}");
    assert!(least < plan.merge_gap, "the plan merges across something");
}

/// The least that is left of the merge gap after a watched state, over every state between a
/// stretch's end and the start of a later stretch that joins its session, and over each
/// mower's last state when its last stretch ended less than the gap before it (the sweep
/// raises that session after the run).
fn least_gap_left(plan: &Plan) -> Duration {
    use swath_domain::Activity;
    let working = |a: Activity| {
        matches!(
            a,
            Activity::Leaving | Activity::Mowing | Activity::Returning | Activity::Paused
        )
    };
    let mut per_mower: BTreeMap<MowerId, Vec<StateReport>> = BTreeMap::new();
    for s in plan.parsed_states() {
        per_mower.entry(s.mower_id).or_default().push(s);
    }
    let mut least = plan.merge_gap;
    for states in per_mower.values() {
        let mut end: Option<DateTime<Utc>> = None;
        for pair in states.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let far = b.observed_at - a.observed_at > Duration::minutes(5);
            if working(a.activity) && (far || !working(b.activity)) {
                end = Some(if far { a.observed_at } else { b.observed_at });
            }
            if working(b.activity) && (far || !working(a.activity)) {
                if let Some(e) = end.take() {
                    if b.observed_at - e <= plan.merge_gap {
                        least = least.min(e + plan.merge_gap - a.observed_at);
                    }
                }
            }
        }
        let last = states.last().expect("a state").observed_at;
        if let Some(e) = end.filter(|e| last - *e < plan.merge_gap) {
            least = least.min(e + plan.merge_gap - last);
        }
    }
    least
}

/// The two references agree on a plan (with late-free, in-order states both are exact), at
/// the default merge gap and with silences at the end-to-end one.
#[tokio::test]
async fn the_independent_reference_agrees_with_the_one_pass_one() {
    let plain = Plan::new(9, 7, 7 * 300).with_blade_threshold_ms(60_000);
    let silent = plain.with_silences(true).with_merge_gap(E2E_MERGE_GAP);
    for plan in [plain, silent] {
        let one_pass = plan.reference().await.unwrap();
        let independent = plan.expected(BusyClock::Wall);
        let differences = compare(&independent.telemetry, &one_pass, Checked::Everything);
        assert!(differences.is_empty(), "{}", differences.join("\n"));
        assert!(one_pass.health.iter().all(|h| h.blade_due_raised));
        assert!(
            one_pass.sessions.len() >= plan.mowers,
            "{}",
            summary(&one_pass)
        );
    }
    // The gap and the silences change the sessions (not the other tables).
    let (a, b) = (
        plain.reference().await.unwrap(),
        silent.reference().await.unwrap(),
    );
    assert_ne!(
        a.sessions.len(),
        b.sessions.len(),
        "{} / {}",
        summary(&a),
        summary(&b)
    );
}
