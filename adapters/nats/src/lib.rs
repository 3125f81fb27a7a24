//! Swath's event bus on NATS JetStream: the [`EventBus`] port (docs/rules.md §5) with the same contract
//! as the in-memory bus, plus durability across restarts and several replicas sharing one
//! durable consumer.
//!
//! # Layout
//! - [`settings`]: [`NatsBusSettings`] and [`StreamSpec`], the streams provisioned at connect
//!   (production: `TELEMETRY` on `telemetry.mower.*`, partitioned by mower, and `NOTIFICATIONS`
//!   on `notifications.>`, file storage).
//! - `provision`: idempotent creation of streams (with the partitions' subject transform) and
//!   durable pull consumers, safe when replicas start together; the server version check.
//! - `worker`: one task per batch subscription, or per partition: pulls a batch (linger,
//!   `max_batch`), runs the handler, settles, drains on unsubscribe, survives reconnects. Its
//!   module documentation explains why batches are pulled the way they are.
//! - `partitioned`: a subscription to a partitioned subject: one pinned consumer and worker per
//!   partition, and the hand-over from an earlier version's unpartitioned consumer.
//! - `pinning`: a partition worker's pin, its replica's share, keeping and releasing pins.
//! - `membership`: the replicas' heartbeats in the `SWATH_REPLICAS` key-value bucket.
//! - `live`: ack-less live subscriptions on ordered consumers.
//! - `publish`: publishing one message, a unit of work's messages within a window, and a
//!   pipelined stream in order; JetStream's refusals mapped onto the port's errors.
//! - `subjects`: which stream covers a subject filter (the subject and name checks both buses
//!   make are `swath_application::bus_rules`).
//!
//! # Mapping the port onto JetStream
//! - `publish` is a JetStream publish with `Nats-Msg-Id` set to the de-duplication id; it returns
//!   once the stream acknowledged it. A duplicate within the stream's duplicate window is
//!   acknowledged as such and is a successful no-op. A stream at its limits refuses it
//!   ([`BusError::Full`]); no answer, no stream, or a lost connection is
//!   [`BusError::Unavailable`].
//! - `subscribe_batch` provisions a durable pull consumer named `consumer` on the stream that
//!   holds `subject` (`AckPolicy::Explicit`, `max_ack_pending` =
//!   [`MAX_IN_FLIGHT`](swath_application::ports::MAX_IN_FLIGHT), filter = `subject`). Replicas
//!   subscribing to the same name share it: JetStream hands each message to one pull request,
//!   and `max_ack_pending` bounds the messages in flight across all of them. On a partitioned
//!   stream ([`StreamSpec::partitioned`]) a subscription to its pattern is one consumer per
//!   partition (`<consumer>-p<N>`, filter `a.p.<N>.b.*`) with a `pinned_client` priority group:
//!   the server hands a partition to one replica at a time (decisions 63–64). An exclusive
//!   subscription (`BatchSettings::exclusive`) to an unpartitioned subject is the same with one
//!   partition: one pinned consumer `<consumer>-p0` filtering the subject (decision 153).
//! - `Settle::Ack` is `+ACK`, `Redeliver` is `-NAK`, `Drop` is `+TERM`; `Message::delivery` is
//!   JetStream's delivery count.
//! - `subscribe` is an ordered consumer (`AckPolicy::None`, `DeliverPolicy::New`); acknowledged,
//!   durable and queue-group live subscriptions are refused.
//! - `ping` asks JetStream for the account's information: a round trip through JetStream, not
//!   just the connection.
//!
//! # Differences from the memory bus that callers may notice
//! - Messages pulled but not yet handed to a handler when a subscription stops are given back
//!   with `-NAK`, which JetStream counts as a delivery: the next subscriber sees `delivery` 2.
//! - Publication order holds per partition across replicas, and across replicas for an exclusive
//!   consumer; for another unpartitioned consumer it holds per subscription only (each replica
//!   takes its own batches).
//! - A process that dies with a batch in hand leaves it unacknowledged; JetStream redelivers it
//!   after `ack_wait` (4 s by default), and its partitions move to another replica after
//!   [`NatsBusSettings::priority_timeout`] (7 s by default).
//! - A new durable consumer starts where `BatchSettings::start` says: `New` (what is published
//!   after its creation) or `Stored` (everything the stream keeps; the memory bus keeps no stream).
//!   Once created it keeps its position across restarts.
//! - Partitioned streams need NATS 2.11 or newer: `connect` refuses an older server.
//! - Both kinds of subscription need a stream that holds their subject (a provisioned one, or
//!   any stream the server names); otherwise they are refused.
//! - After a NATS restart a waiting batch subscription pulls again within about two
//!   `idle_heartbeat`s, a live one within about four.

pub mod settings;

mod backlog;
mod live;
mod membership;
mod partitioned;
mod pinning;
mod provision;
mod publish;
mod subjects;
mod worker;

pub use membership::MEMBERSHIP_BUCKET;

pub use settings::{
    NatsBusSettings, StreamSpec, StreamStorage, DEFAULT_TELEMETRY_PARTITIONS, NOTIFICATIONS_STREAM,
    TELEMETRY_STREAM, TELEMETRY_SUBJECTS,
};

use async_nats::jetstream::context::DeleteStreamErrorKind;
use async_nats::jetstream::{self, ErrorCode};
use async_nats::{Client, ConnectOptions, Event};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;
use swath_application::bus_rules;
use swath_application::ports::{
    cause, chain, BatchHandler, BatchSettings, BusError, EventBus, LiveOptions, LiveSubscription,
    Publication, Subscription,
};
use tokio::sync::watch;

/// How long `connect` retries provisioning while JetStream does not answer (a cluster electing a
/// leader); past it, start-up fails.
const STARTUP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// JetStream's account information request (the default API prefix, no domain).
const JS_API_INFO: &str = "$JS.API.INFO";

/// The JetStream [`EventBus`]. Cloning it gives another handle on the same connection.
#[derive(Clone)]
pub struct NatsBus {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    js: jetstream::Context,
    settings: NatsBusSettings,
}

impl std::fmt::Debug for NatsBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBus")
            .field("state", &self.inner.client.connection_state())
            .field("streams", &self.inner.settings.streams)
            .finish()
    }
}

impl NatsBus {
    /// Connects to NATS at `url` (e.g. `nats://127.0.0.1:4222`) and provisions
    /// `settings.streams`. Fails with [`BusError::Unavailable`] when NATS cannot be reached or
    /// JetStream does not answer, and with [`BusError::Refused`] when a stream cannot be made to
    /// match its spec.
    ///
    /// Once connected, the client reconnects on its own for as long as the process runs: a NATS
    /// restart makes the bus unavailable for a while, never dead.
    pub async fn connect(url: &str, settings: NatsBusSettings) -> Result<NatsBus, BusError> {
        let servers = servers(url)?;
        let mut options = ConnectOptions::new();
        if let Some(creds) = &settings.credentials {
            options = options.credentials_file(creds).await.map_err(|e| {
                BusError::Refused(format!(
                    "reading the NATS credentials file {}: {e}",
                    creds.display()
                ))
            })?;
        }
        if let Some(ca) = &settings.tls_ca {
            options = options.add_root_certificates(ca.clone());
        }
        let client = options
            .name(&settings.connection_name)
            .connection_timeout(settings.request_timeout)
            .request_timeout(Some(settings.request_timeout))
            .event_callback(|event| async move { log_event(event) })
            .connect(servers)
            .await
            .map_err(|e| {
                BusError::Unavailable(cause::context(format!("connecting to NATS at {url}"), e))
            })?;
        let partitioned = settings.streams.iter().any(|s| s.partitions.is_some());
        if partitioned {
            provision::check_server_version(&client.server_info().version)?;
        }
        let js = jetstream::ContextBuilder::new()
            .timeout(settings.request_timeout)
            .build(client.clone());
        // A cluster electing a leader (a node just restarted) answers JetStream requests with
        // time-outs for a few seconds: start-up waits that out rather than exit.
        let started = std::time::Instant::now();
        for spec in &settings.streams {
            loop {
                match provision::provision_stream(&js, spec, settings.replicas).await {
                    Ok(()) => break,
                    Err(BusError::Unavailable(why)) if started.elapsed() < STARTUP_PATIENCE => {
                        tracing::warn!(stream = %spec.name, why = %chain(&*why), "JetStream is not answering yet; retrying.");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        tracing::info!(
            url,
            streams = settings.streams.len(),
            "Connected to NATS JetStream."
        );
        Ok(NatsBus {
            inner: Arc::new(Inner {
                client,
                js,
                settings,
            }),
        })
    }

    /// The partitioning of a provisioned stream, if it has one.
    fn partitioning_of(
        &self,
        stream: &jetstream::stream::Stream,
    ) -> Result<Option<swath_application::ports::Partitioning>, BusError> {
        let name = &stream.cached_info().config.name;
        self.inner
            .settings
            .streams
            .iter()
            .find(|spec| &spec.name == name)
            .map(StreamSpec::partitioning)
            .transpose()
            .map(Option::flatten)
    }

    /// The bus's settings.
    pub fn settings(&self) -> &NatsBusSettings {
        &self.inner.settings
    }

    /// Deletes a stream with its messages and consumers (for tests and operators); a missing
    /// stream is not an error.
    pub async fn delete_stream(&self, name: &str) -> Result<(), BusError> {
        match self.inner.js.delete_stream(name).await {
            Ok(_) => Ok(()),
            Err(e) => match e.kind() {
                DeleteStreamErrorKind::JetStream(err)
                    if err.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                {
                    Ok(())
                }
                _ => Err(provision::unavailable("deleting stream", name, e)),
            },
        }
    }

    /// A durable consumer's backlog on `stream`: messages not delivered yet (`num_pending`) and
    /// delivered but not settled (`num_ack_pending`). For operators' checks and tests.
    pub async fn consumer_backlog(
        &self,
        stream: &str,
        consumer: &str,
    ) -> Result<(u64, usize), BusError> {
        let stream = self
            .inner
            .js
            .get_stream(stream)
            .await
            .map_err(|e| provision::unavailable("reading stream", stream, e))?;
        let mut pull: jetstream::consumer::PullConsumer = stream
            .get_consumer(consumer)
            .await
            .map_err(|e| provision::unavailable("reading consumer", consumer, e))?;
        let info = pull
            .info()
            .await
            .map_err(|e| provision::unavailable("reading consumer", consumer, e))?;
        Ok((info.num_pending, info.num_ack_pending))
    }

    /// Flushes what the connection has buffered to the server.
    pub async fn flush(&self) -> Result<(), BusError> {
        tokio::time::timeout(
            self.inner.settings.request_timeout,
            self.inner.client.flush(),
        )
        .await
        .map_err(|_| BusError::Unavailable("flushing the NATS connection timed out".into()))?
        .map_err(|e| BusError::Unavailable(cause::context("flushing the NATS connection", e)))
    }
}

/// The servers of a NATS URL: one, or several comma-separated seeds of a cluster
/// (`nats://n1:4222,nats://n2:4222`), each `nats://`, `tls://`, `ws://`, `wss://` or `host:port`,
/// credentials (`user:password@`) allowed. [`BusError::Refused`] names the one that does not parse.
pub fn servers(url: &str) -> Result<Vec<async_nats::ServerAddr>, BusError> {
    url.split(',')
        .map(str::trim)
        .map(|server| {
            if server.is_empty() {
                return Err(BusError::Refused(format!(
                    "an empty server in the NATS URL {url:?}"
                )));
            }
            server
                .parse::<async_nats::ServerAddr>()
                .map_err(|e| BusError::Refused(format!("the NATS server {server:?}: {e}")))
        })
        .collect()
}

/// Logs the connection's life: losing NATS is worth a warning, getting it back an info line.
fn log_event(event: Event) {
    match event {
        Event::Connected => tracing::info!("Connected to NATS."),
        Event::Disconnected => tracing::warn!("Lost the connection to NATS; reconnecting."),
        Event::LameDuckMode => tracing::warn!("The NATS server is shutting down (lame duck mode)."),
        Event::SlowConsumer(sid) => {
            tracing::warn!(sid, "A NATS subscription fell behind and lost messages.")
        }
        Event::ServerError(e) => tracing::warn!(error = %e, "The NATS server reported an error."),
        Event::ClientError(e) => tracing::warn!(error = %e, "The NATS client reported an error."),
        Event::Draining | Event::Closed => tracing::debug!(%event, "NATS connection event."),
    }
}

#[async_trait]
impl EventBus for NatsBus {
    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        self.publish_jetstream(subject, payload, dedup_id).await
    }

    async fn publish_all(&self, messages: Vec<Publication>) -> Vec<Result<(), BusError>> {
        self.publish_all_windowed(messages).await
    }

    async fn subscribe_batch(
        &self,
        subject: &str,
        consumer: &str,
        settings: BatchSettings,
        handler: Arc<dyn BatchHandler>,
    ) -> Result<Subscription, BusError> {
        // As at connect: a cluster electing a leader is waited out, within the start-up patience.
        let started = std::time::Instant::now();
        loop {
            match self
                .subscribe_batch_once(subject, consumer, settings, Arc::clone(&handler))
                .await
            {
                Err(BusError::Unavailable(why)) if started.elapsed() < STARTUP_PATIENCE => {
                    tracing::warn!(consumer, why = %chain(&*why), "JetStream is not answering yet; retrying.");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                other => return other,
            }
        }
    }

    async fn subscribe(
        &self,
        subject: &str,
        options: LiveOptions,
    ) -> Result<LiveSubscription, BusError> {
        self.subscribe_live(subject, options).await
    }

    async fn ping(&self) -> Result<(), BusError> {
        self.ping_jetstream().await
    }
}

impl NatsBus {
    async fn subscribe_batch_once(
        &self,
        subject: &str,
        consumer: &str,
        settings: BatchSettings,
        handler: Arc<dyn BatchHandler>,
    ) -> Result<Subscription, BusError> {
        bus_rules::check_filter(subject)?;
        let bus = &self.inner.settings;
        let stream = provision::stream_for(&self.inner.js, &bus.streams, subject).await?;
        let partitioning = self.partitioning_of(&stream)?;
        if let Some(partitioning) =
            bus_rules::check_batch_subscription(subject, consumer, partitioning.iter())?
        {
            let on = partitioned::Bus {
                client: &self.inner.client,
                js: &self.inner.js,
                settings: bus,
            };
            let pinned = partitioned::Pinned::Partitions(partitioning);
            return partitioned::subscribe(on, stream, pinned, consumer, settings, handler).await;
        }
        if settings.exclusive {
            // Pins need priority groups, which `connect` checked only for a partitioned stream.
            provision::check_server_version(&self.inner.client.server_info().version)?;
            let on = partitioned::Bus {
                client: &self.inner.client,
                js: &self.inner.js,
                settings: bus,
            };
            let pinned = partitioned::Pinned::Exclusive(subject);
            return partitioned::subscribe(on, stream, pinned, consumer, settings, handler).await;
        }
        let wanted = provision::durable_config(
            consumer,
            subject,
            bus.ack_wait,
            settings.start,
            provision::Sharing::Shared,
        );
        let pull_consumer = provision::provision_consumer(&stream, wanted.clone()).await?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let worker = worker::Worker::new(
            &self.inner.client,
            &self.inner.js,
            bus,
            stream,
            pull_consumer,
            wanted,
            consumer.to_owned(),
            settings,
            handler,
            stop_rx,
        );
        tracing::debug!(
            consumer,
            subject,
            max_batch = worker.max_batch,
            "Subscribed to a durable consumer."
        );
        Ok(Subscription::new(stop_tx, tokio::spawn(worker.run())))
    }

    async fn subscribe_live(
        &self,
        subject: &str,
        options: LiveOptions,
    ) -> Result<LiveSubscription, BusError> {
        bus_rules::check_live(subject, &options)?;
        let settings = &self.inner.settings;
        let stream = provision::stream_for(&self.inner.js, &settings.streams, subject).await?;
        // On a partitioned stream the stored subjects are the partitioned ones.
        let stored = match self.partitioning_of(&stream)? {
            Some(partitioning) => provision::live_filter(&partitioning, subject)?,
            None => None,
        };
        live::subscribe(
            &stream,
            stored.as_deref().unwrap_or(subject),
            stored.is_some(),
            settings.live_buffer,
            settings.idle_heartbeat,
        )
        .await
    }

    async fn ping_jetstream(&self) -> Result<(), BusError> {
        // A raw `$JS.API.INFO` request rather than `Context::query_account`: its typed response
        // does not parse the answer of every server version, and readiness needs only to know
        // that JetStream answered without an error.
        let request = self.inner.client.request(JS_API_INFO, Bytes::new());
        let answer = tokio::time::timeout(self.inner.settings.request_timeout, request)
            .await
            .map_err(|_| BusError::Unavailable("JetStream did not answer in time".into()))?
            .map_err(|e| BusError::Unavailable(cause::context("JetStream", e)))?;
        let info: serde_json::Value = serde_json::from_slice(&answer.payload)
            .map_err(|e| BusError::Unavailable(cause::context("JetStream answered nonsense", e)))?;
        match info.get("error") {
            None => Ok(()),
            Some(error) => Err(BusError::Unavailable(format!("JetStream: {error}").into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_one_server_or_a_cluster_s_seeds() {
        assert_eq!(servers("nats://127.0.0.1:4222").unwrap().len(), 1);
        let seeds =
            servers("nats://127.0.0.1:14501, nats://127.0.0.1:14502,tls://n3:4222").unwrap();
        assert_eq!(seeds.len(), 3);
        assert_eq!(seeds[1].port(), 14502);
        assert!(seeds[2].tls_required());
        assert_eq!(
            servers("user:secret@n1:4222").unwrap()[0].username(),
            Some("user")
        );
        for bad in ["nats://a:4222,", "nats://a:notaport", ",nats://a:4222"] {
            let e = servers(bad).unwrap_err().to_string();
            assert!(e.contains("NATS"), "{bad}: {e}");
        }
    }
}
