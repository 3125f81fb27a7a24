//! Ack-less live subscriptions: an ordered consumer per subscriber, fed into a bounded channel.
//!
//! Why an ordered JetStream consumer (`AckPolicy::None`, `DeliverPolicy::New`, ephemeral, in
//! server memory) rather than a plain core NATS subscription on the subject: a core subscriber
//! sees every *publish*, including the ones JetStream then refuses (stream full) or drops as
//! duplicates (`Nats-Msg-Id` seen before), so a live view would show states that were never
//! stored, or show one twice when a gateway retries. The consumer only delivers what the stream
//! stored, once, in stream order, like the memory bus does; async-nats recreates it from the last
//! sequence seen if it misses heartbeats or a sequence (a NATS restart). The server deletes it
//! 30 s after its subscriber is gone.
//!
//! The subscriber's channel is fed with `try_send`: a subscriber that falls behind loses messages
//! (counted in `swath_bus_live_dropped_total`); it never slows the consumer down, so JetStream
//! never has to buffer for it.

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use futures::StreamExt;
use std::time::Duration;
use swath_application::ports::{cause, chain, BusError, LiveSubscription, Message};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Aborts the forwarding task when the live subscription is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) async fn subscribe(
    stream: &jetstream::stream::Stream,
    filter: &str,
    partitioned: bool,
    buffer: usize,
    idle_heartbeat: Duration,
) -> Result<LiveSubscription, BusError> {
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: filter.to_owned(),
            deliver_policy: DeliverPolicy::New,
            // async-nats asks for heartbeats every half expiry and recreates the consumer after
            // two missed ones; its default (30 s) would leave a live view dark for a minute after
            // a NATS restart. Capping the expiry at two heartbeats brings that down to about four
            // heartbeats, for one pull request per subscriber every two.
            max_expires: (idle_heartbeat * 2).max(Duration::from_secs(1)),
            ..OrderedConfig::default()
        })
        .await
        .map_err(|e| {
            BusError::Unavailable(cause::context(
                format!("creating a live consumer for {filter}"),
                e,
            ))
        })?;
    let mut messages = consumer.messages().await.map_err(|e| {
        BusError::Unavailable(cause::context(
            format!("starting a live consumer for {filter}"),
            e,
        ))
    })?;
    let (sender, receiver) = mpsc::channel(buffer.max(1));
    let filter = filter.to_owned();
    // async-nats 0.51's ordered stream can return `Pending` after a first missed heartbeat
    // without arming a wake-up, and would then sleep until a message arrives — which, after a
    // NATS restart lost its consumer, never happens. Polling it again every heartbeat re-arms its
    // timer, so the second missed heartbeat is seen and the consumer recreated. (Dropping the
    // `next()` future is harmless: the stream keeps its state.)
    let repoll = idle_heartbeat.max(Duration::from_millis(100));
    let task = tokio::spawn(async move {
        let mut failing = false;
        loop {
            let next = tokio::select! {
                biased;
                () = sender.closed() => break,
                next = tokio::time::timeout(repoll, messages.next()) => next,
            };
            let message = match next {
                Err(_) => continue,
                Ok(None) => break,
                Ok(Some(Ok(message))) => {
                    if failing {
                        tracing::info!(%filter, "A live subscription receives again.");
                        failing = false;
                    }
                    message
                }
                Ok(Some(Err(e))) => {
                    // The ordered consumer recreates itself; log an outage once.
                    if !failing {
                        tracing::warn!(%filter, error = %chain(&e), "A live subscription lost its consumer; it is being recreated.");
                        failing = true;
                    }
                    continue;
                }
            };
            let stored = message.message.subject.as_str();
            let message = Message {
                // What was published, as the memory bus gives it.
                subject: if partitioned {
                    crate::provision::published_subject(stored)
                } else {
                    stored.to_owned()
                },
                payload: message.message.payload.clone(),
                delivery: 1,
            };
            match sender.try_send(message) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    metrics::counter!("swath_bus_live_dropped_total").increment(1);
                    tracing::debug!(%filter, "A slow live subscriber lost a message.");
                }
                Err(mpsc::error::TrySendError::Closed(_)) => break,
            }
        }
        tracing::debug!(%filter, "A live subscription ended.");
    });
    Ok(LiveSubscription {
        messages: receiver,
        guard: Some(Box::new(AbortOnDrop(task))),
    })
}
