//! Bus subjects. One place, so that publishers and consumers agree.

use swath_domain::MowerId;

/// Every state report: `telemetry.mower.<mower_id>`.
pub const TELEMETRY_ALL: &str = "telemetry.mower.*";

/// The subject a mower's gateway publishes its states on.
pub fn telemetry(mower_id: MowerId) -> String {
    format!("telemetry.mower.{mower_id}")
}

/// The mower a telemetry subject names: its last two tokens are `mower.<mower_id>`, as in
/// `telemetry.mower.<mower_id>`, in a partitioned form a stream subject transform makes
/// (`telemetry.p.3.mower.<mower_id>`), or under a test's subject root. `None` for any other
/// subject, or an id that is not a UUID in its hyphenated form: the subject is the gateway's
/// identity, and a report whose subject names no mower is refused.
pub fn telemetry_mower(subject: &str) -> Option<MowerId> {
    let (prefix, id) = subject.rsplit_once('.')?;
    let (_, kind) = prefix.rsplit_once('.')?;
    if kind != "mower" {
        return None;
    }
    // Only the canonical hyphenated form: the subject a gateway is allowed must be one string.
    if id.len() != 36 {
        return None;
    }
    id.parse().ok().map(MowerId)
}

/// The subject of a derived event: `notifications.mower.<mower_id>.<kind>`.
pub fn notification(mower_id: MowerId, kind: &str) -> String {
    format!("notifications.mower.{mower_id}.{kind}")
}

/// An alert cleared without an event (decision 130): `notifications.alert.<mower_id>.cleared`.
/// Kept by the stream of events like them, but outside [`NOTIFICATIONS_ALL`]: it is not an
/// event, and whoever reads that subject reads events only.
pub fn alert_cleared(mower_id: MowerId) -> String {
    format!("notifications.alert.{mower_id}.cleared")
}

/// Every alert cleared without an event: `notifications.alert.<mower_id>.cleared`.
pub const ALERTS_CLEARED_ALL: &str = "notifications.alert.*.cleared";

/// The durable consumer of the ingest use case.
pub const INGEST_CONSUMER: &str = "swath-ingest";

/// The durable consumer of the watcher (notification rules and the busy check).
pub const WATCHER_CONSUMER: &str = "swath-watcher";

/// Every derived event: `notifications.mower.<mower_id>.<kind>`.
pub const NOTIFICATIONS_ALL: &str = "notifications.mower.*.*";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_telemetry_subject_names_its_mower() {
        let mower = MowerId(uuid::Uuid::now_v7());
        assert_eq!(telemetry_mower(&telemetry(mower)), Some(mower));
        assert_eq!(
            telemetry_mower(&format!("telemetry.p.3.mower.{mower}")),
            Some(mower)
        );
        for bad in [
            "telemetry.mower.not-a-uuid".to_owned(),
            "telemetry.mower".to_owned(),
            format!("telemetry.lawn.{mower}"),
            format!("telemetry.mower.{}", mower.0.simple()),
            format!("telemetry.mower.{mower}.extra"),
            format!("telemetry.xmower.{mower}"),
            format!("mower.{mower}"),
        ] {
            assert_eq!(telemetry_mower(&bad), None, "{bad}");
        }
    }
}
