//! Bus subjects. One place, so that publishers and consumers agree.

use swath_domain::MowerId;

/// Every state report: `telemetry.mower.<mower_id>`.
pub const TELEMETRY_ALL: &str = "telemetry.mower.*";

/// The subject a mower's gateway publishes its states on.
pub fn telemetry(mower_id: MowerId) -> String {
    format!("telemetry.mower.{mower_id}")
}

/// The subject of a derived event: `notifications.mower.<mower_id>.<kind>`.
pub fn notification(mower_id: MowerId, kind: &str) -> String {
    format!("notifications.mower.{mower_id}.{kind}")
}

/// The durable consumer of the ingest use case.
pub const INGEST_CONSUMER: &str = "swath-ingest";

/// The durable consumer of the watcher (notification rules and the busy check).
pub const WATCHER_CONSUMER: &str = "swath-watcher";

/// Every derived event: `notifications.mower.<mower_id>.<kind>`.
pub const NOTIFICATIONS_ALL: &str = "notifications.mower.*.*";
