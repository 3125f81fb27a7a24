//! What a partitioned consumer has left to do, per partition, from JetStream's own counts: the
//! gauges behind the backlog panels and alerts (`deploy/prometheus/rules.yml`).
//!
//! Every replica reports every partition (each has a worker on each), so the series of one
//! partition from several replicas agree up to a report period; the rules take their `max`.
//! The counts come from `CONSUMER.INFO`, one request per partition and period: cheap next to
//! the pulls, and independent of which replica holds the pin.

use async_nats::jetstream::consumer::PullConsumer;
use std::time::Duration;
use swath_application::bus_rules::stopped;
use tokio::sync::watch;

/// Messages of a partition's consumer not delivered yet (JetStream's `num_pending`).
pub const PENDING: &str = "swath_bus_consumer_pending_messages";
/// Messages delivered and not acknowledged yet (`num_ack_pending`).
pub const UNACKNOWLEDGED: &str = "swath_bus_consumer_unacknowledged_messages";
/// Replicas subscribed to a consumer, this one included (the membership bucket's count).
pub const REPLICAS: &str = "swath_bus_replicas";

/// How often the counts are asked for: below Prometheus's usual scrape interval.
const PERIOD: Duration = Duration::from_secs(5);

/// Reports the backlog of each `(partition, consumer)` and the replicas of `consumer` every
/// [`PERIOD`] until `stop`. A partition whose count cannot be read keeps its last value (the bus
/// being unreachable is `/readyz`'s and `swath_ready`'s to say).
pub(crate) async fn report(
    consumer: String,
    mut partitions: Vec<(u32, PullConsumer)>,
    members: watch::Receiver<usize>,
    mut stop: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(PERIOD);
    loop {
        tokio::select! {
            () = stopped(&mut stop) => return,
            _ = ticks.tick() => {}
        }
        metrics::gauge!(REPLICAS, "consumer" => consumer.clone()).set(*members.borrow() as f64);
        for (partition, pull) in &mut partitions {
            let Ok(Ok(info)) = tokio::time::timeout(PERIOD, pull.info()).await else {
                continue;
            };
            let labels = [
                ("consumer", consumer.clone()),
                ("partition", partition.to_string()),
            ];
            metrics::gauge!(PENDING, &labels).set(info.num_pending as f64);
            metrics::gauge!(UNACKNOWLEDGED, &labels).set(info.num_ack_pending as f64);
        }
    }
}
