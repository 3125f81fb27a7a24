//! The contract's scenarios of late states: a backfill before live states, late states far from
//! their stored neighbours, and runs of late states over stored ones. Each ends with the rows the
//! same states stored in time order would give.

use super::*;

/// A backfill of a day before a mower's live states (an NDJSON import over two transactions,
/// with redelivered lines) gives that day its row, exactly as for a mower without live states,
/// and raises the health totals by exactly the backfilled intervals; the live day is untouched.
pub async fn import_backfill_counts_in_the_totals(factory: &dyn StoreFactory) {
    let h = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let fresh = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let f = &h.fleet;
    // Live: five mowing states from 22:00 on 1 June in Berlin (mower 0's site).
    let live: Vec<Value> = (0..5)
        .map(|i| report(f, 0, i * 10, Activity::Mowing))
        .collect();
    h.ingest(&live).await;
    let mower = f.mowers[0];
    let health_before = h.store.telemetry.health(mower).await.unwrap().unwrap();
    let days_before = h.rows().await.days;
    assert_eq!(days_before.len(), 1);

    // The backfill: 300 mowing states 2 s apart from 12:00 on 31 May (Berlin), ten redelivered.
    let start = -(24 + 10) * 3600;
    let backfill: Vec<Value> = (0..300)
        .map(|i| report(f, 0, start + i * 2, Activity::Mowing))
        .chain((0..10).map(|i| report(f, 0, start + i * 2, Activity::Mowing)))
        .collect();
    let ndjson: String = backfill.iter().map(|r| format!("{r}\n")).collect();
    let import = |h: &Harness| {
        let ingest = h.ingest.clone();
        let ndjson = ndjson.clone();
        async move {
            swath_application::import_lines::import_ndjson(&ingest, ndjson.as_bytes(), |_| {})
                .await
                .expect("import")
        }
    };
    let summary = import(&h).await;
    assert_eq!(summary.stored, 310);
    assert_eq!(
        summary.counts,
        swath_domain::StateCounts {
            in_order: 0,
            late_merged: 300,
            late_not_counted: 0,
            duplicates: 10
        },
        "every backfilled state is older than the live ones: merged"
    );
    let fresh_summary = import(&fresh).await;
    assert_eq!(
        (
            fresh_summary.counts.in_order,
            fresh_summary.counts.duplicates
        ),
        (300, 10)
    );

    let after = h.rows().await;
    let backfilled = fresh.rows().await;
    let may_31 = chrono::NaiveDate::from_ymd_opt(2026, 5, 31).unwrap();
    assert_eq!(backfilled.days.len(), 1);
    assert_eq!(backfilled.days[0].day, may_31);
    assert_eq!(backfilled.days[0].mowing_ms, 299 * 2_000);
    assert_eq!(backfilled.days[0].state_count, 300);
    assert_eq!(
        after.days,
        vec![backfilled.days[0].clone(), days_before[0].clone()],
        "31 May gets the backfill's row; 1 June, a day later, is untouched"
    );
    let health = h.store.telemetry.health(mower).await.unwrap().unwrap();
    let added = &backfilled.health[0];
    assert_eq!(health.mowing_ms - health_before.mowing_ms, added.mowing_ms);
    assert_eq!(health.blade_ms - health_before.blade_ms, added.blade_ms);
    assert_eq!(
        health.distance_mm - health_before.distance_mm,
        added.distance_mm
    );
    assert!(added.distance_mm > 0);
    assert_eq!(
        (health.error_count, health.charge_count),
        (health_before.error_count, health_before.charge_count)
    );
    assert_eq!(health.counted_from, added.counted_from);
    assert_eq!(health.counted_until, health_before.counted_until);
    assert_eq!(
        h.store.telemetry.latest(&[mower]).await.unwrap()[0].observed_at,
        health_before.counted_until,
        "the latest state is still the live one"
    );
}

/// Late states whose stored neighbours lie days, weeks or months away, or nowhere before them,
/// end with the rows of the same states stored in time order, one at a time. A store may look
/// for neighbours near the late states first (PostgreSQL looks a week around them, decision 168):
/// each late state here arrives in a batch of its own, so that some find both neighbours near
/// them, some one, some none, and the far ones must be found all the same.
pub async fn late_states_with_far_neighbours_merge_as_in_time_order(factory: &dyn StoreFactory) {
    use Activity::{Charging, Error, Mowing};
    let late = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let ordered = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let day = 86_400;
    // (mower, seconds from the trace's start, activity). Intervals longer than five minutes count
    // no time, so what the far neighbours decide is what entering charging or error counts, and
    // whether a merge counts at all (a late state whose predecessor was not found is not merged).
    let stored = [
        (0, -120 * day, Charging),
        (0, -60 * day, Charging),
        (0, -4 * day + 60, Mowing),
        (0, -3 * day, Mowing),
        (0, 0, Mowing),
        (1, -40 * day, Mowing),
        (1, 0, Mowing),
    ];
    let arriving: [&[(usize, i64, Activity)]; 4] = [
        // Older than every stored state: no predecessor; its successor four months later.
        &[(0, -200 * day, Error)],
        // Both neighbours a month away.
        &[(0, -90 * day, Mowing)],
        // Its successor a minute later (a minute of mowing), its predecessor 56 days before.
        &[(0, -4 * day, Mowing)],
        // One batch: mower 0's neighbours within days, mower 1's twenty days away.
        &[(0, -2 * day, Mowing), (1, -20 * day, Charging)],
    ];
    // Positions a few metres apart (`report`'s move with the seconds, too far over months).
    let report_of = |(mower, seconds, activity): (usize, i64, Activity)| {
        let mut r = report(&late.fleet, mower, seconds, activity);
        r["position"]["lat"] = json!(52.5 + seconds.rem_euclid(1_000) as f64 * 1e-6);
        r
    };
    let first: Vec<Value> = stored.iter().map(|s| report_of(*s)).collect();
    ingest_all_stored(&late, &first).await;
    for batch in arriving {
        let reports: Vec<Value> = batch.iter().map(|s| report_of(*s)).collect();
        ingest_all_stored(&late, &reports).await;
    }

    let mut all: Vec<(usize, i64, Activity)> = stored.to_vec();
    all.extend(arriving.iter().flat_map(|b| b.iter().copied()));
    all.sort_by_key(|(mower, seconds, _)| (*seconds, *mower));
    for state in all {
        ordered.ingest(&[report_of(state)]).await;
    }
    let (got, want) = (late.rows().await, ordered.rows().await);
    assert_same_rows(&got, &want);
    let mower_0 = late
        .store
        .health(late.fleet.mowers[0])
        .await
        .expect("mower 0's totals");
    assert_eq!(
        (mower_0.mowing_ms, mower_0.error_count, mower_0.charge_count),
        (60_000, 1, 2),
        "the minute of mowing; the error at -200 days; charging entered at -120 and -60 days"
    );
}

/// Runs of late states laid over stored ones end with the rows of the same states stored in time
/// order, one at a time. A store may read the stored rows between a mower's oldest and newest late
/// state as one range and bound how many it reads (PostgreSQL does, decision 171): here mower 0's
/// three late states span 60 stored states, far more than the bound, so the newest late state's
/// neighbours lie beyond what the range read; mower 1's late states interleave with its stored
/// ones, and mower 2's run lies before all of its stored states (a backfill next to a stored day).
pub async fn runs_of_late_states_over_stored_ones_merge_as_in_time_order(
    factory: &dyn StoreFactory,
) {
    use Activity::{Charging, Error, Mowing};
    let late = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let ordered = Harness::new(factory, DEFAULT_THRESHOLD).await;
    // Activities change along the way, so that which neighbours a merge finds decides the counts.
    let activity = |seconds: i64| match seconds % 9 {
        0 => Charging,
        4 => Error,
        _ => Mowing,
    };
    let mut stored: Vec<(usize, i64)> = (0..=60).map(|i| (0, 2 * i)).collect();
    stored.extend((0..20).map(|i| (1, 10 * i)));
    stored.extend((0..30).map(|i| (2, 600 + i)));
    let arriving: Vec<(usize, i64)> = [(0, 1), (0, 3), (0, 119)]
        .into_iter()
        .chain((0..19).map(|i| (1, 10 * i + 5)))
        .chain((0..30).map(|i| (2, 300 + 2 * i)))
        .collect();
    let report_of =
        |(mower, seconds): (usize, i64)| report(&late.fleet, mower, seconds, activity(seconds));

    let first: Vec<Value> = stored.iter().map(|s| report_of(*s)).collect();
    ingest_all_stored(&late, &first).await;
    let second: Vec<Value> = arriving.iter().map(|s| report_of(*s)).collect();
    ingest_all_stored(&late, &second).await;

    let mut all = stored.clone();
    all.extend(&arriving);
    all.sort_by_key(|(mower, seconds)| (*seconds, *mower));
    for state in all {
        ordered.ingest(&[report_of(state)]).await;
    }
    let (got, want) = (late.rows().await, ordered.rows().await);
    assert_eq!(got.history.len(), stored.len() + arriving.len());
    assert_same_rows(&got, &want);
}

/// The history and track reads say where the kept rows begin once the store's bound on rows per
/// mower removed older ones (`WindowRows::oldest_kept`), per table, on every page whatever the
/// window; and `None` while the bound removed nothing. The bound is the factory's
/// [`StoreFactory::kept_per_mower`]: the memory store's cap, `None` for a store that keeps every
/// row (PostgreSQL).
///
/// Mower 0 reports 12 states, a position every other one (6): with a bound of 5 both tables
/// lose rows. Mower 1 reports 8 states with 3 positions: only its history loses rows. Mower 2
/// reports 3 states: nothing is removed.
pub async fn reads_say_where_the_kept_rows_begin(factory: &dyn StoreFactory) {
    let bound = factory.kept_per_mower();
    let h = Harness::new(factory, DEFAULT_THRESHOLD).await;
    let f = &h.fleet;
    let with_position = |mower: usize, seconds: i64, position: bool| {
        let mut r = report(f, mower, seconds, Activity::Mowing);
        if !position {
            r.as_object_mut().unwrap().remove("position");
        }
        r
    };
    let mut reports: Vec<Value> = (0..12).map(|i| with_position(0, i, i % 2 == 0)).collect();
    reports.extend((0..8).map(|i| with_position(1, i, i < 3)));
    reports.extend((0..3).map(|i| with_position(2, i, true)));
    // In three batches, so that the bound is reached across commits as well as within one.
    for batch in reports.chunks(8) {
        assert!(h
            .ingest(batch)
            .await
            .iter()
            .all(|o| *o == StateOutcome::Stored));
    }
    let at = |seconds: i64| trace_start() + Duration::seconds(seconds);
    // What each table must say: the oldest kept of `sent` rows (their instants, in order) when the
    // bound removed some, and `None` otherwise.
    let expected = |sent: &[i64]| {
        bound
            .filter(|b| sent.len() > *b)
            .map(|b| at(sent[sent.len() - b]))
    };
    let all = first_rows(2);
    let late = TimeWindow {
        from: Some(at(9)),
        to: None,
        after: Some(at(10)),
        limit: 100,
    };
    let sent: [(usize, Vec<i64>, Vec<i64>); 3] = [
        (0, (0..12).collect(), (0..12).step_by(2).collect()),
        (1, (0..8).collect(), (0..3).collect()),
        (2, (0..3).collect(), (0..3).collect()),
    ];
    for (mower, history_sent, positions_sent) in &sent {
        let m = f.mowers[*mower];
        let (history_kept, positions_kept) = (expected(history_sent), expected(positions_sent));
        for window in [&all, &late] {
            let history = h.store.telemetry.history(m, window).await.unwrap();
            assert_eq!(
                history.oldest_kept, history_kept,
                "mower {mower}'s history, {window:?}"
            );
            let track = h.store.telemetry.track(m, window).await.unwrap();
            assert_eq!(
                track.oldest_kept, positions_kept,
                "mower {mower}'s track, {window:?}"
            );
        }
        // The first page of an open window starts at the oldest kept row: the field and the rows
        // agree.
        let first = h.store.telemetry.history(m, &all).await.unwrap().rows;
        let kept_from =
            history_sent[history_sent.len() - bound.unwrap_or(usize::MAX).min(history_sent.len())];
        assert_eq!(first[0].observed_at, at(kept_from), "mower {mower}");
        let first = h.store.telemetry.track(m, &all).await.unwrap().rows;
        let kept_from = positions_sent
            [positions_sent.len() - bound.unwrap_or(usize::MAX).min(positions_sent.len())];
        assert_eq!(first[0].observed_at, at(kept_from), "mower {mower}");
    }
    let unknown = h
        .store
        .telemetry
        .history(f.unknown_mower, &all)
        .await
        .unwrap();
    assert_eq!(unknown, WindowRows::complete(Vec::new()));
}
