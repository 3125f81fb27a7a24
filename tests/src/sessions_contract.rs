//! W8's stored sessions (docs/rules.md §3, W8; decisions 190 and 200): a contract suite run
//! against the memory store always and PostgreSQL when `SWATH_TEST_DATABASE_URL` is set. States
//! go through the `Ingest` use case, as production stores them; the sessions the store answers
//! are compared with the independent one-pass reference (`reference::sessions`) over the
//! mower's stored distinct states, and with W4's health totals.

use crate::reference::sessions as reference;
use crate::support::{
    ingest_json, Fleet, RecordingBus, StoreFactory, TestStore, DEFAULT_THRESHOLD,
};
use crate::traces::{arrival, build_distinct_trace, ingest_clock, split, DistinctStep};
use chrono::Duration;
use chrono_tz::Tz;
use serde_json::Value;
use std::sync::Arc;
use swath_application::ports::ManualClock;
use swath_application::Ingest;
use swath_domain::sessions::{SessionPoint, SessionRow, DEFAULT_SESSION_MERGE_GAP};
use swath_domain::{MowerId, StateOutcome, TelemetryRows};

/// The fleet's site time zones, in the order of `Fleet::mowers` (see `Fleet::seed`).
const ZONES: [Tz; 3] = [
    chrono_tz::Europe::Berlin,
    chrono_tz::Pacific::Auckland,
    chrono_tz::America::New_York,
];

/// A store with the fleet seeded, and the ingest use case with a merge gap on top of it.
pub struct Harness {
    pub store: TestStore,
    pub ingest: Arc<Ingest>,
    pub fleet: Fleet,
    pub merge_gap: Duration,
}

impl Harness {
    pub async fn new(factory: &dyn StoreFactory, merge_gap: Duration) -> Self {
        let store = factory.fresh().await;
        let fleet = Fleet::new();
        fleet
            .seed(store.directory.as_ref(), DEFAULT_THRESHOLD)
            .await;
        let ingest = Ingest::new(
            store.telemetry.clone(),
            Arc::new(RecordingBus::default()),
            Arc::new(ManualClock::new(ingest_clock())),
        )
        .with_session_merge_gap(merge_gap);
        Self {
            store,
            ingest: Arc::new(ingest),
            fleet,
            merge_gap,
        }
    }

    pub async fn ingest(&self, reports: &[Value]) -> Vec<StateOutcome> {
        ingest_json(&self.ingest, reports).await
    }

    /// Every stored session of the fleet, by mower and start.
    pub async fn sessions(&self) -> Vec<SessionRow> {
        let mut mowers = self.fleet.mowers.to_vec();
        mowers.push(self.fleet.unknown_mower);
        let rows = self.store.telemetry.export(&mowers).await.expect("export");
        rows.sessions
    }

    pub async fn rows(&self) -> TelemetryRows {
        let mowers = self.fleet.mowers.to_vec();
        self.store.telemetry.export(&mowers).await.expect("export")
    }

    /// The reference's sessions over the stored distinct states of every mower (each history
    /// row with its position), as rows of the mower's account.
    pub async fn expected(&self) -> Vec<SessionRow> {
        let rows = self.rows().await;
        let mut out = Vec::new();
        for (mower, zone) in self.fleet.mowers.iter().zip(ZONES) {
            let points = points_of(&rows, *mower);
            out.extend(
                reference::sessions(*mower, zone, self.merge_gap, &points)
                    .into_iter()
                    .map(|session| SessionRow {
                        account_id: self.fleet.account_of(*mower),
                        session,
                    }),
            );
        }
        out
    }

    /// Stored sessions equal the reference's, session by session so that a failure names one.
    pub async fn assert_matches_the_reference(&self) {
        let (got, want) = (self.sessions().await, self.expected().await);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "a session differs from the reference's");
        }
        assert_eq!(
            got.len(),
            want.len(),
            "sessions: {got:#?}\nexpected: {want:#?}"
        );
    }
}

/// One mower's stored states as the fold sees them, oldest first.
pub fn points_of(rows: &TelemetryRows, mower: MowerId) -> Vec<SessionPoint> {
    rows.history
        .iter()
        .filter(|h| h.mower_id == mower)
        .map(|h| {
            let position = rows
                .positions
                .iter()
                .find(|p| p.mower_id == mower && p.observed_at == h.observed_at);
            SessionPoint {
                observed_at: h.observed_at,
                activity: h.activity,
                blade_on: h.blade_on,
                battery_percent: h.battery_percent,
                error_code: h.error_code.clone(),
                lat: position.map(|p| p.lat),
                lon: position.map(|p| p.lon),
            }
        })
        .collect()
}

/// States in time order, in any batches: the in-order path alone (each batch extends the newest
/// stored session) ends with the reference's sessions.
pub async fn in_order_matches_the_reference(
    factory: &dyn StoreFactory,
    steps: &[DistinctStep],
    sizes: &[usize],
) {
    let h = Harness::new(factory, DEFAULT_SESSION_MERGE_GAP).await;
    let reports = build_distinct_trace(&h.fleet, steps);
    for batch in split(&reports, sizes) {
        h.ingest(&batch).await;
    }
    h.assert_matches_the_reference().await;
}

/// Any arrival order of the same distinct states (with redeliveries), in any batches, at the
/// default merge gap or at 0: the reference's sessions. Late states refold their window.
pub async fn any_order_matches_the_reference(
    factory: &dyn StoreFactory,
    steps: &[DistinctStep],
    redeliveries: &[usize],
    order: &[usize],
    sizes: &[usize],
    merge_gap: Duration,
) {
    let h = Harness::new(factory, merge_gap).await;
    let reports = build_distinct_trace(&h.fleet, steps);
    for batch in split(&arrival(&reports, redeliveries, order), sizes) {
        let outcomes = h.ingest(&batch).await;
        assert!(outcomes.iter().all(|o| *o == StateOutcome::Stored));
    }
    h.assert_matches_the_reference().await;
}

/// A shuffled arrival in batches gives exactly the sessions of the same arrival one state at a
/// time (rows and the newest session's rest alike: the next in-order state extends both the
/// same way, which the reference comparison of the batched store checks).
pub async fn batched_equals_one_at_a_time(
    factory: &dyn StoreFactory,
    steps: &[DistinctStep],
    redeliveries: &[usize],
    order: &[usize],
    sizes: &[usize],
) {
    let batched = Harness::new(factory, DEFAULT_SESSION_MERGE_GAP).await;
    let single = Harness::new(factory, DEFAULT_SESSION_MERGE_GAP).await;
    let reports = build_distinct_trace(&batched.fleet, steps);
    let arrival = arrival(&reports, redeliveries, order);
    for batch in split(&arrival, sizes) {
        batched.ingest(&batch).await;
    }
    for report in &arrival {
        single.ingest(std::slice::from_ref(report)).await;
    }
    assert_eq!(batched.sessions().await, single.sessions().await);
    batched.assert_matches_the_reference().await;
}

/// Every mowing state lies in a session, so the sessions' mowing time and distance add up to the
/// health totals' (W8: W4's intervals whose earlier state lies in the session), whatever the
/// arrival order.
pub async fn sessions_add_up_to_the_health_totals(
    factory: &dyn StoreFactory,
    steps: &[DistinctStep],
    order: &[usize],
    sizes: &[usize],
) {
    let h = Harness::new(factory, DEFAULT_SESSION_MERGE_GAP).await;
    let reports = build_distinct_trace(&h.fleet, steps);
    let order: Vec<usize> = order
        .iter()
        .copied()
        .filter(|i| *i < reports.len())
        .collect();
    for batch in split(&arrival(&reports, &[], &order), sizes) {
        h.ingest(&batch).await;
    }
    let sessions = h.sessions().await;
    for mower in h.fleet.mowers {
        let Some(health) = h.store.health(mower).await else {
            continue;
        };
        let of_mower = || sessions.iter().filter(|s| s.session.mower_id == mower);
        let mowing: i64 = of_mower().map(|s| s.session.mowing_ms).sum();
        let distance: i64 = of_mower().map(|s| s.session.distance_mm).sum();
        assert_eq!(
            (mowing, distance),
            (health.mowing_ms, health.distance_mm),
            "mower {mower}: the sessions' mowing time and distance against the health totals"
        );
    }
}

/// Two adapters end with identical sessions for the same arrival in the same batches.
pub async fn stores_agree(
    a: &dyn StoreFactory,
    b: &dyn StoreFactory,
    steps: &[DistinctStep],
    order: &[usize],
    sizes: &[usize],
) {
    let a = Harness::new(a, DEFAULT_SESSION_MERGE_GAP).await;
    let b = Harness::new(b, DEFAULT_SESSION_MERGE_GAP).await;
    let reports = build_distinct_trace(&a.fleet, steps);
    let order: Vec<usize> = order
        .iter()
        .copied()
        .filter(|i| *i < reports.len())
        .collect();
    for batch in split(&arrival(&reports, &[], &order), sizes) {
        assert_eq!(a.ingest(&batch).await, b.ingest(&batch).await);
    }
    assert_eq!(
        a.sessions().await,
        b.sessions().await,
        "sessions differ between the stores"
    );
}
