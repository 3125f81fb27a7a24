//! What every [`EventBus`](crate::ports::EventBus) adapter does the same way, written once: the subject
//! and name checks, NATS subject matching, which partitioning a batch subscription's filter
//! falls under (or its refusal), the refusal of live options that need acknowledgements, the
//! stop signal of a subscription, the batch size limit, what is left of a linger, the handler
//! call in a task of its own, and the verdict on a handler's answer to a batch. How a bus waits
//! for messages differs (a queue's wake-ups, JetStream pull requests) and stays in each adapter.
//!
//! The memory bus and the JetStream bus differ in how they store, pull and settle messages; they
//! must not differ in what they refuse or in how they read a handler's answer, or the contract
//! suite would pass on one bus for reasons the other does not share. Both call these functions.

use crate::ports::{
    chain, BatchHandler, BatchSettings, BusError, HandlerError, LiveOptions, Message, Partitioning,
    Settle, MAX_IN_FLIGHT,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;

/// A subject to publish on: non-empty tokens, no wildcards, no whitespace.
pub fn check_subject(subject: &str) -> Result<(), BusError> {
    let ok = !subject.is_empty()
        && subject
            .split('.')
            .all(|t| !t.is_empty() && t != "*" && t != ">" && !t.contains(char::is_whitespace));
    if ok {
        Ok(())
    } else {
        Err(BusError::Refused(format!(
            "invalid subject to publish on: {subject:?}"
        )))
    }
}

/// A subject filter: non-empty tokens, no whitespace, `>` only as the last token.
pub fn check_filter(filter: &str) -> Result<(), BusError> {
    let tokens: Vec<&str> = filter.split('.').collect();
    let last = tokens.len() - 1;
    let ok = !filter.is_empty()
        && tokens.iter().enumerate().all(|(i, t)| {
            !t.is_empty() && !t.contains(char::is_whitespace) && (*t != ">" || i == last)
        });
    if ok {
        Ok(())
    } else {
        Err(BusError::Refused(format!(
            "invalid subject filter: {filter:?}"
        )))
    }
}

/// A durable consumer name as JetStream accepts it (no dots, wildcards or whitespace), so that a
/// name that works on the memory bus also works against NATS.
pub fn check_consumer_name(name: &str) -> Result<(), BusError> {
    let ok = !name.is_empty()
        && !name.contains(|c: char| c == '.' || c == '*' || c == '>' || c.is_whitespace());
    if ok {
        Ok(())
    } else {
        Err(BusError::Refused(format!(
            "invalid durable consumer name: {name:?}"
        )))
    }
}

/// Checks a batch subscription's filter and consumer name, and says which of the bus's
/// partitionings the filter is exactly (its consumer is then partitioned), if any. A filter
/// overlapping a partitioned pattern without being it is refused ([`Partitioning::admits`]).
pub fn check_batch_subscription<'a>(
    filter: &str,
    consumer: &str,
    partitionings: impl IntoIterator<Item = &'a Partitioning>,
) -> Result<Option<&'a Partitioning>, BusError> {
    check_filter(filter)?;
    check_consumer_name(consumer)?;
    let mut partitioned = None;
    for partitioning in partitionings {
        if partitioning.admits(filter)? {
            partitioned = Some(partitioning);
        }
    }
    Ok(partitioned)
}

/// The most messages in one batch: `max_batch` clamped to `1..=`[`MAX_IN_FLIGHT`], so that a
/// subscription (or a partition of it) never has more delivered and unsettled.
pub fn batch_limit(settings: &BatchSettings) -> usize {
    settings.max_batch.clamp(1, MAX_IN_FLIGHT)
}

/// What is left of a linger that began with the first message at `first`; `None` once it is
/// over, or with `max_wait` zero. Under a millisecond counts as over: JetStream does not expire
/// a pull request sooner, and the memory bus must not linger where JetStream would not.
pub fn linger_left(first: Instant, max_wait: Duration) -> Option<Duration> {
    let left = (first + max_wait).saturating_duration_since(Instant::now());
    (left >= Duration::from_millis(1)).then_some(left)
}

/// Runs a handler call in a task of its own: a panic becomes a `JoinError` (a failed batch,
/// see [`judge`]) rather than ending the subscription, and a call that outlives the drain
/// timeout can be aborted.
pub fn call_handler(
    handler: &Arc<dyn BatchHandler>,
    batch: Arc<[Message]>,
) -> JoinHandle<Result<Vec<Settle>, HandlerError>> {
    let handler = Arc::clone(handler);
    tokio::spawn(async move { handler.handle(&batch).await })
}

/// Logs a handler call given up on unsubscribe: the batch goes back for redelivery.
pub fn warn_outlived_drain(consumer: &str, batch: usize, drain_timeout: Duration) {
    tracing::warn!(
        consumer,
        batch,
        ?drain_timeout,
        "A batch handler outlived the drain timeout; its batch will be redelivered."
    );
}

/// Whether `subject` matches `filter` as NATS matches them: `*` is any one token, `>` one or
/// more trailing tokens.
pub fn subject_matches(filter: &str, subject: &str) -> bool {
    let mut filter = filter.split('.');
    let mut subject = subject.split('.');
    loop {
        match (filter.next(), subject.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(f), Some(s)) if f == s => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Refuses the live options only an acknowledged consumer could honour, and checks the filter:
/// a live subscription is ack-less, so durable names and queue groups belong to
/// `subscribe_batch`.
pub fn check_live(subject: &str, options: &LiveOptions) -> Result<(), BusError> {
    if options.acknowledge {
        return Err(BusError::Refused(
            "a live subscription has no acknowledgements".into(),
        ));
    }
    if let Some(durable) = &options.durable {
        return Err(BusError::Refused(format!(
            "a durable consumer ({durable}) needs acknowledgements: use subscribe_batch"
        )));
    }
    if let Some(group) = &options.queue_group {
        return Err(BusError::Refused(format!(
            "a queue group ({group}) shares work, which needs acknowledgements: use subscribe_batch"
        )));
    }
    check_filter(subject)
}

/// Whether a subscription's stop signal (the `watch` behind [`Subscription`](crate::ports::Subscription))
/// says stop: `true` was sent, or the `Subscription` was dropped (then nobody could stop the
/// worker any more, so it stops).
pub fn is_stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow() || stop.has_changed().is_err()
}

/// Resolves once the subscription is stopped (see [`is_stopped`]).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// What a handler call, run in a task of its own, ended with.
pub type HandlerResult = Result<Result<Vec<Settle>, HandlerError>, JoinError>;

/// How a batch is to be settled after its handler call.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// One answer per message, in order, to settle as given.
    Settle(Vec<Settle>),
    /// The call failed as a whole (an error, a panic, or a wrong number of answers): the whole
    /// batch goes back, after the subscription's `redelivery_delay`.
    Failed,
}

impl Verdict {
    /// Whether no message of the batch made progress (every one failed or asked to be
    /// redelivered): the subscription then pauses `redelivery_delay` rather than spin on it.
    pub fn made_no_progress(&self) -> bool {
        match self {
            Verdict::Settle(answers) => answers.iter().all(|a| *a == Settle::Redeliver),
            Verdict::Failed => true,
        }
    }
}

/// How a finished handler call was settled, for the pause that follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Settled as the handler answered; `all_redelivered` when no message made progress.
    Answered { all_redelivered: bool },
    /// The handler failed as a whole: the batch goes back whole.
    Failed,
}

impl Settled {
    /// What a verdict settles as.
    pub fn of(verdict: &Verdict) -> Self {
        match verdict {
            Verdict::Failed => Settled::Failed,
            Verdict::Settle(_) => Settled::Answered {
                all_redelivered: verdict.made_no_progress(),
            },
        }
    }

    /// Whether the subscription pauses `redelivery_delay` before its next batch: after a failed
    /// batch, and after one in which every message asked to be redelivered (no progress, so no
    /// hot loop on it).
    pub fn pauses(self) -> bool {
        !matches!(
            self,
            Settled::Answered {
                all_redelivered: false
            }
        )
    }
}

/// Reads a handler call's result for a batch of `batch` messages (`subjects` names each message,
/// for the log of a dropped one) and logs what goes wrong, naming the consumer.
pub fn judge<'a>(
    consumer: &str,
    subjects: impl ExactSizeIterator<Item = &'a str>,
    result: HandlerResult,
) -> Verdict {
    let batch = subjects.len();
    let answers = match result {
        Ok(Ok(answers)) if answers.len() == batch => answers,
        Ok(Ok(answers)) => {
            tracing::warn!(
                consumer,
                batch,
                answers = answers.len(),
                "A batch handler answered the wrong number of outcomes; the batch will be redelivered."
            );
            return Verdict::Failed;
        }
        Ok(Err(e)) => {
            tracing::warn!(consumer, batch, error = %chain(&e), "A batch handler failed; the batch will be redelivered.");
            return Verdict::Failed;
        }
        Err(e) => {
            tracing::error!(consumer, batch, error = %e, "A batch handler panicked; the batch will be redelivered.");
            return Verdict::Failed;
        }
    };
    for (subject, answer) in subjects.zip(&answers) {
        if *answer == Settle::Drop {
            tracing::warn!(consumer, subject, "Dropped a message that cannot succeed.");
        }
    }
    Verdict::Settle(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_match_like_nats() {
        assert!(subject_matches("a.b", "a.b"));
        assert!(!subject_matches("a.b", "a.c"));
        assert!(!subject_matches("a.b", "a.b.c"));
        assert!(!subject_matches("a.b.c", "a.b"));
        assert!(subject_matches("a.*", "a.b"));
        assert!(!subject_matches("a.*", "a.b.c"));
        assert!(!subject_matches("a.*", "a"));
        assert!(subject_matches("a.*.c", "a.b.c"));
        assert!(subject_matches("a.>", "a.b"));
        assert!(subject_matches("a.>", "a.b.c"));
        assert!(!subject_matches("a.>", "a"));
        assert!(subject_matches(">", "a"));
        assert!(subject_matches("*.>", "a.b"));
        assert!(!subject_matches("*.>", "a"));
    }

    #[test]
    fn invalid_subjects_and_names_are_refused() {
        assert!(check_subject("a.b").is_ok());
        assert!(check_subject("a.*").is_err());
        assert!(check_subject("a.>").is_err());
        assert!(check_subject("a..b").is_err());
        assert!(check_subject("a b").is_err());
        assert!(check_subject("").is_err());
        assert!(check_filter("a.>").is_ok());
        assert!(check_filter("a.*.b").is_ok());
        assert!(check_filter("a.>.b").is_err());
        assert!(check_filter("a.").is_err());
        assert!(check_filter("a .b").is_err());
        assert!(check_consumer_name("swath-ingest").is_ok());
        assert!(check_consumer_name("swath.ingest").is_err());
        assert!(check_consumer_name("swath*").is_err());
        assert!(check_consumer_name("").is_err());
    }

    #[test]
    fn live_options_that_need_acknowledgements_are_refused() {
        assert!(check_live("a.>", &LiveOptions::default()).is_ok());
        let refused = |options: LiveOptions| check_live("a.>", &options).is_err();
        assert!(refused(LiveOptions {
            acknowledge: true,
            ..LiveOptions::default()
        }));
        assert!(refused(LiveOptions {
            durable: Some("d".into()),
            ..LiveOptions::default()
        }));
        assert!(refused(LiveOptions {
            queue_group: Some("q".into()),
            ..LiveOptions::default()
        }));
        assert!(check_live("a.>.b", &LiveOptions::default()).is_err());
    }

    #[test]
    fn a_handler_answer_is_judged_by_its_length_and_its_answers() {
        let subjects = ["a", "b"];
        let judge = |result: HandlerResult| judge("c", subjects.iter().copied(), result);
        let two = vec![Settle::Ack, Settle::Redeliver];
        assert_eq!(judge(Ok(Ok(two.clone()))), Verdict::Settle(two));
        assert_eq!(judge(Ok(Ok(vec![Settle::Ack]))), Verdict::Failed);
        assert_eq!(
            judge(Ok(Err(HandlerError("store down".into())))),
            Verdict::Failed
        );
        assert!(Verdict::Failed.made_no_progress());
        assert!(Verdict::Settle(vec![Settle::Redeliver, Settle::Redeliver]).made_no_progress());
        assert!(!Verdict::Settle(vec![Settle::Redeliver, Settle::Drop]).made_no_progress());
        assert!(!Verdict::Settle(vec![Settle::Ack]).made_no_progress());
    }

    #[test]
    fn settling_pauses_after_a_failure_or_no_progress() {
        let settled = |answers: Vec<Settle>| Settled::of(&Verdict::Settle(answers));
        assert_eq!(Settled::of(&Verdict::Failed), Settled::Failed);
        assert!(Settled::Failed.pauses());
        assert!(settled(vec![Settle::Redeliver]).pauses());
        assert!(!settled(vec![Settle::Redeliver, Settle::Ack]).pauses());
        assert!(!settled(vec![Settle::Drop]).pauses());
    }

    #[test]
    fn batch_subscriptions_are_checked_against_the_partitionings() {
        let p = Partitioning::new("telemetry.mower.*", 4).unwrap();
        let check = |filter: &str| check_batch_subscription(filter, "c", [&p]);
        assert_eq!(check("telemetry.mower.*").unwrap(), Some(&p));
        assert_eq!(check("notifications.>").unwrap(), None);
        assert!(check("telemetry.>").is_err());
        assert!(check("telemetry.mower.m1").is_err());
        assert!(check_batch_subscription("a.>.b", "c", None).is_err());
        assert!(check_batch_subscription("a.b", "c.d", None).is_err());
        assert_eq!(check_batch_subscription("a.b", "c", None).unwrap(), None);
    }

    #[test]
    fn the_batch_limit_is_clamped_to_the_in_flight_bound() {
        let limit = |max_batch| {
            batch_limit(&BatchSettings {
                max_batch,
                ..BatchSettings::default()
            })
        };
        assert_eq!(limit(0), 1);
        assert_eq!(limit(10), 10);
        assert_eq!(limit(MAX_IN_FLIGHT + 1), MAX_IN_FLIGHT);
    }

    #[test]
    fn a_linger_is_over_once_max_wait_has_passed() {
        let now = Instant::now();
        assert_eq!(linger_left(now, Duration::ZERO), None);
        let hour = Duration::from_secs(3600);
        assert!(linger_left(now, hour).is_some_and(|left| left <= hour));
        let earlier = now - Duration::from_millis(20);
        assert_eq!(linger_left(earlier, Duration::from_millis(10)), None);
    }

    #[test]
    fn a_dropped_subscription_counts_as_stopped() {
        let (tx, rx) = watch::channel(false);
        assert!(!is_stopped(&rx));
        drop(tx);
        assert!(is_stopped(&rx));
        let (tx, rx) = watch::channel(false);
        tx.send(true).unwrap();
        assert!(is_stopped(&rx));
    }

    #[tokio::test]
    async fn a_panicking_handler_fails_its_batch() {
        let panicked = tokio::spawn(async { panic!("handler bug") }).await;
        let result: HandlerResult = panicked.map(|()| Ok(Vec::new()));
        assert_eq!(judge("c", ["a"].into_iter(), result), Verdict::Failed);
    }
}
