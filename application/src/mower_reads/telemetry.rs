//! A mower's telemetry as a principal reads it: history, track and day totals, each of a mower
//! found visible first.

use super::{MowerReads, MowerReadsError};
use crate::ports::{TimeWindow, WindowRows};
use chrono::NaiveDate;
use swath_domain::{DayTotals, HistoryRow, MowerId, PositionRow, Principal};

/// A mower's day totals, with the time zone that decided their days.
#[derive(Clone, Debug)]
pub struct MowerDays {
    pub mower: MowerId,
    /// The IANA name of the mower's site's time zone (empty if the site went away meanwhile).
    pub time_zone: String,
    pub days: Vec<DayTotals>,
}

/// The longest range of days one request may ask for.
pub const MAX_DAYS: i64 = 366;

impl MowerReads {
    /// The mower's history in `window`, if `principal` may see it.
    pub async fn history(
        &self,
        principal: &Principal,
        id: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, MowerReadsError> {
        let mower = self.access.visible_mower_id(principal, id).await?;
        Ok(self.telemetry.history(mower, window).await?)
    }

    /// The mower's track in `window`, if `principal` may see it.
    pub async fn track(
        &self,
        principal: &Principal,
        id: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, MowerReadsError> {
        let mower = self.access.visible_mower_id(principal, id).await?;
        Ok(self.telemetry.track(mower, window).await?)
    }

    /// The mower's day totals from `from` to `to` (both included, at most [`MAX_DAYS`] days), if
    /// `principal` may see it.
    pub async fn days(
        &self,
        principal: &Principal,
        id: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<MowerDays, MowerReadsError> {
        // The range first: a bad range is refused alike for every id.
        if from > to {
            return Err(MowerReadsError::Range("`from` is after `to`.".to_owned()));
        }
        if (to - from).num_days() >= MAX_DAYS {
            return Err(MowerReadsError::Range(format!(
                "The range has more than {MAX_DAYS} days; ask for fewer."
            )));
        }
        let mower = self.access.visible_mower(principal, id).await?;
        let site = self.directory.site(mower.site_id).await?;
        let days = self.telemetry.days(mower.id, from, to).await?;
        Ok(MowerDays {
            mower: mower.id,
            time_zone: site
                .map(|s| s.time_zone.name().to_owned())
                .unwrap_or_default(),
            days,
        })
    }
}
