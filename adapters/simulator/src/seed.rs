//! The demo fleet written into the directory: one account, three sites in three time zones, and
//! as many mowers as asked for, with ids that a seed makes the same on every run.

use crate::{mix, SimulatorSettings};
use chrono_tz::Tz;
use swath_application::ports::{Directory, DirectoryError};
use swath_domain::rules::DEFAULT_BLADE_THRESHOLD_MS;
use swath_domain::{Account, AccountId, Mower, MowerId, Site, SiteId};

/// What [`seed_demo_fleet`] wrote into the directory.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoFleet {
    pub account: Account,
    pub sites: Vec<Site>,
    pub mowers: Vec<Mower>,
}

/// The name of the demo account.
pub const DEMO_ACCOUNT_NAME: &str = "Demo Gardens";

/// The id of the demo account: fixed, so that a persistent store keeps one demo fleet.
pub const DEMO_ACCOUNT_ID: AccountId = AccountId(uuid::Uuid::from_u128(
    0x0190_0000_0000_7000_8000_00de_0000_0001,
));

/// A demo site: its name, time zone and where its lawns lie.
pub(crate) struct DemoSite {
    pub(crate) name: &'static str,
    time_zone: Tz,
    pub(crate) lat: f64,
    pub(crate) lon: f64,
}

/// Three sites in three time zones, so that the day totals (W5) visibly split at different
/// instants. The coordinates are real parks, so that a map shows the lawns somewhere plausible.
pub(crate) const DEMO_SITES: [DemoSite; 3] = [
    DemoSite {
        name: "Potsdam Orangery Gardens",
        time_zone: chrono_tz::Europe::Berlin,
        lat: 52.404_5,
        lon: 13.023_0,
    },
    DemoSite {
        name: "Richmond Riverside Lawns",
        time_zone: chrono_tz::Europe::London,
        lat: 51.456_0,
        lon: -0.307_0,
    },
    DemoSite {
        name: "Brooklyn Heights Commons",
        time_zone: chrono_tz::America::New_York,
        lat: 40.696_0,
        lon: -73.997_0,
    },
];

/// Demo models and the prefix of their serial numbers.
const DEMO_MODELS: [(&str, &str); 3] = [
    ("Greenline R40", "GR40"),
    ("Greenline R60 RTK", "GR60"),
    ("Meadowbot M2", "MB2"),
];

/// Writes the demo account, its three sites and `settings.mowers` mowers (spread round-robin over
/// the sites) into `directory`, and returns what it wrote. Ids are new UUID v7s, or, with
/// `settings.seed`, UUID v8s derived from the seed, so that a seeded demo lists the same ids on
/// every run (scripts and snapshot tests can name a mower).
///
/// What the directory already holds of the demo account is kept (a restart on a persistent store
/// carries on with its fleet), so two replicas or two starts against one database never add a
/// second demo fleet.
pub async fn seed_demo_fleet(
    directory: &dyn Directory,
    settings: &SimulatorSettings,
) -> Result<DemoFleet, DirectoryError> {
    // A fixed account id: on a persistent store (PostgreSQL) a restart finds the demo fleet it
    // created before and carries on with it, instead of adding another "Demo Gardens".
    let account = Account {
        id: DEMO_ACCOUNT_ID,
        name: DEMO_ACCOUNT_NAME.to_owned(),
    };
    if directory.account(account.id).await?.is_none() {
        directory.create_account(account.clone()).await?;
    }

    let mut sites = directory.sites(account.id).await?;
    for (i, demo) in DEMO_SITES.iter().enumerate().skip(sites.len()) {
        let site = Site {
            id: SiteId(demo_id(settings.seed, DemoIdKind::Site, i)),
            account_id: account.id,
            name: demo.name.to_owned(),
            time_zone: demo.time_zone,
            display_order: i as i32 + 1,
        };
        directory.create_site(site.clone()).await?;
        sites.push(site);
    }

    let mut mowers = directory.mowers(account.id).await?;
    for i in mowers.len()..settings.mowers {
        let (model, prefix) = DEMO_MODELS[i % DEMO_MODELS.len()];
        let mower = Mower {
            id: MowerId(demo_id(settings.seed, DemoIdKind::Mower, i)),
            account_id: account.id,
            site_id: sites[i % sites.len()].id,
            name: format!("Mower {:02}", i + 1),
            model: model.to_owned(),
            serial: format!("{prefix}-{:06}", 240_001 + i),
            display_order: i32::try_from(i + 1).unwrap_or(i32::MAX),
            blade_threshold_ms: DEFAULT_BLADE_THRESHOLD_MS,
        };
        directory.create_mower(mower.clone()).await?;
        mowers.push(mower);
    }
    // A store may hold more demo mowers than asked for this time: simulate only as many.
    mowers.truncate(settings.mowers);
    Ok(DemoFleet {
        account,
        sites,
        mowers,
    })
}

/// What a demo id names; part of the derivation, so that site 0 and mower 0 differ.
#[derive(Clone, Copy)]
enum DemoIdKind {
    Site = 1,
    Mower = 2,
}

/// The id of the `index`-th demo site or mower: a new UUID v7 without a seed; with one, a UUID v8
/// whose 122 free bits come from the seed, the kind and the index (SplitMix64, as the mowers'
/// behaviour), so that the same seed gives the same ids.
fn demo_id(seed: Option<u64>, kind: DemoIdKind, index: usize) -> uuid::Uuid {
    let Some(seed) = seed else {
        return uuid::Uuid::now_v7();
    };
    let stream = mix(seed, kind as u64);
    let high = mix(stream, 2 * index as u64);
    let low = mix(stream, 2 * index as u64 + 1);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}
