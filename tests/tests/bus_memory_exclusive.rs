//! An exclusive consumer on the memory bus (`BatchSettings::exclusive`, decision 153): one
//! subscription at a time handles it, and what a vanished holder left unsettled comes to the
//! next before anything newer. Tokio's clock is paused.

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::{BatchSettings, Message};
use swath_memory::{MemoryBus, MemoryBusSettings};
use swath_tests::bus_contract::{settings, wait_until, DynBus, Recorder, Reply};

fn exclusive(max_batch: usize) -> BatchSettings {
    BatchSettings {
        exclusive: true,
        ..settings(max_batch, 0)
    }
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect()
}

async fn publish(bus: &DynBus, subject: &str, body: &str) {
    bus.publish(subject, Bytes::from(body.to_owned()), None)
        .await
        .unwrap();
}

/// Two subscriptions, on a bus that partitions other subjects: one holds the consumer, the
/// other gets nothing, newer messages included, until the holder vanishes (unsubscribed with
/// its handler hanging, given up after the drain timeout); then the other gets the two it had in
/// flight first, then the newer ones, in publication order across subjects.
#[tokio::test(start_paused = true)]
async fn one_subscription_at_a_time_and_a_vanished_holder_s_messages_first() {
    let bus: DynBus = Arc::new(MemoryBus::new(MemoryBusSettings {
        partitioning: Some(swath_application::ports::Partitioning::new("t.mower.*", 4).unwrap()),
        ..MemoryBusSettings::default()
    }));
    let stuck = Recorder::new(|_, _| (Duration::ZERO, Reply::Hang));
    let mut s = exclusive(2);
    s.drain_timeout = Duration::from_millis(300);
    let holder = bus
        .subscribe_batch("n.>", "hooks", s, stuck.clone())
        .await
        .unwrap();
    wait_until("the first subscription holds the consumer", || {
        holder.partitions_owned() == 1
    })
    .await;
    let next = Recorder::acking();
    let standby = bus
        .subscribe_batch("n.>", "hooks", exclusive(10), next.clone())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        (holder.partitions_owned(), standby.partitions_owned()),
        (1, 0)
    );
    publish(&bus, "n.mower.a.event", "0").await;
    publish(&bus, "n.mower.b.event", "1").await;
    wait_until("the holder has two in flight", || {
        stuck.delivered().len() >= 2
    })
    .await;
    publish(&bus, "n.alert.a.cleared", "2").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        next.delivered().is_empty(),
        "the standby took a message of a held exclusive consumer"
    );
    holder.unsubscribe().await;
    publish(&bus, "n.mower.c.event", "3").await;
    wait_until("the standby acknowledged all four", || {
        next.acked().len() >= 4
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let acked = next.acked();
    assert_eq!(texts(&acked), ["0", "1", "2", "3"]);
    assert_eq!(
        acked.iter().map(|m| m.delivery).collect::<Vec<_>>(),
        [2, 2, 1, 1],
        "the first two are redeliveries, the newer two first deliveries"
    );
    assert_eq!(standby.partitions_owned(), 1);
    // Every subscription of the consumer must say the same.
    assert!(bus
        .subscribe_batch("n.>", "hooks", settings(10, 0), Recorder::acking())
        .await
        .is_err());
    standby.unsubscribe().await;
}
