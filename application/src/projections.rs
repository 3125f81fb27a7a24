//! The bounded live projections (docs/rules.md §6): the fleet dashboard, the site wall and the
//! health wall, built level by level from the [`ProjectionStore`]'s reads into snapshots.
//!
//! Each level asks the store for one row beyond its ceiling (the sentinel): when it comes back,
//! the level is cut and says so (`truncated`), without anything ever being counted. Only the rows
//! inside a window are carried to the next level, so the sentinel's children, alerts and
//! operators are never read. A level whose parent window is empty is not read at all: an empty
//! tenant costs one read. The cost of a snapshot is therefore bounded by the ceilings, never by
//! the tenant's inventory.
//!
//! Layout: this file holds the windows, the fleet dashboard and the walls; `map` the site map
//! ([`MapSnapshot`]) and the site cards of the fleet dashboard's mowers.

mod map;

pub use map::{MapMower, MapSite, MapSnapshot};

use crate::ports::{
    AlertCard, HealthCard, MowerCard, MowerFilter, ProjectionError, ProjectionStore, SiteCard,
    Visibility,
};
use crate::sentinel::{self, with_sentinel};
use std::collections::HashMap;
use std::sync::Arc;
use swath_domain::{Assignment, MowerId, Principal, SiteId};

/// Mowers on the fleet dashboard.
pub const FLEET_MOWERS: usize = 64;
/// Open alerts per mower on the fleet dashboard.
pub const FLEET_ALERTS_PER_MOWER: usize = 32;
/// Sites on the site wall.
pub const WALL_SITES: usize = 16;
/// Mowers in the field per site on the site wall.
pub const WALL_MOWERS_PER_SITE: usize = 32;
/// Open alerts per mower on the site wall.
pub const WALL_ALERTS_PER_MOWER: usize = 32;
/// Sites on the health wall.
pub const HEALTH_SITES: usize = 16;
/// Mowers per site on the health wall.
pub const HEALTH_MOWERS_PER_SITE: usize = 32;
/// Sites listed on the site map (the site picker).
pub const MAP_SITES: usize = 16;
/// Mowers on a site's map.
pub const MAP_MOWERS_PER_SITE: usize = 32;

/// The ceilings of every level. [`Ceilings::default`] is docs/rules.md §6; tests lower them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ceilings {
    pub fleet_mowers: usize,
    pub fleet_alerts_per_mower: usize,
    pub wall_sites: usize,
    pub wall_mowers_per_site: usize,
    pub wall_alerts_per_mower: usize,
    pub health_sites: usize,
    pub health_mowers_per_site: usize,
    pub map_sites: usize,
    pub map_mowers_per_site: usize,
}

impl Default for Ceilings {
    fn default() -> Self {
        Self {
            fleet_mowers: FLEET_MOWERS,
            fleet_alerts_per_mower: FLEET_ALERTS_PER_MOWER,
            wall_sites: WALL_SITES,
            wall_mowers_per_site: WALL_MOWERS_PER_SITE,
            wall_alerts_per_mower: WALL_ALERTS_PER_MOWER,
            health_sites: HEALTH_SITES,
            health_mowers_per_site: HEALTH_MOWERS_PER_SITE,
            map_sites: MAP_SITES,
            map_mowers_per_site: MAP_MOWERS_PER_SITE,
        }
    }
}

/// One bounded list: at most `limit` items, and whether at least one more visible item exists.
#[derive(Clone, Debug, PartialEq)]
pub struct Window<T> {
    pub items: Vec<T>,
    pub truncated: bool,
    pub limit: usize,
}

impl<T> Window<T> {
    /// Cuts rows fetched with one sentinel beyond `limit` ([`sentinel::with_sentinel`]).
    pub fn cut(rows: Vec<T>, limit: usize) -> Self {
        let (rows, truncated) = sentinel::cut(rows, limit);
        Self {
            items: rows,
            truncated,
            limit,
        }
    }

    fn map<U>(self, f: impl FnMut(T) -> U) -> Window<U> {
        Window {
            items: self.items.into_iter().map(f).collect(),
            truncated: self.truncated,
            limit: self.limit,
        }
    }

    fn empty(limit: usize) -> Self {
        Self {
            items: Vec::new(),
            truncated: false,
            limit,
        }
    }
}

/// A mower on the fleet dashboard or the site wall.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveMower {
    pub mower: MowerCard,
    /// The operator on duty (the winning active assignment), if any.
    pub operator: Option<Assignment>,
    pub alerts: Window<AlertCard>,
}

/// The fleet dashboard.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetSnapshot {
    pub mowers: Window<LiveMower>,
}

/// A site on the site wall, with its mowers in the field.
#[derive(Clone, Debug, PartialEq)]
pub struct WallSite {
    pub site: SiteCard,
    pub mowers: Window<LiveMower>,
}

/// The site wall.
#[derive(Clone, Debug, PartialEq)]
pub struct WallSnapshot {
    pub sites: Window<WallSite>,
}

/// How a mower is, from the most severe of all its open alerts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HealthStatus {
    Ok,
    Low,
    Normal,
    High,
    Critical,
}

impl HealthStatus {
    pub fn of(card: &HealthCard) -> Self {
        if card.critical > 0 {
            HealthStatus::Critical
        } else if card.high > 0 {
            HealthStatus::High
        } else if card.normal > 0 {
            HealthStatus::Normal
        } else if card.low > 0 {
            HealthStatus::Low
        } else {
            HealthStatus::Ok
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Ok => "ok",
            HealthStatus::Low => "low",
            HealthStatus::Normal => "normal",
            HealthStatus::High => "high",
            HealthStatus::Critical => "critical",
        }
    }
}

/// A mower on the health wall.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthMower {
    pub mower: MowerCard,
    pub operator: Option<Assignment>,
    pub status: HealthStatus,
    pub health: HealthCard,
}

/// A site on the health wall.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthSite {
    pub site: SiteCard,
    pub mowers: Window<HealthMower>,
}

/// The health wall.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthSnapshot {
    pub sites: Window<HealthSite>,
}

/// The live projections use case.
#[derive(Clone)]
pub struct Projections {
    store: Arc<dyn ProjectionStore>,
    ceilings: Ceilings,
}

impl Projections {
    pub fn new(store: Arc<dyn ProjectionStore>) -> Self {
        Self {
            store,
            ceilings: Ceilings::default(),
        }
    }

    /// The same projections with other ceilings (tests lower them).
    pub fn with_ceilings(mut self, ceilings: Ceilings) -> Self {
        self.ceilings = ceilings;
        self
    }

    pub fn ceilings(&self) -> Ceilings {
        self.ceilings
    }

    /// The fleet dashboard: the first mowers by `(display_order, name, id)`, each with its most
    /// urgent open alerts and its operator on duty.
    pub async fn fleet(&self, principal: &Principal) -> Result<FleetSnapshot, ProjectionError> {
        let who = Visibility::from(principal);
        let c = self.ceilings;
        let mowers = Window::cut(
            self.store
                .window_mowers(&who, with_sentinel(c.fleet_mowers))
                .await?,
            c.fleet_mowers,
        );
        let mowers = self
            .live_mowers(&who, mowers, c.fleet_alerts_per_mower)
            .await?;
        Ok(FleetSnapshot { mowers })
    }

    /// The site wall: the first sites, each with its first mowers in the field (filtered before
    /// the cutoff), each with its most urgent open alerts and its operator on duty.
    pub async fn wall(&self, principal: &Principal) -> Result<WallSnapshot, ProjectionError> {
        let who = Visibility::from(principal);
        let c = self.ceilings;
        let sites = Window::cut(
            self.store
                .window_sites(&who, with_sentinel(c.wall_sites))
                .await?,
            c.wall_sites,
        );
        let mut per_site = self
            .site_windows(
                &who,
                &sites,
                MowerFilter::InTheField,
                c.wall_mowers_per_site,
            )
            .await?;
        // One level for the alerts and one for the operators of every mower of every site.
        let all: Vec<MowerCard> = per_site
            .iter()
            .flat_map(|w| w.items.iter().cloned())
            .collect();
        let mut live = self
            .live_mowers(&who, Window::cut(all, usize::MAX), c.wall_alerts_per_mower)
            .await?
            .items
            .into_iter();
        let sites = sites.map(|site| {
            let window = per_site.remove(0);
            let items = live.by_ref().take(window.items.len()).collect();
            WallSite {
                site,
                mowers: Window {
                    items,
                    truncated: window.truncated,
                    limit: window.limit,
                },
            }
        });
        Ok(WallSnapshot { sites })
    }

    /// The health wall: the first sites, each with its first mowers, each with a health summary
    /// over all of its open alerts and its operator on duty.
    pub async fn health(&self, principal: &Principal) -> Result<HealthSnapshot, ProjectionError> {
        let who = Visibility::from(principal);
        let c = self.ceilings;
        let sites = Window::cut(
            self.store
                .window_sites(&who, with_sentinel(c.health_sites))
                .await?,
            c.health_sites,
        );
        let mut per_site = self
            .site_windows(&who, &sites, MowerFilter::All, c.health_mowers_per_site)
            .await?;
        let ids: Vec<MowerId> = per_site
            .iter()
            .flat_map(|w| w.items.iter().map(|m| m.id))
            .collect();
        let (mut health, mut operators) = if ids.is_empty() {
            (HashMap::new(), HashMap::new())
        } else {
            let health: HashMap<MowerId, HealthCard> = self
                .store
                .health(&who, &ids)
                .await?
                .into_iter()
                .map(|h| (h.mower_id, h))
                .collect();
            (health, self.operators(&who, &ids).await?)
        };
        let sites = sites.map(|site| {
            let window = per_site.remove(0);
            HealthSite {
                site,
                mowers: window.map(|mower| {
                    let card = health.remove(&mower.id).unwrap_or(HealthCard {
                        mower_id: mower.id,
                        ..HealthCard::default()
                    });
                    HealthMower {
                        operator: operators.remove(&mower.id),
                        status: HealthStatus::of(&card),
                        health: card,
                        mower,
                    }
                }),
            }
        });
        Ok(HealthSnapshot { sites })
    }

    /// The mower windows of every site of `sites` (one read for all of them), in site order.
    async fn site_windows(
        &self,
        who: &Visibility,
        sites: &Window<SiteCard>,
        filter: MowerFilter,
        per_site: usize,
    ) -> Result<Vec<Window<MowerCard>>, ProjectionError> {
        if sites.items.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<SiteId> = sites.items.iter().map(|s| s.id).collect();
        let rows = self
            .store
            .site_mowers(who, &ids, filter, with_sentinel(per_site))
            .await?;
        let mut grouped: HashMap<SiteId, Vec<MowerCard>> = HashMap::new();
        for row in rows {
            grouped.entry(row.site_id).or_default().push(row);
        }
        Ok(ids
            .iter()
            .map(|id| Window::cut(grouped.remove(id).unwrap_or_default(), per_site))
            .collect())
    }

    /// Alerts and operators of the mowers inside `mowers` (never its sentinel, already cut off).
    async fn live_mowers(
        &self,
        who: &Visibility,
        mowers: Window<MowerCard>,
        alerts_per_mower: usize,
    ) -> Result<Window<LiveMower>, ProjectionError> {
        if mowers.items.is_empty() {
            return Ok(Window::empty(mowers.limit));
        }
        let ids: Vec<MowerId> = mowers.items.iter().map(|m| m.id).collect();
        // Both levels hang from the same window and not from each other: asked at once (on two
        // connections of a pooled store), a view waits for one round trip less. Still one
        // statement per level.
        let (open, mut operators) = tokio::try_join!(
            self.store
                .open_alerts(who, &ids, with_sentinel(alerts_per_mower)),
            self.operators(who, &ids),
        )?;
        let mut alerts: HashMap<MowerId, Vec<AlertCard>> = HashMap::new();
        for alert in open {
            alerts.entry(alert.mower_id).or_default().push(alert);
        }
        Ok(mowers.map(|mower| LiveMower {
            operator: operators.remove(&mower.id),
            alerts: alerts
                .remove(&mower.id)
                .map(|a| Window::cut(a, alerts_per_mower))
                .unwrap_or_else(|| Window::empty(alerts_per_mower)),
            mower,
        }))
    }

    async fn operators(
        &self,
        who: &Visibility,
        ids: &[MowerId],
    ) -> Result<HashMap<MowerId, Assignment>, ProjectionError> {
        Ok(self
            .store
            .operators_on_duty(who, ids)
            .await?
            .into_iter()
            .map(|a| (a.mower_id, a))
            .collect())
    }
}
