//! The clock of the service's periodic tasks (retention on its schedule, the offline sweep): a
//! tick every period until a stop signal.

use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{interval, Interval, MissedTickBehavior};

/// A tick every period, the first one at once, until `stop` turns `true`. A tick that comes late
/// (the task ran longer than the period) delays the next ones rather than bunching them.
pub struct Ticks {
    ticks: Interval,
    stop: watch::Receiver<bool>,
}

impl Ticks {
    pub fn new(period: Duration, stop: watch::Receiver<bool>) -> Self {
        let mut ticks = interval(period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self { ticks, stop }
    }

    /// Waits for the next tick: `true`, or `false` once `stop` turned `true` (or its sender is
    /// gone). A stop already given wins over a tick that is due.
    pub async fn next(&mut self) -> bool {
        tokio::select! {
            biased;
            _ = self.stop.wait_for(|s| *s) => false,
            _ = self.ticks.tick() => true,
        }
    }

    /// The stop signal, for a task that checks it while it runs.
    pub fn stop(&self) -> &watch::Receiver<bool> {
        &self.stop
    }
}
