//! The ports: what the use cases need from the outside world, as traits. Each trait's doc comment
//! says what an implementation MUST do and which errors it returns; the contract suites in
//! `swath-tests` check every adapter against exactly these sentences.

mod bus;
mod clock;
mod directory;
mod telemetry;
mod tokens;
mod watch;

pub use bus::{
    BatchHandler, BatchSettings, BusError, EventBus, HandlerError, LiveOptions, LiveSubscription,
    Message, Settle, Subscription, MAX_IN_FLIGHT,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use directory::{Account, Directory, DirectoryError, Mower, Site};
pub use telemetry::{StoreError, TelemetryBatch, TelemetryStore};
pub use tokens::{hash_token, Principal, Scope, TokenError, TokenHash, TokenStore};
pub use watch::{
    AlertCursor, AlertQuery, EventQuery, Geofence, WatchBatch, WatchError, WatchRows, WatchStore,
    ZoneBatch, ZoneRows,
};
