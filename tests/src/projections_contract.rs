//! The live projections' contract (docs/rules.md §6), run against every adapter with lowered
//! ceilings: windows and sentinels, visibility before every cutoff, total orders, the site wall's
//! filter, the health wall's counts, the operator on duty, and the reads each level costs.
//!
//! Every scenario reads through a [`Counting`] store that records each port call (and the mower
//! ids the operator lookup was given); on PostgreSQL the harness also reads the adapter's
//! statement counter, and the two must agree: one statement per call, one call per level. The
//! same wrapper counts the rows each call returns and fails the scenario when a read returns more
//! than it was asked for (the use case asks for its ceiling plus the sentinel, `limit + 1`): the
//! use case cuts what it gets, so a read that lost its `LIMIT` would otherwise go unnoticed.

use crate::support::{self, open_alert, store_alerts};
use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use std::sync::{Arc, Mutex};
use swath_application::ports::{
    AlertCard, Assignments, Directory, HealthCard, MowerCard, MowerFilter, ProjectionError,
    ProjectionStore, SiteCard, TelemetryStore, Visibility, WatchStore,
};
use swath_application::projections::{Ceilings, HealthStatus, Projections};
use swath_domain::watch::{
    Alert, AlertChanges, AlertKind, IngestNotifications, Watch, WatchChanges,
};
use swath_domain::{
    AccountId, Activity, Assignment, BatchChanges, LatestRow, MowerId, Principal, Priority, Scope,
    Site, SiteId, StateReport,
};
use uuid::Uuid;

/// One adapter's ports, fresh and empty.
#[derive(Clone)]
pub struct ProjectionHarness {
    pub directory: Arc<dyn Directory>,
    pub telemetry: Arc<dyn TelemetryStore>,
    pub watch: Arc<dyn WatchStore>,
    pub projections: Arc<dyn ProjectionStore>,
    pub assignments: Arc<dyn Assignments>,
    /// The PostgreSQL store, whose statement counter must agree with the calls.
    pub postgres: Option<swath_postgres::PostgresStore>,
}

/// Makes a fresh harness, and seeds many mowers fast (PostgreSQL: one `INSERT … SELECT`).
#[async_trait]
pub trait ProjectionFactory: Send + Sync {
    async fn fresh(&self) -> ProjectionHarness;
    /// Adds `n` mowers to `site` of `account`, named `bulk-00000…`, display order 10.
    async fn bulk_mowers(&self, h: &ProjectionHarness, account: AccountId, site: SiteId, n: usize);
    /// Gives every mower of `account` `per_mower` active assignments (operators `op-1`…, of
    /// priorities low, normal, high…, all at [`at`]`(0)`). By default through the port, one
    /// assignment at a time; a store may seed them in one statement.
    async fn bulk_assignments(&self, h: &ProjectionHarness, account: AccountId, per_mower: usize) {
        let priorities = [Priority::Low, Priority::Normal, Priority::High];
        for mower in h.directory.mowers(account).await.unwrap() {
            for i in 0..per_mower {
                h.assignments
                    .create_assignment(Assignment {
                        id: Uuid::now_v7(),
                        mower_id: mower.id,
                        account_id: account,
                        operator: format!("op-{}", i + 1),
                        priority: priorities[i % priorities.len()],
                        active: true,
                        updated_at: at(0),
                    })
                    .await
                    .unwrap();
            }
        }
    }
}

/// The reads a projection made: the calls per port method, the ids given to the operator
/// lookup, and what each call returned.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Calls {
    pub window_mowers: usize,
    pub window_sites: usize,
    pub site_mowers: usize,
    pub open_alerts: usize,
    pub health: usize,
    pub operators: usize,
    pub operator_ids: Vec<MowerId>,
    /// Every call, in order, with the rows it returned.
    pub reads: Vec<Read>,
}

/// One port call: what it was asked for and how many rows the adapter returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub port: &'static str,
    /// Parents given (sites or mowers), or 1 for a first level.
    pub parents: usize,
    /// The rows allowed per parent: the `limit` passed (ceiling + 1), 1 for the health and
    /// operator reads (one row per mower).
    pub limit: usize,
    /// Rows returned.
    pub rows: usize,
    /// The most rows returned for one parent.
    pub most_per_parent: usize,
}

impl Read {
    /// Records a call and fails at once when the adapter returned more than it was asked for,
    /// in all or for one parent, or rows of a parent it was not given.
    fn check<K: Eq + std::hash::Hash + std::fmt::Debug>(
        port: &'static str,
        parents: &[K],
        limit: usize,
        rows: impl IntoIterator<Item = K>,
    ) -> Self {
        let mut per_parent: std::collections::HashMap<K, usize> = Default::default();
        let mut total = 0;
        for key in rows {
            assert!(
                parents.contains(&key),
                "{port}: a row of {key:?}, which was not asked for"
            );
            *per_parent.entry(key).or_default() += 1;
            total += 1;
        }
        let most_per_parent = per_parent.values().copied().max().unwrap_or(0);
        assert!(
            most_per_parent <= limit,
            "{port}: {most_per_parent} rows for one parent, asked for at most {limit}"
        );
        assert!(
            total <= parents.len().saturating_mul(limit),
            "{port}: {total} rows for {} parents of at most {limit}",
            parents.len()
        );
        Read {
            port,
            parents: parents.len(),
            limit,
            rows: total,
            most_per_parent,
        }
    }
}

impl Calls {
    pub fn total(&self) -> usize {
        self.window_mowers
            + self.window_sites
            + self.site_mowers
            + self.open_alerts
            + self.health
            + self.operators
    }
}

/// A [`ProjectionStore`] that records what it is asked.
pub struct Counting {
    inner: Arc<dyn ProjectionStore>,
    pub calls: Mutex<Calls>,
}

impl Counting {
    pub fn new(inner: Arc<dyn ProjectionStore>) -> Self {
        Self {
            inner,
            calls: Mutex::default(),
        }
    }

    pub fn take(&self) -> Calls {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

#[async_trait]
impl ProjectionStore for Counting {
    async fn window_mowers(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        self.calls.lock().unwrap().window_mowers += 1;
        let rows = self.inner.window_mowers(who, limit).await?;
        let read = Read::check("window_mowers", &[()], limit, rows.iter().map(|_| ()));
        self.calls.lock().unwrap().reads.push(read);
        Ok(rows)
    }

    async fn window_sites(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<SiteCard>, ProjectionError> {
        self.calls.lock().unwrap().window_sites += 1;
        let rows = self.inner.window_sites(who, limit).await?;
        let read = Read::check("window_sites", &[()], limit, rows.iter().map(|_| ()));
        self.calls.lock().unwrap().reads.push(read);
        Ok(rows)
    }

    async fn site_mowers(
        &self,
        who: &Visibility,
        sites: &[SiteId],
        filter: MowerFilter,
        per_site: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        self.calls.lock().unwrap().site_mowers += 1;
        let rows = self.inner.site_mowers(who, sites, filter, per_site).await?;
        let read = Read::check(
            "site_mowers",
            sites,
            per_site,
            rows.iter().map(|m| m.site_id),
        );
        self.calls.lock().unwrap().reads.push(read);
        Ok(rows)
    }

    async fn open_alerts(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
        per_mower: usize,
    ) -> Result<Vec<AlertCard>, ProjectionError> {
        self.calls.lock().unwrap().open_alerts += 1;
        let rows = self.inner.open_alerts(who, mowers, per_mower).await?;
        let read = Read::check(
            "open_alerts",
            mowers,
            per_mower,
            rows.iter().map(|a| a.mower_id),
        );
        self.calls.lock().unwrap().reads.push(read);
        Ok(rows)
    }

    async fn health(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<HealthCard>, ProjectionError> {
        self.calls.lock().unwrap().health += 1;
        let rows = self.inner.health(who, mowers).await?;
        let read = Read::check("health", mowers, 1, rows.iter().map(|h| h.mower_id));
        self.calls.lock().unwrap().reads.push(read);
        Ok(rows)
    }

    async fn operators_on_duty(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<Assignment>, ProjectionError> {
        {
            let mut calls = self.calls.lock().unwrap();
            calls.operators += 1;
            calls.operator_ids.extend_from_slice(mowers);
        }
        let rows = self.inner.operators_on_duty(who, mowers).await?;
        let read = Read::check(
            "operators_on_duty",
            mowers,
            1,
            rows.iter().map(|a| a.mower_id),
        );
        self.calls.lock().unwrap().reads.push(read);
        Ok(rows)
    }
}

/// Lowered ceilings: small enough to cross in a few rows.
pub const LOW: Ceilings = Ceilings {
    fleet_mowers: 3,
    fleet_alerts_per_mower: 2,
    wall_sites: 2,
    wall_mowers_per_site: 2,
    wall_alerts_per_mower: 2,
    health_sites: 2,
    health_mowers_per_site: 2,
    map_sites: 2,
    map_mowers_per_site: 2,
};

/// A harness with the use case over a counting store.
pub struct Setup {
    pub h: ProjectionHarness,
    pub counting: Arc<Counting>,
    pub projections: Projections,
}

impl Setup {
    pub async fn new(factory: &dyn ProjectionFactory, ceilings: Ceilings) -> Self {
        let h = factory.fresh().await;
        let counting = Arc::new(Counting::new(Arc::clone(&h.projections)));
        let projections = Projections::new(counting.clone()).with_ceilings(ceilings);
        Self {
            h,
            counting,
            projections,
        }
    }

    fn statements(&self) -> Option<u64> {
        self.h
            .postgres
            .as_ref()
            .map(|p| p.projection_counters().statements())
    }

    /// Runs `f`, and returns what it read: the calls, checked against PostgreSQL's statements.
    pub async fn measure<T, F: std::future::Future<Output = T>>(&self, f: F) -> (T, Calls) {
        self.counting.take();
        let before = self.statements();
        let out = f.await;
        let calls = self.counting.take();
        if let (Some(b), Some(a)) = (before, self.statements()) {
            assert_eq!(
                (a - b) as usize,
                calls.total(),
                "one PostgreSQL statement per read: {calls:?}"
            );
        }
        (out, calls)
    }

    pub async fn account(&self, name: &str) -> AccountId {
        let id = AccountId(Uuid::now_v7());
        support::add_account(self.h.directory.as_ref(), id, name).await;
        id
    }

    pub async fn site(&self, account: AccountId, name: &str, order: i32) -> SiteId {
        let id = SiteId(Uuid::now_v7());
        let berlin = chrono_tz::Europe::Berlin;
        let site = Site {
            display_order: order,
            ..support::site(id, account, name, berlin, 0)
        };
        support::add_site(self.h.directory.as_ref(), site).await;
        id
    }

    pub async fn mower_with_id(
        &self,
        id: MowerId,
        account: AccountId,
        site: SiteId,
        name: &str,
        order: i32,
    ) -> MowerId {
        let mower = swath_domain::Mower {
            serial: format!("SN-{name}"),
            display_order: order,
            ..support::mower(id, account, site, name, 0)
        };
        support::add_mower(self.h.directory.as_ref(), mower).await;
        id
    }

    pub async fn mower(&self, account: AccountId, site: SiteId, name: &str, order: i32) -> MowerId {
        self.mower_with_id(MowerId(Uuid::now_v7()), account, site, name, order)
            .await
    }

    /// Stores a latest state with this activity.
    pub async fn report(&self, account: AccountId, mower: MowerId, activity: &str) {
        self.report_with(account, mower, json!({ "activity": activity }))
            .await;
    }

    /// Stores a latest state with these fields (an `activity` at least) and an 80 % battery.
    pub async fn report_with(&self, account: AccountId, mower: MowerId, fields: serde_json::Value) {
        let at = at(0);
        let mut report = json!({
            "mower_id": mower, "account_id": account, "observed_at": at.to_rfc3339(),
            "battery_percent": 80,
        });
        for (k, v) in fields.as_object().unwrap() {
            report[k] = v.clone();
        }
        let bytes = report.to_string();
        let state = StateReport::parse(bytes.as_bytes(), at).unwrap();
        let (_, batch) = self.h.telemetry.begin(&[mower]).await.unwrap();
        batch
            .commit(
                BatchChanges {
                    latest: vec![LatestRow {
                        mower_id: mower,
                        account_id: account,
                        observed_at: at,
                        last_seen_at: at,
                        state,
                    }],
                    ..BatchChanges::default()
                },
                IngestNotifications::default(),
            )
            .await
            .unwrap();
    }

    /// Opens an alert (stored as given: `account` may be another one than the mower's).
    pub async fn alert(
        &self,
        account: AccountId,
        mower: MowerId,
        kind: AlertKind,
        seconds: i64,
    ) -> Uuid {
        let id = Uuid::now_v7();
        let (_, batch) = self.h.watch.begin_watch(&[mower], &[]).await.unwrap();
        batch
            .commit(WatchChanges {
                alerts: AlertChanges {
                    clears: Vec::new(),
                    raised: vec![Alert {
                        id,
                        ..open_alert(mower, account, kind, at(seconds))
                    }],
                },
                // The watcher flags the watch row offline in the same commit as the alert.
                watches: (kind == AlertKind::Offline)
                    .then(|| Watch {
                        mower_id: mower,
                        account_id: account,
                        watched_until: at(seconds),
                        last_seen_at: at(seconds),
                        last_activity: Activity::Mowing,
                        error_code: None,
                        outside_geofence: false,
                        battery_low: false,
                        offline: true,
                        geofence_version: None,
                        session: None,
                        session_due_at: None,
                    })
                    .into_iter()
                    .collect(),
                ..WatchChanges::default()
            })
            .await
            .unwrap();
        id
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn assign(
        &self,
        id: Uuid,
        account: AccountId,
        mower: MowerId,
        operator: &str,
        priority: Priority,
        active: bool,
        seconds: i64,
    ) {
        self.h
            .assignments
            .create_assignment(Assignment {
                id,
                mower_id: mower,
                account_id: account,
                operator: operator.into(),
                priority,
                active,
                updated_at: at(seconds),
            })
            .await
            .unwrap();
    }
}

/// A fixed instant plus `seconds` (whole microseconds: every store keeps them exactly).
pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap() + Duration::seconds(seconds)
}

pub fn reader(account: AccountId, sites: Option<Vec<SiteId>>) -> Principal {
    Principal {
        account_id: account,
        scopes: vec![Scope::Read],
        sites,
    }
}

fn names<'a>(items: impl IntoIterator<Item = &'a MowerCard>) -> Vec<String> {
    items.into_iter().map(|m| m.name.clone()).collect()
}

/// An empty tenant: empty lists, `truncated = false`, one read, no operator lookup.
pub async fn an_empty_tenant_costs_one_read(factory: &dyn ProjectionFactory) {
    let s = Setup::new(factory, LOW).await;
    let account = s.account("Empty").await;
    let p = reader(account, None);
    let (fleet, calls) = s.measure(s.projections.fleet(&p)).await;
    let fleet = fleet.unwrap();
    assert!(fleet.mowers.items.is_empty() && !fleet.mowers.truncated);
    assert_eq!(fleet.mowers.limit, LOW.fleet_mowers);
    assert_eq!((calls.total(), calls.operators), (1, 0), "{calls:?}");
    let (wall, calls) = s.measure(s.projections.wall(&p)).await;
    let wall = wall.unwrap();
    assert!(wall.sites.items.is_empty() && !wall.sites.truncated);
    assert_eq!((calls.total(), calls.operators), (1, 0), "{calls:?}");
    let (health, calls) = s.measure(s.projections.health(&p)).await;
    let health = health.unwrap();
    assert!(health.sites.items.is_empty() && !health.sites.truncated);
    assert_eq!((calls.total(), calls.operators), (1, 0), "{calls:?}");
}

/// The site map: the sites window, the shown site (the first, or the one asked for even beyond
/// the window, never one the principal may not see), its mowers with the latest state's position
/// and error code, their statuses; at most four reads. `site_cards` answers the visible ones of
/// the ids asked for, once each.
pub async fn the_map_reads_one_site_its_mowers_positions_and_errors(
    factory: &dyn ProjectionFactory,
) {
    let s = Setup::new(factory, LOW).await;
    let a = s.account("A").await;
    let mut sites = Vec::new();
    for i in 0..3 {
        sites.push(s.site(a, &format!("S{i}"), i).await);
    }
    let m1 = s.mower(a, sites[0], "m1", 0).await;
    let m2 = s.mower(a, sites[0], "m2", 1).await;
    s.mower(a, sites[0], "m3", 2).await;
    s.report_with(
        a,
        m1,
        json!({"activity": "error", "error_code": "E7", "position": {"lat": 52.5, "lon": 13.25}}),
    )
    .await;
    s.report(a, m2, "mowing").await;
    s.alert(a, m1, AlertKind::Error, 1).await;
    let p = reader(a, None);
    let (map, calls) = s.measure(s.projections.map(&p, None)).await;
    let map = map.unwrap();
    assert_eq!(map.sites.items.len(), LOW.map_sites);
    assert!(map.sites.truncated);
    let shown = map.site.unwrap();
    assert_eq!(shown.site.id, sites[0]);
    assert!(shown.mowers.truncated && shown.mowers.limit == LOW.map_mowers_per_site);
    let first = &shown.mowers.items[0];
    assert_eq!(first.mower.error_code.as_deref(), Some("E7"));
    assert_eq!(
        first.mower.position,
        Some(swath_application::ports::LatLon {
            lat: 52.5,
            lon: 13.25
        })
    );
    assert_eq!(first.status, HealthStatus::High);
    let second = &shown.mowers.items[1];
    assert_eq!(
        (&second.mower.error_code, second.mower.position),
        (&None, None)
    );
    assert_eq!(second.status, HealthStatus::Ok);
    assert_eq!((calls.total(), calls.health), (3, 1), "{calls:?}");
    // Beyond the sites' window: read alone.
    let (map, calls) = s.measure(s.projections.map(&p, Some(sites[2]))).await;
    let shown = map.unwrap().site.unwrap();
    assert_eq!(shown.site.name, "S2");
    assert!(shown.mowers.items.is_empty());
    assert_eq!((calls.total(), calls.window_sites), (3, 2), "{calls:?}");
    // Not visible (another site's token, an unknown id): no site, nothing read for it.
    let limited = reader(a, Some(vec![sites[1]]));
    let (map, calls) = s.measure(s.projections.map(&limited, Some(sites[0]))).await;
    let map = map.unwrap();
    assert!(map.site.is_none());
    assert_eq!(map.sites.items.len(), 1);
    assert_eq!(calls.total(), 1, "{calls:?}");
    let map = s
        .projections
        .map(&p, Some(SiteId(Uuid::now_v7())))
        .await
        .unwrap();
    assert!(map.site.is_none());
    // Site cards: visible ones, once each, in display order.
    let (cards, calls) = s
        .measure(
            s.projections
                .site_cards(&p, &[sites[2], sites[0], sites[2]]),
        )
        .await;
    let names: Vec<String> = cards.unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["S0", "S2"]);
    assert_eq!(calls.total(), 1);
    let cards = s
        .projections
        .site_cards(&limited, &[sites[0]])
        .await
        .unwrap();
    assert!(cards.is_empty());
}

/// `limit` rows: not truncated; `limit + 1`: truncated — at every level.
pub async fn the_sentinel_row_decides_truncation(factory: &dyn ProjectionFactory) {
    let s = Setup::new(factory, LOW).await;
    let account = s.account("A").await;
    let site = s.site(account, "Site 1", 0).await;
    let p = reader(account, None);
    let mut mowers = Vec::new();
    for i in 0..LOW.fleet_mowers {
        let m = s.mower(account, site, &format!("m{i}"), 0).await;
        s.report(account, m, "mowing").await;
        mowers.push(m);
    }
    // Exactly the ceiling of alerts on the first mower.
    s.alert(account, mowers[0], AlertKind::Error, 1).await;
    s.alert(account, mowers[0], AlertKind::BatteryLow, 2).await;
    let fleet = s.projections.fleet(&p).await.unwrap();
    assert_eq!(fleet.mowers.items.len(), LOW.fleet_mowers);
    assert!(!fleet.mowers.truncated);
    assert_eq!(fleet.mowers.items[0].alerts.items.len(), 2);
    assert!(!fleet.mowers.items[0].alerts.truncated);
    assert_eq!(
        fleet.mowers.items[0].alerts.limit,
        LOW.fleet_alerts_per_mower
    );

    // One more of each.
    let extra = s.mower(account, site, "m9", 0).await;
    s.report(account, extra, "mowing").await;
    s.alert(account, mowers[0], AlertKind::BladeDue, 3).await;
    let (fleet, calls) = s.measure(s.projections.fleet(&p)).await;
    let fleet = fleet.unwrap();
    assert_eq!(fleet.mowers.items.len(), LOW.fleet_mowers);
    assert!(fleet.mowers.truncated);
    assert!(fleet.mowers.items[0].alerts.truncated);
    assert_eq!(calls.total(), 3, "mowers, alerts, operators: {calls:?}");
    assert!(
        !calls.operator_ids.contains(&extra),
        "the sentinel's operator is never looked up"
    );
    assert_eq!(calls.operator_ids, mowers, "exactly the window, in order");

    // Site wall: 2 sites exactly, then 3; 2 mowers in the field on a site exactly, then 3.
    let wall = s.projections.wall(&p).await.unwrap();
    assert_eq!(wall.sites.items.len(), 1);
    assert!(!wall.sites.truncated);
    assert_eq!(wall.sites.limit, LOW.wall_sites);
    let site_window = &wall.sites.items[0].mowers;
    assert_eq!(site_window.items.len(), 2);
    assert!(site_window.truncated, "4 mowers in the field, ceiling 2");
    assert_eq!(site_window.limit, LOW.wall_mowers_per_site);
    let second = s.site(account, "Site 2", 1).await;
    let wall = s.projections.wall(&p).await.unwrap();
    assert_eq!(wall.sites.items.len(), 2);
    assert!(!wall.sites.truncated);
    assert!(wall.sites.items[1].mowers.items.is_empty());
    assert!(!wall.sites.items[1].mowers.truncated);
    let third = s.site(account, "Site 3", 2).await;
    let (wall, calls) = s.measure(s.projections.wall(&p)).await;
    let wall = wall.unwrap();
    assert!(wall.sites.truncated);
    assert!(wall.sites.items.iter().all(|w| w.site.id != third));
    assert_eq!(
        calls.total(),
        4,
        "sites, mowers, alerts, operators: {calls:?}"
    );
    let _ = second;

    // Health wall: same sites, every mower (no filter), ceiling 2 per site.
    let (health, calls) = s.measure(s.projections.health(&p)).await;
    let health = health.unwrap();
    assert!(health.sites.truncated);
    assert_eq!(health.sites.items[0].mowers.items.len(), 2);
    assert!(health.sites.items[0].mowers.truncated);
    assert_eq!(
        calls.total(),
        4,
        "sites, mowers, health, operators: {calls:?}"
    );
}

/// Rows of another account, or of a hidden site, sorted before the visible ones, never appear
/// and never use up a window, at any level.
pub async fn foreign_rows_never_use_up_a_window(factory: &dyn ProjectionFactory) {
    let s = Setup::new(factory, LOW).await;
    let a = s.account("A").await;
    let b = s.account("B").await;
    // B's sites and mowers sort first (display order -1).
    let b_site = s.site(b, "AAA foreign", -1).await;
    for i in 0..5 {
        let m = s.mower(b, b_site, &format!("foreign{i}"), -1).await;
        s.report(b, m, "mowing").await;
        s.alert(b, m, AlertKind::Geofence, i).await;
    }
    // A's hidden site sorts first too.
    let hidden = s.site(a, "AAA hidden", -1).await;
    for i in 0..5 {
        let m = s.mower(a, hidden, &format!("hidden{i}"), -1).await;
        s.report(a, m, "mowing").await;
    }
    let shown = s.site(a, "Shown", 5).await;
    let mut visible = Vec::new();
    for i in 0..LOW.fleet_mowers {
        let m = s.mower(a, shown, &format!("v{i}"), 0).await;
        s.report(a, m, "mowing").await;
        visible.push(m);
    }
    // A foreign alert on a visible mower, more severe than its own, must not show or count.
    s.alert(b, visible[0], AlertKind::Geofence, 50).await;
    s.alert(a, visible[0], AlertKind::BatteryLow, 1).await;
    let p = reader(a, Some(vec![shown]));

    let fleet = s.projections.fleet(&p).await.unwrap();
    let got: Vec<MowerId> = fleet.mowers.items.iter().map(|m| m.mower.id).collect();
    assert_eq!(got, visible);
    assert!(
        !fleet.mowers.truncated,
        "hidden rows must not count as more"
    );
    let alerts = &fleet.mowers.items[0].alerts;
    assert_eq!(alerts.items.len(), 1);
    assert_eq!(alerts.items[0].kind, AlertKind::BatteryLow);
    assert!(!alerts.truncated);

    let wall = s.projections.wall(&p).await.unwrap();
    assert_eq!(wall.sites.items.len(), 1);
    assert_eq!(wall.sites.items[0].site.id, shown);
    assert!(!wall.sites.truncated);
    let health = s.projections.health(&p).await.unwrap();
    assert_eq!(health.sites.items.len(), 1);
    let card = &health.sites.items[0].mowers.items[0];
    assert_eq!((card.health.critical, card.health.normal), (0, 1));
    assert_eq!(card.status, HealthStatus::Normal);

    // The whole account sees its hidden site first, never B's.
    let all = s.projections.fleet(&reader(a, None)).await.unwrap();
    assert!(all
        .mowers
        .items
        .iter()
        .all(|m| m.mower.name.starts_with("hidden")));
    assert!(all.mowers.truncated);
    // Asking the store directly for another account's mowers answers nothing.
    let who = Visibility {
        account_id: a,
        sites: None,
    };
    let foreign: Vec<MowerId> =
        s.h.projections
            .window_mowers(
                &Visibility {
                    account_id: b,
                    sites: None,
                },
                10,
            )
            .await
            .unwrap()
            .iter()
            .map(|m| m.id)
            .collect();
    assert!(s
        .h
        .projections
        .open_alerts(&who, &foreign, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(s
        .h
        .projections
        .health(&who, &foreign)
        .await
        .unwrap()
        .is_empty());
}

/// Rows created out of order come back in the total order, ids last.
pub async fn children_inserted_out_of_order_come_back_in_order(factory: &dyn ProjectionFactory) {
    let s = Setup::new(factory, Ceilings::default()).await;
    let a = s.account("A").await;
    let site = s.site(a, "Site", 0).await;
    // Same display order and name: the id decides. Then names byte by byte ("B" < "a").
    let low = MowerId(Uuid::from_u128(0x1000));
    let high = MowerId(Uuid::from_u128(0x2000));
    s.mower(a, site, "a", 1).await;
    s.mower_with_id(high, a, site, "same", 0).await;
    s.mower(a, site, "B", 1).await;
    s.mower_with_id(low, a, site, "same", 0).await;
    s.mower(a, site, "z", -1).await;
    let fleet = s.projections.fleet(&reader(a, None)).await.unwrap();
    assert_eq!(
        names(fleet.mowers.items.iter().map(|m| &m.mower)),
        ["z", "same", "same", "B", "a"]
    );
    assert_eq!(fleet.mowers.items[1].mower.id, low);
    assert_eq!(fleet.mowers.items[2].mower.id, high);

    // Alerts: severity desc, raised_at desc, id desc, raised out of order.
    s.alert(a, low, AlertKind::BladeDue, 5).await;
    s.alert(a, low, AlertKind::Offline, 1).await;
    s.alert(a, low, AlertKind::Geofence, 0).await;
    s.alert(a, low, AlertKind::Error, 3).await;
    let fleet = s.projections.fleet(&reader(a, None)).await.unwrap();
    let kinds: Vec<AlertKind> = fleet.mowers.items[1]
        .alerts
        .items
        .iter()
        .map(|a| a.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            AlertKind::Geofence,
            AlertKind::Error,
            AlertKind::Offline,
            AlertKind::BladeDue
        ]
    );

    // Sites likewise.
    for (name, order) in [("b", 0), ("A", 0), ("c", -2)] {
        s.site(a, name, order).await;
    }
    let wall = s.projections.health(&reader(a, None)).await.unwrap();
    let sites: Vec<&str> = wall
        .sites
        .items
        .iter()
        .map(|w| w.site.name.as_str())
        .collect();
    assert_eq!(sites, ["c", "A", "Site", "b"]);
}

/// The site wall shows mowers in the field only, filtered before the cutoff; the health wall
/// counts all of a mower's open alerts even when the alert windows are lower.
pub async fn the_wall_filters_before_the_cutoff_and_health_counts_everything(
    factory: &dyn ProjectionFactory,
) {
    let ceilings = Ceilings {
        fleet_alerts_per_mower: 1,
        wall_alerts_per_mower: 1,
        ..LOW
    };
    let s = Setup::new(factory, ceilings).await;
    let a = s.account("A").await;
    let site = s.site(a, "Site", 0).await;
    // Sorted first, but not in the field: docked, charging, offline, never reported.
    let docked = s.mower(a, site, "a-docked", 0).await;
    s.report(a, docked, "docked").await;
    let charging = s.mower(a, site, "b-charging", 0).await;
    s.report(a, charging, "charging").await;
    let offline = s.mower(a, site, "c-offline", 0).await;
    s.report(a, offline, "mowing").await;
    s.alert(a, offline, AlertKind::Offline, 0).await;
    s.mower(a, site, "d-silent", 0).await;
    let mowing = s.mower(a, site, "e-mowing", 0).await;
    s.report(a, mowing, "mowing").await;
    let error = s.mower(a, site, "f-error", 0).await;
    s.report(a, error, "error").await;
    s.alert(a, error, AlertKind::Error, 1).await;
    s.alert(a, error, AlertKind::Geofence, 2).await;
    s.alert(a, error, AlertKind::BladeDue, 3).await;

    let wall = s.projections.wall(&reader(a, None)).await.unwrap();
    let field = &wall.sites.items[0].mowers;
    assert_eq!(
        names(field.items.iter().map(|m| &m.mower)),
        ["e-mowing", "f-error"]
    );
    assert!(!field.truncated, "exactly two mowers are in the field");
    let error_alerts = &field.items[1].alerts;
    assert_eq!(error_alerts.items.len(), 1);
    assert_eq!(error_alerts.items[0].kind, AlertKind::Geofence);
    assert!(error_alerts.truncated);

    let health = s.projections.health(&reader(a, None)).await.unwrap();
    let mowers = &health.sites.items[0].mowers;
    assert_eq!(
        names(mowers.items.iter().map(|m| &m.mower)),
        ["a-docked", "b-charging"]
    );
    assert!(mowers.truncated);
    // The error mower is outside the health window; ask the store about it directly, and with a
    // window of one alert the status still comes from all three.
    let who = Visibility {
        account_id: a,
        sites: None,
    };
    let card = &s.h.projections.health(&who, &[error]).await.unwrap()[0];
    assert_eq!(
        (card.critical, card.high, card.normal, card.low),
        (1, 1, 0, 1)
    );
    assert_eq!(HealthStatus::of(card), HealthStatus::Critical);
    let offline_card = &s.h.projections.health(&who, &[offline]).await.unwrap()[0];
    assert_eq!(HealthStatus::of(offline_card), HealthStatus::High);
}

/// The operator on duty: priority, then the newest `updated_at`, then the highest id; never an
/// inactive or foreign assignment; one read for the whole window.
pub async fn the_operator_on_duty_is_ranked_by_the_store(factory: &dyn ProjectionFactory) {
    let s = Setup::new(factory, LOW).await;
    let a = s.account("A").await;
    let b = s.account("B").await;
    let site = s.site(a, "Site", 0).await;
    let m1 = s.mower(a, site, "m1", 0).await;
    let m2 = s.mower(a, site, "m2", 1).await;
    let m3 = s.mower(a, site, "m3", 2).await;
    let m4 = s.mower(a, site, "m4", 3).await;

    // m1: 40 low and 1 critical.
    for i in 0..40 {
        s.assign(
            Uuid::now_v7(),
            a,
            m1,
            &format!("low{i}"),
            Priority::Low,
            true,
            i,
        )
        .await;
    }
    s.assign(Uuid::now_v7(), a, m1, "chief", Priority::Critical, true, 0)
        .await;
    // m2: equal priority: the newer updated_at wins; equal too: the higher id.
    s.assign(Uuid::from_u128(9), a, m2, "older", Priority::High, true, 10)
        .await;
    s.assign(
        Uuid::from_u128(1),
        a,
        m2,
        "newer-low-id",
        Priority::High,
        true,
        20,
    )
    .await;
    s.assign(
        Uuid::from_u128(2),
        a,
        m2,
        "newer-high-id",
        Priority::High,
        true,
        20,
    )
    .await;
    // m3: a foreign critical and an inactive critical never beat a visible low one.
    s.assign(
        Uuid::now_v7(),
        b,
        m3,
        "foreign",
        Priority::Critical,
        true,
        99,
    )
    .await;
    s.assign(
        Uuid::now_v7(),
        a,
        m3,
        "off duty",
        Priority::Critical,
        false,
        99,
    )
    .await;
    s.assign(Uuid::now_v7(), a, m3, "visible", Priority::Low, true, 0)
        .await;
    // m4 (the sentinel with a window of 3) has an assignment that must never be looked up.
    s.assign(
        Uuid::now_v7(),
        a,
        m4,
        "sentinel",
        Priority::Critical,
        true,
        0,
    )
    .await;

    let (fleet, calls) = s.measure(s.projections.fleet(&reader(a, None))).await;
    let fleet = fleet.unwrap();
    let on_duty: Vec<Option<&str>> = fleet
        .mowers
        .items
        .iter()
        .map(|m| m.operator.as_ref().map(|o| o.operator.as_str()))
        .collect();
    assert_eq!(
        on_duty,
        [Some("chief"), Some("newer-high-id"), Some("visible")]
    );
    assert!(fleet.mowers.truncated);
    assert_eq!(calls.operators, 1, "one read for every operator");
    assert_eq!(calls.operator_ids, [m1, m2, m3], "never the sentinel m4");

    // The store alone: the winner only, one per mower; a foreign viewer sees its own only.
    let who = Visibility {
        account_id: a,
        sites: None,
    };
    let winners =
        s.h.projections
            .operators_on_duty(&who, &[m1, m2, m3])
            .await
            .unwrap();
    assert_eq!(winners.len(), 3);
    let foreign = Visibility {
        account_id: b,
        sites: None,
    };
    assert!(s
        .h
        .projections
        .operators_on_duty(&foreign, &[m3])
        .await
        .unwrap()
        .is_empty());
    // The administrative list: active first, ranked; never another account's.
    let list = s.h.assignments.assignments(a, m3).await.unwrap();
    let ops: Vec<&str> = list.iter().map(|a| a.operator.as_str()).collect();
    assert_eq!(ops, ["visible", "off duty"]);
}

/// The reads of each projection do not depend on the tenant's size: 0, 1, 1 000 and 10 000
/// mowers cost the same, at most one per level.
pub async fn reads_are_constant_in_the_tenant_size(factory: &dyn ProjectionFactory) {
    let s = Setup::new(factory, Ceilings::default()).await;
    let mut seen: Vec<(usize, Calls, Calls, Calls)> = Vec::new();
    for n in [0usize, 1, 1_000, 10_000] {
        let a = s.account(&format!("T{n}")).await;
        let site = s.site(a, "Site", 0).await;
        if n > 0 {
            factory.bulk_mowers(&s.h, a, site, n).await;
        }
        let p = reader(a, None);
        let (fleet, f) = s.measure(s.projections.fleet(&p)).await;
        let (wall, w) = s.measure(s.projections.wall(&p)).await;
        let (health, hc) = s.measure(s.projections.health(&p)).await;
        assert_eq!(fleet.unwrap().mowers.truncated, n > 64);
        assert_eq!(wall.unwrap().sites.items.len(), 1);
        assert_eq!(health.unwrap().sites.items[0].mowers.truncated, n > 32);
        seen.push((n, f, w, hc));
    }
    let totals: Vec<(usize, usize, usize, usize)> = seen
        .iter()
        .map(|(n, f, w, h)| (*n, f.total(), w.total(), h.total()))
        .collect();
    // No mower: the fleet reads its first level only, the walls their site and mower levels (a
    // level under an empty window is never read, which is what makes an empty tenant one read).
    assert_eq!(totals[0], (0, 1, 2, 2), "{totals:?}");
    // From one mower on, the same reads whatever the size, at most one per level: fleet (mowers,
    // alerts, operators), wall (sites, mowers in the field — none here, so nothing below),
    // health (sites, mowers, health, operators).
    for (n, f, w, h) in &totals[1..] {
        assert_eq!((*f, *w, *h), (3, 2, 4), "{n} mowers: {totals:?}");
    }
}

/// At 10 000 mowers on 20 sites, each with a latest state (mowing), four open alerts and three
/// active assignments, every level of every projection is read and no adapter read returns more
/// than it was asked for (checked by [`Counting`] on every call): the first levels stop at their
/// sentinel, each site at its own, each mower's alerts at theirs, and one operator per mower.
/// The alert ceilings are lowered to 2: a mower has at most one open alert per kind (five), so
/// only a ceiling below four lets a lost per-mower `LIMIT` show.
pub async fn every_read_is_bounded_at_ten_thousand_mowers(factory: &dyn ProjectionFactory) {
    const SITES: usize = 20;
    const PER_SITE: usize = 500;
    const ASSIGNMENTS: usize = 3;
    let ceilings = Ceilings {
        fleet_alerts_per_mower: 2,
        wall_alerts_per_mower: 2,
        ..Ceilings::default()
    };
    assert!(SITES > ceilings.wall_sites + 1 && SITES > ceilings.health_sites + 1);
    assert!(PER_SITE > ceilings.wall_mowers_per_site + 1);
    let s = Setup::new(factory, ceilings).await;
    let a = s.account("Big").await;
    for i in 0..SITES {
        let site = s.site(a, &format!("Site {i:02}"), 0).await;
        factory.bulk_mowers(&s.h, a, site, PER_SITE).await;
    }
    let mowers: Vec<MowerId> =
        s.h.directory
            .mowers(a)
            .await
            .unwrap()
            .iter()
            .map(|m| m.id)
            .collect();
    assert_eq!(mowers.len(), SITES * PER_SITE);
    // States and alerts through the write ports, in batches of a thousand mowers.
    let kinds = [
        AlertKind::Error,
        AlertKind::Geofence,
        AlertKind::BatteryLow,
        AlertKind::BladeDue,
    ];
    for chunk in mowers.chunks(1_000) {
        let latest = chunk
            .iter()
            .map(|&m| {
                let bytes = json!({
                    "mower_id": m, "account_id": a, "observed_at": at(0).to_rfc3339(),
                    "activity": "mowing", "battery_percent": 80,
                })
                .to_string();
                LatestRow {
                    mower_id: m,
                    account_id: a,
                    observed_at: at(0),
                    last_seen_at: at(0),
                    state: StateReport::parse(bytes.as_bytes(), at(0)).unwrap(),
                }
            })
            .collect();
        let (_, batch) = s.h.telemetry.begin(chunk).await.unwrap();
        batch
            .commit(
                BatchChanges {
                    latest,
                    ..BatchChanges::default()
                },
                IngestNotifications::default(),
            )
            .await
            .unwrap();
        let raised = chunk
            .iter()
            .flat_map(|&m| {
                let alert =
                    move |(i, &kind): (usize, &AlertKind)| open_alert(m, a, kind, at(i as i64));
                kinds.iter().enumerate().map(alert)
            })
            .collect();
        store_alerts(s.h.watch.as_ref(), chunk, raised).await;
    }
    factory.bulk_assignments(&s.h, a, ASSIGNMENTS).await;

    let p = reader(a, None);
    // The rows of each read, by port: the lower levels of a level are read concurrently, so the
    // order of the calls is not part of the contract.
    let rows = |calls: &Calls| -> Vec<(&'static str, usize)> {
        let mut rows: Vec<_> = calls.reads.iter().map(|r| (r.port, r.rows)).collect();
        rows.sort();
        rows
    };
    let sorted = |mut expected: Vec<(&'static str, usize)>| {
        expected.sort();
        expected
    };
    let c = ceilings;

    let (fleet, calls) = s.measure(s.projections.fleet(&p)).await;
    let fleet = fleet.unwrap();
    assert!(fleet.mowers.truncated);
    assert!(fleet.mowers.items.iter().all(|m| m.alerts.truncated
        && m.alerts.items.len() == c.fleet_alerts_per_mower
        && m.operator.is_some()));
    // Each read returned exactly its window plus the sentinel: every level was reached at
    // size, and none returned more (the wrapper checked each parent's rows as well).
    assert_eq!(
        rows(&calls),
        sorted(vec![
            ("window_mowers", c.fleet_mowers + 1),
            (
                "open_alerts",
                c.fleet_mowers * (c.fleet_alerts_per_mower + 1)
            ),
            ("operators_on_duty", c.fleet_mowers),
        ]),
        "{:?}",
        calls.reads
    );

    let (wall, calls) = s.measure(s.projections.wall(&p)).await;
    let wall = wall.unwrap();
    assert!(wall.sites.truncated);
    assert!(wall.sites.items.iter().all(|w| w.mowers.truncated
        && w.mowers.items.len() == c.wall_mowers_per_site
        && w.mowers
            .items
            .iter()
            .all(|m| m.alerts.truncated && m.operator.is_some())));
    let field = c.wall_sites * c.wall_mowers_per_site;
    assert_eq!(
        rows(&calls),
        sorted(vec![
            ("window_sites", c.wall_sites + 1),
            ("site_mowers", c.wall_sites * (c.wall_mowers_per_site + 1)),
            ("open_alerts", field * (c.wall_alerts_per_mower + 1)),
            ("operators_on_duty", field),
        ]),
        "{:?}",
        calls.reads
    );

    let (health, calls) = s.measure(s.projections.health(&p)).await;
    let health = health.unwrap();
    assert!(health.sites.truncated);
    assert!(health.sites.items.iter().all(|w| w.mowers.truncated
        && w.mowers
            .items
            .iter()
            .all(|m| m.status == HealthStatus::Critical && m.operator.is_some())));
    let shown = c.health_sites * c.health_mowers_per_site;
    assert_eq!(
        rows(&calls),
        sorted(vec![
            ("window_sites", c.health_sites + 1),
            (
                "site_mowers",
                c.health_sites * (c.health_mowers_per_site + 1)
            ),
            ("health", shown),
            ("operators_on_duty", shown),
        ]),
        "{:?}",
        calls.reads
    );
}
