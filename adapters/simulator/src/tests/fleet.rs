use super::*;

#[tokio::test]
async fn the_demo_fleet_is_written_to_the_directory() {
    let directory = VecDirectory::default();
    let settings = SimulatorSettings::default();
    let fleet = seed_demo_fleet(&directory, &settings).await.unwrap();

    assert_eq!(fleet.account.name, "Demo Gardens");
    assert_eq!(fleet.account.id, DEMO_ACCOUNT_ID);
    assert_eq!(
        directory.account(fleet.account.id).await.unwrap(),
        Some(fleet.account.clone())
    );
    assert_eq!(
        directory.sites(fleet.account.id).await.unwrap(),
        fleet.sites
    );
    assert_eq!(
        directory.mowers(fleet.account.id).await.unwrap(),
        fleet.mowers
    );

    let zones: HashSet<Tz> = fleet.sites.iter().map(|s| s.time_zone).collect();
    assert_eq!(fleet.sites.len(), 3);
    assert_eq!(zones.len(), 3, "three time zones");

    assert_eq!(fleet.mowers.len(), 20);
    assert_eq!(fleet.mowers[0].name, "Mower 01");
    assert_eq!(fleet.mowers[19].name, "Mower 20");
    let serials: HashSet<&str> = fleet.mowers.iter().map(|m| m.serial.as_str()).collect();
    assert_eq!(serials.len(), 20, "serials are unique");
    for site in &fleet.sites {
        let count = fleet.mowers.iter().filter(|m| m.site_id == site.id).count();
        assert!((6..=7).contains(&count), "{} has {count} mowers", site.name);
    }
    for mower in &fleet.mowers {
        assert_eq!(mower.id.0.get_version_num(), 7);
        assert_eq!(mower.account_id, fleet.account.id);
        assert_eq!(mower.blade_threshold_ms, DEFAULT_BLADE_THRESHOLD_MS);
        assert!(!mower.model.is_empty());
    }

    // Seeding again (a restart on a persistent store) reuses the fleet: the same rows, more
    // mowers when more are asked for, fewer simulated when fewer are.
    let again = seed_demo_fleet(&directory, &settings).await.unwrap();
    assert_eq!(again, fleet);
    let more = SimulatorSettings {
        mowers: 22,
        ..SimulatorSettings::default()
    };
    let grown = seed_demo_fleet(&directory, &more).await.unwrap();
    assert_eq!(grown.mowers.len(), 22);
    assert_eq!(grown.mowers[..20], fleet.mowers[..]);
    assert_eq!(directory.mowers(fleet.account.id).await.unwrap().len(), 22);
    let none = SimulatorSettings {
        mowers: 0,
        ..SimulatorSettings::default()
    };
    let empty = seed_demo_fleet(&directory, &none).await.unwrap();
    assert!(empty.mowers.is_empty());
    assert_eq!(directory.mowers(fleet.account.id).await.unwrap().len(), 22);
}

#[tokio::test]
async fn a_replay_reports_every_mower_in_time_order_and_the_same_seed_replays_alike() {
    let settings = SimulatorSettings {
        mowers: 4,
        seed: Some(3),
        ..SimulatorSettings::default()
    };
    let fleet = seed_demo_fleet(&VecDirectory::default(), &settings)
        .await
        .unwrap();
    let to = start() + chrono::Duration::minutes(10);
    let mut reports = Vec::new();
    replay(&fleet, &settings, start(), to, |r| reports.push(r.clone()));
    // At least one report a second per mower (a period of 1 s), changes on top.
    assert!(reports.len() >= 4 * 600, "{} reports", reports.len());
    assert!(reports
        .windows(2)
        .all(|w| w[0].observed_at <= w[1].observed_at));
    assert!(reports
        .iter()
        .all(|r| r.observed_at >= start() && r.observed_at < to));
    let mowers: HashSet<MowerId> = reports.iter().map(|r| r.mower_id).collect();
    assert_eq!(mowers, fleet.mowers.iter().map(|m| m.id).collect());
    assert!(reports.iter().all(|r| r.clone().validate(to).is_ok()));
    let mut again = Vec::new();
    replay(&fleet, &settings, start(), to, |r| again.push(r.clone()));
    assert_eq!(again, reports);
}

#[tokio::test]
async fn a_seed_gives_the_same_ids_on_every_run_and_another_seed_others() {
    let seeded = |seed| SimulatorSettings {
        seed: Some(seed),
        ..SimulatorSettings::default()
    };
    let ids = |fleet: &DemoFleet| {
        let sites: Vec<_> = fleet.sites.iter().map(|s| s.id.0).collect();
        let mowers: Vec<_> = fleet.mowers.iter().map(|m| m.id.0).collect();
        (sites, mowers)
    };
    // Two runs: two empty directories, as two starts of the memory store.
    let first = seed_demo_fleet(&VecDirectory::default(), &seeded(7))
        .await
        .unwrap();
    let second = seed_demo_fleet(&VecDirectory::default(), &seeded(7))
        .await
        .unwrap();
    assert_eq!(ids(&first), ids(&second));
    assert_eq!(first, second, "names, sites and serials too");
    let (sites, mowers) = ids(&first);
    let distinct: HashSet<_> = sites.iter().chain(&mowers).collect();
    assert_eq!(distinct.len(), 3 + 20, "no id is repeated");
    assert!(mowers.iter().all(|id| id.get_version_num() == 8));

    let other = seed_demo_fleet(&VecDirectory::default(), &seeded(8))
        .await
        .unwrap();
    assert!(ids(&other).1.iter().all(|id| !mowers.contains(id)));
    // Without a seed, fresh v7 ids every run.
    let unseeded = seed_demo_fleet(&VecDirectory::default(), &SimulatorSettings::default())
        .await
        .unwrap();
    assert!(ids(&unseeded).1.iter().all(|id| !mowers.contains(id)));
}

#[tokio::test]
async fn each_lawn_lies_near_its_site_and_apart_from_the_others() {
    use geo::Intersects;
    let fleet = fleet(20).await;
    let settings = SimulatorSettings {
        seed: Some(5),
        ..SimulatorSettings::default()
    };
    let mowers = build_mowers(&fleet, &settings);
    let again = build_mowers(&fleet, &settings);
    assert_eq!(mowers.len(), 20);
    for (i, (sim, mower)) in mowers.iter().zip(&fleet.mowers).enumerate() {
        assert_eq!(sim.mower_id(), mower.id);
        assert_eq!(sim.lawn(), again[i].lawn(), "the same seed, the same lawns");
        let site = fleet.sites.iter().find(|s| s.id == mower.site_id).unwrap();
        let demo = DEMO_SITES.iter().find(|d| d.name == site.name).unwrap();
        let (lat, lon) = sim.lawn().dock_lat_lon();
        let from_site = Haversine::distance(Point::new(demo.lon, demo.lat), Point::new(lon, lat));
        assert!(
            from_site < 500.0,
            "{} is {from_site} m from its site",
            mower.name
        );
        assert!(
            sim.lawn().polygon().contains(&Point::new(lon, lat)),
            "the dock is on the lawn"
        );
        for other in &mowers[i + 1..] {
            assert!(!sim.lawn().polygon().intersects(&other.lawn().polygon()));
        }
    }
}
