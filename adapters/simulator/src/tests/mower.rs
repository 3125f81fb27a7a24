use super::*;

/// Steps `sim` every `step` for `hours` of simulated time; returns every report with the
/// time of the step that produced it, and checks on the way that every activity change was
/// reported at the step it happened.
fn run(sim: &mut MowerSim, step: chrono::Duration, hours: i64) -> Vec<StateReport> {
    let mut reports = Vec::new();
    let end = start() + chrono::Duration::hours(hours);
    let mut now = start();
    let mut previous: Option<Activity> = None;
    while now <= end {
        let report = sim.step(now);
        if previous != Some(sim.activity()) {
            let report = report.as_ref().unwrap_or_else(|| {
                panic!("the change to {} at {now} was not reported", sim.activity())
            });
            assert_eq!(report.activity, sim.activity());
            assert_eq!(report.observed_at, now);
        }
        previous = Some(sim.activity());
        reports.extend(report);
        now += step;
    }
    reports
}

/// The activities in order, consecutive repeats collapsed.
fn activities(reports: &[StateReport]) -> Vec<Activity> {
    let mut out: Vec<Activity> = Vec::new();
    for r in reports {
        if out.last() != Some(&r.activity) {
            out.push(r.activity);
        }
    }
    out
}

#[test]
fn a_mower_cycles_mowing_returning_charging_docked_within_its_lawn() {
    use Activity::*;
    let allowed: HashSet<(Activity, Activity)> = [
        (Docked, Leaving),
        (Leaving, Mowing),
        (Mowing, Returning),
        (Mowing, Error),
        (Error, Paused),
        (Paused, Mowing),
        (Paused, Returning),
        (Returning, Charging),
        (Charging, Docked),
    ]
    .into_iter()
    .collect();
    let step = chrono::Duration::milliseconds(200);
    let mut errors = 0;
    for seed in [1, 2, 3, 42] {
        let mut sim = sim(seed, Duration::from_secs(1));
        let lawn = sim.lawn().polygon();
        let reports = run(&mut sim, step, 10);
        assert!(
            reports.len() > 30_000,
            "seed {seed}: {} reports",
            reports.len()
        );

        let sequence = activities(&reports);
        for pair in sequence.windows(2) {
            assert!(
                allowed.contains(&(pair[0], pair[1])),
                "seed {seed}: {pair:?}"
            );
        }
        let cycles = sequence
            .windows(4)
            .filter(|w| *w == [Mowing, Returning, Charging, Docked])
            .count();
        assert!(cycles >= 2, "seed {seed}: {cycles} cycles in {sequence:?}");

        for (previous, r) in reports.iter().zip(reports.iter().skip(1)) {
            let p = r.position.as_ref().unwrap();
            let q = previous.position.as_ref().unwrap();
            let here = Point::new(p.lon, p.lat);
            assert!(lawn.contains(&here), "seed {seed}: {p:?} is off the lawn");
            // No jumps: never faster than the mower drives (plus a centimetre of rounding).
            let metres = Haversine::distance(Point::new(q.lon, q.lat), here);
            let seconds = (r.observed_at - previous.observed_at).num_milliseconds() as f64 / 1e3;
            assert!(
                metres <= SPEED_M_PER_S * seconds * 1.01 + 0.02,
                "seed {seed}: {metres} m in {seconds} s"
            );

            assert_eq!(r.blade_on, r.activity == Mowing, "seed {seed}: {r:?}");
            assert!(r.battery_percent.unwrap() <= 100);
            assert_eq!(
                r.error_code.is_some(),
                r.activity == Error,
                "seed {seed}: {r:?}"
            );
            assert!(r.vendor_state.is_some());
            assert!(p.accuracy_m.is_some() && p.heading_deg.is_some());
            let battery = r.battery_percent.unwrap();
            let before = previous.battery_percent.unwrap();
            match r.activity {
                Mowing | Leaving | Returning if previous.activity == r.activity => {
                    assert!(
                        battery <= before,
                        "seed {seed}: battery rose while {}",
                        r.activity
                    )
                }
                Charging if previous.activity == Charging => assert!(battery >= before),
                Returning if previous.activity != Returning => {
                    assert!(battery <= 20, "seed {seed}: went home at {battery} %")
                }
                Docked => assert_eq!(battery, 100),
                _ => {}
            }
            let observed_at = r.observed_at;
            assert_eq!(r.clone().validate(observed_at).as_ref(), Ok(r));
        }
        errors += sequence.iter().filter(|a| **a == Error).count();
    }
    // About one error per 90 min of mowing: over 40 simulated hours, some must happen.
    assert!(errors >= 2, "{errors} errors");
}

#[test]
fn periodic_reports_keep_the_period_and_changes_come_at_once() {
    let period = Duration::from_secs(5);
    let mut sim = sim(7, period);
    // An uneven step (130 ms) so that the period is not a multiple of it.
    let reports = run(&mut sim, chrono::Duration::milliseconds(130), 6);
    let period = chrono::Duration::from_std(period).unwrap();
    let step = chrono::Duration::milliseconds(130);
    let mut changes = 0;
    for (previous, r) in reports.iter().zip(reports.iter().skip(1)) {
        let gap = r.observed_at - previous.observed_at;
        if r.activity == previous.activity {
            assert!(
                gap >= period,
                "a periodic report {gap} after the previous one"
            );
            assert!(gap < period + step, "a periodic report late: {gap}");
        } else {
            changes += 1;
        }
    }
    assert!(changes >= 5, "{changes} changes");
}

#[test]
fn the_same_seed_gives_the_same_reports_and_time_going_back_gives_none() {
    let mut a = sim(9, Duration::from_secs(1));
    let mut b = sim(9, Duration::from_secs(1));
    b.mower_id = a.mower_id;
    b.account_id = a.account_id;
    let step = chrono::Duration::milliseconds(250);
    assert_eq!(run(&mut a, step, 2), run(&mut b, step, 2));

    let mut sim = sim(3, Duration::from_secs(1));
    assert!(sim.step(start()).is_some(), "the first step reports");
    assert!(sim.step(start()).is_none());
    assert!(sim.step(start() - chrono::Duration::seconds(1)).is_none());
}

#[test]
fn a_long_gap_is_not_replayed() {
    let mut sim = sim(5, Duration::from_secs(1));
    sim.step(start()).unwrap();
    let before = sim.pos;
    sim.step(start() + chrono::Duration::hours(3)).unwrap();
    let moved = (sim.pos.0 - before.0).hypot(sim.pos.1 - before.1);
    assert!(moved <= SPEED_M_PER_S * MAX_CATCH_UP_S + 1e-9, "{moved} m");
}
