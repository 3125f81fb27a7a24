//! Group commit: the batches that several partitions hand over at the same moment are written in
//! one unit of work.
//!
//! Why: a replica handles one batch per partition concurrently (docs/decisions.md, decision 63).
//! At the default batch maximum of 64, each of those batches paid its statements' fixed cost and
//! a commit of its own, and that per-batch work was the largest cost per state (BENCHMARKS.md,
//! "End to end with partitions"). Batches of different partitions hold different mowers and the
//! write rules are per mower, so writing them together stores exactly what writing them one after
//! the other stores, with fewer and larger units of work (decision 84).
//!
//! How: a batch is queued; at most `writers` units of work run at once. A caller that gets a
//! writer's turn takes what is queued (oldest first, its own batch or others', up to
//! `max_items`), writes it with its own write function, and hands every batch its own outputs.
//! When the combined write fails, each batch of it is written alone, so that a failure (a state
//! the store refuses, a store that went away) is the failing batch's only, as without grouping.
//! The write functions must be idempotent (writing the same items twice stores them once), which
//! every write behind a bus is already: a redelivered batch is written again.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use tokio::sync::{oneshot, Semaphore};

/// A queue of batches written together; see the module's documentation.
pub struct GroupCommit<T, O, E> {
    queue: Mutex<VecDeque<Queued<T, O, E>>>,
    writers: Semaphore,
    max_items: usize,
    /// The metric label of the use case (`swath_group_commit_batches{use_case}`).
    use_case: &'static str,
}

struct Queued<T, O, E> {
    items: Vec<T>,
    reply: oneshot::Sender<Result<Vec<O>, E>>,
}

impl<T: Clone, O, E> GroupCommit<T, O, E> {
    /// At most `writers` units of work at once, each of at most `max_items` items unless a single
    /// batch is larger (a batch is never split).
    pub fn new(use_case: &'static str, writers: usize, max_items: usize) -> Self {
        Self {
            queue: Mutex::default(),
            writers: Semaphore::new(writers.max(1)),
            max_items: max_items.max(1),
            use_case,
        }
    }

    /// Writes `items` (alone or with other batches, see the module's documentation) and answers
    /// their outputs, one per item, in order, or the error of writing them alone.
    ///
    /// Cancel-safe for the other callers: if this call is dropped while it writes their batches,
    /// each of them writes its own batch again, alone.
    pub async fn submit<W, Fut>(&self, items: Vec<T>, write: W) -> Result<Vec<O>, E>
    where
        W: Fn(Vec<T>) -> Fut,
        Fut: Future<Output = Result<Vec<O>, E>>,
    {
        // Kept to write alone if the writer that took the batch was cancelled or panicked: the
        // batch may or may not be stored then, and writing it again is what a redelivery does.
        let mine = items.clone();
        let (reply, mut answer) = oneshot::channel();
        self.lock().push_back(Queued { items, reply });
        loop {
            tokio::select! {
                biased;
                answer = &mut answer => {
                    return match answer {
                        Ok(result) => result,
                        Err(_abandoned) => write(mine).await,
                    };
                }
                permit = self.writers.acquire() => {
                    let Ok(permit) = permit else {
                        // The semaphore is never closed; written alone all the same.
                        return write(mine).await;
                    };
                    let group = self.take_group();
                    if group.is_empty() {
                        // Another writer took this batch: its answer comes from there, and this
                        // writer's turn goes to the batches queued behind.
                        drop(permit);
                        return match (&mut answer).await {
                            Ok(result) => result,
                            Err(_abandoned) => write(mine).await,
                        };
                    }
                    self.write_group(group, &write).await;
                    drop(permit);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Queued<T, O, E>>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest queued batches, as many as fit in `max_items` (at least one).
    fn take_group(&self) -> Vec<Queued<T, O, E>> {
        let mut queue = self.lock();
        let mut group = Vec::new();
        let mut items = 0;
        while let Some(next) = queue.front() {
            if !group.is_empty() && items + next.items.len() > self.max_items {
                break;
            }
            items += next.items.len();
            group.extend(queue.pop_front());
        }
        group
    }

    async fn write_group<W, Fut>(&self, group: Vec<Queued<T, O, E>>, write: &W)
    where
        W: Fn(Vec<T>) -> Fut,
        Fut: Future<Output = Result<Vec<O>, E>>,
    {
        metrics::histogram!("swath_group_commit_batches", "use_case" => self.use_case)
            .record(group.len() as f64);
        if group.len() == 1 {
            for queued in group {
                let _ = queued.reply.send(write(queued.items).await);
            }
            return;
        }
        let all: Vec<T> = group.iter().flat_map(|q| q.items.iter().cloned()).collect();
        let total = all.len();
        match write(all).await {
            Ok(outputs) if outputs.len() == total => {
                let mut outputs = outputs.into_iter();
                for queued in group {
                    let own = outputs.by_ref().take(queued.items.len()).collect();
                    let _ = queued.reply.send(Ok(own));
                }
            }
            // Failed (or a write function that broke its contract): each batch alone, in order.
            _ => {
                for queued in group {
                    let _ = queued.reply.send(write(queued.items).await);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A write that records each call's items and refuses any call holding a negative item.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<Vec<i64>>>,
        running: AtomicUsize,
        most_running: AtomicUsize,
    }

    impl Recorder {
        async fn write(&self, items: Vec<i64>) -> Result<Vec<i64>, String> {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_running.fetch_max(now, Ordering::SeqCst);
            // Lets the other callers queue up behind this write.
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            self.calls.lock().unwrap().push(items.clone());
            self.running.fetch_sub(1, Ordering::SeqCst);
            if items.iter().any(|i| *i < 0) {
                return Err(format!("refused {items:?}"));
            }
            Ok(items.iter().map(|i| i * 10).collect())
        }
    }

    async fn submit_all(
        group: &Arc<GroupCommit<i64, i64, String>>,
        recorder: &Arc<Recorder>,
        batches: Vec<Vec<i64>>,
    ) -> Vec<Result<Vec<i64>, String>> {
        let tasks: Vec<_> = batches
            .into_iter()
            .map(|batch| {
                let group = Arc::clone(group);
                let recorder = Arc::clone(recorder);
                tokio::spawn(async move {
                    group
                        .submit(batch, |items| {
                            let recorder = Arc::clone(&recorder);
                            async move { recorder.write(items).await }
                        })
                        .await
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        results
    }

    #[tokio::test(flavor = "current_thread")]
    async fn concurrent_batches_are_written_together_and_answered_each_its_own() {
        let group = Arc::new(GroupCommit::new("test", 1, 100));
        let recorder = Arc::new(Recorder::default());
        let batches: Vec<Vec<i64>> = (0..6).map(|b| vec![b * 10, b * 10 + 1]).collect();
        let results = submit_all(&group, &recorder, batches.clone()).await;
        for (batch, result) in batches.iter().zip(results) {
            let expected: Vec<i64> = batch.iter().map(|i| i * 10).collect();
            assert_eq!(result, Ok(expected));
        }
        let calls = recorder.calls.lock().unwrap().clone();
        // The first batch is written alone (nothing else was queued yet); the five queued while
        // it ran are written in one call, oldest first.
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[1], vec![10, 11, 20, 21, 30, 31, 40, 41, 50, 51]);
        assert_eq!(recorder.most_running.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_group_never_exceeds_the_maximum_unless_one_batch_does() {
        let group = Arc::new(GroupCommit::new("test", 1, 5));
        let recorder = Arc::new(Recorder::default());
        let batches = vec![
            vec![1],
            vec![2, 3],
            vec![4, 5, 6],
            vec![7, 8, 9, 10, 11, 12],
            vec![13],
        ];
        let results = submit_all(&group, &recorder, batches).await;
        assert!(results.iter().all(Result::is_ok));
        let calls = recorder.calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            vec![
                vec![1],
                vec![2, 3, 4, 5, 6],
                vec![7, 8, 9, 10, 11, 12],
                vec![13]
            ]
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failing_batch_fails_alone_and_the_others_are_written() {
        let group = Arc::new(GroupCommit::new("test", 1, 100));
        let recorder = Arc::new(Recorder::default());
        let batches = vec![vec![1], vec![2], vec![-3], vec![4]];
        let results = submit_all(&group, &recorder, batches).await;
        assert_eq!(results[0], Ok(vec![10]));
        assert_eq!(results[1], Ok(vec![20]));
        assert_eq!(results[2], Err("refused [-3]".to_owned()));
        assert_eq!(results[3], Ok(vec![40]));
        let calls = recorder.calls.lock().unwrap().clone();
        // The group [2, -3, 4] failed and each of its batches was written alone, in order.
        assert_eq!(
            calls,
            vec![vec![1], vec![2, -3, 4], vec![2], vec![-3], vec![4]]
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn writers_run_concurrently_up_to_their_number() {
        let group = Arc::new(GroupCommit::new("test", 3, 1));
        let recorder = Arc::new(Recorder::default());
        let batches: Vec<Vec<i64>> = (0..9).map(|b| vec![b]).collect();
        let results = submit_all(&group, &recorder, batches).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(recorder.calls.lock().unwrap().len(), 9);
        assert_eq!(recorder.most_running.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_batch_whose_writer_was_cancelled_is_written_by_its_own_caller() {
        let group: Arc<GroupCommit<i64, i64, String>> = Arc::new(GroupCommit::new("test", 1, 100));
        // The first batch's write waits for `first_done`; a group's write never ends.
        let first_done = Arc::new(tokio::sync::Notify::new());
        let calls = Arc::new(Mutex::new(Vec::<Vec<i64>>::new()));
        let submit = |items: Vec<i64>| {
            let (group, first_done, calls) = (
                Arc::clone(&group),
                Arc::clone(&first_done),
                Arc::clone(&calls),
            );
            tokio::spawn(async move {
                let write = |items: Vec<i64>| {
                    let (first_done, calls) = (Arc::clone(&first_done), Arc::clone(&calls));
                    async move {
                        calls.lock().unwrap().push(items.clone());
                        if items == [1] {
                            first_done.notified().await;
                        } else if items.len() > 1 {
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, String>(items)
                    }
                };
                group.submit(items, write).await
            })
        };
        let first = submit(vec![1]);
        tokio::task::yield_now().await;
        let writer = submit(vec![2]);
        tokio::task::yield_now().await;
        let waiting = submit(vec![3]);
        for _ in 0..5 {
            tokio::task::yield_now().await;
        }
        first_done.notify_one();
        assert_eq!(first.await.unwrap(), Ok(vec![1]));
        // The second caller got the writer's turn and took [2, 3]: cancel it mid-write.
        for _ in 0..5 {
            tokio::task::yield_now().await;
        }
        assert_eq!(calls.lock().unwrap().last(), Some(&vec![2, 3]));
        writer.abort();
        assert_eq!(waiting.await.unwrap(), Ok(vec![3]));
        assert_eq!(calls.lock().unwrap().last(), Some(&vec![3]));
    }
}
