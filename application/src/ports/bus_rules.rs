//! What every [`EventBus`](super::EventBus) adapter does the same way, written once: the subject
//! and name checks, NATS subject matching, the refusal of live options that need
//! acknowledgements, the stop signal of a subscription, and the verdict on a handler's answer to
//! a batch. How a bus waits for and lingers over messages differs (a queue's wake-ups, JetStream
//! pull requests) and stays in each adapter.
//!
//! The memory bus and the JetStream bus differ in how they store, pull and settle messages; they
//! must not differ in what they refuse or in how they read a handler's answer, or the contract
//! suite would pass on one bus for reasons the other does not share. Both call these functions.

use super::{BusError, HandlerError, LiveOptions, Settle};
use tokio::sync::watch;
use tokio::task::JoinError;

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

/// Whether a subscription's stop signal (the `watch` behind [`Subscription`](super::Subscription))
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
            tracing::warn!(consumer, batch, error = %e, "A batch handler failed; the batch will be redelivered.");
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
