//! The live stream's "changes only" rule (docs/rules.md §7, decision 103): which of a mower's
//! states are worth sending to a client that asked for changes only.
//!
//! A state is a change when, against the last state *sent* for the same mower, its activity, its
//! error code, its battery band, its blade, or its availability (a `went_offline` came since)
//! differs, or it moved farther than [`MOVE_THRESHOLD_M`] from the last sent position. The first
//! state of a mower is always a change. Comparing with the last sent state (not the last
//! received one) means that a slow drift adds up: ten moves of 2 m are sent once they reach
//! 10 m from what the client shows.

use crate::report::{Activity, StateReport};
use crate::rules::distance_mm;
use crate::watch::{AlertKind, EventKind};

/// Battery percentages are compared in bands this wide (0–9, 10–19, …, 90–99, 100).
pub const BATTERY_BAND_PERCENT: u8 = 10;

/// A move farther than this (metres, great circle) from the last sent position is a change.
pub const MOVE_THRESHOLD_M: f64 = 10.0;

/// What the rule compares of a mower: the last state sent, and whether it went offline since.
#[derive(Clone, Debug, PartialEq)]
pub struct SentState {
    activity: Activity,
    error_code: Option<String>,
    battery_band: Option<u8>,
    blade_on: bool,
    /// Latitude and longitude of the last sent position, if it had one.
    position: Option<(f64, f64)>,
    online: bool,
}

impl SentState {
    /// The digest of a state that was sent (a state means the mower is online).
    pub fn of(state: &StateReport) -> Self {
        Self {
            activity: state.activity,
            error_code: state.error_code.clone(),
            battery_band: state.battery_percent.map(battery_band),
            blade_on: state.blade_on,
            position: state.position.as_ref().map(|p| (p.lat, p.lon)),
            online: true,
        }
    }

    /// The mower went offline: its next state is a change, whatever it says.
    pub fn went_offline(&mut self) {
        self.online = false;
    }
}

/// The band of a battery percentage.
pub fn battery_band(percent: u8) -> u8 {
    percent / BATTERY_BAND_PERCENT
}

/// Whether `next` is a change against `sent`, the last state sent for its mower (`None`: none
/// was sent yet).
pub fn is_change(sent: Option<&SentState>, next: &StateReport) -> bool {
    let Some(sent) = sent else {
        return true;
    };
    let next_digest = SentState::of(next);
    if !sent.online
        || sent.activity != next_digest.activity
        || sent.error_code != next_digest.error_code
        || sent.battery_band != next_digest.battery_band
        || sent.blade_on != next_digest.blade_on
    {
        return true;
    }
    match (sent.position, next_digest.position) {
        (Some((lat, lon)), Some((to_lat, to_lon))) => {
            distance_mm(lat, lon, to_lat, to_lon) as f64 > MOVE_THRESHOLD_M * 1000.0
        }
        // A position that appears is a change; one that is missing from a report is not (the
        // client keeps showing the last one).
        (None, Some(_)) => true,
        (_, None) => false,
    }
}

/// What an event does to its mower's alerts: raises or clears one of a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertChange {
    Raised(AlertKind),
    Cleared(AlertKind),
}

/// The alert an event of this kind raises or clears, as the notification rules do it
/// (`domain/src/watch/fold.rs`). Alerts cleared without an event (the battery re-armed, a
/// geofence removed, a blade reset) have no kind here.
pub fn alert_change(kind: EventKind) -> Option<AlertChange> {
    use AlertChange::{Cleared, Raised};
    Some(match kind {
        EventKind::ErrorRaised => Raised(AlertKind::Error),
        EventKind::ErrorCleared => Cleared(AlertKind::Error),
        EventKind::GeofenceLeft => Raised(AlertKind::Geofence),
        EventKind::GeofenceReturned => Cleared(AlertKind::Geofence),
        EventKind::BatteryLow => Raised(AlertKind::BatteryLow),
        EventKind::BladeDue => Raised(AlertKind::BladeDue),
        EventKind::WentOffline => Raised(AlertKind::Offline),
        EventKind::CameOnline => Cleared(AlertKind::Offline),
        EventKind::MowingStarted
        | EventKind::MowingFinished
        | EventKind::ZoneEntered
        | EventKind::ZoneLeft
        | EventKind::SessionEnded => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Position;
    use crate::{AccountId, MowerId};
    use chrono::{TimeZone, Utc};

    fn state(activity: Activity) -> StateReport {
        StateReport {
            mower_id: MowerId(uuid::Uuid::nil()),
            account_id: AccountId(uuid::Uuid::nil()),
            observed_at: Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, 0).unwrap(),
            activity,
            battery_percent: Some(55),
            position: Some(Position {
                lat: 52.0,
                lon: 4.0,
                accuracy_m: None,
                heading_deg: None,
            }),
            blade_on: true,
            error_code: None,
            vendor_state: None,
            extra: None,
            unknown: Default::default(),
        }
    }

    #[test]
    fn the_first_state_is_a_change_and_the_same_state_is_not() {
        let s = state(Activity::Mowing);
        assert!(is_change(None, &s));
        assert!(!is_change(Some(&SentState::of(&s)), &s));
    }

    #[test]
    fn each_compared_field_makes_a_change() {
        let sent = SentState::of(&state(Activity::Mowing));
        let mut s = state(Activity::Paused);
        assert!(is_change(Some(&sent), &s), "activity");
        s = state(Activity::Mowing);
        s.error_code = Some("E1".into());
        assert!(is_change(Some(&sent), &s), "error code");
        s = state(Activity::Mowing);
        s.battery_percent = Some(49);
        assert!(is_change(Some(&sent), &s), "battery band");
        s.battery_percent = Some(50);
        assert!(!is_change(Some(&sent), &s), "same band");
        s = state(Activity::Mowing);
        s.blade_on = false;
        assert!(is_change(Some(&sent), &s), "blade");
        let mut offline = sent.clone();
        offline.went_offline();
        assert!(
            is_change(Some(&offline), &state(Activity::Mowing)),
            "online"
        );
    }

    #[test]
    fn a_move_counts_past_the_threshold_from_the_last_sent_position() {
        let sent = SentState::of(&state(Activity::Mowing));
        let mut s = state(Activity::Mowing);
        // 1e-4° of latitude is about 11.1 m; 5e-5° about 5.6 m.
        s.position.as_mut().unwrap().lat = 52.00005;
        assert!(!is_change(Some(&sent), &s));
        s.position.as_mut().unwrap().lat = 52.0001;
        assert!(is_change(Some(&sent), &s));
        s.position = None;
        assert!(!is_change(Some(&sent), &s), "a missing position is no move");
        let mut without = state(Activity::Mowing);
        without.position = None;
        assert!(is_change(
            Some(&SentState::of(&without)),
            &state(Activity::Mowing)
        ));
    }

    #[test]
    fn offline_and_online_raise_and_clear_the_offline_alert() {
        assert_eq!(
            alert_change(EventKind::WentOffline),
            Some(AlertChange::Raised(AlertKind::Offline))
        );
        assert_eq!(
            alert_change(EventKind::CameOnline),
            Some(AlertChange::Cleared(AlertKind::Offline))
        );
        assert_eq!(alert_change(EventKind::MowingStarted), None);
    }

    #[test]
    fn the_battery_bands_are_ten_points_wide() {
        assert_eq!(battery_band(0), 0);
        assert_eq!(battery_band(9), 0);
        assert_eq!(battery_band(10), 1);
        assert_eq!(battery_band(99), 9);
        assert_eq!(battery_band(100), 10);
    }
}
