//! Every use case method that takes a principal and an id, asked by someone who may not see that
//! id: another account's admin, and a token of the same account limited to another site. Each
//! answers the one error of an unknown id (or the documented answer of its kind: `None`, `false`,
//! an empty page), over the memory store and PostgreSQL alike (`tests/cross_tenant_memory.rs`,
//! `tests/cross_tenant_postgres.rs`, decision 197).
//!
//! [`METHODS`] names one scenario per method; `the_scenarios_name_every_method` (in
//! `tests/cross_tenant_memory.rs`) reads the application's sources and fails when a method that
//! takes a `&Principal` and an id has no scenario, or a scenario no method. Each scenario's
//! target has data of its own (telemetry, a geofence, a zone, an assignment, an event and its
//! alert, a token, a webhook), so that a method whose visibility check is removed answers
//! something, and the scenario fails.

use crate::postgres::PostgresFactory;
use crate::support::{add_account, add_mower, add_site, ingest_json, mower, site, RecordingBus};
use crate::traces::ingest_clock;
use async_trait::async_trait;
use chrono::Duration;
use serde_json::{json, Value};
use std::sync::Arc;
use swath::wiring::Stores;
use swath_application::ports::{
    AlertQuery, EventBus, EventQuery, ManualClock, TimeWindow, TokenHash, TokenId,
};
use swath_application::{
    Access, AccessError, AssignmentSpec, CreationLimits, CreationRate, EndpointPatch, EndpointSpec,
    ExportError, Exports, FleetDirectory, FleetError, HistoryExport, Ingest, IssueError,
    MowerChanges, MowerReads, MowerReadsError, MowerSettings, MowerSettingsError, Projections,
    Revocations, SessionRange, Sessions, SessionsError, SiteChanges, TokenAdmin, TokenRequest,
    Watcher, Webhooks, WebhooksError,
};
use swath_domain::valid::{Label, TextRule};
use swath_domain::watch::{EventKind, GeoPolygon};
use swath_domain::webhook::{WebhookId, WebhookKind};
use swath_domain::{AccountId, MowerId, Principal, Priority, Scope, SiteId};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use uuid::Uuid;

/// Makes fresh stores behind every port.
#[async_trait]
pub trait CrossTenantFactory: Send + Sync {
    async fn fresh(&self) -> Stores;
}

/// The memory adapters.
pub struct MemoryCrossTenant;

#[async_trait]
impl CrossTenantFactory for MemoryCrossTenant {
    async fn fresh(&self) -> Stores {
        Stores::memory(MemoryStore::new(MemoryStoreSettings::default()))
    }
}

/// A fresh PostgreSQL database.
pub struct PostgresCrossTenant(pub PostgresFactory);

#[async_trait]
impl CrossTenantFactory for PostgresCrossTenant {
    async fn fresh(&self) -> Stores {
        Stores::postgres(self.0.fresh_store().await)
    }
}

/// One scenario per use case method that takes a `&Principal` and an id, named
/// `Type::method` (the type whose `impl` holds it).
pub const METHODS: &[&str] = &[
    "FleetDirectory::account",
    "FleetDirectory::site",
    "FleetDirectory::update_site",
    "FleetDirectory::delete_site",
    "FleetDirectory::update_mower",
    "FleetDirectory::delete_mower",
    "TokenAdmin::tokens",
    "TokenAdmin::visible",
    "TokenAdmin::revoke",
    "MowerSettings::put_geofence",
    "MowerSettings::delete_geofence",
    "MowerSettings::create_zone",
    "MowerSettings::update_zone",
    "MowerSettings::delete_zone",
    "MowerSettings::reset_blade",
    "MowerSettings::assignments",
    "MowerSettings::create_assignment",
    "MowerSettings::update_assignment",
    "MowerSettings::delete_assignment",
    "Exports::start",
    "Projections::map",
    "Projections::site_cards",
    "MowerReads::latest",
    "MowerReads::health",
    "MowerReads::zones",
    "MowerReads::geofence",
    "MowerReads::events",
    "MowerReads::open_alerts",
    "MowerReads::busy",
    "MowerReads::view",
    "MowerReads::history",
    "MowerReads::track",
    "MowerReads::days",
    "Sessions::of_mower",
    "Sessions::open",
    "Webhooks::list",
    "Webhooks::get",
    "Webhooks::update",
    "Webhooks::delete",
    "Webhooks::rotate_secret",
    "Webhooks::deliveries",
    "Webhooks::retry",
    "Webhooks::test",
];

/// Account A (sites North and South, a mower on each; South's mower with telemetry, a
/// geofence, a zone, an assignment, an open alert and its event; a token and a webhook limited
/// to South) and account B; the use cases over one store.
pub struct World {
    fleet: FleetDirectory,
    tokens: TokenAdmin,
    settings: MowerSettings,
    data: MowerReads,
    webhooks: Webhooks,
    exports: Exports,
    sessions: Sessions,
    views: Projections,
    south: SiteId,
    south_mower: MowerId,
    account_a: AccountId,
    zone: Uuid,
    assignment: Uuid,
    south_token: TokenId,
    webhook: WebhookId,
    /// A's admin with every scope and site.
    pub admin: Principal,
    /// B's admin with every scope and site: another account.
    pub other_account: Principal,
    /// A's admin limited to North: the same account, another site.
    pub north_only: Principal,
}

fn label(text: &str, rule: TextRule) -> Label {
    Label::new("name", text, rule).expect("a valid label")
}

fn square() -> GeoPolygon {
    GeoPolygon::from_geojson(&json!({
        "type": "Polygon",
        "coordinates": [[[13.0, 52.0], [13.01, 52.0], [13.01, 52.01], [13.0, 52.01], [13.0, 52.0]]]
    }))
    .expect("a valid polygon")
}

fn spec() -> AssignmentSpec {
    AssignmentSpec {
        operator: label("Robin", TextRule::OPERATOR),
        priority: Priority::High,
        active: true,
    }
}

fn window() -> TimeWindow {
    TimeWindow {
        from: None,
        to: None,
        after: None,
        limit: 100,
    }
}

/// A state report of `mower` of `account`, `minutes` after the trace clock's start.
fn report(mower: MowerId, account: AccountId, minutes: i64, activity: &str) -> Value {
    let at = ingest_clock() - Duration::hours(1) + Duration::minutes(minutes);
    json!({
        "mower_id": mower,
        "account_id": account,
        "observed_at": at.to_rfc3339(),
        "activity": activity,
        "blade_on": activity == "mowing",
        "battery_percent": 80,
        "error_code": (activity == "error").then_some("E_STUCK"),
        "position": {"lat": 52.005, "lon": 13.005, "accuracy_m": 1.0},
    })
}

impl World {
    pub async fn new(factory: &dyn CrossTenantFactory) -> World {
        let stores = factory.fresh().await;
        let directory = stores.admin.clone();
        let (account_a, account_b) = (AccountId::new(), AccountId::new());
        add_account(&*directory, account_a, "A").await;
        add_account(&*directory, account_b, "B").await;
        let (north, south, b_site) = (SiteId::new(), SiteId::new(), SiteId::new());
        let berlin = chrono_tz::Europe::Berlin;
        add_site(&*directory, site(north, account_a, "North", berlin, 0)).await;
        add_site(&*directory, site(south, account_a, "South", berlin, 1)).await;
        add_site(&*directory, site(b_site, account_b, "B", berlin, 0)).await;
        let (north_mower, south_mower) = (MowerId::new(), MowerId::new());
        add_mower(&*directory, mower(north_mower, account_a, north, "N", 0)).await;
        add_mower(&*directory, mower(south_mower, account_a, south, "S", 1)).await;

        let clock = Arc::new(ManualClock::new(ingest_clock()));
        let bus: Arc<dyn EventBus> = Arc::new(RecordingBus::default());
        let access = Access::new(
            directory.clone(),
            stores.tokens.clone(),
            clock.clone(),
            Revocations::default(),
        );
        let rate = CreationRate::new(CreationLimits::default(), clock.clone());
        let tokens = TokenAdmin::new(access.clone(), stores.tokens.clone(), rate.clone());
        let fleet = FleetDirectory::new(
            access.clone(),
            directory.clone(),
            stores.telemetry.clone(),
            tokens.clone(),
            rate,
        );
        let ports = stores.notifications.clone();
        let settings = MowerSettings::new(access.clone(), bus.clone(), clock.clone())
            .with_notifications(Some(ports.clone()))
            .with_assignments(Some(stores.assignments.clone()));
        let data = MowerReads::new(
            access.clone(),
            directory.clone(),
            stores.telemetry.clone(),
            None,
        )
        .with_notifications(ports.clone());
        let exports = Exports::new(access.clone(), stores.telemetry.clone());
        let sessions = Sessions::new(access.clone(), stores.sessions.clone());
        let views = Projections::new(stores.projections.clone());
        let webhooks = Webhooks::new(stores.webhooks.clone(), access, clock.clone(), false);

        // South's mower: telemetry, an error (its event and open alert), a geofence, a zone, an
        // assignment.
        let ingest = Ingest::new(stores.telemetry.clone(), bus.clone(), clock.clone());
        let watcher = Watcher::new(ports.watch.clone(), bus, clock, chrono::Duration::hours(1));
        let states = [
            report(south_mower, account_a, 0, "docked"),
            report(south_mower, account_a, 1, "mowing"),
            report(south_mower, account_a, 2, "error"),
        ];
        ingest_json(&ingest, &states).await;
        let batch: Vec<_> = states
            .iter()
            .map(|r| watcher.parse(r.to_string().as_bytes()))
            .collect();
        watcher.on_states(&batch).await.expect("the watcher stores");

        let admin = Principal {
            account_id: account_a,
            scopes: vec![Scope::Read, Scope::Write, Scope::Admin],
            sites: None,
        };
        settings
            .put_geofence(&admin, south_mower, square())
            .await
            .expect("a geofence");
        let zone = settings
            .create_zone(
                &admin,
                south_mower,
                label("Bed", TextRule::ZONE_NAME),
                square(),
            )
            .await
            .expect("a zone")
            .id;
        let assignment = settings
            .create_assignment(&admin, south_mower, spec())
            .await
            .expect("an assignment")
            .id;
        let south_token = tokens
            .issue(
                &admin,
                TokenRequest {
                    name: label("south", TextRule::TOKEN_NAME),
                    scopes: vec![Scope::Read],
                    sites: Some(vec![south]),
                },
            )
            .await
            .expect("a token")
            .id;
        let endpoint = EndpointSpec {
            url: "https://hooks.example.com/swath".to_owned(),
            kinds: vec![WebhookKind::Event(EventKind::ErrorRaised)],
            mowers: Some(vec![south_mower]),
            sites: Some(vec![south]),
            enabled: true,
        };
        let webhook = webhooks
            .create(&admin, endpoint)
            .await
            .expect("a webhook")
            .0
            .id;
        World {
            fleet,
            tokens,
            settings,
            data,
            webhooks,
            exports,
            sessions,
            views,
            south,
            south_mower,
            account_a,
            zone,
            assignment,
            south_token,
            webhook,
            other_account: Principal {
                account_id: account_b,
                ..admin.clone()
            },
            north_only: Principal {
                sites: Some(vec![north]),
                ..admin.clone()
            },
            admin,
        }
    }

    /// Whether `method`, asked by `p` about A's South (its site, its mower, the token and the
    /// webhook limited to it), answers as for an unknown id.
    pub async fn refuses(&self, method: &str, p: &Principal) -> bool {
        let (m, s) = (self.south_mower, self.south);
        let (fleet, set, data, hooks) = (&self.fleet, &self.settings, &self.data, &self.webhooks);
        let fleet_nf = |r: Result<(), FleetError>| {
            matches!(r, Err(FleetError::Access(AccessError::NotVisible(_))))
        };
        let set_nf = |r: Result<(), MowerSettingsError>| {
            matches!(
                r,
                Err(MowerSettingsError::Access(AccessError::NotVisible(_)))
            )
        };
        let data_nf = |r: Result<(), MowerReadsError>| {
            matches!(r, Err(MowerReadsError::Access(AccessError::NotVisible(_))))
        };
        let hook_nf = |r: Result<(), WebhooksError>| matches!(r, Err(WebhooksError::NotFound));
        let sessions_nf =
            |r: Result<(), SessionsError>| matches!(r, Err(SessionsError::NotFound(_)));
        let patch = EndpointPatch {
            enabled: Some(false),
            ..EndpointPatch::default()
        };
        // Within the longest range a read may ask for, around the states.
        let day = (ingest_clock() - Duration::days(30)).date_naive();
        let far = (ingest_clock() + Duration::days(1)).date_naive();
        match method {
            // Only an account's own is visible; a site-limited token sees its own account, so
            // both are asked for A's id with B's principal standing in (documented: `404`).
            "FleetDirectory::account" => {
                let asked = if p.account_id == self.account_a {
                    AccountId::new()
                } else {
                    self.account_a
                };
                matches!(fleet.account(p, asked).await, Ok(None))
            }
            "FleetDirectory::site" => fleet_nf(fleet.site(p, s).await.map(drop)),
            "FleetDirectory::update_site" => {
                let changes = SiteChanges {
                    display_order: Some(7),
                    ..SiteChanges::default()
                };
                fleet_nf(fleet.update_site(p, s, changes).await.map(drop))
            }
            "FleetDirectory::delete_site" => fleet_nf(fleet.delete_site(p, s).await.map(drop)),
            "FleetDirectory::update_mower" => {
                let changes = MowerChanges {
                    display_order: Some(7),
                    ..MowerChanges::default()
                };
                fleet_nf(fleet.update_mower(p, m, changes).await.map(drop))
            }
            "FleetDirectory::delete_mower" => fleet_nf(fleet.delete_mower(p, m).await.map(drop)),
            "TokenAdmin::visible" => {
                matches!(self.tokens.visible(p, self.south_token).await, Ok(None))
            }
            "TokenAdmin::revoke" => {
                matches!(self.tokens.revoke(p, self.south_token).await, Ok(false))
            }
            "MowerSettings::put_geofence" => {
                set_nf(set.put_geofence(p, m, square()).await.map(drop))
            }
            "MowerSettings::delete_geofence" => set_nf(set.delete_geofence(p, m).await),
            "MowerSettings::create_zone" => {
                let name = label("Other", TextRule::ZONE_NAME);
                set_nf(set.create_zone(p, m, name, square()).await.map(drop))
            }
            "MowerSettings::update_zone" => {
                let name = label("Other", TextRule::ZONE_NAME);
                set_nf(
                    set.update_zone(p, m, self.zone, name, square())
                        .await
                        .map(drop),
                )
            }
            "MowerSettings::delete_zone" => {
                set_nf(set.delete_zone(p, m, self.zone).await.map(drop))
            }
            "MowerSettings::reset_blade" => set_nf(set.reset_blade(p, m).await),
            "MowerSettings::assignments" => set_nf(set.assignments(p, m).await.map(drop)),
            "MowerSettings::create_assignment" => {
                set_nf(set.create_assignment(p, m, spec()).await.map(drop))
            }
            "MowerSettings::update_assignment" => set_nf(
                set.update_assignment(p, m, self.assignment, spec())
                    .await
                    .map(drop),
            ),
            "MowerSettings::delete_assignment" => {
                set_nf(set.delete_assignment(p, m, self.assignment).await.map(drop))
            }
            "MowerReads::latest" => data_nf(data.latest(p, m).await.map(drop)),
            "MowerReads::health" => data_nf(data.health(p, m).await.map(drop)),
            "MowerReads::zones" => data_nf(data.zones(p, m).await.map(drop)),
            "MowerReads::geofence" => data_nf(data.geofence(p, m).await.map(drop)),
            // A feed filtered by an invisible mower is an empty page, like an unknown one's.
            "MowerReads::events" => {
                let query = EventQuery {
                    account_id: p.account_id,
                    mowers: None,
                    kind: None,
                    before: None,
                    limit: 10,
                };
                matches!(data.events(p, Some(m), query).await, Ok(e) if e.is_empty())
            }
            "MowerReads::open_alerts" => {
                let query = AlertQuery {
                    account_id: p.account_id,
                    mowers: None,
                    kind: None,
                    after: None,
                    limit: 10,
                };
                matches!(data.open_alerts(p, Some(m), query).await, Ok(a) if a.is_empty())
            }
            "MowerReads::busy" => data_nf(data.busy(p, m).await.map(drop)),
            // An export of an invisible site is refused like an unknown site.
            "Exports::start" => {
                let (from, to) = (ingest_clock() - Duration::days(1), ingest_clock());
                let source = HistoryExport::new(Some(s), from, to).expect("a window");
                let started = self
                    .exports
                    .start(p, TokenHash(String::new()), Some(s), source)
                    .await;
                matches!(
                    started,
                    Err(ExportError::Access(AccessError::NotVisible(_)))
                )
            }
            // The map of an invisible site shows no site; its card is left out.
            "Projections::map" => {
                matches!(self.views.map(p, Some(s)).await, Ok(m) if m.site.is_none())
            }
            "Projections::site_cards" => {
                matches!(self.views.site_cards(p, &[s]).await, Ok(c) if c.is_empty())
            }
            // Lists (whatever their cursor) hold nothing of South.
            "TokenAdmin::tokens" => matches!(
                self.tokens.tokens(p, None, 100).await,
                Ok(t) if t.iter().all(|t| t.id != self.south_token)
            ),
            "Webhooks::list" => matches!(
                hooks.list(p, None, 100).await,
                Ok(l) if l.iter().all(|e| e.id != self.webhook)
            ),
            "MowerReads::view" => data_nf(data.view(p, m).await.map(drop)),
            "MowerReads::history" => data_nf(data.history(p, m, &window()).await.map(drop)),
            "Sessions::of_mower" => {
                let range = SessionRange::new(None, None, None, 10).expect("a valid range");
                sessions_nf(self.sessions.of_mower(p, m, &range).await.map(drop))
            }
            "Sessions::open" => sessions_nf(self.sessions.open(p, m).await.map(drop)),
            "MowerReads::track" => data_nf(data.track(p, m, &window()).await.map(drop)),
            "MowerReads::days" => data_nf(data.days(p, m, day, far).await.map(drop)),
            "Webhooks::get" => hook_nf(hooks.get(p, self.webhook).await.map(drop)),
            "Webhooks::update" => hook_nf(hooks.update(p, self.webhook, patch).await.map(drop)),
            "Webhooks::delete" => hook_nf(hooks.delete(p, self.webhook).await),
            "Webhooks::rotate_secret" => {
                hook_nf(hooks.rotate_secret(p, self.webhook).await.map(drop))
            }
            "Webhooks::deliveries" => {
                hook_nf(hooks.deliveries(p, self.webhook, None, 10).await.map(drop))
            }
            "Webhooks::retry" => {
                let delivery = Uuid::now_v7();
                hook_nf(hooks.retry(p, self.webhook, delivery).await.map(drop))
            }
            "Webhooks::test" => hook_nf(hooks.test(p, self.webhook).await.map(drop)),
            other => panic!("no scenario for {other}"),
        }
    }

    /// The methods that answered `p` something else than an unknown id's answer.
    pub async fn not_refused(&self, p: &Principal) -> Vec<&'static str> {
        let mut answered = Vec::new();
        for method in METHODS {
            if !self.refuses(method, p).await {
                answered.push(*method);
            }
        }
        answered
    }

    /// Whether A's South data is all still there, as its admin sees it.
    async fn intact(&self) -> bool {
        let a = &self.admin;
        let data = &self.data;
        let zones = data.zones(a, self.south_mower).await.expect("zones").zones;
        let assignments = self.settings.assignments(a, self.south_mower).await;
        data.geofence(a, self.south_mower)
            .await
            .expect("geofence")
            .is_some()
            && zones.len() == 1
            && zones[0].name == "Bed"
            && assignments.expect("assignments").len() == 1
            && self
                .tokens
                .visible(a, self.south_token)
                .await
                .expect("token")
                .is_some()
            && self
                .webhooks
                .get(a, self.webhook)
                .await
                .expect("webhook")
                .enabled
            && self
                .fleet
                .site(a, self.south)
                .await
                .expect("site")
                .display_order
                == 1
            && data
                .latest(a, self.south_mower)
                .await
                .expect("latest")
                .is_some()
    }
}

/// Another account's admin gets an unknown id's answer from every method, and changes nothing.
pub async fn another_account_sees_nothing_of_an_id(factory: &dyn CrossTenantFactory) {
    let w = World::new(factory).await;
    assert!(w.intact().await, "the world is seeded");
    assert_eq!(w.not_refused(&w.other_account).await, Vec::<&str>::new());
    assert!(w.intact().await, "nothing of account A changed");
}

/// A token of the same account limited to another site gets an unknown id's answer from every
/// method, and changes nothing.
pub async fn a_site_limited_token_sees_nothing_of_another_site(factory: &dyn CrossTenantFactory) {
    let w = World::new(factory).await;
    assert_eq!(w.not_refused(&w.north_only).await, Vec::<&str>::new());
    assert!(w.intact().await, "nothing of site South changed");
}

/// The same world asked by A's own unlimited admin: every read answers (so that the refusals
/// above are refusals of visibility, not of a scenario that could never succeed).
pub async fn the_owner_is_answered(factory: &dyn CrossTenantFactory) {
    let w = World::new(factory).await;
    let reads = [
        "FleetDirectory::site",
        "TokenAdmin::tokens",
        "TokenAdmin::visible",
        "MowerSettings::assignments",
        "MowerReads::latest",
        "MowerReads::health",
        "MowerReads::zones",
        "MowerReads::geofence",
        "MowerReads::view",
        "MowerReads::history",
        "MowerReads::track",
        "MowerReads::days",
        "Sessions::of_mower",
        "Sessions::open",
        "Webhooks::list",
        "Webhooks::get",
        "Webhooks::deliveries",
    ];
    for method in reads {
        assert!(
            !w.refuses(method, &w.admin).await,
            "{method} answers its owner"
        );
    }
    // An answer, not another refusal (a range refused would pass the line above).
    let (from, to) = (ingest_clock() - Duration::days(30), ingest_clock());
    let days = w
        .data
        .days(&w.admin, w.south_mower, from.date_naive(), to.date_naive())
        .await;
    assert!(
        days.is_ok_and(|d| !d.days.is_empty()),
        "the owner's days are answered"
    );
    // The feeds, the export, the map and the lists answer something for the owner too.
    let feeds = ["MowerReads::events", "MowerReads::open_alerts"];
    for method in feeds {
        assert!(
            !w.refuses(method, &w.admin).await,
            "{method} is not empty for its owner"
        );
    }
}

/// `TokenAdmin::issue` refuses a token its issuer does not cover: more sites, or more scopes,
/// than its own, and sites it cannot see.
pub async fn a_token_is_issued_only_within_its_issuers_powers(factory: &dyn CrossTenantFactory) {
    let w = World::new(factory).await;
    let ask = |scopes: Vec<Scope>, sites: Option<Vec<SiteId>>| TokenRequest {
        name: label("t", TextRule::TOKEN_NAME),
        scopes,
        sites,
    };
    let reader = Principal {
        scopes: vec![Scope::Read, Scope::Admin],
        ..w.north_only.clone()
    };
    // Every site (none named) from a North-only issuer.
    let unlimited = w
        .tokens
        .issue(&w.north_only, ask(vec![Scope::Read], None))
        .await;
    assert!(
        matches!(unlimited, Err(IssueError::NotCovered)),
        "{unlimited:?}"
    );
    // A scope the issuer lacks.
    let north = w.north_only.sites.clone();
    let write = w
        .tokens
        .issue(&reader, ask(vec![Scope::Write], north.clone()))
        .await;
    assert!(matches!(write, Err(IssueError::NotCovered)), "{write:?}");
    // A site the issuer cannot see, and another account's.
    let south = w
        .tokens
        .issue(&w.north_only, ask(vec![Scope::Read], Some(vec![w.south])))
        .await;
    assert!(matches!(south, Err(IssueError::Invalid(_))), "{south:?}");
    let foreign = w
        .tokens
        .issue(
            &w.other_account,
            ask(vec![Scope::Read], Some(vec![w.south])),
        )
        .await;
    assert!(
        matches!(foreign, Err(IssueError::Invalid(_))),
        "{foreign:?}"
    );
    // Within its powers: issued.
    let within = w
        .tokens
        .issue(&w.north_only, ask(vec![Scope::Read], north))
        .await;
    assert!(within.is_ok(), "{within:?}");
}
