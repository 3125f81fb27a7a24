//! Idempotent provisioning of streams (at connect) and durable pull consumers (at
//! `subscribe_batch`), and the look-up of the stream that holds a subject filter.
//!
//! Every replica of the service runs this at start-up, possibly at the same moment, so each step
//! tolerates finding the work already done: a stream or consumer that exists with the wanted
//! configuration is used as it is, and a create that loses a race falls back to using what the
//! winner created.

use crate::settings::{StreamSpec, StreamStorage};
use crate::subjects::covers;
use async_nats::jetstream::consumer::{
    pull, AckPolicy, DeliverPolicy, PriorityPolicy, PullConsumer,
};
use async_nats::jetstream::context::{
    CreateStreamErrorKind, GetStreamByNameErrorKind, GetStreamErrorKind,
};
use async_nats::jetstream::stream::{self, ConsumerErrorKind};
use async_nats::jetstream::{self, ErrorCode};
use std::time::Duration;
use swath_application::ports::{cause, BusError, Cause, Partitioning, StartAt, MAX_IN_FLIGHT};

/// The priority group every pull on a partition's consumer names.
pub(crate) const PIN_GROUP: &str = "swath";

/// Where a partitioned stream stores a subject of `pattern` (`a.b.*` → `a.p.<N>.b.<key>`): the
/// first token, `p`, the partition, the other literal tokens, the key.
fn partitioned_form(pattern: &str, partition: &str, key: &str) -> String {
    let literal = pattern.strip_suffix(".*").unwrap_or(pattern);
    match literal.split_once('.') {
        Some((first, rest)) => format!("{first}.p.{partition}.{rest}.{key}"),
        None => format!("{literal}.p.{partition}.{key}"),
    }
}

/// The stream subject transform of a partitioning.
pub(crate) fn transform(partitioning: &Partitioning) -> stream::SubjectTransform {
    let partition = format!("{{{{partition({},1)}}}}", partitioning.partitions());
    stream::SubjectTransform {
        source: partitioning.subjects().to_owned(),
        destination: partitioned_form(partitioning.subjects(), &partition, "{{wildcard(1)}}"),
    }
}

/// The filter of partition `n`'s consumers.
pub(crate) fn partition_filter(partitioning: &Partitioning, n: u32) -> String {
    partitioned_form(partitioning.subjects(), &n.to_string(), "*")
}

/// What a live view filtering `filter` asks a partitioned stream for: the pattern itself is every
/// partition (`a.p.*.b.*`), one subject of it is that subject's partitioned form; `None` when the
/// filter shares nothing with the pattern; refused when it overlaps it otherwise (the stored
/// subjects of part of the pattern cannot be filtered).
pub(crate) fn live_filter(
    partitioning: &Partitioning,
    filter: &str,
) -> Result<Option<String>, BusError> {
    if filter == partitioning.subjects() {
        return Ok(Some(partitioned_form(filter, "*", "*")));
    }
    let literal = !filter.split('.').any(|t| t == "*" || t == ">");
    if let (true, Some(n)) = (literal, partitioning.partition_of(filter)) {
        let (_, key) = filter.rsplit_once('.').unwrap_or_default();
        return Ok(Some(partitioned_form(
            partitioning.subjects(),
            &n.to_string(),
            key,
        )));
    }
    partitioning.admits(filter).map(|_| None)
}

/// The subject a gateway published on, from the one a partitioned stream stored
/// (`a.p.<N>.b.<key>` → `a.b.<key>`): handlers see what was published, as on the memory bus.
pub(crate) fn published_subject(stored: &str) -> String {
    let mut tokens = stored.splitn(4, '.');
    match (tokens.next(), tokens.next(), tokens.next(), tokens.next()) {
        (Some(first), Some("p"), Some(n), Some(rest)) if n.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{first}.{rest}")
        }
        _ => stored.to_owned(),
    }
}

/// The oldest NATS server Swath runs on: stream subject transforms (2.10) and priority groups
/// with pinned clients (2.11).
pub(crate) const MINIMUM_SERVER: (u64, u64) = (2, 11);

/// Refuses a server older than [`MINIMUM_SERVER`], naming both versions.
pub(crate) fn check_server_version(version: &str) -> Result<(), BusError> {
    let mut parts = version
        .trim_start_matches('v')
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found >= MINIMUM_SERVER {
        Ok(())
    } else {
        Err(BusError::Refused(format!(
            "the NATS server is {version}; Swath needs {}.{} or newer (stream subject transforms \
             and pinned consumers; README \"On NATS JetStream\" says how to install one)",
            MINIMUM_SERVER.0, MINIMUM_SERVER.1
        )))
    }
}

/// The JetStream configuration a spec asks for, laid over `base` (an existing stream's
/// configuration, or the defaults) so that fields the spec does not mention are kept.
fn apply(
    spec: &StreamSpec,
    replicas: Option<usize>,
    base: &stream::Config,
) -> Result<stream::Config, BusError> {
    let subject_transform = spec.partitioning()?.as_ref().map(transform);
    Ok(stream::Config {
        subject_transform,
        num_replicas: replicas.unwrap_or(base.num_replicas).max(1),
        name: spec.name.clone(),
        subjects: spec.subjects.clone(),
        storage: match spec.storage {
            StreamStorage::File => stream::StorageType::File,
            StreamStorage::Memory => stream::StorageType::Memory,
        },
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::New,
        max_age: spec.max_age.unwrap_or(Duration::ZERO),
        max_messages: spec.max_messages.unwrap_or(-1),
        max_bytes: spec.max_bytes.unwrap_or(-1),
        duplicate_window: spec.duplicate_window,
        ..base.clone()
    })
}

/// Creates the stream, or brings an existing one in line with the spec.
pub(crate) async fn provision_stream(
    js: &jetstream::Context,
    spec: &StreamSpec,
    replicas: Option<usize>,
) -> Result<(), BusError> {
    // Two attempts: a create can lose a race against another replica creating the same stream,
    // after which the second pass finds it.
    for _ in 0..2 {
        match js.get_stream(&spec.name).await {
            Ok(existing) => {
                // `get_stream` fetched the stream's information already.
                let current = existing.cached_info().config.clone();
                let wanted = apply(spec, replicas, &current)?;
                if wanted == current {
                    tracing::debug!(stream = %spec.name, "The stream is provisioned.");
                    return Ok(());
                }
                if let (Some(now), Some(asked)) =
                    (&current.subject_transform, &wanted.subject_transform)
                {
                    if now != asked {
                        // Another partition count would put a mower's newer states in another
                        // partition than its older, unconsumed ones: two consumers, no order.
                        return Err(BusError::Refused(format!(
                            "stream {} is partitioned as {} -> {}, not {}: the partition count \
                             of a deployment cannot change in place (docs/operations.md)",
                            spec.name, now.source, now.destination, asked.destination
                        )));
                    }
                }
                if wanted.storage != current.storage {
                    return Err(BusError::Refused(format!(
                        "stream {} exists with {:?} storage, not {:?}; NATS cannot convert it",
                        spec.name, current.storage, wanted.storage
                    )));
                }
                js.update_stream(wanted).await.map_err(|e| match e.kind() {
                    CreateStreamErrorKind::JetStream(err) => {
                        BusError::Refused(format!("updating stream {}: {err}", spec.name))
                    }
                    _ => unavailable("updating stream", &spec.name, e),
                })?;
                tracing::info!(stream = %spec.name, "Updated the stream's configuration.");
                return Ok(());
            }
            Err(e) if is_not_found(&e) => {
                match js
                    .create_stream(apply(spec, replicas, &stream::Config::default())?)
                    .await
                {
                    Ok(_) => {
                        tracing::info!(stream = %spec.name, subjects = ?spec.subjects, "Created the stream.");
                        return Ok(());
                    }
                    Err(e) => match e.kind() {
                        CreateStreamErrorKind::JetStream(err)
                            if err.error_code() == ErrorCode::STREAM_NAME_EXIST =>
                        {
                            continue
                        }
                        CreateStreamErrorKind::JetStream(err) => {
                            return Err(BusError::Refused(format!(
                                "creating stream {}: {err}",
                                spec.name
                            )))
                        }
                        _ => return Err(unavailable("creating stream", &spec.name, e)),
                    },
                }
            }
            Err(e) => return Err(unavailable("looking up stream", &spec.name, e)),
        }
    }
    Err(BusError::Unavailable(
        format!("stream {} could neither be created nor found", spec.name).into(),
    ))
}

fn is_not_found(e: &async_nats::error::Error<GetStreamErrorKind>) -> bool {
    matches!(e.kind(), GetStreamErrorKind::JetStream(err) if err.error_code() == ErrorCode::STREAM_NOT_FOUND)
}

/// The stream holding every subject `filter` matches: one of the provisioned streams when one
/// covers it (no round trip), else whichever stream the server names for it.
pub(crate) async fn stream_for(
    js: &jetstream::Context,
    specs: &[StreamSpec],
    filter: &str,
) -> Result<jetstream::stream::Stream, BusError> {
    let local = specs
        .iter()
        .find(|spec| spec.subjects.iter().any(|s| covers(s, filter)))
        .map(|spec| spec.name.clone());
    let name = match local {
        Some(name) => name,
        None => js
            .stream_by_subject(filter)
            .await
            .map_err(|e| match e.kind() {
                GetStreamByNameErrorKind::Request => {
                    unavailable("looking up the stream of", filter, e)
                }
                _ => BusError::Refused(format!("no stream holds subject {filter}: {e}")),
            })?,
    };
    js.get_stream(&name).await.map_err(|e| match e.kind() {
        GetStreamErrorKind::JetStream(err) => {
            BusError::Refused(format!("stream {name} for subject {filter}: {err}"))
        }
        _ => unavailable("looking up stream", &name, e),
    })
}

/// How a durable consumer is shared by the replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// Every subscription pulls its own batches (an unpartitioned subject).
    Shared,
    /// One partition's consumer: the server pins one subscription at a time (`pinned_client`
    /// priority group [`PIN_GROUP`]) and moves the pin `timeout` after its last pull.
    Pinned { timeout: Duration },
}

/// The wanted configuration of a durable batch consumer.
pub(crate) fn durable_config(
    name: &str,
    filter: &str,
    ack_wait: Duration,
    start: StartAt,
    sharing: Sharing,
) -> pull::Config {
    let mut config = pull::Config {
        durable_name: Some(name.to_owned()),
        filter_subject: filter.to_owned(),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        // The port's bound on delivered-and-unsettled messages, enforced by the server across
        // every replica sharing the consumer.
        max_ack_pending: MAX_IN_FLIGHT as i64,
        // `New`: a consumer added later (a watcher, say) must not replay days of history and
        // fire stale notifications. `Stored`: ingestion must not skip states stored before its
        // consumer existed (a first start after gateways began publishing). Existing consumers
        // keep their position across restarts either way.
        deliver_policy: match start {
            StartAt::New => DeliverPolicy::New,
            StartAt::Stored => DeliverPolicy::All,
        },
        ..Default::default()
    };
    if let Sharing::Pinned { timeout } = sharing {
        config.priority_policy = PriorityPolicy::PinnedClient;
        config.priority_groups = vec![PIN_GROUP.to_owned()];
        config.priority_timeout = timeout;
    }
    config
}

/// Creates the durable consumer or checks the existing one: its filter and ack policy cannot
/// change (that would silently change what it delivers: refused, as the memory bus does); its
/// `max_ack_pending`, `ack_wait` and pin timeout are brought in line.
pub(crate) async fn provision_consumer(
    stream: &jetstream::stream::Stream,
    wanted: pull::Config,
) -> Result<PullConsumer, BusError> {
    let name = wanted.durable_name.clone().unwrap_or_default();
    let name = name.as_str();
    let filter = wanted.filter_subject.as_str();
    let stream_name = stream.cached_info().config.name.clone();
    let consumer: PullConsumer = stream
        .get_or_create_consumer(name, wanted.clone())
        .await
        .map_err(|e| consumer_error(&stream_name, name, e))?;
    let current = &consumer.cached_info().config;
    if current.filter_subject != filter {
        return Err(BusError::Refused(format!(
            "durable consumer {name} filters {}, not {filter}",
            current.filter_subject
        )));
    }
    if current.ack_policy != AckPolicy::Explicit || current.deliver_subject.is_some() {
        return Err(BusError::Refused(format!(
            "consumer {name} exists but is not a pull consumer with explicit acknowledgements"
        )));
    }
    if current.priority_policy != wanted.priority_policy
        || current.priority_groups != wanted.priority_groups
    {
        return Err(BusError::Refused(format!(
            "consumer {name} exists with priority policy {:?} {:?}, not {:?} {:?}",
            current.priority_policy,
            current.priority_groups,
            wanted.priority_policy,
            wanted.priority_groups
        )));
    }
    if current.max_ack_pending != wanted.max_ack_pending
        || current.ack_wait != wanted.ack_wait
        || current.priority_timeout != wanted.priority_timeout
    {
        tracing::info!(stream = %stream_name, consumer = name, "Updating the durable consumer's limits.");
        // A create of an existing consumer is an update (of the fields NATS lets change); its
        // deliver policy stays what it was created with.
        let update = pull::Config {
            deliver_policy: current.deliver_policy,
            ..wanted
        };
        return stream
            .create_consumer(update)
            .await
            .map_err(|e| consumer_error(&stream_name, name, e));
    }
    Ok(consumer)
}

fn consumer_error(
    stream: &str,
    name: &str,
    e: async_nats::error::Error<ConsumerErrorKind>,
) -> BusError {
    match e.kind() {
        ConsumerErrorKind::JetStream(err) => {
            BusError::Refused(format!("durable consumer {name} on stream {stream}: {err}"))
        }
        ConsumerErrorKind::InvalidName | ConsumerErrorKind::InvalidConsumerType => {
            BusError::Refused(format!("durable consumer {name} on stream {stream}: {e}"))
        }
        _ => unavailable("provisioning consumer", name, e),
    }
}

pub(crate) fn unavailable(what: &str, name: &str, e: impl Into<Cause>) -> BusError {
    BusError::Unavailable(cause::context(format!("{what} {name}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partitioned_pattern_maps_to_the_transform_and_back() {
        let p = Partitioning::new("telemetry.mower.*", 8).unwrap();
        let t = transform(&p);
        assert_eq!(t.source, "telemetry.mower.*");
        assert_eq!(
            t.destination,
            "telemetry.p.{{partition(8,1)}}.mower.{{wildcard(1)}}"
        );
        assert_eq!(partition_filter(&p, 3), "telemetry.p.3.mower.*");
        assert_eq!(
            published_subject("telemetry.p.3.mower.m1"),
            "telemetry.mower.m1"
        );
        assert_eq!(
            published_subject("telemetry.mower.m1"),
            "telemetry.mower.m1"
        );
        assert_eq!(published_subject("a.p.x.b"), "a.p.x.b");
        assert_eq!(
            live_filter(&p, "telemetry.mower.*").unwrap().unwrap(),
            "telemetry.p.*.mower.*"
        );
        let one = format!("telemetry.p.{}.mower.m1", p.partition_of_key("m1"));
        assert_eq!(live_filter(&p, "telemetry.mower.m1").unwrap().unwrap(), one);
        assert_eq!(live_filter(&p, "notifications.>").unwrap(), None);
        assert!(live_filter(&p, "telemetry.>").is_err());
        let short = Partitioning::new("t.*", 2).unwrap();
        assert_eq!(partition_filter(&short, 1), "t.p.1.*");
        assert_eq!(published_subject("t.p.1.k"), "t.k");
    }

    #[test]
    fn servers_older_than_2_11_are_refused_by_name() {
        assert!(check_server_version("2.11.0").is_ok());
        assert!(check_server_version("2.15.1").is_ok());
        assert!(check_server_version("3.0.0-beta").is_ok());
        let e = check_server_version("2.9.20").unwrap_err().to_string();
        assert!(e.contains("2.9.20") && e.contains("2.11"), "{e}");
        assert!(check_server_version("2.10.22").is_err());
    }
}
