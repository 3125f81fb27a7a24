//! What a principal reads of its mowers (issue 35): the mower as every read shows it, its
//! telemetry and its child data. Nothing here writes; a mower's deletion is
//! [`crate::FleetDirectory::delete_mower`].
//!
//! A mower's id is global and chosen by its gateway, so an id can change hands: account A
//! deletes mower X, account B creates a mower X. Two rules keep A's data from B:
//!
//! - **the deletion takes everything along** ([`crate::FleetDirectory::delete_mower`]): the
//!   store removes every row of the mower in every table at once and refuses a late write of it
//!   (the contract of `DirectoryAdmin::delete_mower`), and this process forgets what it kept of
//!   the mower (its latest state, its placement);
//! - **every per-mower read is of the principal's account** ([`crate::visibility::of_account`]):
//!   the mower of the path is found visible first ([`Access`]), then the rows read of it are
//!   kept only when they were written for the principal's account, whatever a store, a cache or
//!   another replica still holds.
//!
//! The reads of `/v1/mowers` and `/v1/mowers/{id}` and its children, the events and alerts
//! feeds (of one mower or the account's) and the live map's tracks go through here, never
//! through a port: a mower as every read shows it ([`views`]: latest state, site, availability)
//! and its telemetry ([`telemetry`]: history, track, day totals) are here too.

mod telemetry;
mod views;

pub use telemetry::{MowerDays, MAX_DAYS};
pub use views::MowerView;

use crate::ports::{
    AlertQuery, DirectoryAdmin, DirectoryError, EventQuery, NotificationPorts, StoreError,
    TelemetryStore, WatchError,
};
use crate::visibility::{of_account, Access, AccessError};
use std::sync::Arc;
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Zone, ZoneWatch};
use swath_domain::watch::{Alert, Event, Geofence};
use swath_domain::{HealthTotals, LatestRow, Mower, MowerId, Principal};

/// Errors of [`MowerReads`]: the port's or the visibility's, as they came.
#[derive(Debug, thiserror::Error)]
pub enum MowerReadsError {
    /// The mower is not visible (or visibility could not be decided).
    #[error(transparent)]
    Access(#[from] AccessError),
    /// The directory failed.
    #[error(transparent)]
    Directory(#[from] DirectoryError),
    /// The telemetry store failed.
    #[error(transparent)]
    Telemetry(#[from] StoreError),
    /// The notification store failed.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// The service runs without a notification store.
    #[error("no notification store is configured")]
    NoNotifications,
    /// A range of days that is reversed or too long, in the service's words.
    #[error("{0}")]
    Range(String),
}

/// A mower's zones, with what W7 remembers of it (which zones it is in).
#[derive(Clone, Debug)]
pub struct MowerZones {
    pub mower: Mower,
    /// The principal's account's zones of the mower, in name then id order.
    pub zones: Vec<Zone>,
    /// The mower's zone watch; its occupancy names zones by id, so only the zones above match.
    pub watch: Option<ZoneWatch>,
}

/// The use case of a mower's reads (see the module).
#[derive(Clone)]
pub struct MowerReads {
    access: Access,
    directory: Arc<dyn DirectoryAdmin>,
    telemetry: Arc<dyn TelemetryStore>,
    notifications: Option<NotificationPorts>,
}

impl MowerReads {
    pub fn new(
        access: Access,
        directory: Arc<dyn DirectoryAdmin>,
        telemetry: Arc<dyn TelemetryStore>,
        notifications: Option<NotificationPorts>,
    ) -> Self {
        Self {
            access,
            directory,
            telemetry,
            notifications,
        }
    }

    /// The same with the notification side's ports.
    pub fn with_notifications(mut self, ports: NotificationPorts) -> Self {
        self.notifications = Some(ports);
        self
    }

    fn ports(&self) -> Result<&NotificationPorts, MowerReadsError> {
        self.notifications
            .as_ref()
            .ok_or(MowerReadsError::NoNotifications)
    }

    /// The mower's latest state, when it has one of the principal's account.
    pub async fn latest(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<Option<LatestRow>, MowerReadsError> {
        let mower = self.access.visible_mower_id(principal, id).await?;
        Ok(self
            .latest_states(principal, &[mower])
            .await?
            .remove(&mower))
    }

    /// The mower with its health totals (`None` before its first state of this account).
    pub async fn health(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<(Mower, Option<HealthTotals>), MowerReadsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let totals = self.telemetry.health(mower.id).await?;
        Ok((mower, of_account(principal, totals).pop()))
    }

    /// The mower's zones and its zone watch.
    pub async fn zones(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<MowerZones, MowerReadsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let store = &self.ports()?.zones;
        let zones = of_account(principal, store.zones(mower.id).await?);
        let watch = store.zone_watch(mower.id).await?;
        Ok(MowerZones {
            mower,
            zones,
            watch,
        })
    }

    /// The mower's geofence, when it has one of the principal's account.
    pub async fn geofence(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<Option<Geofence>, MowerReadsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let geofence = self.ports()?.geofences.geofence(mower.id).await?;
        Ok(of_account(principal, geofence).pop())
    }

    /// A page of the events feed as `query` asks it, of the mower `only` when given: its
    /// mowers and account are the principal's (a mower it cannot see gives an empty page, like
    /// an unknown one), and every event answered is of the principal's account.
    pub async fn events(
        &self,
        principal: &Principal,
        only: Option<MowerId>,
        query: EventQuery,
    ) -> Result<Vec<Event>, MowerReadsError> {
        let Some(mowers) = self.feed_mowers(principal, only).await? else {
            return Ok(Vec::new());
        };
        let query = EventQuery {
            account_id: principal.account_id,
            mowers,
            ..query
        };
        Ok(of_account(
            principal,
            self.ports()?.feed.events(&query).await?,
        ))
    }

    /// A page of open alerts as `query` asks it, of the mower `only` when given, like
    /// [`MowerReads::events`].
    pub async fn open_alerts(
        &self,
        principal: &Principal,
        only: Option<MowerId>,
        query: AlertQuery,
    ) -> Result<Vec<Alert>, MowerReadsError> {
        let Some(mowers) = self.feed_mowers(principal, only).await? else {
            return Ok(Vec::new());
        };
        let query = AlertQuery {
            account_id: principal.account_id,
            mowers,
            ..query
        };
        Ok(of_account(
            principal,
            self.ports()?.feed.open_alerts(&query).await?,
        ))
    }

    /// The mowers a feed shows (`Some(None)`: the whole account), or `None` when none is left
    /// to show (the page is empty without a read).
    async fn feed_mowers(
        &self,
        principal: &Principal,
        only: Option<MowerId>,
    ) -> Result<Option<Option<Vec<MowerId>>>, MowerReadsError> {
        let mowers = self.access.feed_mowers(principal, only).await?;
        Ok((!mowers.as_ref().is_some_and(Vec::is_empty)).then_some(mowers))
    }

    /// The mower's busy status, when it has one of the principal's account.
    pub async fn busy(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<Option<BusyStatus>, MowerReadsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let statuses = self.ports()?.watch.busy(&[mower.id]).await?;
        let statuses = statuses.into_iter().filter(|s| s.mower_id == mower.id);
        Ok(of_account(principal, statuses).pop())
    }
}
