use super::Cause;
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The most messages delivered and not yet settled, per consumer and partition (JetStream
/// `max_ack_pending`).
pub const MAX_IN_FLIGHT: usize = 1000;

/// A message as a handler sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub subject: String,
    pub payload: Bytes,
    /// 1 on the first delivery, 2 on the first redelivery, …
    pub delivery: u32,
}

/// What a batch handler answers for each message of its batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// Done: never delivered again.
    Ack,
    /// Not done: deliver it again later (JetStream `nak`).
    Redeliver,
    /// Never deliver it again, it cannot succeed (JetStream `term`).
    Drop,
}

/// How a batch subscription collects its batches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchSettings {
    /// The most messages in one batch; clamped to [`MAX_IN_FLIGHT`].
    pub max_batch: usize,
    /// How long to linger for more messages once the first has arrived. Zero batches only what
    /// queued up while the previous batch ran.
    pub max_wait: Duration,
    /// On unsubscribe, how long the running batch may take to finish and be settled.
    pub drain_timeout: Duration,
    /// After a failed batch, how long to wait before delivering again (no hot loop while a
    /// database is down).
    pub redelivery_delay: Duration,
    /// Where a durable consumer created by this subscription starts; an existing consumer keeps
    /// its position whatever this says.
    pub start: StartAt,
    /// One holder at a time for an unpartitioned consumer: its messages are handled by one
    /// subscription at a time, across every subscription (and replica) of the consumer, as one
    /// partition of a partitioned consumer is, and what its holder leaves unsettled comes to
    /// the next holder before anything newer. For a consumer whose stream order must survive a
    /// replica's crash (the webhooks' enqueuer, decision 153); a partitioned consumer is
    /// exclusive per partition already, and ignores it.
    pub exclusive: bool,
}

/// Where a new durable consumer starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StartAt {
    /// With what is published from its creation on: a consumer added later (a watcher, say)
    /// does not replay history.
    #[default]
    New,
    /// With every message the bus still holds for its subject: nothing stored before the
    /// consumer existed is skipped (ingestion). JetStream holds its streams' messages; the
    /// memory bus holds messages only in its consumers' queues, so there this is `New`.
    Stored,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            max_batch: 64,
            max_wait: Duration::from_millis(200),
            drain_timeout: Duration::from_secs(10),
            redelivery_delay: Duration::from_millis(500),
            start: StartAt::New,
            exclusive: false,
        }
    }
}

/// A handler failed as a whole (e.g. the store is down): the whole batch is redelivered.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HandlerError(#[source] pub Cause);

/// Handles the batches of a [`EventBus::subscribe_batch`] subscription.
#[async_trait]
pub trait BatchHandler: Send + Sync + 'static {
    /// Returns exactly one [`Settle`] per message, in order. A list of another length is treated
    /// like an error: the whole batch is redelivered.
    async fn handle(&self, batch: &[Message]) -> Result<Vec<Settle>, HandlerError>;
}

/// Options of an ack-less live subscription.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveOptions {
    /// Must be `false`: acknowledged consumers use [`EventBus::subscribe_batch`].
    pub acknowledge: bool,
    /// Must be `None`: a durable consumer needs acknowledgements.
    pub durable: Option<String>,
    /// Must be `None`: a queue group shares work, which needs acknowledgements.
    pub queue_group: Option<String>,
}

/// Errors of the [`EventBus`] port.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The request contradicts the contract (e.g. an ack-less durable consumer).
    #[error("refused: {0}")]
    Refused(String),
    /// The stream is at its limit; nothing was published.
    #[error("stream full, message to {0} not accepted")]
    Full(String),
    /// The bus could not be reached; the caller may retry.
    #[error("bus unavailable: {0}")]
    Unavailable(#[source] Cause),
}

/// A running batch subscription. [`Subscription::unsubscribe`] stops it.
pub struct Subscription {
    stop: watch::Sender<bool>,
    worker: JoinHandle<()>,
    owned: Arc<AtomicUsize>,
}

impl Subscription {
    /// For adapters: `stop` turns `true` on unsubscribe; `worker` ends once it has drained.
    pub fn new(stop: watch::Sender<bool>, worker: JoinHandle<()>) -> Self {
        Self {
            stop,
            worker,
            owned: Arc::default(),
        }
    }

    /// For adapters: `owned` counts the partitions this subscription holds at the moment.
    pub fn with_partitions_owned(mut self, owned: Arc<AtomicUsize>) -> Self {
        self.owned = owned;
        self
    }

    /// How many partitions of its consumer this subscription holds now (0 when it is a standby,
    /// or when the adapter does not say); for metrics and the balance across replicas.
    pub fn partitions_owned(&self) -> usize {
        self.owned.load(Ordering::Relaxed)
    }

    /// The counter behind [`Subscription::partitions_owned`], for a reporter that outlives a
    /// borrow of the subscription (a metrics task).
    pub fn partitions_owned_counter(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.owned)
    }

    /// Stops new deliveries, lets the running batch finish and be settled within the drain
    /// timeout, and returns when the worker has ended. What stays unsettled is redelivered.
    pub async fn unsubscribe(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.worker.await {
            tracing::error!(error = %e, "A bus subscription worker ended abnormally.");
        }
    }
}

/// An ack-less live subscription: messages from the moment of subscribing, none acknowledged,
/// none redelivered. A subscriber that falls behind loses messages (counted by the adapter), it
/// never slows the publishers. Dropping it unsubscribes.
pub struct LiveSubscription {
    pub messages: mpsc::Receiver<Message>,
    /// Kept alive for as long as the subscription; adapters may put a guard here.
    pub guard: Option<Box<dyn Send + Sync>>,
}

/// One message for [`EventBus::publish_all`].
#[derive(Clone, Debug, PartialEq)]
pub struct Publication {
    pub subject: String,
    pub payload: Bytes,
    pub dedup_id: Option<String>,
}

/// The event bus (docs/rules.md §5).
///
/// An implementation MUST:
/// - `publish`: store the message for every consumer whose subject filter matches (NATS wildcards
///   `*` and `>`), and return only once it is stored; a `dedup_id` seen within the
///   de-duplication window makes the publish a no-op that succeeds.
/// - `publish_all`: what `publish` does for each message, stored in the order given, with one
///   result per message; it returns once every message is stored or has failed. It MAY send a
///   message before the previous one is stored (the default implementation does not). A refused
///   message does not stop the ones after it; once the bus has not answered within its timeout,
///   the messages not sent yet MAY fail at once with [`BusError::Unavailable`] (a unit of work's
///   events must not wait a timeout each).
/// - `subscribe_batch`: deliver the messages of the durable `consumer` to `handler` in batches:
///   once a message is there, linger up to `max_wait` for more, up to `max_batch`; batches of one
///   subscription never overlap and keep publication order; settle each message only after the
///   handler returned, as it answered; on a handler error (or a wrong number of answers)
///   redeliver the whole batch after `redelivery_delay`; never have more than [`MAX_IN_FLIGHT`]
///   messages delivered and unsettled. Several subscriptions to the same consumer share its
///   messages (each message goes to one of them). What a subscription leaves unsettled when it
///   ends (unsubscribed past the drain timeout, or its process killed) is redelivered to the
///   consumer's next subscription **before** any message published after it (docs/rules.md §5).
///   A new consumer starts where `settings.start` says.
/// - Partitions: when the bus partitions `subject` ([`Partitioning`](super::Partitioning), e.g.
///   `telemetry.mower.*` by mower), the consumer has one queue per partition and everything
///   above holds per partition, **across every subscription of the consumer**: a partition is
///   handled by one subscription at a time (it may move to another between batches, or when its
///   holder ends), so its batches never overlap and keep publication order, and what its holder
///   leaves unsettled comes to the next holder before anything newer. Batches of different
///   partitions run concurrently, also inside one subscription (the handler MUST accept
///   concurrent calls; they never share a partition key). Subscriptions of one consumer share
///   its partitions. A filter that overlaps a partitioned pattern without being it is refused
///   ([`BusError::Refused`]).
/// - Exclusive consumers: a subscription with [`BatchSettings::exclusive`] to an unpartitioned
///   subject has the partitions' guarantees with one partition: one subscription at a time
///   handles the consumer, and what its holder leaves unsettled comes to the next holder before
///   any newer message. Every subscription of one consumer must agree on it.
/// - `subscribe`: an ack-less live view; refused with [`BusError::Refused`] when
///   `options.acknowledge` is set or a durable name or a queue group is given.
/// - return [`BusError::Unavailable`] when the bus cannot be reached.
#[async_trait]
pub trait EventBus: Send + Sync {
    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError>;

    /// See the trait's contract; by default, one [`EventBus::publish`] after the other.
    async fn publish_all(&self, messages: Vec<Publication>) -> Vec<Result<(), BusError>> {
        let mut results = Vec::with_capacity(messages.len());
        for message in messages {
            results.push(
                self.publish(&message.subject, message.payload, message.dedup_id)
                    .await,
            );
        }
        results
    }

    async fn subscribe_batch(
        &self,
        subject: &str,
        consumer: &str,
        settings: BatchSettings,
        handler: Arc<dyn BatchHandler>,
    ) -> Result<Subscription, BusError>;

    async fn subscribe(
        &self,
        subject: &str,
        options: LiveOptions,
    ) -> Result<LiveSubscription, BusError>;

    /// Whether the bus answers (for `/readyz`).
    async fn ping(&self) -> Result<(), BusError>;
}
