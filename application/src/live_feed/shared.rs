//! The one [`LiveFeed`] of a process, started by the first stream that asks for it (decision
//! 101), over the bus and clock it was given.

use super::LiveFeed;
use crate::ports::{BusError, Clock, EventBus};
use std::sync::Arc;

/// The process's live feed, started on first use (see the module). Cheap to clone: clones share
/// the one feed.
#[derive(Clone)]
pub struct SharedFeed {
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
    feed: Arc<tokio::sync::OnceCell<LiveFeed>>,
}

impl SharedFeed {
    pub fn new(bus: Arc<dyn EventBus>, clock: Arc<dyn Clock>) -> Self {
        Self {
            bus,
            clock,
            feed: Arc::default(),
        }
    }

    /// The feed, keeping `capacity` items to resume from, started now if no stream started it
    /// yet (a failed start is tried again by the next stream).
    pub async fn get(&self, capacity: usize) -> Result<LiveFeed, BusError> {
        self.feed
            .get_or_try_init(|| LiveFeed::start(self.bus.clone(), self.clock.clone(), capacity))
            .await
            .cloned()
    }
}
