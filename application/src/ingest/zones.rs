//! Virtual zones (W7) evaluated after the telemetry commit, and the order in which W6's and W7's
//! events are published.

use crate::ports::{WatchError, ZoneStore};
use std::collections::BTreeMap;
use swath_domain::watch::zones::{apply_zones, ZoneFence, ZoneSnapshot};
use swath_domain::watch::Event;
use swath_domain::{MowerId, StateOutcome, StateReport};

/// W6's and W7's events in the order of the states that raised them (W6 first for one state),
/// which is the order the same states ingested one at a time publish them in. A W6 event is
/// raised by the first stored state of its key, a W7 event by the first stored one with a
/// position.
pub(super) fn in_state_order(
    valid: &[StateReport],
    applied: &[StateOutcome],
    blade: Vec<Event>,
    zones: Vec<Event>,
) -> Vec<Event> {
    if zones.is_empty() {
        return blade;
    }
    let mut first: BTreeMap<(MowerId, chrono::DateTime<chrono::Utc>), usize> = BTreeMap::new();
    let mut first_positioned = BTreeMap::new();
    for (i, (s, o)) in valid.iter().zip(applied).enumerate() {
        if *o != StateOutcome::Stored {
            continue;
        }
        first.entry((s.mower_id, s.observed_at)).or_insert(i);
        if s.position.is_some() {
            first_positioned
                .entry((s.mower_id, s.observed_at))
                .or_insert(i);
        }
    }
    let mut tagged: Vec<(usize, u8, Event)> = blade
        .into_iter()
        .map(|e| {
            (
                first
                    .get(&(e.mower_id, e.observed_at))
                    .copied()
                    .unwrap_or(0),
                0,
                e,
            )
        })
        .chain(zones.into_iter().map(|e| {
            let i = first_positioned.get(&(e.mower_id, e.observed_at)).copied();
            (i.unwrap_or(0), 1, e)
        }))
        .collect();
    tagged.sort_by_key(|(i, source, _)| (*i, *source));
    tagged.into_iter().map(|(_, _, e)| e).collect()
}

/// W7: the zones of all the batch's mowers read at once, the positions evaluated in order, the
/// zone watches and events committed together. Mowers without zones cost nothing beyond the read.
pub(super) async fn evaluate_zones(
    store: &dyn ZoneStore,
    states: &[StateReport],
) -> Result<Vec<Event>, WatchError> {
    if states.is_empty() {
        return Ok(Vec::new());
    }
    let mut mowers: Vec<MowerId> = states.iter().map(|s| s.mower_id).collect();
    mowers.sort_unstable();
    mowers.dedup();
    let (rows, unit) = store.begin_zones(&mowers).await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut snapshots: BTreeMap<MowerId, ZoneSnapshot> = rows
        .into_iter()
        .map(|(mower, (zones, watch))| {
            let zones = zones
                .into_iter()
                .map(|z| ZoneFence {
                    fence: z.polygon.fence(),
                    id: z.id,
                    name: z.name,
                })
                .collect();
            (mower, ZoneSnapshot { zones, watch })
        })
        .collect();
    let changes = apply_zones(&mut snapshots, states);
    let events = changes.events.clone();
    unit.commit(changes).await?;
    Ok(events)
}
