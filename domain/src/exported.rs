//! What a store exports of some mowers: every row it keeps for them, table by table, so that
//! tests and the end-to-end verifier can compare stores with each other and with the references.
//! Its own module because it gathers the rows of two others (`rows` and `sessions`, which reads
//! `rows`).

use crate::rows::{DayTotals, HealthTotals, HistoryRow, LatestRow, PositionRow};
use crate::sessions::SessionRow;
use serde::{Deserialize, Serialize};

/// Every stored row of some mowers, each table in key order. Stores export it so that tests and
/// the verifier can compare stores, and a batch with the same states stored one at a time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TelemetryRows {
    pub history: Vec<HistoryRow>,
    pub positions: Vec<PositionRow>,
    pub latest: Vec<LatestRow>,
    pub health: Vec<HealthTotals>,
    pub days: Vec<DayTotals>,
    /// W8's sessions, by `(mower_id, started_at)`, with the account whose states made each.
    pub sessions: Vec<SessionRow>,
}
