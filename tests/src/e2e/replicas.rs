//! Several `swath` replicas on one database and one NATS server: started, killed with `SIGKILL`
//! at chosen moments (also while they start up), restarted, and asked how many partitions they
//! hold. A killed replica's process is gone but its log is kept until the set is dropped, so
//! that a failing scenario can print every log.

use super::Service;
use crate::load::Plan;
use sqlx::PgPool;
use std::time::{Duration, Instant};
use swath_application::ports::Partitioning;
use swath_domain::MowerId;
use uuid::Uuid;

/// SplitMix64 dice: the kill schedules of a scenario from a printed seed, with no dependency.
#[derive(Clone, Debug)]
pub struct Dice(u64);

impl Dice {
    /// From `SWATH_E2E_SEED` when set (to replay a schedule), else from the clock. The seed is
    /// printed.
    pub fn from_env(scenario: &str) -> Dice {
        let seed = std::env::var("SWATH_E2E_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("{scenario}: dice seed {seed} (SWATH_E2E_SEED={seed} replays the schedule)");
        Dice(seed)
    }

    pub fn roll(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..high`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.roll() % (high - low).max(1)
    }

    /// A duration of `low..high` milliseconds.
    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(self.range(low, high))
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.range(0, i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// One `kill -9`: which replica, how long after its process started, and whether `/readyz`
/// answered 200 just before.
#[derive(Clone, Debug)]
pub struct Kill {
    pub replica: usize,
    pub after_spawn: Duration,
    pub was_ready: bool,
    pub at: Instant,
}

/// `N` replicas of `swath` sharing a database and a NATS server.
pub struct Replicas {
    binary: String,
    database_url: String,
    nats_url: String,
    env: Vec<(String, String)>,
    live: Vec<Option<Service>>,
    /// Killed processes, kept for their logs.
    dead: Vec<(usize, Service)>,
    /// How long each start took until `/readyz` answered 200 (those that were waited for).
    startups: Vec<Duration>,
    pub kills: Vec<Kill>,
}

impl Replicas {
    /// Starts `n` replicas one after another, each ready before the next starts.
    pub async fn start(
        binary: &str,
        database_url: &str,
        nats_url: &str,
        env: &[(&str, &str)],
        n: usize,
    ) -> anyhow::Result<Replicas> {
        let mut replicas = Replicas {
            binary: binary.to_owned(),
            database_url: database_url.to_owned(),
            nats_url: nats_url.to_owned(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            live: (0..n).map(|_| None).collect(),
            dead: Vec::new(),
            startups: Vec::new(),
            kills: Vec::new(),
        };
        for i in 0..n {
            replicas.spawn(i)?;
            replicas.wait_ready(i, Duration::from_secs(60)).await?;
        }
        Ok(replicas)
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Replica `i`'s current process; panics when it is down.
    pub fn service(&self, i: usize) -> &Service {
        self.live[i].as_ref().expect("the replica runs")
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.live[i].is_some()
    }

    /// Starts replica `i` (it must be down) without waiting for it.
    pub fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        anyhow::ensure!(self.live[i].is_none(), "replica {i} runs already");
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.live[i] = Some(Service::spawn(
            &self.binary,
            &self.database_url,
            &self.nats_url,
            &env,
        )?);
        Ok(())
    }

    /// Waits until replica `i` answers `/readyz` with 200, and records how long its start took.
    pub async fn wait_ready(&mut self, i: usize, timeout: Duration) -> anyhow::Result<()> {
        let service = self.live[i].as_mut().expect("the replica runs");
        service.wait_ready(timeout).await?;
        self.startups.push(service.spawned_at().elapsed());
        Ok(())
    }

    /// Waits until every replica runs and is ready (those down are started first).
    pub async fn wait_all_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        for i in 0..self.len() {
            if !self.is_up(i) {
                self.spawn(i)?;
            }
            if !self.live[i].as_ref().expect("started").is_ready().await {
                self.wait_ready(i, timeout).await?;
            }
        }
        Ok(())
    }

    /// `kill -9` of replica `i` (it must run): no drain, no settlement. Records the kill.
    pub async fn kill9(&mut self, i: usize) -> Kill {
        let mut service = self.live[i].take().expect("the replica runs");
        let was_ready = service.is_ready().await;
        let kill = Kill {
            replica: i,
            after_spawn: service.spawned_at().elapsed(),
            was_ready,
            at: Instant::now(),
        };
        service.kill9();
        eprintln!(
            "kill -9 of replica {i} {} ms after it was started ({})",
            kill.after_spawn.as_millis(),
            if was_ready {
                "ready"
            } else {
                "still starting up: /readyz was not 200"
            }
        );
        self.dead.push((i, service));
        self.kills.push(kill.clone());
        kill
    }

    /// Starts replica `i` again (it must be down) and kills it while it starts up, before
    /// `/readyz` answers 200: at a random share of the start-ups seen so far (their median),
    /// tried again with half the delay, up to five times, when it was ready first. Leaves it
    /// down; the kills are in [`Replicas::kills`]. Fails when it was ready every time.
    pub async fn kill_during_startup(&mut self, i: usize, dice: &mut Dice) -> anyhow::Result<()> {
        let mut typical = self.median_startup().unwrap_or(Duration::from_millis(100));
        for _ in 0..5 {
            self.spawn(i)?;
            let delay = typical.mul_f64(dice.range(10, 90) as f64 / 100.0);
            tokio::time::sleep(delay).await;
            if !self.kill9(i).await.was_ready {
                return Ok(());
            }
            typical /= 2;
        }
        anyhow::bail!("replica {i} was ready every time before the kill (start-ups: {typical:?})")
    }

    /// The median time from spawn to `/readyz` 200 of the starts that were waited for.
    pub fn median_startup(&self) -> Option<Duration> {
        let mut s = self.startups.clone();
        s.sort();
        s.get(s.len() / 2).copied()
    }

    /// Every process, running or killed (for their logs).
    pub fn all_services(&self) -> Vec<&Service> {
        self.live
            .iter()
            .flatten()
            .chain(self.dead.iter().map(|(_, s)| s))
            .collect()
    }

    /// The log tails of every process, replica by replica.
    pub fn print_logs(&self) {
        for (i, s) in self.live.iter().enumerate() {
            if let Some(s) = s {
                eprintln!("--- replica {i} (running) log tail ---\n{}", s.log_tail());
            }
        }
        for (i, s) in &self.dead {
            eprintln!("--- replica {i} (killed) log tail ---\n{}", s.log_tail());
        }
    }

    /// How many times `needle` occurs in the logs of every process, running or killed.
    pub fn log_count(&self, needle: &str) -> usize {
        self.all_services()
            .iter()
            .map(|s| s.log_text().matches(needle).count())
            .sum()
    }

    /// How many partitions of `consumer` each replica holds (`None`: down).
    pub async fn partitions_owned(&self, consumer: &str) -> anyhow::Result<Vec<Option<u32>>> {
        let mut owned = Vec::new();
        for s in &self.live {
            owned.push(match s {
                Some(s) => Some(s.partitions_owned(consumer).await?),
                None => None,
            });
        }
        Ok(owned)
    }

    /// Waits until the running replicas hold every one of the `partitions` of `consumer`
    /// between them and each holds its share, `partitions / running ± 1`. Fails after `timeout`,
    /// naming what they held last. Returns the shares and how long it took.
    pub async fn wait_balanced(
        &self,
        consumer: &str,
        partitions: u32,
        timeout: Duration,
    ) -> anyhow::Result<(Vec<Option<u32>>, Duration)> {
        let started = Instant::now();
        loop {
            // A replica that has not registered the gauge yet is not balanced.
            let owned = self.partitions_owned(consumer).await;
            if let Ok(owned) = &owned {
                if balanced(owned, partitions) {
                    return Ok((owned.clone(), started.elapsed()));
                }
            }
            if started.elapsed() > timeout {
                anyhow::bail!(
                    "the replicas' {consumer} partitions did not balance within {timeout:?} \
                     ({partitions} partitions, held at the end: {owned:?})"
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Every partition held by exactly one running replica (the sum is `partitions`: the gauges
/// are read one after another, so a hand-over in between may show a sum off by one for a
/// moment; the wait tries again), each running replica's share within 1 of an even split.
fn balanced(owned: &[Option<u32>], partitions: u32) -> bool {
    let running: Vec<u32> = owned.iter().flatten().copied().collect();
    if running.is_empty() || running.iter().sum::<u32>() != partitions {
        return false;
    }
    let share = partitions as f64 / running.len() as f64;
    running.iter().all(|&n| (n as f64 - share).abs() <= 1.0)
}

/// History rows of the plan's mowers per partition of `telemetry.mower.*` into `partitions`.
pub async fn partition_counts(
    pool: &PgPool,
    plan: &Plan,
    partitions: u32,
) -> anyhow::Result<Vec<usize>> {
    let partitioning = Partitioning::new("telemetry.mower.*", partitions)?;
    let ids: Vec<Uuid> = plan.mower_ids().iter().map(|m| m.0).collect();
    let rows: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT mower_id, count(*) FROM state_history WHERE mower_id = ANY($1) GROUP BY mower_id",
    )
    .bind(&ids)
    .fetch_all(pool)
    .await?;
    let mut counts = vec![0; partitions as usize];
    for (mower, n) in rows {
        // The key is the subject's last token: the mower id as the subject names it.
        let p = partitioning.partition_of_key(&MowerId(mower).to_string());
        counts[p as usize] += n as usize;
    }
    Ok(counts)
}

/// Waits until every partition has more history rows than `since` (counts taken at a kill):
/// with states of every partition being published, how long until each partition is ingested
/// again, i.e. the failover time of the partitions the killed replica held. Fails after
/// `timeout`, naming the partitions still stalled.
pub async fn wait_every_partition_grows(
    pool: &PgPool,
    plan: &Plan,
    since: &[usize],
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let now = partition_counts(pool, plan, since.len() as u32).await?;
        let stalled: Vec<usize> = (0..since.len()).filter(|&p| now[p] <= since[p]).collect();
        if stalled.is_empty() {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < timeout,
            "partitions {stalled:?} stored nothing for {timeout:?} (counts then {since:?}, now {now:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
