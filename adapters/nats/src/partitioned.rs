//! A subscription to a partitioned consumer: one pinned durable consumer and one worker per
//! partition, the replica's membership for the balance, and the hand-over from the unpartitioned
//! consumer an earlier version of Swath made. An exclusive consumer of an unpartitioned subject
//! (`BatchSettings::exclusive`) is the same with one partition ([`Pinned::Exclusive`]).
//!
//! # Upgrading from an unpartitioned consumer
//!
//! Before partitions, a use case had one durable consumer named after it (`swath-ingest`)
//! filtering the published subjects. Once the stream is partitioned (`provision.rs` adds the
//! subject transform at connect), newly stored messages carry the partitioned subjects, which
//! that consumer's filter no longer matches: it only has the messages stored before, some
//! perhaps never delivered. So a subscription that finds it runs it first, unpartitioned, until
//! it has nothing left to deliver or settle, then deletes it and starts the partitions. Their
//! consumers are then created to start with everything the stream holds under the partitioned
//! subjects, which is exactly what was stored since the transform: nothing is skipped, nothing
//! handled twice, and a mower's older states come before its newer ones.

use crate::membership;
use crate::pinning::Pinning;
use crate::provision::{self, durable_config, partition_filter, provision_consumer, Sharing};
use crate::settings::NatsBusSettings;
use crate::worker::Worker;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{self, stream::Stream};
use async_nats::Client;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use swath_application::bus_rules::is_stopped;
use swath_application::ports::{
    chain, BatchHandler, BatchSettings, BusError, Partitioning, StartAt, Subscription,
};
use tokio::sync::watch;

/// What a subscription needs of the bus.
pub(crate) struct Bus<'a> {
    pub client: &'a Client,
    pub js: &'a jetstream::Context,
    pub settings: &'a NatsBusSettings,
}

/// What the pinned consumers of a subscription filter.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pinned<'a> {
    /// One consumer per partition of a partitioned pattern.
    Partitions(&'a Partitioning),
    /// An exclusive consumer of an unpartitioned filter (`BatchSettings::exclusive`): one pinned
    /// consumer, `<consumer>-p0`, filtering the subject itself: a partitioned consumer with one
    /// partition, so the same pins, hand-over and order after a crash (decision 153).
    Exclusive(&'a str),
}

impl Pinned<'_> {
    fn partitions(&self) -> u32 {
        match self {
            Pinned::Partitions(p) => p.partitions(),
            Pinned::Exclusive(_) => 1,
        }
    }

    /// The filter of partition `n`'s consumer.
    fn filter(&self, n: u32) -> String {
        match self {
            Pinned::Partitions(p) => partition_filter(p, n),
            Pinned::Exclusive(subject) => (*subject).to_owned(),
        }
    }

    /// The filter the subscription was asked for (an earlier version's consumer's).
    fn subjects(&self) -> &str {
        match self {
            Pinned::Partitions(p) => p.subjects(),
            Pinned::Exclusive(subject) => subject,
        }
    }

    /// Where the pinned consumers start when an earlier version's unpinned consumer exists.
    /// Partitions: with everything stored under their subjects, all of which came after the
    /// transform, which the old consumer cannot see. An exclusive consumer filters what the old
    /// one filters: it starts as asked, and what both get is handled twice (once by the drain of
    /// the old one, first), which at-least-once handlers take in their stride.
    fn start_after_an_earlier_version(&self, asked: StartAt) -> StartAt {
        match self {
            Pinned::Partitions(_) => StartAt::Stored,
            Pinned::Exclusive(_) => asked,
        }
    }
}

/// Subscribes `handler` to every pinned consumer of `pinned` on `stream` as `consumer`.
pub(crate) async fn subscribe(
    bus: Bus<'_>,
    stream: Stream,
    pinned: Pinned<'_>,
    consumer: &str,
    settings: BatchSettings,
    handler: Arc<dyn BatchHandler>,
) -> Result<Subscription, BusError> {
    let stream_name = stream.cached_info().config.name.clone();
    let legacy = match stream
        .get_consumer::<jetstream::consumer::pull::Config>(consumer)
        .await
    {
        Ok(found) => Some(found),
        Err(e) if e.to_string().to_ascii_lowercase().contains("not found") => None,
        Err(e) => return Err(provision::unavailable("looking up consumer", consumer, e)),
    };
    let start = if legacy.is_some() {
        pinned.start_after_an_earlier_version(settings.start)
    } else {
        settings.start
    };
    let timeout = bus.settings.priority_timeout();
    let mut partitions = Vec::new();
    for n in 0..pinned.partitions() {
        let name = format!("{consumer}-p{n}");
        let wanted = durable_config(
            &name,
            &pinned.filter(n),
            bus.settings.ack_wait,
            start,
            Sharing::Pinned { timeout },
        );
        let pull = provision_consumer(&stream, wanted.clone()).await?;
        partitions.push((name, wanted, pull));
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let replica = bus
        .client
        .new_inbox()
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_owned();
    let membership = membership::join(
        bus.js.clone(),
        consumer.to_owned(),
        replica,
        bus.settings.membership_heartbeat,
        bus.settings.replicas,
        stop_rx.clone(),
    )
    .await?;
    tokio::spawn(crate::backlog::report(
        consumer.to_owned(),
        partitions
            .iter()
            .enumerate()
            .map(|(n, (_, _, pull))| (n as u32, pull.clone()))
            .collect(),
        membership.members.clone(),
        stop_rx.clone(),
    ));
    let owned = Arc::new(AtomicUsize::new(0));
    let make = |name: String, wanted, pull: PullConsumer| {
        Worker::new(
            bus.client,
            bus.js,
            bus.settings,
            stream.clone(),
            pull,
            wanted,
            name,
            settings,
            Arc::clone(&handler),
            stop_rx.clone(),
        )
    };
    let drain = legacy.map(|pull| {
        let wanted = durable_config(
            consumer,
            pinned.subjects(),
            bus.settings.ack_wait,
            StartAt::New,
            Sharing::Shared,
        );
        let mut worker = make(consumer.to_owned(), wanted, pull);
        worker.until_drained = true;
        worker
    });
    let workers: Vec<Worker> = partitions
        .into_iter()
        .enumerate()
        .map(|(n, (name, wanted, pull))| {
            let mut worker = make(name, wanted, pull);
            worker.pinning = Some(Pinning {
                partition: n as u32,
                partitions: pinned.partitions(),
                id: None,
                owned: Arc::clone(&owned),
                members: membership.members.clone(),
                timeout,
            });
            worker
        })
        .collect();
    tracing::debug!(
        consumer,
        partitions = workers.len(),
        "Subscribed to a partitioned durable consumer."
    );
    let js = bus.js.clone();
    let consumer = consumer.to_owned();
    let task = tokio::spawn(async move {
        if let Some(drain) = drain {
            tracing::info!(consumer = %consumer, "An unpartitioned consumer of an earlier version exists; handling what it holds before the partitions take over.");
            drain.run().await;
            if is_stopped(&stop_rx) {
                let _ = membership.task.await;
                return;
            }
            retire(&js, &stream_name, &consumer).await;
        }
        let running: Vec<_> = workers
            .into_iter()
            .map(|worker| tokio::spawn(worker.run()))
            .collect();
        for worker in running {
            if let Err(e) = worker.await {
                tracing::error!(consumer = %consumer, error = %e, "A partition worker ended abnormally.");
            }
        }
        let _ = membership.task.await;
    });
    Ok(Subscription::new(stop_tx, task).with_partitions_owned(owned))
}

/// Deletes the drained unpartitioned consumer (another replica may have done it already).
async fn retire(js: &jetstream::Context, stream: &str, consumer: &str) {
    let deleted = match js.get_stream(stream).await {
        Ok(stream) => stream
            .delete_consumer(consumer)
            .await
            .map(|_| ())
            .or_else(|e| {
                if e.to_string().to_ascii_lowercase().contains("not found") {
                    Ok(())
                } else {
                    Err(chain(&e).to_string())
                }
            }),
        Err(e) => Err(chain(&e).to_string()),
    };
    match deleted {
        Ok(()) => tracing::info!(consumer, "Handled everything the unpartitioned consumer held and deleted it; the partitions take over."),
        Err(e) => tracing::warn!(consumer, error = %e, "Handled everything the unpartitioned consumer held but could not delete it; the partitions take over."),
    }
}
