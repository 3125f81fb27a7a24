//! A batch the store refuses, split until what fails is single states (see
//! [`Ingest::record_states_isolating`]).

use super::{Ingest, IngestError};
use crate::ports::chain;
use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use std::ops::Range;
use swath_domain::{DropReason, StateCounts, StateOutcome, StateReport};

impl Ingest {
    /// [`Ingest::store`], splitting what the store refuses (see
    /// [`Ingest::record_states_isolating`]). Ranges are tried in order, so the states of a mower
    /// keep their order around a refused one.
    pub(super) async fn isolate(
        &self,
        valid: &[StateReport],
        origins: &[&str],
        received_at: DateTime<Utc>,
    ) -> Result<(Vec<StateOutcome>, StateCounts), IngestError> {
        let first = match self.store(valid, received_at).await {
            Err(e) if e.is_rejection() => e,
            other => return other,
        };
        let mut outcomes: Vec<Option<StateOutcome>> = vec![None; valid.len()];
        let mut counts = StateCounts::default();
        let mut refused: Vec<(usize, String)> = Vec::new();
        // A range with the refusal it is known to fail with, or `None` when not tried yet.
        let mut pending: VecDeque<(Range<usize>, Option<String>)> = VecDeque::new();
        pending.push_back((0..valid.len(), Some(chain(&first).to_string())));
        while let Some((range, failed)) = pending.pop_front() {
            match failed {
                Some(error) if range.len() == 1 => refused.push((range.start, error)),
                Some(_) => {
                    let middle = range.start + range.len() / 2;
                    pending.push_front((middle..range.end, None));
                    pending.push_front((range.start..middle, None));
                }
                None => match self.store(&valid[range.clone()], received_at).await {
                    Ok((applied, stored)) => {
                        counts.in_order += stored.in_order;
                        counts.late_merged += stored.late_merged;
                        counts.late_not_counted += stored.late_not_counted;
                        counts.duplicates += stored.duplicates;
                        for (i, outcome) in range.zip(applied) {
                            outcomes[i] = Some(outcome);
                        }
                    }
                    Err(e) if e.is_rejection() => {
                        pending.push_front((range, Some(chain(&e).to_string())))
                    }
                    Err(e) => return Err(e),
                },
            }
        }
        if refused.len() > 1 && outcomes.iter().all(Option::is_none) {
            tracing::error!(
                states = valid.len(),
                error = %chain(&first),
                "The store refused every state of a batch, each alone: a fault of the store, not of the states; nothing is dropped and the batch will be redelivered."
            );
            return Err(first);
        }
        for (i, error) in refused {
            let state = &valid[i];
            tracing::warn!(
                mower_id = %state.mower_id,
                account_id = %state.account_id,
                subject = origins.get(i).copied().unwrap_or("http"),
                observed_at = %state.observed_at.to_rfc3339(),
                reason = DropReason::RejectedByStore.as_str(),
                %error,
                "Dropped a state report the store refused every time; the other states of its batch are stored."
            );
            metrics::counter!(
                "swath_states_dropped_total",
                "reason" => DropReason::RejectedByStore.as_str()
            )
            .increment(1);
            outcomes[i] = Some(StateOutcome::Dropped(DropReason::RejectedByStore));
        }
        let outcomes = outcomes
            .into_iter()
            .map(|o| o.unwrap_or(StateOutcome::Stored))
            .collect();
        Ok((outcomes, counts))
    }
}
