//! The simulator's unit tests: a mower's motion (`mower`), the demo fleet and its lawns (`fleet`),
//! the running simulator on a recording bus (`publish`).

mod fleet;
mod mower;
mod publish;

use crate::lawn::Lawn;
use crate::mower::{MAX_CATCH_UP_S, SPEED_M_PER_S};
use crate::run::build_mowers;
use crate::seed::DEMO_SITES;
use crate::{
    replay, seed_demo_fleet, DemoFleet, MowerSim, Simulator, SimulatorSettings, DEMO_ACCOUNT_ID,
};
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use geo::{Contains, Distance, Haversine, Point};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use swath_application::ports::{BusError, Clock, Directory, DirectoryError, ManualClock};
use swath_application::publish_only::{PublishOnly, Publisher};
use swath_application::subjects;
use swath_domain::rules::DEFAULT_BLADE_THRESHOLD_MS;
use swath_domain::{Account, AccountId, Activity, Mower, MowerId, Site, StateReport};
use tokio::sync::watch;

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 6, 0, 0).unwrap()
}

fn sim(seed: u64, period: Duration) -> MowerSim {
    let lawn = Lawn::random(52.4045, 13.023, seed);
    MowerSim::new(MowerId::new(), AccountId::new(), lawn, period, seed)
}

/// A directory that keeps its rows in vectors and checks the references, as the contract says.
#[derive(Default)]
struct VecDirectory {
    accounts: Mutex<Vec<Account>>,
    sites: Mutex<Vec<Site>>,
    mowers: Mutex<Vec<Mower>>,
}

#[async_trait]
impl Directory for VecDirectory {
    async fn create_account(&self, account: Account) -> Result<(), DirectoryError> {
        let mut accounts = self.accounts.lock().unwrap();
        if accounts.iter().any(|a| a.id == account.id) {
            return Err(DirectoryError::Conflict(format!("account {}", account.id)));
        }
        accounts.push(account);
        Ok(())
    }

    async fn create_site(&self, site: Site) -> Result<(), DirectoryError> {
        if !self
            .accounts
            .lock()
            .unwrap()
            .iter()
            .any(|a| a.id == site.account_id)
        {
            return Err(DirectoryError::NotFound(format!(
                "account {}",
                site.account_id
            )));
        }
        self.sites.lock().unwrap().push(site);
        Ok(())
    }

    async fn create_mower(&self, mower: Mower) -> Result<(), DirectoryError> {
        let sites = self.sites.lock().unwrap();
        if !sites
            .iter()
            .any(|s| s.id == mower.site_id && s.account_id == mower.account_id)
        {
            return Err(DirectoryError::NotFound(format!("site {}", mower.site_id)));
        }
        self.mowers.lock().unwrap().push(mower);
        Ok(())
    }

    async fn account(&self, id: AccountId) -> Result<Option<Account>, DirectoryError> {
        Ok(self
            .accounts
            .lock()
            .unwrap()
            .iter()
            .find(|a| a.id == id)
            .cloned())
    }

    async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError> {
        Ok(self
            .mowers
            .lock()
            .unwrap()
            .iter()
            .find(|m| m.id == id)
            .cloned())
    }

    async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError> {
        let sites = self.sites.lock().unwrap();
        Ok(sites
            .iter()
            .filter(|s| s.account_id == account)
            .cloned()
            .collect())
    }

    async fn mowers(&self, account: AccountId) -> Result<Vec<Mower>, DirectoryError> {
        let mowers = self.mowers.lock().unwrap();
        Ok(mowers
            .iter()
            .filter(|m| m.account_id == account)
            .cloned()
            .collect())
    }
}

async fn fleet(mowers: usize) -> DemoFleet {
    let settings = SimulatorSettings {
        mowers,
        ..SimulatorSettings::default()
    };
    seed_demo_fleet(&VecDirectory::default(), &settings)
        .await
        .unwrap()
}
