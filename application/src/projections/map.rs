//! The site map: the visible sites (a bounded list to pick from) and one site with its mowers,
//! whose latest positions the page draws. The tracks are not read here: they are the telemetry
//! store's, read by the page with its own ceiling.

use super::{HealthStatus, Projections, Window};
use crate::ports::{HealthCard, MowerCard, MowerFilter, ProjectionError, SiteCard, Visibility};
use crate::sentinel::with_sentinel;
use std::collections::HashMap;
use swath_domain::{MowerId, Principal, SiteId};

/// A mower on the map: its card (with its latest position) and its status over all of its open
/// alerts (as on the health wall).
#[derive(Clone, Debug, PartialEq)]
pub struct MapMower {
    pub mower: MowerCard,
    pub status: HealthStatus,
}

/// A site on the map, with its mowers (every mower, in the field or not).
#[derive(Clone, Debug, PartialEq)]
pub struct MapSite {
    pub site: SiteCard,
    pub mowers: Window<MapMower>,
}

/// The site map.
#[derive(Clone, Debug, PartialEq)]
pub struct MapSnapshot {
    /// The visible sites, to pick from.
    pub sites: Window<SiteCard>,
    /// The site shown: the one asked for, else the first of `sites`; `None` when the one asked
    /// for is not visible (or does not exist), or when no site is visible.
    pub site: Option<MapSite>,
}

impl Projections {
    /// The site map of `site` (else of the first visible site): the first sites by
    /// `(display_order, name, id)`, and the shown site's first mowers with their status. Four
    /// reads at most, each bounded: sites, the asked site when it is not among them, its mowers,
    /// their alert counts.
    pub async fn map(
        &self,
        principal: &Principal,
        site: Option<SiteId>,
    ) -> Result<MapSnapshot, ProjectionError> {
        let who = Visibility::from(principal);
        let c = self.ceilings;
        let sites = Window::cut(
            self.store
                .window_sites(&who, with_sentinel(c.map_sites))
                .await?,
            c.map_sites,
        );
        let card = match site {
            None => sites.items.first().cloned(),
            Some(id) => match sites.items.iter().find(|s| s.id == id) {
                Some(card) => Some(card.clone()),
                // Beyond the window: read it alone, through the same visibility.
                None if who.sites.as_ref().is_none_or(|s| s.contains(&id)) => {
                    let only = Visibility {
                        account_id: who.account_id,
                        sites: Some(vec![id]),
                    };
                    self.store.window_sites(&only, 1).await?.into_iter().next()
                }
                None => None,
            },
        };
        let site = match card {
            None => None,
            Some(card) => {
                let rows = self
                    .store
                    .site_mowers(
                        &who,
                        &[card.id],
                        MowerFilter::All,
                        with_sentinel(c.map_mowers_per_site),
                    )
                    .await?;
                let mowers = Window::cut(rows, c.map_mowers_per_site);
                let ids: Vec<MowerId> = mowers.items.iter().map(|m| m.id).collect();
                let mut health: HashMap<MowerId, HealthCard> = if ids.is_empty() {
                    HashMap::new()
                } else {
                    self.store
                        .health(&who, &ids)
                        .await?
                        .into_iter()
                        .map(|h| (h.mower_id, h))
                        .collect()
                };
                Some(MapSite {
                    site: card,
                    mowers: mowers.map(|mower| MapMower {
                        status: health
                            .remove(&mower.id)
                            .map(|h| HealthStatus::of(&h))
                            .unwrap_or(HealthStatus::Ok),
                        mower,
                    }),
                })
            }
        };
        Ok(MapSnapshot { sites, site })
    }
}

impl Projections {
    /// The cards of these sites that `principal` may see, in display order: one read, bounded by
    /// the number of ids (the fleet dashboard names the sites of its window's mowers).
    pub async fn site_cards(
        &self,
        principal: &Principal,
        sites: &[SiteId],
    ) -> Result<Vec<SiteCard>, ProjectionError> {
        let who = Visibility::from(principal);
        let mut ids: Vec<SiteId> = sites
            .iter()
            .copied()
            .filter(|id| who.sites.as_ref().is_none_or(|s| s.contains(id)))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let limit = ids.len();
        let only = Visibility {
            account_id: who.account_id,
            sites: Some(ids),
        };
        self.store.window_sites(&only, limit).await
    }
}
