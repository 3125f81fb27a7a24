//! Idempotent provisioning of streams (at connect) and durable pull consumers (at
//! `subscribe_batch`), and the look-up of the stream that holds a subject filter.
//!
//! Every replica of the service runs this at start-up, possibly at the same moment, so each step
//! tolerates finding the work already done: a stream or consumer that exists with the wanted
//! configuration is used as it is, and a create that loses a race falls back to using what the
//! winner created.

use crate::settings::{StreamSpec, StreamStorage};
use crate::subjects::covers;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::context::{
    CreateStreamErrorKind, GetStreamByNameErrorKind, GetStreamErrorKind,
};
use async_nats::jetstream::stream::{self, ConsumerErrorKind};
use async_nats::jetstream::{self, ErrorCode};
use std::time::Duration;
use swath_application::ports::{BusError, MAX_IN_FLIGHT};

/// The JetStream configuration a spec asks for, laid over `base` (an existing stream's
/// configuration, or the defaults) so that fields the spec does not mention are kept.
fn apply(spec: &StreamSpec, base: &stream::Config) -> stream::Config {
    stream::Config {
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
    }
}

/// Creates the stream, or brings an existing one in line with the spec.
pub(crate) async fn provision_stream(
    js: &jetstream::Context,
    spec: &StreamSpec,
) -> Result<(), BusError> {
    // Two attempts: a create can lose a race against another replica creating the same stream,
    // after which the second pass finds it.
    for _ in 0..2 {
        match js.get_stream(&spec.name).await {
            Ok(existing) => {
                // `get_stream` fetched the stream's information already.
                let current = existing.cached_info().config.clone();
                let wanted = apply(spec, &current);
                if wanted == current {
                    tracing::debug!(stream = %spec.name, "The stream is provisioned.");
                    return Ok(());
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
                    .create_stream(apply(spec, &stream::Config::default()))
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
    Err(BusError::Unavailable(format!(
        "stream {} could neither be created nor found",
        spec.name
    )))
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

/// The wanted configuration of a durable batch consumer.
pub(crate) fn durable_config(name: &str, filter: &str, ack_wait: Duration) -> pull::Config {
    pull::Config {
        durable_name: Some(name.to_owned()),
        filter_subject: filter.to_owned(),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        // The port's bound on delivered-and-unsettled messages, enforced by the server across
        // every replica sharing the consumer.
        max_ack_pending: MAX_IN_FLIGHT as i64,
        // Like the memory bus, a new consumer sees what is published from its creation on: a
        // consumer added later (a watcher, say) must not replay days of history and fire stale
        // notifications. Existing consumers keep their position across restarts.
        deliver_policy: DeliverPolicy::New,
        ..Default::default()
    }
}

/// Creates the durable consumer or checks the existing one: its filter and ack policy cannot
/// change (that would silently change what it delivers: refused, as the memory bus does); its
/// `max_ack_pending` and `ack_wait` are brought in line.
pub(crate) async fn provision_consumer(
    stream: &jetstream::stream::Stream,
    name: &str,
    filter: &str,
    ack_wait: Duration,
) -> Result<PullConsumer, BusError> {
    let wanted = durable_config(name, filter, ack_wait);
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
    if current.max_ack_pending != wanted.max_ack_pending || current.ack_wait != wanted.ack_wait {
        tracing::info!(stream = %stream_name, consumer = name, "Updating the durable consumer's limits.");
        // A create of an existing consumer is an update (of the fields NATS lets change).
        return stream
            .create_consumer(wanted)
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

pub(crate) fn unavailable(what: &str, name: &str, e: impl std::fmt::Display) -> BusError {
    BusError::Unavailable(format!("{what} {name}: {e}"))
}
