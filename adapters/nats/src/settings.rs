//! What a [`NatsBus`](crate::NatsBus) is configured with: the streams it provisions and the
//! timings of its pull requests.

use std::path::PathBuf;
use std::time::Duration;
use swath_application::ports::{BusError, Partitioning};

/// How many partitions the telemetry subjects get unless configured (`SWATH_TELEMETRY_PARTITIONS`).
pub const DEFAULT_TELEMETRY_PARTITIONS: u32 = 8;

/// The subjects gateways publish states on; the telemetry stream partitions them by mower.
pub const TELEMETRY_SUBJECTS: &str = "telemetry.mower.*";

/// The stream of mower states (docs/rules.md §5).
pub const TELEMETRY_STREAM: &str = "TELEMETRY";
/// The stream of events derived by the watcher (notifications, alerts).
pub const NOTIFICATIONS_STREAM: &str = "NOTIFICATIONS";

/// Where a stream keeps its messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamStorage {
    /// On disk: survives a NATS restart (what Swath's streams use).
    #[default]
    File,
    /// In memory: lost when NATS restarts.
    Memory,
}

/// A stream to provision at connect.
///
/// Provisioning is idempotent: a missing stream is created; an existing one keeps whatever an
/// operator set that this spec does not mention (replicas, placement, …) and gets the fields
/// below where they differ. A stream whose storage differs cannot be converted by NATS, so
/// `connect` refuses it rather than run on a stream that would lose messages on a restart.
///
/// The stream always uses limits retention with `DiscardPolicy::New`: when a limit is reached,
/// a publish is refused ([`BusError::Full`]) instead
/// of silently discarding the oldest, possibly unconsumed, messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSpec {
    pub name: String,
    /// The subjects the stream captures (NATS wildcards allowed).
    pub subjects: Vec<String>,
    pub storage: StreamStorage,
    /// Messages older than this are removed, consumed or not; `None` keeps them forever.
    pub max_age: Option<Duration>,
    /// The most messages kept; `None` for no limit.
    pub max_messages: Option<i64>,
    /// The most bytes kept; `None` for no limit.
    pub max_bytes: Option<i64>,
    /// How long a `Nats-Msg-Id` is remembered for de-duplication.
    pub duplicate_window: Duration,
    /// Partitions of the stream's one subject pattern (literal tokens then `*`, the key): the
    /// stream stores `a.b.<key>` as `a.p.<N>.b.<key>` (a subject transform hashing the key as
    /// [`Partitioning::partition_of`] does), and a consumer of the pattern is one durable
    /// consumer per partition, pinned to one replica at a time (see the crate documentation).
    pub partitions: Option<u32>,
}

impl StreamSpec {
    /// A file-backed stream without limits and NATS's default two-minute duplicate window.
    pub fn new(
        name: impl Into<String>,
        subjects: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            subjects: subjects.into_iter().map(Into::into).collect(),
            storage: StreamStorage::File,
            max_age: None,
            max_messages: None,
            max_bytes: None,
            duplicate_window: Duration::from_secs(120),
            partitions: None,
        }
    }

    /// This spec with its one subject pattern split in `partitions`.
    pub fn partitioned(self, partitions: u32) -> Self {
        Self {
            partitions: Some(partitions),
            ..self
        }
    }

    /// The partitioning of the stream's subject, when it has one; refused when the spec is not
    /// one pattern of literal tokens and a last `*`, or the count is out of range.
    pub fn partitioning(&self) -> Result<Option<Partitioning>, BusError> {
        let Some(partitions) = self.partitions else {
            return Ok(None);
        };
        match self.subjects.as_slice() {
            [pattern] => Partitioning::new(pattern.clone(), partitions).map(Some),
            _ => Err(BusError::Refused(format!(
                "stream {}: a partitioned stream has exactly one subject pattern",
                self.name
            ))),
        }
    }

    /// `TELEMETRY`: every state a mower reports (`telemetry.mower.<id>`), split by mower in
    /// [`DEFAULT_TELEMETRY_PARTITIONS`] (see [`StreamSpec::partitioned`]), kept seven days so that
    /// a consumer that was down can catch up and an operator can replay, without the stream
    /// growing forever. Only `telemetry.mower.*` is captured: a subject of the partitioned form
    /// published directly would bypass the mower's partition.
    pub fn telemetry() -> Self {
        Self {
            max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            ..Self::new(TELEMETRY_STREAM, [TELEMETRY_SUBJECTS])
        }
        .partitioned(DEFAULT_TELEMETRY_PARTITIONS)
    }

    /// `NOTIFICATIONS`: the events the watcher derives (`notifications.>`), kept seven days.
    pub fn notifications() -> Self {
        Self {
            max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            ..Self::new(NOTIFICATIONS_STREAM, ["notifications.>"])
        }
    }
}

/// Settings of a [`NatsBus`](crate::NatsBus).
#[derive(Clone, Debug, PartialEq)]
pub struct NatsBusSettings {
    /// Provisioned at connect, in order. Default: [`StreamSpec::telemetry`] and
    /// [`StreamSpec::notifications`].
    pub streams: Vec<StreamSpec>,
    /// The connection's name, as NATS monitoring shows it.
    pub connection_name: String,
    /// How long a JetStream API call, a publish acknowledgement or an acknowledgement's
    /// confirmation may take before the bus counts NATS as unavailable (5 s).
    pub request_timeout: Duration,
    /// How long a pull request that waits for a first message lives before it is renewed (2 s).
    /// A pinned replica's waiting pulls keep its pin, so this must stay well below the pin's
    /// timeout; renewing is cheap.
    pub pull_expiry: Duration,
    /// The idle heartbeat asked of the server on waiting pull requests (1 s). Two missed
    /// heartbeats and the request is given up and made again, so a NATS restart never stalls a
    /// subscription silently.
    pub idle_heartbeat: Duration,
    /// JetStream `ack_wait` of the durable consumers (4 s): a message delivered and neither
    /// acknowledged nor refused within it is redelivered. While a handler runs longer, the bus
    /// tells the server it is still working on the batch (`+WPI`), so this only matters when a
    /// process dies; it bounds, with `pull_expiry`, how long a partition of a dead replica waits
    /// for another (see [`NatsBusSettings::priority_timeout`]).
    pub ack_wait: Duration,
    /// How often a replica renews its membership in the balance of partitions (1 s); a replica
    /// silent for three times this is no longer counted.
    pub membership_heartbeat: Duration,
    /// The buffer of each live subscription; a subscriber that falls further behind loses
    /// messages (1024).
    pub live_buffer: usize,
    /// Replicas of every stream and bucket Swath provisions (3 on a three-node cluster: a
    /// publish is acknowledged once a majority stored it). An existing stream is brought to this
    /// count (NATS moves the data). `None`: a new stream gets one, an existing one keeps what an
    /// operator set.
    pub replicas: Option<usize>,
    /// A NATS credentials file (JWT and NKey seed) to authenticate with, if any. A user and
    /// password go in the URL (`nats://user:password@host:4222`).
    pub credentials: Option<PathBuf>,
    /// A PEM file of the certificate authorities that sign the servers' certificates, when they
    /// are not in the system's roots; `tls://` URLs (or a server that requires TLS) use TLS.
    pub tls_ca: Option<PathBuf>,
}

impl Default for NatsBusSettings {
    fn default() -> Self {
        Self {
            streams: vec![StreamSpec::telemetry(), StreamSpec::notifications()],
            connection_name: "swath".to_owned(),
            request_timeout: Duration::from_secs(5),
            pull_expiry: Duration::from_secs(2),
            idle_heartbeat: Duration::from_secs(1),
            ack_wait: Duration::from_secs(4),
            membership_heartbeat: Duration::from_secs(1),
            live_buffer: 1024,
            replicas: None,
            credentials: None,
            tls_ca: None,
        }
    }
}

impl NatsBusSettings {
    /// How long a partition stays pinned to a replica that stopped pulling: `ack_wait` plus
    /// `pull_expiry` plus one second. A dead replica's last pull lived up to `pull_expiry`, and
    /// what it was delivered is redelivered `ack_wait` after its last sign of life; with this
    /// timeout the partition's next holder is pinned only once all of it is due, so it gets those
    /// redeliveries before anything newer (decision 63).
    pub fn priority_timeout(&self) -> Duration {
        self.ack_wait + self.pull_expiry + Duration::from_secs(1)
    }

    /// The default timings with these streams only (tests use one stream of their own).
    pub fn with_streams(streams: Vec<StreamSpec>) -> Self {
        Self {
            streams,
            ..Self::default()
        }
    }
}
