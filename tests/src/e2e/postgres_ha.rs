//! Swath's highly available PostgreSQL as the failover scenario drives it
//! (`swath/tests/e2e_postgres_ha.rs`, docs/e2e.md): the set `deploy/postgres-ha/start.sh`
//! started (two PostgreSQL nodes under Patroni, etcd, HAProxy), found through the `env` file it
//! wrote in its directory (`SWATH_TEST_HA_DIR`); the nodes' roles read from Patroni's REST API,
//! a primary's postmaster killed, a planned switchover asked for; and a steady reader of Swath's
//! API, whose answers are counted in the windows a scenario names.

use super::{http_request, signal, Service};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Patroni member names of the set, in the order of their REST ports in its `env` file.
pub const NODES: [&str; 2] = ["node1", "node2"];

/// A running set of `deploy/postgres-ha/start.sh`.
pub struct HaSet {
    dir: PathBuf,
    /// The server's URL through HAProxy's primary port (the `postgres` database).
    pub write_url: String,
    /// The server's URL through HAProxy's replica port.
    pub read_url: String,
    /// Patroni's REST port of each node of [`NODES`].
    rest: [u16; 2],
}

impl HaSet {
    /// The set whose directory `SWATH_TEST_HA_DIR` names (`deploy/postgres-ha/check.sh` sets it).
    pub fn from_env() -> anyhow::Result<HaSet> {
        let dir = std::env::var_os("SWATH_TEST_HA_DIR")
            .context("SWATH_TEST_HA_DIR is not set: run deploy/postgres-ha/check.sh")?;
        let dir = PathBuf::from(dir);
        let file = dir.join("env");
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let mut vars = BTreeMap::new();
        for line in text.lines() {
            let Some(assignments) = line.strip_prefix("export ") else {
                continue;
            };
            // `PATRONICTL` is a quoted command, not needed here.
            if assignments.contains('"') {
                continue;
            }
            for pair in assignments.split_whitespace() {
                if let Some((name, value)) = pair.split_once('=') {
                    vars.insert(name.to_owned(), value.to_owned());
                }
            }
        }
        let var = |name: &str| {
            vars.get(name)
                .cloned()
                .with_context(|| format!("{name} is missing from {}", file.display()))
        };
        let port = |name: &str| -> anyhow::Result<u16> {
            var(name)?
                .parse()
                .with_context(|| format!("{name} in {}", file.display()))
        };
        Ok(HaSet {
            write_url: var("SWATH_DATABASE_URL")?,
            read_url: var("SWATH_DATABASE_READ_URL")?,
            rest: [port("REST1_PORT")?, port("REST2_PORT")?],
            dir,
        })
    }

    async fn answers_200(&self, node: usize, path: &str) -> bool {
        matches!(
            http_request(self.rest[node], "GET", path, &[], "").await,
            Ok((200, _))
        )
    }

    /// The node Patroni runs as the primary (its REST API answers 200 on `/primary`), if any.
    pub async fn primary(&self) -> Option<usize> {
        for node in 0..NODES.len() {
            if self.answers_200(node, "/primary").await {
                return Some(node);
            }
        }
        None
    }

    /// Waits until one node is the primary and the other streams as its synchronous standby
    /// (`/sync`), as after a start or a completed failover; returns the primary.
    pub async fn wait_whole(&self, timeout: Duration) -> anyhow::Result<usize> {
        let started = Instant::now();
        loop {
            if let Some(primary) = self.primary().await {
                if self.answers_200(1 - primary, "/sync").await {
                    return Ok(primary);
                }
            }
            if started.elapsed() > timeout {
                bail!(
                    "no primary with a synchronous standby after {timeout:?} (the set's logs are in {})",
                    self.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until `node` no longer answers as the primary (Patroni noticed the fault); a
    /// commit or a whole set seen before that would be the old primary's.
    pub async fn wait_not_primary(&self, node: usize, timeout: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        while self.answers_200(node, "/primary").await {
            if started.elapsed() > timeout {
                bail!("{} was still the primary after {timeout:?}", NODES[node]);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// `kill -9` of `node`'s postmaster: PostgreSQL dies at once, mid-transaction; its Patroni
    /// lives on (and, the set's `primary_start_timeout` being 0, hands the leadership over
    /// instead of restarting it in place). Returns the killed pid.
    pub fn kill_postmaster(&self, node: usize) -> anyhow::Result<u32> {
        let file = self.dir.join(NODES[node]).join("postmaster.pid");
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let pid: u32 = text
            .lines()
            .next()
            .context("an empty postmaster.pid")?
            .trim()
            .parse()
            .context("postmaster.pid's first line")?;
        signal(pid, "KILL");
        Ok(pid)
    }

    /// A planned switchover from the primary `leader` to the other node, asked of Patroni's
    /// REST API (what `patronictl switchover` does).
    pub async fn switchover(&self, leader: usize) -> anyhow::Result<()> {
        let body = format!(
            r#"{{"leader":"{}","candidate":"{}"}}"#,
            NODES[leader],
            NODES[1 - leader]
        );
        let (status, answer) = http_request(
            self.rest[leader],
            "POST",
            "/switchover",
            &[("Content-Type", "application/json")],
            &body,
        )
        .await?;
        anyhow::ensure!(
            status == 200,
            "Patroni refused the switchover ({status}): {answer}"
        );
        Ok(())
    }
}

/// Waits until one of `services` has committed an ingest batch after `since` (Unix seconds:
/// `swath_ingest_last_commit_timestamp_seconds`); returns how long after `since` it committed,
/// and whether any of them said `503` on `/readyz` meanwhile (the store down).
pub async fn wait_storing_again(
    services: &[&Service],
    since: f64,
    timeout: Duration,
) -> anyhow::Result<(Duration, bool)> {
    let started = Instant::now();
    let mut said_503 = false;
    loop {
        for service in services {
            if let Ok((503, _)) = service.get("/readyz").await {
                said_503 = true;
            }
            let last = service
                .metric("swath_ingest_last_commit_timestamp_seconds")
                .await
                .unwrap_or(0.0);
            if last > since {
                return Ok((Duration::from_secs_f64(last - since), said_503));
            }
        }
        if started.elapsed() > timeout {
            bail!("no ingest commit within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Seconds since the Unix epoch, as the service's timestamp gauges count them.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// A client reading one path of Swath's API at a steady pace until stopped: each answer's
/// status (0 when none came within its time-out) and when it was asked.
pub struct SteadyReader {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(Instant, u16)>>,
}

impl SteadyReader {
    /// `GET path` on `port` with the bearer `token`, every `every`.
    pub fn start(port: u16, path: String, token: String, every: Duration) -> SteadyReader {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let authorization = format!("Bearer {token}");
            let mut reads = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let asked = Instant::now();
                let status =
                    http_request(port, "GET", &path, &[("Authorization", &authorization)], "")
                        .await
                        .map(|(status, _)| status)
                        .unwrap_or(0);
                reads.push((asked, status));
                tokio::time::sleep(every.saturating_sub(asked.elapsed())).await;
            }
            reads
        });
        SteadyReader { stop, task }
    }

    /// Stops reading; returns every read.
    pub async fn stop(self) -> Reads {
        self.stop.store(true, Ordering::Relaxed);
        Reads(self.task.await.expect("the reader"))
    }
}

/// What a [`SteadyReader`] was answered.
pub struct Reads(pub Vec<(Instant, u16)>);

impl Reads {
    /// Reads asked inside any of `windows` (from, to), and how many of them were answered 200.
    pub fn within(&self, windows: &[(Instant, Instant)]) -> (usize, usize) {
        let inside: Vec<u16> = self
            .0
            .iter()
            .filter(|(at, _)| windows.iter().any(|(from, to)| at >= from && at <= to))
            .map(|(_, status)| *status)
            .collect();
        let answered = inside.iter().filter(|s| **s == 200).count();
        (answered, inside.len())
    }

    /// The statuses other than 200 and how many of each (0: no answer).
    pub fn failures(&self) -> BTreeMap<u16, usize> {
        let mut out = BTreeMap::new();
        for (_, status) in &self.0 {
            if *status != 200 {
                *out.entry(*status).or_default() += 1;
            }
        }
        out
    }
}
