//! What a [`NatsBus`](crate::NatsBus) is configured with: the streams it provisions and the
//! timings of its pull requests.

use std::time::Duration;

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
/// a publish is refused ([`BusError::Full`](swath_application::ports::BusError::Full)) instead
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
        }
    }

    /// `TELEMETRY`: every state a mower reports (`telemetry.>`), kept seven days so that a
    /// consumer that was down can catch up and an operator can replay, without the stream
    /// growing forever.
    pub fn telemetry() -> Self {
        Self {
            max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            ..Self::new(TELEMETRY_STREAM, ["telemetry.>"])
        }
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
    /// How long a pull request that waits for a first message lives before it is renewed (10 s).
    /// Renewing is cheap; a shorter life only bounds how long a request the server forgot (a
    /// restart) could go unnoticed if heartbeats were off.
    pub pull_expiry: Duration,
    /// The idle heartbeat asked of the server on waiting pull requests (2 s). Two missed
    /// heartbeats and the request is given up and made again, so a NATS restart never stalls a
    /// subscription silently.
    pub idle_heartbeat: Duration,
    /// JetStream `ack_wait` of the durable consumers (30 s): a message delivered and neither
    /// acknowledged nor refused within it is redelivered. While a handler runs longer, the bus
    /// tells the server it is still working on the batch (`+WPI`), so this only matters when a
    /// process dies.
    pub ack_wait: Duration,
    /// The buffer of each live subscription; a subscriber that falls further behind loses
    /// messages (1024).
    pub live_buffer: usize,
}

impl Default for NatsBusSettings {
    fn default() -> Self {
        Self {
            streams: vec![StreamSpec::telemetry(), StreamSpec::notifications()],
            connection_name: "swath".to_owned(),
            request_timeout: Duration::from_secs(5),
            pull_expiry: Duration::from_secs(10),
            idle_heartbeat: Duration::from_secs(2),
            ack_wait: Duration::from_secs(30),
            live_buffer: 1024,
        }
    }
}

impl NatsBusSettings {
    /// The default timings with these streams only (tests use one stream of their own).
    pub fn with_streams(streams: Vec<StreamSpec>) -> Self {
        Self {
            streams,
            ..Self::default()
        }
    }
}
