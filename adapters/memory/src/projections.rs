//! The live projections' ports in memory: [`MemoryProjections`] answers `ProjectionStore` from a
//! [`MemoryStore`] (through its directory, telemetry and watch ports, so that it reads exactly
//! what they committed) and keeps the operator assignments (`Assignments`) itself.
//!
//! Work is bounded by what a window shows, not by the tenant, except for the scan that picks a
//! window: memory has no ordered index per account, so `window_mowers` and `site_mowers` walk the
//! account's (or site's) mowers once and keep the first rows; nothing beyond the limit is cloned.
//! Results equal PostgreSQL's: the same filters before the limits, the same total orders (names
//! byte by byte, as `COLLATE "C"`).

use crate::store::MemoryStore;
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use swath_application::ports::{
    AlertCard, AlertQuery, AssignmentError, Assignments, Cause, Directory, DirectoryAdmin,
    HealthCard, LatLon, ListQuery, MowerCard, MowerFilter, NotificationFeed, ProjectionError,
    ProjectionStore, SiteCard, TelemetryStore, Visibility, MAX_ASSIGNMENTS_PER_MOWER,
};
use swath_application::visibility::sees_site;
use swath_domain::watch::{Alert, AlertKind, Severity};
use swath_domain::{list_order, AccountId, Assignment, Mower, MowerId, SiteId};
use uuid::Uuid;

/// The projections' ports on a [`MemoryStore`]. Cheap to clone.
#[derive(Clone)]
pub struct MemoryProjections {
    store: MemoryStore,
    /// Assignments by mower, then id: the store's, so that a mower's deletion takes them along.
    assignments: Arc<RwLock<crate::store::AssignmentRows>>,
}

impl MemoryProjections {
    pub fn new(store: MemoryStore) -> Self {
        Self {
            assignments: Arc::clone(&store.assignments),
            store,
        }
    }
}

fn unavailable(e: impl Into<Cause>) -> ProjectionError {
    ProjectionError::Unavailable(e.into())
}

impl MemoryProjections {
    /// Cards for these mowers (in the given order): latest states and open offline alerts.
    async fn cards(
        &self,
        who: &Visibility,
        mowers: Vec<swath_domain::Mower>,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        if mowers.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<MowerId> = mowers.iter().map(|m| m.id).collect();
        let latest: HashMap<MowerId, _> = TelemetryStore::latest(&self.store, &ids)
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(|l| (l.mower_id, l))
            .collect();
        let offline: HashSet<MowerId> = self
            .store
            .open_alerts(&AlertQuery {
                account_id: who.account_id,
                mowers: Some(ids),
                kind: Some(AlertKind::Offline),
                after: None,
                limit: usize::MAX,
            })
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(|a| a.mower_id)
            .collect();
        Ok(mowers
            .into_iter()
            .map(|m| {
                let latest = latest.get(&m.id);
                MowerCard {
                    offline: offline.contains(&m.id),
                    activity: latest.map(|l| l.state.activity),
                    battery_percent: latest.and_then(|l| l.state.battery_percent),
                    observed_at: latest.map(|l| l.observed_at),
                    last_seen_at: latest.map(|l| l.last_seen_at),
                    error_code: latest.and_then(|l| l.state.error_code.clone()),
                    position: latest.and_then(|l| {
                        l.state.position.as_ref().map(|p| LatLon {
                            lat: p.lat,
                            lon: p.lon,
                        })
                    }),
                    id: m.id,
                    site_id: m.site_id,
                    name: m.name,
                    model: m.model,
                    display_order: m.display_order,
                }
            })
            .collect())
    }

    /// Visible mowers of `sites` (or of every visible site), ordered, at most `limit`.
    async fn mowers_of(
        &self,
        who: &Visibility,
        sites: Option<Vec<SiteId>>,
        limit: usize,
    ) -> Result<Vec<swath_domain::Mower>, ProjectionError> {
        self.store
            .list_mowers(&ListQuery {
                account: who.account_id,
                sites,
                after: None,
                limit,
            })
            .await
            .map_err(unavailable)
    }
}

#[async_trait]
impl ProjectionStore for MemoryProjections {
    async fn window_mowers(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        let mowers = self.mowers_of(who, who.sites.clone(), limit).await?;
        self.cards(who, mowers).await
    }

    async fn window_sites(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<SiteCard>, ProjectionError> {
        Ok(self
            .store
            .list_sites(&ListQuery {
                account: who.account_id,
                sites: who.sites.clone(),
                after: None,
                limit,
            })
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(|s| SiteCard {
                id: s.id,
                name: s.name,
                time_zone: s.time_zone.name().to_owned(),
                display_order: s.display_order,
            })
            .collect())
    }

    async fn site_mowers(
        &self,
        who: &Visibility,
        sites: &[SiteId],
        filter: MowerFilter,
        per_site: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        let mut out = Vec::new();
        for site in sites
            .iter()
            .filter(|s| sees_site(who.sites.as_deref(), **s))
        {
            match filter {
                MowerFilter::All => {
                    let mowers = self.mowers_of(who, Some(vec![*site]), per_site).await?;
                    out.extend(self.cards(who, mowers).await?);
                }
                // The filter needs each mower's state: read the site's mowers, filter, then cut.
                MowerFilter::InTheField => {
                    let mowers = self.mowers_of(who, Some(vec![*site]), usize::MAX).await?;
                    out.extend(
                        self.cards(who, mowers)
                            .await?
                            .into_iter()
                            .filter(MowerCard::in_the_field)
                            .take(per_site),
                    );
                }
            }
        }
        Ok(out)
    }

    async fn open_alerts(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
        per_mower: usize,
    ) -> Result<Vec<AlertCard>, ProjectionError> {
        let visible = self.visible(who, mowers).await?;
        let alerts = self.every_open_alert(who, visible.clone()).await?;
        // Already in (severity desc, raised_at desc, id desc) order: keep the first of each mower.
        let mut by_mower: HashMap<MowerId, Vec<AlertCard>> = HashMap::new();
        for a in alerts {
            let list = by_mower.entry(a.mower_id).or_default();
            if list.len() < per_mower {
                list.push(AlertCard {
                    id: a.id,
                    mower_id: a.mower_id,
                    kind: a.kind,
                    severity: a.severity,
                    raised_at: a.raised_at,
                    code: a.code,
                });
            }
        }
        Ok(visible
            .iter()
            .flat_map(|m| by_mower.remove(m).unwrap_or_default())
            .collect())
    }

    async fn health(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<HealthCard>, ProjectionError> {
        let visible = self.visible_mowers(who, mowers).await?;
        let ids = visible.iter().map(|m| m.id).collect();
        let alerts = self.every_open_alert(who, ids).await?;
        let mut cards: HashMap<MowerId, HealthCard> = HashMap::new();
        for a in alerts {
            let card = cards.entry(a.mower_id).or_default();
            match a.severity {
                Severity::Critical => card.critical += 1,
                Severity::High => card.high += 1,
                Severity::Normal => card.normal += 1,
                Severity::Low => card.low += 1,
            }
        }
        let mut out = Vec::with_capacity(visible.len());
        for mower in visible {
            let mut card = cards.remove(&mower.id).unwrap_or_default();
            card.mower_id = mower.id;
            card.blade_threshold_ms = mower.blade_threshold_ms;
            if let Some(h) = TelemetryStore::health(&self.store, mower.id)
                .await
                .map_err(unavailable)?
            {
                card.blade_since_reset_ms = h.blade_since_reset_ms;
                card.error_count = h.error_count;
            }
            out.push(card);
        }
        Ok(out)
    }

    async fn operators_on_duty(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<Assignment>, ProjectionError> {
        let visible = self.visible(who, mowers).await?;
        let assignments = self.assignments.read().unwrap_or_else(|e| e.into_inner());
        Ok(visible
            .iter()
            .filter_map(|m| {
                assignments.get(m).and_then(|of_mower| {
                    of_mower
                        .values()
                        .filter(|a| a.active && a.account_id == who.account_id)
                        .max_by_key(|a| a.rank_key())
                        .cloned()
                })
            })
            .collect())
    }
}

impl MemoryProjections {
    /// Those of `mowers` that `who` may see, in the given order.
    async fn visible(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<MowerId>, ProjectionError> {
        let visible = self.visible_mowers(who, mowers).await?;
        Ok(visible.into_iter().map(|m| m.id).collect())
    }

    /// The directory's entries of those of `mowers` that `who` may see, in the given order.
    async fn visible_mowers(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<Mower>, ProjectionError> {
        let seen: HashMap<MowerId, Mower> = self
            .store
            .mowers_by_id(mowers)
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|m| {
                m.account_id == who.account_id && sees_site(who.sites.as_deref(), m.site_id)
            })
            .map(|m| (m.id, m))
            .collect();
        Ok(mowers.iter().filter_map(|m| seen.get(m).cloned()).collect())
    }

    /// Every open alert of `mowers` (visible ones), most severe first, then newest.
    async fn every_open_alert(
        &self,
        who: &Visibility,
        mowers: Vec<MowerId>,
    ) -> Result<Vec<Alert>, ProjectionError> {
        self.store
            .open_alerts(&AlertQuery {
                account_id: who.account_id,
                mowers: Some(mowers),
                kind: None,
                after: None,
                limit: usize::MAX,
            })
            .await
            .map_err(unavailable)
    }
}

#[async_trait]
impl Assignments for MemoryProjections {
    async fn create_assignment(&self, assignment: Assignment) -> Result<(), AssignmentError> {
        // Held while the assignment is stored: a mower's deletion takes the directory first,
        // then the assignments, so none lands after it.
        let directory = crate::store::read(&self.store.directory);
        if !directory.mowers.contains_key(&assignment.mower_id) {
            return Err(AssignmentError::NotFound(format!(
                "mower {}",
                assignment.mower_id
            )));
        }
        let mut all = self.assignments.write().unwrap_or_else(|e| e.into_inner());
        if all
            .values()
            .any(|of_mower| of_mower.contains_key(&assignment.id))
        {
            return Err(AssignmentError::Conflict(assignment.id));
        }
        let of_mower = all.entry(assignment.mower_id).or_default();
        if of_mower.len() >= MAX_ASSIGNMENTS_PER_MOWER {
            return Err(AssignmentError::Limit(format!(
                "A mower may have at most {MAX_ASSIGNMENTS_PER_MOWER} assignments."
            )));
        }
        of_mower.insert(assignment.id, assignment);
        Ok(())
    }

    async fn assignments(
        &self,
        account: AccountId,
        mower: MowerId,
    ) -> Result<Vec<Assignment>, AssignmentError> {
        // Only a mower in the directory has any (its deletion removes them).
        if Directory::mower(&self.store, mower)
            .await
            .map_err(|e| AssignmentError::Unavailable(e.into()))?
            .is_none()
        {
            return Ok(Vec::new());
        }
        let all = self.assignments.read().unwrap_or_else(|e| e.into_inner());
        let mut list: Vec<Assignment> = all
            .get(&mower)
            .map(|m| {
                m.values()
                    .filter(|a| a.account_id == account)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        list.sort_by(list_order);
        Ok(list)
    }

    async fn update_assignment(&self, assignment: Assignment) -> Result<bool, AssignmentError> {
        let mut all = self.assignments.write().unwrap_or_else(|e| e.into_inner());
        match all
            .get_mut(&assignment.mower_id)
            .and_then(|m| m.get_mut(&assignment.id))
        {
            Some(stored) if stored.account_id == assignment.account_id => {
                stored.operator = assignment.operator;
                stored.priority = assignment.priority;
                stored.active = assignment.active;
                stored.updated_at = assignment.updated_at;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn delete_assignment(
        &self,
        account: AccountId,
        mower: MowerId,
        id: Uuid,
    ) -> Result<bool, AssignmentError> {
        let mut all = self.assignments.write().unwrap_or_else(|e| e.into_inner());
        let Some(of_mower) = all.get_mut(&mower) else {
            return Ok(false);
        };
        if of_mower.get(&id).is_some_and(|a| a.account_id == account) {
            of_mower.remove(&id);
            return Ok(true);
        }
        Ok(false)
    }
}
