//! What a principal sets on a mower: its geofence, its virtual zones, its operator assignments,
//! and a blade reset.
//!
//! Every method takes the principal and the mower's id, finds the mower as
//! [`crate::Access::visible_mower`] answers it for that principal (another account's or a hidden
//! site's mower answers [`MowerSettingsError::Access`], exactly like an unknown id), and writes
//! rows of that mower's account only. Names and polygons come checked
//! ([`swath_domain::valid::Label`], [`GeoPolygon`]). The reads of these rows are
//! [`crate::MowerReads`]'s, except the assignments, read here.

use crate::ports::{AssignmentError, Assignments, Clock, EventBus, NotificationPorts, WatchError};
use crate::visibility::{Access, AccessError};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use swath_domain::valid::Label;
use swath_domain::watch::zones::Zone;
use swath_domain::watch::{GeoPolygon, Geofence};
use swath_domain::{Assignment, Mower, MowerId, Principal, Priority};
use uuid::Uuid;

/// Errors of [`MowerSettings`]: the port's or the visibility's, as they came.
#[derive(Debug, thiserror::Error)]
pub enum MowerSettingsError {
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error(transparent)]
    Watch(#[from] WatchError),
    #[error(transparent)]
    Assignment(#[from] AssignmentError),
    /// The service runs without a notification store.
    #[error("no notification store is configured")]
    NoNotifications,
    /// The service runs without the live projections and their assignments.
    #[error("no live projections are configured")]
    NoAssignments,
}

/// An assignment's fields as a principal gives them (checked).
#[derive(Clone, Debug)]
pub struct AssignmentSpec {
    pub operator: Label,
    pub priority: Priority,
    pub active: bool,
}

/// The use case of a mower's settings (see the module).
#[derive(Clone)]
pub struct MowerSettings {
    access: Access,
    notifications: Option<NotificationPorts>,
    assignments: Option<Arc<dyn Assignments>>,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
}

impl MowerSettings {
    pub fn new(access: Access, bus: Arc<dyn EventBus>, clock: Arc<dyn Clock>) -> Self {
        Self {
            access,
            notifications: None,
            assignments: None,
            bus,
            clock,
        }
    }

    /// With the notification side's ports (geofences, zones, blade resets).
    pub fn with_notifications(mut self, ports: Option<NotificationPorts>) -> Self {
        self.notifications = ports;
        self
    }

    /// With the operator assignments.
    pub fn with_assignments(mut self, assignments: Option<Arc<dyn Assignments>>) -> Self {
        self.assignments = assignments;
        self
    }

    fn ports(&self) -> Result<&NotificationPorts, MowerSettingsError> {
        self.notifications
            .as_ref()
            .ok_or(MowerSettingsError::NoNotifications)
    }

    fn assignment_store(&self) -> Result<&dyn Assignments, MowerSettingsError> {
        self.assignments
            .as_deref()
            .ok_or(MowerSettingsError::NoAssignments)
    }

    /// Now, to the microsecond: what every store keeps, so that rankings and versions agree.
    fn now(&self) -> DateTime<Utc> {
        self.clock.now_micros()
    }

    /// Replaces the mower's geofence with `polygon` (a new version).
    pub async fn put_geofence(
        &self,
        principal: &Principal,
        id: MowerId,
        polygon: GeoPolygon,
    ) -> Result<Geofence, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let geofence = Geofence {
            mower_id: mower.id,
            account_id: mower.account_id,
            version: Uuid::now_v7(),
            polygon,
            updated_at: self.now(),
        };
        self.ports()?
            .geofences
            .put_geofence(geofence.clone())
            .await?;
        Ok(geofence)
    }

    /// Removes the mower's geofence (none: nothing to do).
    pub async fn delete_geofence(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<(), MowerSettingsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        self.ports()?.geofences.delete_geofence(mower.id).await?;
        Ok(())
    }

    /// The zone `id` of the mower named `name` over `polygon`, changed now.
    fn zone(&self, mower: &Mower, id: Uuid, name: Label, polygon: GeoPolygon) -> Zone {
        let now = self.now();
        Zone {
            id,
            mower_id: mower.id,
            account_id: mower.account_id,
            name: name.into_string(),
            polygon,
            created_at: now,
            updated_at: now,
        }
    }

    /// Adds a zone to the mower.
    pub async fn create_zone(
        &self,
        principal: &Principal,
        id: MowerId,
        name: Label,
        polygon: GeoPolygon,
    ) -> Result<Zone, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let zone = self.zone(&mower, Uuid::now_v7(), name, polygon);
        self.ports()?.zones.create_zone(zone.clone()).await?;
        Ok(zone)
    }

    /// Changes the mower's zone `id`; `false` when the mower has no such zone.
    pub async fn update_zone(
        &self,
        principal: &Principal,
        mower: MowerId,
        id: Uuid,
        name: Label,
        polygon: GeoPolygon,
    ) -> Result<bool, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, mower).await?;
        let zone = self.zone(&mower, id, name, polygon);
        Ok(self.ports()?.zones.update_zone(zone).await?)
    }

    /// Removes the mower's zone `id`; `false` when the mower has no such zone.
    pub async fn delete_zone(
        &self,
        principal: &Principal,
        mower: MowerId,
        id: Uuid,
    ) -> Result<bool, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, mower).await?;
        Ok(self.ports()?.zones.delete_zone(mower.id, id).await?)
    }

    /// Resets the mower's blade time (its open `blade_due` alert is cleared and told).
    pub async fn reset_blade(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<(), MowerSettingsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        crate::watcher::reset_blade(
            self.ports()?.feed.as_ref(),
            self.bus.as_ref(),
            mower.id,
            mower.account_id,
            self.clock.now(),
        )
        .await?;
        Ok(())
    }

    /// The assignments of the mower `id`, if `principal` may see it, in ranking order.
    pub async fn assignments(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<Vec<Assignment>, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let store = self.assignment_store()?;
        Ok(store.assignments(mower.account_id, mower.id).await?)
    }

    /// The assignment `id` of the mower as `spec` gives it, changed now.
    fn assignment(&self, mower: &Mower, id: Uuid, spec: AssignmentSpec) -> Assignment {
        Assignment {
            id,
            mower_id: mower.id,
            account_id: mower.account_id,
            operator: spec.operator.into_string(),
            priority: spec.priority,
            active: spec.active,
            updated_at: self.now(),
        }
    }

    /// Adds an assignment to the mower.
    pub async fn create_assignment(
        &self,
        principal: &Principal,
        id: MowerId,
        spec: AssignmentSpec,
    ) -> Result<Assignment, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let assignment = self.assignment(&mower, Uuid::now_v7(), spec);
        let store = self.assignment_store()?;
        store.create_assignment(assignment.clone()).await?;
        Ok(assignment)
    }

    /// Changes the mower's assignment `id`; `None` when the mower has no such assignment.
    pub async fn update_assignment(
        &self,
        principal: &Principal,
        mower: MowerId,
        id: Uuid,
        spec: AssignmentSpec,
    ) -> Result<Option<Assignment>, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, mower).await?;
        let assignment = self.assignment(&mower, id, spec);
        let store = self.assignment_store()?;
        let updated = store.update_assignment(assignment.clone()).await?;
        Ok(updated.then_some(assignment))
    }

    /// Removes the mower's assignment `id`; `false` when the mower has no such assignment.
    pub async fn delete_assignment(
        &self,
        principal: &Principal,
        mower: MowerId,
        id: Uuid,
    ) -> Result<bool, MowerSettingsError> {
        let mower = self.access.visible_mower(principal, mower).await?;
        let store = self.assignment_store()?;
        Ok(store
            .delete_assignment(mower.account_id, mower.id, id)
            .await?)
    }
}
