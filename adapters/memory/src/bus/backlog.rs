//! The backlog gauges of a durable consumer, named as the JetStream adapter's
//! (`swath_bus_consumer_pending_messages{consumer, partition}`, `swath_bus_replicas{consumer}`),
//! so that one dashboard and one set of alert rules serve both buses.

use super::Inner;
use std::sync::Arc;
use std::time::Duration;
use swath_application::bus_rules::stopped;
use tokio::sync::watch;

/// How often the gauges are refreshed: below Prometheus's usual scrape interval.
const PERIOD: Duration = Duration::from_secs(1);

/// Reports the messages waiting in each lane of `consumer` and its subscriptions, every
/// [`PERIOD`] until `stop`. (The batch a worker runs has left its lane: the memory bus has no
/// `num_ack_pending` worth reporting.)
pub(super) async fn report(inner: Arc<Inner>, consumer: String, mut stop: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(PERIOD);
    loop {
        tokio::select! {
            () = stopped(&mut stop) => return,
            _ = ticks.tick() => {}
        }
        let (lanes, members): (Vec<usize>, usize) = {
            let state = inner.lock();
            let Some(c) = state.consumers.get(&consumer) else {
                continue;
            };
            (
                c.lanes.iter().map(|l| l.queue.len()).collect(),
                c.members.len().max(1),
            )
        };
        metrics::gauge!("swath_bus_replicas", "consumer" => consumer.clone()).set(members as f64);
        for (partition, pending) in lanes.into_iter().enumerate() {
            let labels = [
                ("consumer", consumer.clone()),
                ("partition", partition.to_string()),
            ];
            metrics::gauge!("swath_bus_consumer_pending_messages", &labels).set(pending as f64);
        }
    }
}
