//! A three-node NATS JetStream cluster on loopback for the end-to-end tests (docs/e2e.md): three
//! `nats-server` processes of the pinned release (`e2e::nats_server_binary`) with cluster routes
//! to each other, each with its own client port and storage, that a test can kill (`SIGKILL`),
//! restart on the same ports and storage, or pause (`SIGSTOP`) and resume.
//!
//! JetStream's durability setting is the cluster's choice: [`Durability::Default`] is the
//! server's (acknowledged once in the memory of a majority, flushed to disk every two minutes),
//! [`Durability::SyncAlways`] writes every message to disk before it is acknowledged
//! (`sync_interval: always`).

use crate::e2e::{free_port, nats_server_binary, signal, TempDir};
use anyhow::{bail, Context};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// When JetStream flushes to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The server's default: in memory on a majority, flushed every two minutes.
    Default,
    /// `sync_interval: always`: on disk on a majority before the publish is acknowledged.
    SyncAlways,
}

/// One node of a [`Cluster`].
struct Node {
    name: String,
    port: u16,
    config: std::path::PathBuf,
    log: std::path::PathBuf,
    child: Option<Child>,
    paused: bool,
}

/// A three-node cluster, stopped (and its storage removed) when dropped.
pub struct Cluster {
    nodes: Vec<Node>,
    _dir: TempDir,
}

impl Cluster {
    /// Starts three nodes and waits until JetStream answers on every one (a meta leader is
    /// elected).
    pub async fn start(durability: Durability) -> anyhow::Result<Cluster> {
        let binary = nats_server_binary();
        anyhow::ensure!(
            binary.exists(),
            "{} is missing (run .ci/nats-server and set SWATH_TEST_NATS_SERVER)",
            binary.display()
        );
        let dir = TempDir::new("swath-e2e-cluster");
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, route)| format!("nats-route://127.0.0.1:{route}"))
            .collect();
        let sync = match durability {
            Durability::Default => "",
            Durability::SyncAlways => "  sync_interval: always\n",
        };
        let mut nodes = Vec::new();
        for (i, (port, route)) in ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let store = dir.path().join(&name);
            let config = dir.path().join(format!("{name}.conf"));
            let text = format!(
                "server_name: {name}\nlisten: 127.0.0.1:{port}\n\
                 jetstream {{\n  store_dir: \"{}\"\n{sync}}}\n\
                 cluster {{\n  name: swath\n  listen: 127.0.0.1:{route}\n  routes: [{}]\n}}\n",
                store.display(),
                routes.join(", ")
            );
            std::fs::write(&config, text)?;
            nodes.push(Node {
                name,
                port: *port,
                config,
                log: dir.path().join(format!("n{}.log", i + 1)),
                child: None,
                paused: false,
            });
        }
        let mut cluster = Cluster { nodes, _dir: dir };
        for i in 0..3 {
            cluster.launch(i)?;
        }
        for i in 0..3 {
            cluster.wait_jetstream(i, Duration::from_secs(30)).await?;
        }
        Ok(cluster)
    }

    fn launch(&mut self, i: usize) -> anyhow::Result<()> {
        let node = &mut self.nodes[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)?;
        let child = Command::new(nats_server_binary())
            .arg("-c")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting NATS node {}", node.name))?;
        node.child = Some(child);
        node.paused = false;
        let port = node.port;
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if start.elapsed() > Duration::from_secs(20) {
                bail!(
                    "NATS node {} did not listen within 20 s",
                    self.nodes[i].name
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Waits until node `i` answers JetStream's account information (it knows a meta leader).
    pub async fn wait_jetstream(&self, i: usize, timeout: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            if let Ok(client) = async_nats::connect(self.url(i)).await {
                let answer = tokio::time::timeout(
                    Duration::from_secs(2),
                    client.request("$JS.API.INFO", bytes::Bytes::new()),
                )
                .await;
                if let Ok(Ok(answer)) = answer {
                    let info: serde_json::Value =
                        serde_json::from_slice(&answer.payload).unwrap_or_default();
                    if info.get("error").is_none() {
                        return Ok(());
                    }
                }
            }
            if start.elapsed() > timeout {
                bail!(
                    "JetStream did not answer on node {} within {timeout:?}",
                    self.nodes[i].name
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Node `i`'s client URL.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// Every node's URL, comma-separated starting with node `first` (the seeds a client is
    /// given; it connects to the first that answers).
    pub fn seeds_from(&self, first: usize) -> String {
        (0..self.nodes.len())
            .map(|k| self.url((first + k) % self.nodes.len()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `i`'s name (`n1`…), as JetStream names a stream's leader.
    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    /// The node that leads `stream`'s replicas now, asked of node `via`.
    pub async fn stream_leader(&self, via: usize, stream: &str) -> anyhow::Result<usize> {
        let client = async_nats::connect(self.url(via)).await?;
        let answer = client
            .request(format!("$JS.API.STREAM.INFO.{stream}"), bytes::Bytes::new())
            .await?;
        let info: serde_json::Value = serde_json::from_slice(&answer.payload)?;
        let leader = info["cluster"]["leader"]
            .as_str()
            .with_context(|| format!("no leader in {info}"))?;
        self.nodes
            .iter()
            .position(|n| n.name == leader)
            .with_context(|| format!("leader {leader} is not a node of this cluster"))
    }

    /// The process ids of the running nodes (for their CPU time).
    pub fn pids(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .filter_map(|n| n.child.as_ref().map(Child::id))
            .collect()
    }

    /// Kills node `i` (`SIGKILL`: no flush, no goodbye).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            if self.nodes[i].paused {
                signal(child.id(), "CONT");
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts node `i` again, on its ports and storage.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.kill(i);
        self.launch(i)
    }

    /// Pauses node `i` (`SIGSTOP`): it holds its connections and answers nothing.
    pub fn pause(&mut self, i: usize) {
        if let Some(child) = &self.nodes[i].child {
            signal(child.id(), "STOP");
            self.nodes[i].paused = true;
        }
    }

    /// Resumes a paused node (`SIGCONT`).
    pub fn resume(&mut self, i: usize) {
        if let Some(child) = &self.nodes[i].child {
            signal(child.id(), "CONT");
            self.nodes[i].paused = false;
        }
    }

    /// The tail of node `i`'s log, for a failing test's report.
    pub fn log_tail(&self, i: usize) -> String {
        let text = std::fs::read_to_string(&self.nodes[i].log).unwrap_or_default();
        let start = text.len().saturating_sub(3000);
        text[text.floor_char_boundary(start)..].to_owned()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}
