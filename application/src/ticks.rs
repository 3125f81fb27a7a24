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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_tick_is_at_once_and_a_stop_ends_them() {
        let (stop, stopped) = watch::channel(false);
        let mut ticks = Ticks::new(Duration::from_secs(3600), stopped);
        let first = tokio::time::timeout(Duration::from_secs(5), ticks.next()).await;
        assert_eq!(first, Ok(true), "the first tick comes at once");
        stop.send(true).unwrap();
        assert!(!ticks.next().await, "a stop ends the ticks");
        assert!(*ticks.stop().borrow());
    }

    #[tokio::test]
    async fn a_stop_wins_over_a_due_tick_and_a_gone_sender_stops_too() {
        let (stop, stopped) = watch::channel(true);
        let mut ticks = Ticks::new(Duration::from_secs(1), stopped);
        assert!(
            !ticks.next().await,
            "the first tick was due, the stop given"
        );
        drop((stop, ticks));
        let (_, stopped) = watch::channel(false);
        let mut ticks = Ticks::new(Duration::from_secs(3600), stopped);
        assert!(
            !ticks.next().await,
            "no sender: no tick, not even a due one"
        );
    }
}
