use chrono::{DateTime, Duration, Utc};
use std::sync::Mutex;

/// The time. Use cases never call `Utc::now()` themselves, so tests can set it.
///
/// An implementation MUST be monotonic enough for validation (a report more than five minutes
/// after `now()` is refused) and cheap: it is read once per batch.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;

    /// Now, to the microsecond: what every store keeps (decision 1), so that an instant answered
    /// from memory equals the same instant read back from a store.
    fn now_micros(&self) -> DateTime<Utc> {
        chrono::SubsecRound::trunc_subsecs(self.now(), 6)
    }
}

/// The system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to. For tests and replays.
#[derive(Debug)]
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub fn new(now: DateTime<Utc>) -> Self {
        Self(Mutex::new(now))
    }

    pub fn set(&self, now: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
