//! W7, virtual zones (docs/rules.md §3): named polygons per mower. After the ingest commit, the batch's
//! positions newer than what was evaluated for the mower are evaluated in order; entering and
//! leaving raise `zone_entered` / `zone_left`, and the occupancy (which zones the mower is in,
//! since when) is stored.
//!
//! Like the geofence, a zone changes its mind only on a clear position (farther than its accuracy
//! from the boundary), so a mower driving along a zone's edge does not flap.

use super::geometry::{accuracy_of, Fence, GeoPolygon};
use super::{Event, EventDetail};
use crate::ids::{AccountId, MowerId};
use crate::report::StateReport;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// The most zones a mower may have.
pub const MAX_ZONES_PER_MOWER: usize = 64;
/// The longest zone name, in characters.
pub const MAX_ZONE_NAME_CHARS: usize = 100;

/// A named polygon of a mower.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Zone {
    pub id: Uuid,
    pub mower_id: MowerId,
    pub account_id: AccountId,
    pub name: String,
    pub polygon: GeoPolygon,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A zone the mower is in, and since when (the `observed_at` of the state that entered it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupancy {
    pub zone_id: Uuid,
    pub since: DateTime<Utc>,
}

/// What W7 remembers per mower.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ZoneWatch {
    pub mower_id: MowerId,
    /// Positions up to this `observed_at` were evaluated; older and equal ones are skipped.
    pub evaluated_until: Option<DateTime<Utc>>,
    /// The zones the mower is in, in zone id order.
    pub occupancy: Vec<Occupancy>,
}

impl ZoneWatch {
    pub fn new(mower_id: MowerId) -> Self {
        Self {
            mower_id,
            evaluated_until: None,
            occupancy: Vec::new(),
        }
    }
}

/// A zone ready for evaluation.
#[derive(Clone, Debug)]
pub struct ZoneFence {
    pub id: Uuid,
    pub name: String,
    pub fence: Fence,
}

/// What a store reads for W7, per mower of the batch that has zones.
#[derive(Clone, Debug)]
pub struct ZoneSnapshot {
    /// In zone id order.
    pub zones: Vec<ZoneFence>,
    pub watch: ZoneWatch,
}

/// What W7 writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZoneChanges {
    /// Changed zone watches, one per mower, in mower id order.
    pub watches: Vec<ZoneWatch>,
    /// In the order they were derived.
    pub events: Vec<Event>,
}

/// Evaluates `states` (stored states, in arrival order) against the zones of their mowers.
/// Mowers without a snapshot have no zones. Per state: `zone_left` for each zone left, then
/// `zone_entered` for each zone entered, each in zone id order. A zone that no longer exists is
/// dropped from the occupancy without an event.
pub fn apply_zones(
    snapshots: &mut BTreeMap<MowerId, ZoneSnapshot>,
    states: &[StateReport],
) -> ZoneChanges {
    let mut changes = ZoneChanges::default();
    let mut touched: BTreeMap<MowerId, ()> = BTreeMap::new();
    for state in states {
        let (Some(snapshot), Some(p)) = (snapshots.get_mut(&state.mower_id), &state.position)
        else {
            continue;
        };
        let watch = &mut snapshot.watch;
        if watch
            .evaluated_until
            .is_some_and(|until| state.observed_at <= until)
        {
            continue;
        }
        watch
            .occupancy
            .retain(|o| snapshot.zones.iter().any(|z| z.id == o.zone_id));
        let accuracy = accuracy_of(p.accuracy_m);
        let mut entered = Vec::new();
        for zone in &snapshot.zones {
            let placement = zone.fence.locate(p.lat, p.lon);
            let inside = watch.occupancy.iter().any(|o| o.zone_id == zone.id);
            if inside && placement.clearly_outside(accuracy) {
                watch.occupancy.retain(|o| o.zone_id != zone.id);
                changes.events.push(Event::new(
                    state.mower_id,
                    state.account_id,
                    state.observed_at,
                    EventDetail::ZoneLeft {
                        zone_id: zone.id,
                        zone_name: zone.name.clone(),
                    },
                ));
            } else if !inside && placement.clearly_inside(accuracy) {
                entered.push(zone);
            }
        }
        for zone in entered {
            watch.occupancy.push(Occupancy {
                zone_id: zone.id,
                since: state.observed_at,
            });
            changes.events.push(Event::new(
                state.mower_id,
                state.account_id,
                state.observed_at,
                EventDetail::ZoneEntered {
                    zone_id: zone.id,
                    zone_name: zone.name.clone(),
                },
            ));
        }
        watch.occupancy.sort_by_key(|o| o.zone_id);
        watch.evaluated_until = Some(state.observed_at);
        touched.insert(state.mower_id, ());
    }
    changes.watches = touched
        .into_keys()
        .filter_map(|m| snapshots.get(&m).map(|s| s.watch.clone()))
        .collect();
    changes
}
