//! A mower's geofence as stored and administered: the polygon the watcher judges positions
//! against (docs/rules.md §4), and the version it caches it under.

use super::GeoPolygon;
use crate::{AccountId, MowerId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A mower's geofence: a GeoJSON polygon and the version key the watcher caches it under.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Geofence {
    pub mower_id: MowerId,
    pub account_id: AccountId,
    /// A new UUID v7 every time the geofence is replaced: never reused, so a cached fence of an
    /// older version can never be mistaken for the current one.
    pub version: Uuid,
    pub polygon: GeoPolygon,
    pub updated_at: DateTime<Utc>,
}
