//! What both consumers of the telemetry stream (ingestion and the watcher) do with a message: parse
//! it, its subject being the gateway's identity, and settle the state's outcome on the bus.

use crate::ports::{Message, Settle};
use crate::subjects;
use chrono::{DateTime, Utc};
use swath_domain::{DropReason, InvalidReport, StateOutcome, StateReport};

/// Maps a state's outcome onto the bus: stored → acknowledge; dropped → drop (never redelivered,
/// it can never succeed).
pub fn settle(outcome: StateOutcome) -> Settle {
    match outcome {
        StateOutcome::Stored => Settle::Ack,
        StateOutcome::Dropped(_) => Settle::Drop,
    }
}

/// Parses and validates one bus message received at `received_at`. The subject is the gateway's
/// identity: a subject that names no mower (see [`subjects::telemetry_mower`]), or another mower
/// than the report's `mower_id`, is refused as `subject_mismatch`, so that NATS subject
/// permissions confine a gateway to its mowers (docs/operations.md).
pub fn parse_message(
    message: &Message,
    received_at: DateTime<Utc>,
) -> Result<StateReport, InvalidReport> {
    let report = StateReport::parse(&message.payload, received_at);
    let named = report
        .as_ref()
        .map(|r| Some(r.mower_id))
        .unwrap_or_else(|e| e.mower_id);
    let mismatch = |detail: String| InvalidReport {
        reason: DropReason::SubjectMismatch,
        detail,
        mower_id: named,
    };
    match subjects::telemetry_mower(&message.subject) {
        None => Err(mismatch(format!(
            "the subject {:?} is not `telemetry.mower.<mower id>`",
            message.subject
        ))),
        Some(subject_mower) => match report {
            Ok(r) if r.mower_id != subject_mower => Err(mismatch(format!(
                "the report names mower {} but was published on {:?}",
                r.mower_id, message.subject
            ))),
            other => other,
        },
    }
}
