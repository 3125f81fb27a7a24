//! What a mower is doing, as its gateway reports it, and the Home Assistant `lawn_mower` activity
//! it maps to (docs/rules.md §2).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a mower is doing, as its gateway reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    Mowing,
    Leaving,
    Returning,
    Docked,
    Charging,
    Paused,
    Idle,
    Error,
}

impl Activity {
    /// Every activity, in declaration order.
    pub const ALL: [Activity; 8] = [
        Activity::Mowing,
        Activity::Leaving,
        Activity::Returning,
        Activity::Docked,
        Activity::Charging,
        Activity::Paused,
        Activity::Idle,
        Activity::Error,
    ];

    /// The wire name (`mowing`, `docked`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Mowing => "mowing",
            Activity::Leaving => "leaving",
            Activity::Returning => "returning",
            Activity::Docked => "docked",
            Activity::Charging => "charging",
            Activity::Paused => "paused",
            Activity::Idle => "idle",
            Activity::Error => "error",
        }
    }

    /// Parses a wire name.
    pub fn parse(value: &str) -> Option<Activity> {
        Activity::ALL.into_iter().find(|a| a.as_str() == value)
    }

    /// The Home Assistant `lawn_mower` activity: leaving → mowing, charging → docked, idle → paused.
    pub fn lawn_mower(self) -> LawnMowerActivity {
        match self {
            Activity::Mowing | Activity::Leaving => LawnMowerActivity::Mowing,
            Activity::Returning => LawnMowerActivity::Returning,
            Activity::Docked | Activity::Charging => LawnMowerActivity::Docked,
            Activity::Paused | Activity::Idle => LawnMowerActivity::Paused,
            Activity::Error => LawnMowerActivity::Error,
        }
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The activity of Home Assistant's `lawn_mower` entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LawnMowerActivity {
    Mowing,
    Docked,
    Paused,
    Returning,
    Error,
}
