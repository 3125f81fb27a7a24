//! What a commit tells the bus, after it: the events it stored and the alerts it cleared without
//! an event, in the one order they were derived in. Both writers of events publish through it:
//! ingestion (W6, W7) and the watcher.

use crate::ports::{chain, EventBus, Publication};
use crate::subjects;
use bytes::Bytes;
use swath_domain::watch::{ClearedAlert, Event};
use swath_domain::MowerId;

/// Publishes events after their commit, in order, each on `notifications.mower.<id>.<kind>` with
/// its id as the de-duplication id, in one [`EventBus::publish_all`] (a unit of work of several
/// partitions may derive thousands: they are not sent one round trip at a time). A failed publish
/// cannot undo the commit: it is logged, the event stays in the feed, and a later re-publish of
/// the same id is recognised by the bus.
pub async fn publish(bus: &dyn EventBus, events: &[Event]) {
    publish_told(bus, events, &[]).await;
}

/// Publishes what a commit tells: its events (as [`publish`] does) and the alerts it cleared
/// without an event, each on [`subjects::alert_cleared`] (decision 130), in one
/// [`EventBus::publish_all`], in the one order they were derived in: each clear comes after the
/// number of events it names
/// ([`WatchChanges::cleared_without_event`](swath_domain::watch::WatchChanges::cleared_without_event)).
pub async fn publish_told(bus: &dyn EventBus, events: &[Event], cleared: &[(usize, ClearedAlert)]) {
    let mut told: Vec<Told<'_>> = Vec::with_capacity(events.len() + cleared.len());
    let mut clears = cleared.iter().peekable();
    for (derived, event) in events.iter().enumerate() {
        while let Some((_, clear)) = clears.next_if(|(before, _)| *before <= derived) {
            told.push(Told::Cleared(clear));
        }
        told.push(Told::Event(event));
    }
    told.extend(clears.map(|(_, clear)| Told::Cleared(clear)));
    if told.is_empty() {
        return;
    }
    let mut sent = Vec::with_capacity(told.len());
    let mut publications = Vec::with_capacity(told.len());
    for item in told {
        let (subject, dedup_id, payload) = match item {
            Told::Event(event) => (
                subjects::notification(event.mower_id, event.kind().as_str()),
                event.id.to_string(),
                serde_json::to_vec(event),
            ),
            Told::Cleared(clear) => (
                subjects::alert_cleared(clear.mower_id),
                clear.dedup_id(),
                serde_json::to_vec(clear),
            ),
        };
        let payload = match payload {
            Ok(p) => Bytes::from(p),
            Err(e) => {
                tracing::error!(mower_id = %item.mower_id(), error = %e, "Could not encode what a commit tells.");
                continue;
            }
        };
        match item {
            Told::Event(event) => {
                metrics::counter!("swath_events_total", "kind" => event.kind().as_str())
                    .increment(1);
            }
            Told::Cleared(clear) => {
                metrics::counter!("swath_alerts_cleared_without_event_total", "kind" => clear.kind.as_str())
                    .increment(1);
            }
        }
        publications.push(Publication {
            subject,
            payload,
            dedup_id: Some(dedup_id),
        });
        sent.push(item);
    }
    for (item, result) in sent.into_iter().zip(bus.publish_all(publications).await) {
        if let Err(e) = result {
            tracing::error!(mower_id = %item.mower_id(), what = item.name(), error = %chain(&e), "Could not publish after its commit.");
        }
    }
}

/// One thing a commit tells the bus.
#[derive(Clone, Copy)]
enum Told<'a> {
    Event(&'a Event),
    Cleared(&'a ClearedAlert),
}

impl Told<'_> {
    fn mower_id(&self) -> MowerId {
        match self {
            Told::Event(e) => e.mower_id,
            Told::Cleared(c) => c.mower_id,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Told::Event(e) => e.kind().as_str(),
            Told::Cleared(_) => "alert_cleared",
        }
    }
}
