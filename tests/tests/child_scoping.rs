//! Store-level scoping of child resources (zones, assignments, geofences), on PostgreSQL when
//! `SWATH_TEST_DATABASE_URL` is set, and on the memory stores with the same scenarios.
//!
//! The API checks that the mower of a path belongs to the token's account, then hands the store
//! the mower id and the child's id (docs/decisions.md 24, 27). A child resource is therefore only
//! as isolated as the store's `WHERE`: updating or deleting B's zone through A's mower (or A's
//! assignment through A's other mower, or B's assignment under A's account) must change nothing
//! and answer "none", exactly like an unknown id. The HTTP isolation sweep (swath/tests/isolation.rs)
//! runs on the memory store only; these run the store itself. Each refusal is paired with the
//! same call through the right parent, which must succeed, so a store that ignored every call
//! could not pass.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use std::sync::Arc;
use swath_application::ports::{Assignments, Directory, GeofenceStore, ZoneStore};
use swath_domain::watch::zones::Zone;
use swath_domain::watch::{GeoPolygon, Geofence};
use swath_domain::{AccountId, Assignment, Mower, MowerId, Priority, SiteId};
use swath_memory::{MemoryProjections, MemoryStore, MemoryStoreSettings};
use swath_tests::postgres::{test_database_url, PostgresFactory};
use swath_tests::support::{add_account, add_mower, add_site, mower, site};
use uuid::Uuid;

/// The ports of one store.
struct Ports {
    directory: Arc<dyn Directory>,
    zones: Arc<dyn ZoneStore>,
    geofences: Arc<dyn GeofenceStore>,
    assignments: Arc<dyn Assignments>,
}

/// Two tenants: A with mowers `a1` and `a2`, B with mower `b`.
struct Tenants {
    a: AccountId,
    b: AccountId,
    a1: MowerId,
    a2: MowerId,
    b1: MowerId,
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap() + Duration::seconds(seconds)
}

/// A rectangle from 13.4 E 52.5 N to `east`, `north`; literal coordinates, which every store
/// gives back as they were (a sum such as `13.4 + 2e-3` may come back rounded from `jsonb`).
fn square(east: f64, north: f64) -> GeoPolygon {
    GeoPolygon::from_geojson(&json!({
        "type": "Polygon",
        "coordinates": [[[13.4, 52.5], [east, 52.5], [east, north], [13.4, north], [13.4, 52.5]]]
    }))
    .unwrap()
}

async fn tenants(p: &Ports) -> Tenants {
    let mut made = Vec::new();
    for (name, mowers) in [("A", 2), ("B", 1)] {
        let account = AccountId::new();
        let directory = p.directory.as_ref();
        add_account(directory, account, name).await;
        let site_id = SiteId::new();
        let berlin = chrono_tz::Europe::Berlin;
        add_site(
            directory,
            site(site_id, account, &format!("{name} site"), berlin, 0),
        )
        .await;
        for i in 0..mowers {
            let id = MowerId::new();
            let mower = Mower {
                serial: format!("SN-{name}{i}"),
                ..mower(id, account, site_id, format!("{name}{i}"), i)
            };
            add_mower(directory, mower).await;
            made.push((account, id));
        }
    }
    Tenants {
        a: made[0].0,
        b: made[2].0,
        a1: made[0].1,
        a2: made[1].1,
        b1: made[2].1,
    }
}

fn zone(id: Uuid, t: &Tenants, mower: MowerId, name: &str, corner: (f64, f64)) -> Zone {
    let account = if mower == t.b1 { t.b } else { t.a };
    Zone {
        id,
        mower_id: mower,
        account_id: account,
        name: name.into(),
        polygon: square(corner.0, corner.1),
        created_at: at(0),
        updated_at: at(0),
    }
}

/// A zone is changed or deleted only through its own mower: another tenant's mower, or another
/// mower of the same tenant, answers `false` and leaves it as it was.
async fn zones_are_scoped_by_their_mower(p: &Ports) {
    let t = tenants(p).await;
    let zb = Uuid::now_v7();
    let za2 = Uuid::now_v7();
    p.zones
        .create_zone(zone(zb, &t, t.b1, "B's zone", (13.401, 52.501)))
        .await
        .unwrap();
    p.zones
        .create_zone(zone(za2, &t, t.a2, "A2's zone", (13.401, 52.501)))
        .await
        .unwrap();
    let before_b = p.zones.zones(t.b1).await.unwrap();
    let before_a2 = p.zones.zones(t.a2).await.unwrap();
    assert_eq!(before_b.len(), 1);
    assert!(p.zones.zones(t.a1).await.unwrap().is_empty());

    for (zone_id, owner) in [(zb, "B's mower"), (za2, "A's other mower")] {
        let mut through_a1 = zone(zone_id, &t, t.a1, "renamed", (13.402, 52.502));
        through_a1.updated_at = at(60);
        assert!(
            !p.zones.update_zone(through_a1).await.unwrap(),
            "a zone of {owner} was updated through A's mower a1"
        );
        assert!(
            !p.zones.delete_zone(t.a1, zone_id).await.unwrap(),
            "a zone of {owner} was deleted through A's mower a1"
        );
    }
    assert_eq!(p.zones.zones(t.b1).await.unwrap(), before_b, "B's zone");
    assert_eq!(p.zones.zones(t.a2).await.unwrap(), before_a2, "a2's zone");
    assert!(p.zones.zones(t.a1).await.unwrap().is_empty());

    // Through its own mower the same calls work.
    let mut renamed = zone(zb, &t, t.b1, "renamed", (13.402, 52.502));
    renamed.updated_at = at(60);
    assert!(p.zones.update_zone(renamed.clone()).await.unwrap());
    assert_eq!(p.zones.zones(t.b1).await.unwrap(), [renamed]);
    assert!(p.zones.delete_zone(t.b1, zb).await.unwrap());
    assert!(p.zones.zones(t.b1).await.unwrap().is_empty());
    assert_eq!(p.zones.zones(t.a2).await.unwrap(), before_a2, "a2's zone");
}

fn assignment(id: Uuid, account: AccountId, mower: MowerId, operator: &str) -> Assignment {
    Assignment {
        id,
        mower_id: mower,
        account_id: account,
        operator: operator.into(),
        priority: Priority::Normal,
        active: true,
        updated_at: at(0),
    }
}

/// An assignment is changed or deleted only with its own id, mower *and* account: B's through
/// A's mower, B's under A's account through B's mower, and a2's through a1 all answer `false`
/// and change nothing.
async fn assignments_are_scoped_by_mower_and_account(p: &Ports) {
    let t = tenants(p).await;
    let of_b = Uuid::now_v7();
    let of_a2 = Uuid::now_v7();
    p.assignments
        .create_assignment(assignment(of_b, t.b, t.b1, "B's operator"))
        .await
        .unwrap();
    p.assignments
        .create_assignment(assignment(of_a2, t.a, t.a2, "A2's operator"))
        .await
        .unwrap();
    let before_b = p.assignments.assignments(t.b, t.b1).await.unwrap();
    let before_a2 = p.assignments.assignments(t.a, t.a2).await.unwrap();
    assert_eq!(before_b.len(), 1);

    let wrong = [
        (of_b, t.a, t.a1, "B's, through A's mower"),
        (of_b, t.a, t.b1, "B's, under A's account"),
        (of_b, t.b, t.a1, "B's, through A's mower under B's account"),
        (of_a2, t.a, t.a1, "a2's, through a1"),
    ];
    for (id, account, mower, what) in wrong {
        let mut changed = assignment(id, account, mower, "taken over");
        changed.priority = Priority::Critical;
        changed.updated_at = at(60);
        assert!(
            !p.assignments.update_assignment(changed).await.unwrap(),
            "updated {what}"
        );
        assert!(
            !p.assignments
                .delete_assignment(account, mower, id)
                .await
                .unwrap(),
            "deleted {what}"
        );
    }
    assert_eq!(
        p.assignments.assignments(t.b, t.b1).await.unwrap(),
        before_b
    );
    assert_eq!(
        p.assignments.assignments(t.a, t.a2).await.unwrap(),
        before_a2
    );
    // Nothing of B's is listed under A, on any mower.
    for mower in [t.a1, t.a2, t.b1] {
        let listed = p.assignments.assignments(t.a, mower).await.unwrap();
        assert!(listed.iter().all(|x| x.id != of_b), "{listed:?}");
    }

    // With the right id, mower and account the same calls work.
    let mut changed = assignment(of_b, t.b, t.b1, "taken over");
    changed.updated_at = at(60);
    assert!(p
        .assignments
        .update_assignment(changed.clone())
        .await
        .unwrap());
    assert_eq!(
        p.assignments.assignments(t.b, t.b1).await.unwrap(),
        [changed]
    );
    assert!(p
        .assignments
        .delete_assignment(t.b, t.b1, of_b)
        .await
        .unwrap());
    assert!(p
        .assignments
        .assignments(t.b, t.b1)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        p.assignments.assignments(t.a, t.a2).await.unwrap(),
        before_a2
    );
}

fn geofence(account: AccountId, mower: MowerId, corner: (f64, f64), seconds: i64) -> Geofence {
    Geofence {
        mower_id: mower,
        account_id: account,
        version: Uuid::now_v7(),
        polygon: square(corner.0, corner.1),
        updated_at: at(seconds),
    }
}

/// A geofence belongs to one mower: replacing or deleting another mower's (of the same tenant
/// or another) leaves it as it was, and reading one mower's never answers another's.
async fn geofences_are_scoped_by_their_mower(p: &Ports) {
    let t = tenants(p).await;
    let of_b = geofence(t.b, t.b1, (13.401, 52.501), 0);
    let of_a2 = geofence(t.a, t.a2, (13.402, 52.502), 0);
    p.geofences.put_geofence(of_b.clone()).await.unwrap();
    p.geofences.put_geofence(of_a2.clone()).await.unwrap();
    assert_eq!(p.geofences.geofence(t.a1).await.unwrap(), None);

    // a1 gets a geofence of its own, is replaced, then deleted: nobody else's changes.
    p.geofences
        .put_geofence(geofence(t.a, t.a1, (13.403, 52.503), 10))
        .await
        .unwrap();
    let replaced = geofence(t.a, t.a1, (13.404, 52.504), 20);
    p.geofences.put_geofence(replaced.clone()).await.unwrap();
    assert_eq!(p.geofences.geofence(t.a1).await.unwrap(), Some(replaced));
    assert_eq!(
        p.geofences.geofence(t.b1).await.unwrap(),
        Some(of_b.clone())
    );
    assert_eq!(
        p.geofences.geofence(t.a2).await.unwrap(),
        Some(of_a2.clone())
    );
    assert!(p.geofences.delete_geofence(t.a1).await.unwrap());
    assert!(
        !p.geofences.delete_geofence(t.a1).await.unwrap(),
        "a1 has none left; nobody else's may go in its place"
    );
    assert_eq!(p.geofences.geofence(t.a1).await.unwrap(), None);
    assert_eq!(p.geofences.geofence(t.b1).await.unwrap(), Some(of_b), "B's");
    assert_eq!(
        p.geofences.geofence(t.a2).await.unwrap(),
        Some(of_a2),
        "a2's"
    );
}

async fn postgres_ports(factory: &PostgresFactory) -> Ports {
    let store = factory.fresh_store().await;
    Ports {
        directory: Arc::new(store.clone()),
        zones: Arc::new(store.clone()),
        geofences: Arc::new(store.clone()),
        assignments: Arc::new(store),
    }
}

fn memory_ports() -> Ports {
    let store = MemoryStore::new(MemoryStoreSettings::default());
    let assignments = Arc::new(MemoryProjections::new(store.clone()));
    let store = Arc::new(store);
    Ports {
        directory: store.clone(),
        zones: store.clone(),
        geofences: store,
        assignments,
    }
}

/// One test per scenario and store, so that a break shows in each scenario it breaks.
macro_rules! on_both_stores {
    ($($scenario:ident => $postgres:ident, $memory:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(
                swath_no_postgres,
                ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL"
            )]
            async fn $postgres() {
                let factory = PostgresFactory::new(test_database_url());
                $scenario(&postgres_ports(&factory).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $memory() {
                $scenario(&memory_ports()).await;
            }
        )*
    };
}

on_both_stores! {
    zones_are_scoped_by_their_mower => zones_on_postgres, zones_on_memory;
    assignments_are_scoped_by_mower_and_account => assignments_on_postgres, assignments_on_memory;
    geofences_are_scoped_by_their_mower => geofences_on_postgres, geofences_on_memory;
}
