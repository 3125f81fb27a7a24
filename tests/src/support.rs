//! Test support shared by every suite: a seeded directory, a store bundle built by a factory (one
//! per adapter), and a bus that records what use cases publish.

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use swath_application::ports::{BusError, Directory, PublishOnly, Publisher, TelemetryStore};
use swath_application::Ingest;
use swath_domain::{
    rules::DEFAULT_BLADE_THRESHOLD_MS, Account, AccountId, Mower, MowerId, Site, SiteId,
    StateOutcome,
};
use uuid::Uuid;

/// One adapter's store, seen through each port it implements.
#[derive(Clone)]
pub struct TestStore {
    pub directory: Arc<dyn Directory>,
    pub telemetry: Arc<dyn TelemetryStore>,
    /// The PostgreSQL store itself, for scenarios that look at the database directly.
    pub postgres: Option<swath_postgres::PostgresStore>,
}

impl TestStore {
    /// A memory store.
    pub fn memory(store: swath_memory::MemoryStore) -> Self {
        let store = Arc::new(store);
        Self {
            directory: store.clone(),
            telemetry: store,
            postgres: None,
        }
    }
}

/// Makes a fresh, empty store (for PostgreSQL: a new database).
#[async_trait]
pub trait StoreFactory: Send + Sync {
    async fn fresh(&self) -> TestStore;

    /// The history and position rows per mower the store keeps (the memory store's cap), `None`
    /// when it keeps every row (PostgreSQL): what `reads_say_where_the_kept_rows_begin` expects
    /// of this adapter.
    fn kept_per_mower(&self) -> Option<usize>;
}

/// The fleet every telemetry scenario uses: two accounts, sites in three time zones (one far from
/// UTC so that local days differ), and one mower id that is in no directory.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub account_a: AccountId,
    pub account_b: AccountId,
    /// Mowers 0 and 1 belong to account A (Berlin, Auckland), mower 2 to account B (New York).
    pub mowers: [MowerId; 3],
    pub unknown_mower: MowerId,
}

impl Fleet {
    /// Fixed ids: the same fleet in every store, so rows compare equal.
    pub fn new() -> Self {
        Self {
            account_a: AccountId(Uuid::from_u128(0xa)),
            account_b: AccountId(Uuid::from_u128(0xb)),
            mowers: [1, 2, 3].map(|n| MowerId(Uuid::from_u128(n))),
            unknown_mower: MowerId(Uuid::from_u128(0xdead)),
        }
    }

    /// The account a mower belongs to.
    pub fn account_of(&self, mower: MowerId) -> AccountId {
        if mower == self.mowers[2] {
            self.account_b
        } else {
            self.account_a
        }
    }

    /// Creates the accounts, sites and mowers in `directory`. `blade_threshold_ms` applies to
    /// every mower (scenarios lower it to see W6 happen).
    pub async fn seed(&self, directory: &dyn Directory, blade_threshold_ms: i64) {
        for (id, name) in [(self.account_a, "A"), (self.account_b, "B")] {
            directory
                .create_account(Account {
                    id,
                    name: format!("Account {name}"),
                })
                .await
                .expect("seed account");
        }
        let zones = [
            chrono_tz::Europe::Berlin,
            chrono_tz::Pacific::Auckland,
            chrono_tz::America::New_York,
        ];
        for (i, (mower, tz)) in self.mowers.iter().zip(zones).enumerate() {
            let account_id = self.account_of(*mower);
            let site_id = SiteId(Uuid::from_u128(0x5000 + i as u128));
            directory
                .create_site(Site {
                    id: site_id,
                    account_id,
                    name: format!("Site {i}"),
                    time_zone: tz,
                    display_order: i as i32,
                })
                .await
                .expect("seed site");
            directory
                .create_mower(Mower {
                    id: *mower,
                    account_id,
                    site_id,
                    name: format!("Mower {i}"),
                    model: "M1".into(),
                    serial: format!("SN{i}"),
                    display_order: 0,
                    blade_threshold_ms,
                })
                .await
                .expect("seed mower");
        }
    }
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

/// Creates one account with one site (Europe/Berlin) and `count` mowers named `M0`, `M1`, …, for
/// suites and benchmarks that need many mowers rather than the fixed [`Fleet`].
pub async fn seed_account_with_mowers(
    directory: &dyn Directory,
    count: usize,
    blade_threshold_ms: i64,
) -> (AccountId, Vec<MowerId>) {
    let account = AccountId::new();
    directory
        .create_account(Account {
            id: account,
            name: "Seeded".into(),
        })
        .await
        .expect("seed account");
    let site = SiteId::new();
    directory
        .create_site(Site {
            id: site,
            account_id: account,
            name: "Seeded site".into(),
            time_zone: chrono_tz::Europe::Berlin,
            display_order: 0,
        })
        .await
        .expect("seed site");
    let mut mowers = Vec::with_capacity(count);
    for i in 0..count {
        let id = MowerId::new();
        directory
            .create_mower(Mower {
                id,
                account_id: account,
                site_id: site,
                name: format!("M{i}"),
                model: "X".into(),
                serial: format!("S{i}"),
                display_order: i32::try_from(i).unwrap_or(i32::MAX),
                blade_threshold_ms,
            })
            .await
            .expect("seed mower");
        mowers.push(id);
    }
    (account, mowers)
}

/// The default blade threshold, for scenarios that do not care about W6.
pub const DEFAULT_THRESHOLD: i64 = DEFAULT_BLADE_THRESHOLD_MS;

/// The instant traces start at; the test clock stands a day later.
pub fn trace_start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 20, 0, 0).unwrap()
}

/// Parses and records one batch of JSON reports through `ingest`; the store must accept the batch.
pub async fn ingest_json(ingest: &Ingest, reports: &[Value]) -> Vec<StateOutcome> {
    let batch = reports
        .iter()
        .map(|r| ingest.parse(r.to_string().as_bytes()))
        .collect();
    ingest
        .record_states(batch)
        .await
        .expect("the store accepts the batch")
}

/// An event bus that only records what is published: for use cases whose subscriptions are not
/// under test. Subscribing through it is refused.
pub type RecordingBus = PublishOnly<Recording>;

/// What a [`RecordingBus`] was given.
#[derive(Default)]
pub struct Recording {
    published: Mutex<Vec<(String, Bytes, Option<String>)>>,
}

impl Recording {
    /// Everything published so far: subject, payload, dedup id.
    pub fn published(&self) -> Vec<(String, Bytes, Option<String>)> {
        self.published.lock().unwrap().clone()
    }
}

impl Publisher for Recording {
    const REFUSAL: &'static str = "the recording bus does not deliver";

    fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        self.published
            .lock()
            .unwrap()
            .push((subject.to_string(), payload, dedup_id));
        Ok(())
    }
}
