//! The ports: what the use cases need from the outside world, as traits. Each trait's doc comment
//! says what an implementation MUST do and which errors it returns; the contract suites in
//! `swath-tests` check every adapter against exactly these sentences.
//!
//! Ports hold traits, the queries they take and the errors they return; the entities they store
//! (accounts, sites, mowers, principals, assignments, geofences…) are `swath_domain`'s.

mod bus;
pub mod cause;
mod clock;
mod directory;
mod partitions;
mod projections;
mod retention;
mod sessions;
mod telemetry;
mod tokens;
mod watch;
mod webhooks;

pub use bus::{
    BatchHandler, BatchSettings, BusError, EventBus, HandlerError, LiveOptions, LiveSubscription,
    Message, Publication, Settle, StartAt, Subscription, MAX_IN_FLIGHT,
};
pub use cause::{chain, Cause};
pub use clock::{Clock, ManualClock, SystemClock};
pub use directory::{Directory, DirectoryAdmin, DirectoryError, ListQuery};
pub use partitions::{fnv1a32, subjects_overlap, Partitioning, MAX_PARTITIONS};
pub use projections::{
    AlertCard, AssignmentError, Assignments, HealthCard, LatLon, MowerCard, MowerFilter,
    ProjectionError, ProjectionStore, SiteCard, Visibility, MAX_ASSIGNMENTS_PER_MOWER,
};
pub use retention::{
    DownsampleWindow, Partition, RetainedTable, RetentionError, RetentionRun, RetentionStore,
};
pub use sessions::{SessionError, SessionQuery, SessionStore, SessionWindow};
pub use telemetry::{StoreError, TelemetryBatch, TelemetryStore, TimeWindow, WindowRows};
pub use tokens::{
    generate_token, hash_token, NewToken, TokenError, TokenHash, TokenId, TokenInfo, TokenQuery,
    TokenStore, TOKEN_PREFIX,
};
pub use watch::{
    AlertCursor, AlertQuery, EventQuery, GeofenceStore, NotificationFeed, NotificationPorts,
    WatchBatch, WatchError, WatchRead, WatchRows, WatchStore, ZoneBatch, ZoneRows, ZoneStore,
};
pub use webhooks::{
    Attempt, ClaimLimit, Claimed, Delivery, DeliveryOutcome, NewDelivery, SendResult, WebhookError,
    WebhookSender, WebhookStore,
};
