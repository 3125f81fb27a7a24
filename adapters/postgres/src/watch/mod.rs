//! The notification side on PostgreSQL (the ports `WatchStore`, `ZoneStore`, `GeofenceStore` and
//! `NotificationFeed`): the watcher's batch unit of work, the offline sweep, virtual zones (W7),
//! the busy status, geofences, zones, the events feed and alerts.
//!
//! The watcher's batch, like ingestion's: `BEGIN`; one statement reading each mower's directory
//! account, geofence version (with its polygon when the watcher has not parsed that version yet)
//! and watch row, the watch rows locked in mower id order; then one constant statement per table
//! with array parameters (watches, events, alert clears, raised alerts), skipped when it has no
//! rows (most batches raise no event); `COMMIT`. The count of statements does not depend on the
//! size of the batch, and is counted in [`PostgresStore::watch_counters`].
//!
//! The lock is on `mower_watches`, the row the rules advance (see the migration): in READ
//! COMMITTED the locked row is re-read after a lock wait, but joined rows (the mower, its
//! geofence) come from the statement's snapshot. For those that is harmless: a mower's account
//! never changes, and a geofence replaced while we waited is simply used from the next batch on.
//! The version and its polygon come from that one snapshot, so they always belong together: a
//! second statement (as there was before decision 48) would see a replacement committed between
//! the two and find the version read first gone, which the watcher took for "no geofence".
//!
//! # Layout
//! - `unit_of_work`: the watcher's batch, the sweep, zones (W7), the busy status and the ingest
//!   batch's events, with their constant statements.
//! - `admin`: geofences, zones and the blade reset.
//! - `feeds`: the events feed, open alerts and the export of watch rows.
//! - `watch_row`: the watch row's columns, read and written (W8's pending session as one text,
//!   decisions 208 and 211).
//! - `rows`: decoding the other rows into domain values.
//!
//! The implementations of the four ports below only hand each method to its module.

mod admin;
mod feeds;
mod rows;
mod unit_of_work;
mod watch_row;

pub(crate) use unit_of_work::store_ingest_events;

use crate::PostgresStore;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use swath_application::ports::{
    AlertQuery, EventQuery, GeofenceStore, NotificationFeed, WatchBatch, WatchError, WatchRead,
    WatchRows, WatchStore, ZoneBatch, ZoneRows, ZoneStore,
};
use swath_domain::watch::busy::BusyStatus;
use swath_domain::watch::zones::{Zone, ZoneWatch};
use swath_domain::watch::Geofence;
use swath_domain::watch::{Alert, Event, Watch};
use swath_domain::MowerId;
use uuid::Uuid;

#[async_trait]
impl WatchStore for PostgresStore {
    async fn begin_watch(
        &self,
        mowers: &[MowerId],
        parsed: &[Uuid],
    ) -> Result<(WatchRead, Box<dyn WatchBatch>), WatchError> {
        unit_of_work::begin_watch(self, mowers, parsed).await
    }

    async fn begin_sweep(
        &self,
        silent_before: DateTime<Utc>,
        due_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<(Vec<Watch>, Box<dyn WatchBatch>), WatchError> {
        unit_of_work::begin_sweep(self, silent_before, due_before, limit).await
    }

    async fn busy(&self, mowers: &[MowerId]) -> Result<Vec<BusyStatus>, WatchError> {
        unit_of_work::busy(self, mowers).await
    }

    async fn write_busy(&self, statuses: &[BusyStatus]) -> Result<(), WatchError> {
        unit_of_work::write_busy(self, statuses).await
    }

    async fn export_watch(&self, mowers: &[MowerId]) -> Result<WatchRows, WatchError> {
        feeds::export_watch(self, mowers).await
    }
}

#[async_trait]
impl ZoneStore for PostgresStore {
    async fn begin_zones(
        &self,
        mowers: &[MowerId],
    ) -> Result<(ZoneRows, Box<dyn ZoneBatch>), WatchError> {
        unit_of_work::begin_zones(self, mowers).await
    }

    async fn zones(&self, mower: MowerId) -> Result<Vec<Zone>, WatchError> {
        admin::zones(self, mower).await
    }

    async fn create_zone(&self, zone: Zone) -> Result<(), WatchError> {
        admin::create_zone(self, zone).await
    }

    async fn update_zone(&self, zone: Zone) -> Result<bool, WatchError> {
        admin::update_zone(self, zone).await
    }

    async fn delete_zone(&self, mower: MowerId, zone: Uuid) -> Result<bool, WatchError> {
        admin::delete_zone(self, mower, zone).await
    }

    async fn zone_watch(&self, mower: MowerId) -> Result<Option<ZoneWatch>, WatchError> {
        admin::zone_watch(self, mower).await
    }
}

#[async_trait]
impl GeofenceStore for PostgresStore {
    async fn put_geofence(&self, g: Geofence) -> Result<(), WatchError> {
        admin::put_geofence(self, g).await
    }

    async fn geofence(&self, mower: MowerId) -> Result<Option<Geofence>, WatchError> {
        admin::geofence(self, mower).await
    }

    async fn delete_geofence(&self, mower: MowerId) -> Result<bool, WatchError> {
        admin::delete_geofence(self, mower).await
    }
}

#[async_trait]
impl NotificationFeed for PostgresStore {
    async fn events(&self, query: &EventQuery) -> Result<Vec<Event>, WatchError> {
        feeds::events(self, query).await
    }

    async fn open_alerts(&self, query: &AlertQuery) -> Result<Vec<Alert>, WatchError> {
        feeds::open_alerts(self, query).await
    }

    async fn reset_blade(&self, mower: MowerId, at: DateTime<Utc>) -> Result<bool, WatchError> {
        admin::reset_blade(self, mower, at).await
    }
}
