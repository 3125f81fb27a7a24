//! The live feed: what `GET /v1/live/stream` sends, numbered, with a bounded window to resume
//! from (decisions 101 and 102).
//!
//! One [`LiveFeed`] per replica holds an ack-less live subscription on every state
//! (`telemetry.mower.*`), every derived event (`notifications.mower.*.*`) and every alert cleared
//! without an event (`notifications.alert.*.cleared`, decision 130), numbers what
//! arrives with a sequence of its own, keeps the last [`RESUME_WINDOW`] items in a ring and
//! fans them out to the open streams. A stream's event ids are `<feed>-<n>`: `feed` names this
//! feed (random per process), so an id is only meaningful to the replica that gave it, and `n`
//! is the item's sequence hidden by a keyed permutation ([`ids`]), so that an id tells nothing of
//! other tenants' traffic. A client
//! resuming with `Last-Event-ID` ([`LiveFeed::cursor`]) gets every item after it while it is
//! still in the ring; an id of another replica, of a restarted one, or older than the window
//! gets a [`Delivery::Reset`] first (reload through REST), never a silent gap. A stream that
//! reads too slowly catches up from the ring the same way, or is reset.
//!
//! Visibility and the stream's filters are the [`filter`] module's, applied per connection.

pub mod filter;
mod shared;

pub use shared::SharedFeed;
mod ids;

use crate::ports::{Clock, EventBus, LiveOptions, LiveSubscription, Message};
use crate::subjects;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use swath_domain::watch::{ClearedAlert, Event};
use swath_domain::{AccountId, LatestRow, MowerId};
use tokio::sync::broadcast;

/// How many items (states and events of every tenant) a replica keeps to resume streams from.
/// At the demo's 20 mowers reporting every second that is more than 8 minutes; at 1 000 mowers
/// every second, 10 s. A resume from further back is a [`Delivery::Reset`].
pub const RESUME_WINDOW: usize = 10_000;

/// How many items a stream may fall behind the feed before it catches up from the ring.
const FANOUT_BUFFER: usize = 1024;

/// What the feed carries.
#[derive(Clone, Debug, PartialEq)]
pub enum FeedBody {
    /// A state as it arrived (before it is stored), `last_seen_at` the instant this replica
    /// relayed it, to the microsecond like every stored instant.
    State(Box<LatestRow>),
    /// An event the watcher derived and published.
    Event(Event),
    /// An alert cleared without an event (the battery re-armed, a geofence removed, a blade
    /// reset): events tell their own clears.
    Cleared(ClearedAlert),
}

/// One numbered item of the feed.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedItem {
    pub seq: u64,
    pub body: FeedBody,
}

impl FeedItem {
    pub fn mower_id(&self) -> MowerId {
        match &self.body {
            FeedBody::State(row) => row.mower_id,
            FeedBody::Event(e) => e.mower_id,
            FeedBody::Cleared(c) => c.mower_id,
        }
    }

    pub fn account_id(&self) -> AccountId {
        match &self.body {
            FeedBody::State(row) => row.account_id,
            FeedBody::Event(e) => e.account_id,
            FeedBody::Cleared(c) => c.account_id,
        }
    }
}

/// Why a stream could not resume where its client asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetReason {
    /// The id names another replica, a restarted one, or is not an id this service gives.
    UnknownId,
    /// The items after the id are no longer in the ring (resumed too late, or read too slowly).
    WindowExceeded,
}

impl ResetReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ResetReason::UnknownId => "unknown_id",
            ResetReason::WindowExceeded => "window_exceeded",
        }
    }
}

/// What a stream's cursor hands out next.
#[derive(Clone, Debug)]
pub enum Delivery {
    Item(Arc<FeedItem>),
    /// Items may have been missed: the client must reload what it shows. `head` is the sequence
    /// the stream continues after.
    Reset {
        reason: ResetReason,
        head: u64,
    },
}

struct Ring {
    items: VecDeque<Arc<FeedItem>>,
    /// The sequence the next item gets (the first is 1).
    next_seq: u64,
}

struct Shared {
    id: String,
    /// Hides the sequence in the stream's ids.
    key: ids::IdKey,
    ring: Mutex<Ring>,
    sender: broadcast::Sender<Arc<FeedItem>>,
    capacity: usize,
}

impl Shared {
    fn new(capacity: usize) -> Arc<Shared> {
        Arc::new(Shared {
            // The low bits of a UUID v7 are random: two replicas' feeds never share a name.
            id: format!("{:016x}", uuid::Uuid::now_v7().as_u128() as u64),
            key: ids::IdKey::random(),
            ring: Mutex::new(Ring {
                items: VecDeque::with_capacity(capacity.clamp(1, RESUME_WINDOW)),
                next_seq: 1,
            }),
            sender: broadcast::channel(FANOUT_BUFFER).0,
            capacity: capacity.max(1),
        })
    }
}

/// The replica's numbered feed. Cheap to clone.
#[derive(Clone)]
pub struct LiveFeed {
    shared: Arc<Shared>,
    _tasks: Arc<Tasks>,
}

/// Stops the subscriptions' tasks with the last clone of the feed.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

impl LiveFeed {
    /// Subscribes to every state, event and alert cleared without an event on the bus and
    /// starts numbering them.
    pub async fn start(
        bus: Arc<dyn EventBus>,
        clock: Arc<dyn Clock>,
        capacity: usize,
    ) -> Result<LiveFeed, crate::ports::BusError> {
        let states = bus
            .subscribe(subjects::TELEMETRY_ALL, LiveOptions::default())
            .await?;
        let events = bus
            .subscribe(subjects::NOTIFICATIONS_ALL, LiveOptions::default())
            .await?;
        let cleared = bus
            .subscribe(subjects::ALERTS_CLEARED_ALL, LiveOptions::default())
            .await?;
        let shared = Shared::new(capacity);
        let tasks = vec![
            tokio::spawn(relay(Arc::clone(&shared), states, move |message| {
                let now = clock.now_micros();
                let report = crate::parse_message(message, now).ok()?;
                Some(FeedBody::State(Box::new(LatestRow {
                    mower_id: report.mower_id,
                    account_id: report.account_id,
                    observed_at: report.observed_at,
                    last_seen_at: now,
                    state: report,
                })))
            })),
            tokio::spawn(relay(Arc::clone(&shared), events, |message| {
                serde_json::from_slice::<Event>(&message.payload)
                    .ok()
                    .map(FeedBody::Event)
            })),
            tokio::spawn(relay(Arc::clone(&shared), cleared, |message| {
                serde_json::from_slice::<ClearedAlert>(&message.payload)
                    .ok()
                    .map(FeedBody::Cleared)
            })),
        ];
        Ok(LiveFeed {
            shared,
            _tasks: Arc::new(Tasks(tasks)),
        })
    }

    /// The name of this feed, the first part of its ids.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The stream id of an item of this feed: the feed's name and the hidden sequence.
    pub fn event_id(&self, seq: u64) -> String {
        format!("{}-{:016x}", self.shared.id, self.shared.key.hide(seq))
    }

    /// A cursor from `last_event_id` (a client's `Last-Event-ID`), or from now.
    pub fn cursor(&self, last_event_id: Option<&str>) -> Cursor {
        let ring = self.shared.ring.lock().unwrap_or_else(|p| p.into_inner());
        // Subscribed under the ring's lock: every item is either in the snapshot below or
        // received, none in neither.
        let receiver = self.shared.sender.subscribe();
        let head = ring.next_seq - 1;
        let mut cursor = Cursor {
            shared: Arc::clone(&self.shared),
            receiver,
            pending: VecDeque::new(),
            after: head,
        };
        if let Some(id) = last_event_id {
            match self.resume_point(id, head) {
                Some(after) => match catch_up(&ring, after) {
                    Some(items) => {
                        cursor.after = after;
                        cursor.pending = items.into_iter().map(Delivery::Item).collect();
                    }
                    None => cursor.pending.push_back(Delivery::Reset {
                        reason: ResetReason::WindowExceeded,
                        head,
                    }),
                },
                None => cursor.pending.push_back(Delivery::Reset {
                    reason: ResetReason::UnknownId,
                    head,
                }),
            }
        }
        cursor
    }

    /// The sequence an id of this feed names, when it is one this feed gave.
    fn resume_point(&self, id: &str, head: u64) -> Option<u64> {
        let (feed, hidden) = id.trim().rsplit_once('-')?;
        let hidden = u64::from_str_radix(hidden, 16).ok()?;
        let seq = self.shared.key.reveal(hidden);
        (feed == self.shared.id && seq <= head).then_some(seq)
    }
}

/// The items after `after`, or `None` when some of them left the ring already.
fn catch_up(ring: &Ring, after: u64) -> Option<Vec<Arc<FeedItem>>> {
    let oldest = ring.items.front().map_or(ring.next_seq, |i| i.seq);
    if after + 1 < oldest {
        return None;
    }
    Some(
        ring.items
            .iter()
            .filter(|i| i.seq > after)
            .cloned()
            .collect(),
    )
}

/// Numbers what a live subscription brings, keeps it in the ring and fans it out.
async fn relay(
    shared: Arc<Shared>,
    mut subscription: LiveSubscription,
    parse: impl Fn(&Message) -> Option<FeedBody>,
) {
    while let Some(message) = subscription.messages.recv().await {
        // Invalid reports are never relayed (ingestion logs and counts them).
        let Some(body) = parse(&message) else {
            continue;
        };
        push(&shared, body);
    }
    tracing::warn!("The live feed's subscription ended; open streams get nothing new.");
}

/// Numbers an item, keeps it in the ring and fans it out, under the ring's lock (so that the
/// fan-out's order is the sequence's).
fn push(shared: &Shared, body: FeedBody) {
    let mut ring = shared.ring.lock().unwrap_or_else(|p| p.into_inner());
    let item = Arc::new(FeedItem {
        seq: ring.next_seq,
        body,
    });
    ring.next_seq += 1;
    if ring.items.len() == shared.capacity {
        ring.items.pop_front();
    }
    ring.items.push_back(Arc::clone(&item));
    // No stream open: nothing to fan out to, the ring keeps it.
    let _ = shared.sender.send(item);
}

/// One stream's position in the feed.
pub struct Cursor {
    shared: Arc<Shared>,
    receiver: broadcast::Receiver<Arc<FeedItem>>,
    pending: VecDeque<Delivery>,
    /// The last sequence handed out (or skipped past by a reset).
    after: u64,
}

impl Cursor {
    /// The next item after the cursor, or a reset when items were lost; `None` once the feed
    /// ended.
    pub async fn next(&mut self) -> Option<Delivery> {
        loop {
            if let Some(delivery) = self.pending.pop_front() {
                match &delivery {
                    Delivery::Item(item) => self.after = item.seq,
                    Delivery::Reset { head, .. } => self.after = self.after.max(*head),
                }
                return Some(delivery);
            }
            match self.receiver.recv().await {
                // Items the catch-up already gave are skipped.
                Ok(item) if item.seq <= self.after => {}
                Ok(item) => self.pending.push_back(Delivery::Item(item)),
                Err(broadcast::error::RecvError::Lagged(_)) => self.recover(),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Fell behind the fan-out: continue from the ring, or reset when it no longer has the
    /// items after the cursor.
    fn recover(&mut self) {
        let ring = self.shared.ring.lock().unwrap_or_else(|p| p.into_inner());
        self.receiver = self.shared.sender.subscribe();
        match catch_up(&ring, self.after) {
            Some(items) => self.pending.extend(items.into_iter().map(Delivery::Item)),
            None => self.pending.push_back(Delivery::Reset {
                reason: ResetReason::WindowExceeded,
                head: ring.next_seq - 1,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
