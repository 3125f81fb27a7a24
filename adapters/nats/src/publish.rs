//! Publishing on JetStream: one message, a unit of work's messages pipelined within a window,
//! a gateway's or load generator's stream kept in order, and the mapping of JetStream's refusals
//! onto the port's errors.

use crate::NatsBus;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::{self, ErrorCode};
use async_nats::HeaderMap;
use bytes::Bytes;
use swath_application::bus_rules;
use swath_application::ports::{cause, BusError, Publication};

/// Messages [`EventBus::publish_all`](swath_application::ports::EventBus::publish_all) sends
/// before awaiting the oldest one's acknowledgement: a unit of work's events go out without a
/// round trip each, and what is unacknowledged at once stays bounded.
const PUBLISH_WINDOW: usize = 256;

impl NatsBus {
    /// Publishes `messages` in this order, each with its de-duplication id, keeping up to
    /// `window` stream acknowledgements outstanding (a gateway's or load generator's throughput
    /// without giving up the order: one connection delivers them to the stream in the order
    /// sent). Returns how many were acknowledged, in order, before the first failure, with that
    /// failure: the caller publishes again from there (the ids make what the stream already has
    /// a no-op).
    pub async fn publish_pipelined(
        &self,
        messages: impl IntoIterator<Item = (String, Bytes, String)>,
        window: usize,
    ) -> (usize, Option<BusError>) {
        use std::collections::VecDeque;
        let window = window.max(1);
        let js = &self.inner.js;
        let mut pending = VecDeque::with_capacity(window);
        let mut acknowledged = 0;
        let mut failure = None;
        for (subject, payload, id) in messages {
            if let Err(e) = bus_rules::check_subject(&subject) {
                failure = Some(e);
                break;
            }
            if pending.len() >= window {
                let (subject, ack): (String, jetstream::context::PublishAckFuture) =
                    pending.pop_front().expect("a full window");
                if let Err(e) = ack.await {
                    failure = Some(publish_error(&subject, e));
                    break;
                }
                acknowledged += 1;
            }
            let mut headers = HeaderMap::new();
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
            match js
                .publish_with_headers(subject.clone(), headers, payload)
                .await
            {
                Ok(ack) => pending.push_back((subject, ack)),
                Err(e) => {
                    failure = Some(publish_error(&subject, e));
                    break;
                }
            }
        }
        // What is in flight: counted while the acknowledgements come in order.
        for (subject, ack) in pending {
            if failure.is_some() {
                break;
            }
            match ack.await {
                Ok(_) => acknowledged += 1,
                Err(e) => failure = Some(publish_error(&subject, e)),
            }
        }
        (acknowledged, failure)
    }

    /// [`EventBus::publish`](swath_application::ports::EventBus::publish): one message, its
    /// stream acknowledgement awaited.
    pub(crate) async fn publish_jetstream(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        bus_rules::check_subject(subject)?;
        let js = &self.inner.js;
        let sent = match &dedup_id {
            Some(id) => {
                let mut headers = HeaderMap::new();
                headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
                js.publish_with_headers(subject.to_owned(), headers, payload)
                    .await
            }
            None => js.publish(subject.to_owned(), payload).await,
        };
        // Two steps: the publish is sent, then the stream's acknowledgement awaited.
        let ack = sent
            .map_err(|e| publish_error(subject, e))?
            .await
            .map_err(|e| publish_error(subject, e))?;
        if ack.duplicate {
            tracing::debug!(subject, dedup_id = ?dedup_id, "Ignored a duplicate publish.");
        }
        Ok(())
    }

    /// Pipelined: up to [`PUBLISH_WINDOW`] messages are sent before the oldest one's
    /// acknowledgement is awaited. One connection sends them in order, so the stream stores them
    /// in order. Each message waits at most `request_timeout` from its send (an acknowledgement's
    /// own timeout starts only when it is awaited: awaiting lost ones one after the other, as a
    /// stream without quorum loses them, would take the timeout once per message), and once one
    /// has timed out the messages not sent yet fail at once.
    pub(crate) async fn publish_all_windowed(
        &self,
        messages: Vec<Publication>,
    ) -> Vec<Result<(), BusError>> {
        use std::collections::VecDeque;
        use std::future::IntoFuture;
        use tokio::time::{timeout_at, Instant};
        type Pending = (usize, String, Instant, jetstream::context::PublishAckFuture);
        let js = &self.inner.js;
        let patience = self.inner.settings.request_timeout;
        let timed_out = |subject: &str| {
            BusError::Unavailable(
                format!("no acknowledgement of a publish to {subject} within {patience:?}").into(),
            )
        };
        // The acknowledgement's result, and whether it timed out.
        let settle = |(_, subject, deadline, ack): Pending| async move {
            match timeout_at(deadline, ack.into_future()).await {
                Ok(acked) => (
                    acked.map(|_| ()).map_err(|e| publish_error(&subject, e)),
                    false,
                ),
                Err(_) => (Err(timed_out(&subject)), true),
            }
        };
        let mut results: Vec<Result<(), BusError>> = Vec::with_capacity(messages.len());
        let mut pending: VecDeque<Pending> = VecDeque::with_capacity(PUBLISH_WINDOW);
        let mut silent = false;
        for message in messages {
            if pending.len() >= PUBLISH_WINDOW {
                if let Some(oldest) = pending.pop_front() {
                    let i = oldest.0;
                    let (result, timed) = settle(oldest).await;
                    results[i] = result;
                    silent |= timed;
                }
            }
            let i = results.len();
            if silent {
                results.push(Err(timed_out(&message.subject)));
                continue;
            }
            results.push(Ok(()));
            if let Err(e) = bus_rules::check_subject(&message.subject) {
                results[i] = Err(e);
                continue;
            }
            let deadline = Instant::now() + patience;
            let send = async {
                match &message.dedup_id {
                    Some(id) => {
                        let mut headers = HeaderMap::new();
                        headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
                        js.publish_with_headers(
                            message.subject.clone(),
                            headers,
                            message.payload.clone(),
                        )
                        .await
                    }
                    None => {
                        js.publish(message.subject.clone(), message.payload.clone())
                            .await
                    }
                }
            };
            match timeout_at(deadline, send).await {
                Ok(Ok(ack)) => pending.push_back((i, message.subject, deadline, ack)),
                Ok(Err(e)) => results[i] = Err(publish_error(&message.subject, e)),
                Err(_) => {
                    results[i] = Err(timed_out(&message.subject));
                    silent = true;
                }
            }
        }
        for oldest in pending {
            let i = oldest.0;
            results[i] = settle(oldest).await.0;
        }
        results
    }
}

/// Maps a failed JetStream publish onto the port's errors.
fn publish_error(subject: &str, e: async_nats::error::Error<PublishErrorKind>) -> BusError {
    let server = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<jetstream::Error>());
    match (e.kind(), server) {
        (PublishErrorKind::MaxPayloadExceeded, _) => {
            BusError::Refused(format!("message to {subject} is too large: {e}"))
        }
        (_, Some(err)) if is_limit(err) => {
            tracing::warn!(subject, error = %err, "Refused a publish: the stream is at its limits.");
            BusError::Full(subject.to_owned())
        }
        (_, Some(err)) if err.error_code() == ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM => {
            BusError::Refused(format!("message to {subject} is too large: {err}"))
        }
        (PublishErrorKind::StreamNotFound, _) => BusError::Unavailable(
            format!(
                "no JetStream stream answered for {subject} (none holds it, or JetStream is down)"
            )
            .into(),
        ),
        _ => BusError::Unavailable(cause::context(format!("publishing to {subject}"), e)),
    }
}

/// Whether a JetStream error says the stream (or the server's storage) is full.
fn is_limit(err: &jetstream::Error) -> bool {
    let code = err.error_code();
    if code == ErrorCode::STREAM_STORE_FAILED {
        // "maximum messages exceeded", "maximum bytes exceeded", … (other store failures are I/O
        // errors, which a retry may overcome).
        return err.to_string().contains("maximum");
    }
    code == ErrorCode::INSUFFICIENT_RESOURCES
        || code == ErrorCode::STORAGE_RESOURCES_EXCEEDED
        || code == ErrorCode::MEMORY_RESOURCES_EXCEEDED
}
