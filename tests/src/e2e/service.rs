//! The `swath` binary as a child process: started, probed (`/readyz`, `/metrics`), killed.

use super::{free_port, signal, wait_exit, TempDir};
use crate::load::E2E_MERGE_GAP;
use anyhow::{bail, Context};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A `swath` process on PostgreSQL and NATS, without a simulated fleet, its logs in a file,
/// folding W8 at the scenarios' merge gap ([`E2E_MERGE_GAP`], unless `extra` sets
/// `SWATH_SESSION_MERGE_GAP_SECONDS`). Killed when dropped.
pub struct Service {
    pub port: u16,
    child: Option<Child>,
    pub log: PathBuf,
    spawned_at: Instant,
    _dir: TempDir,
}

impl Service {
    /// Starts `binary` (`env!("CARGO_BIN_EXE_swath")`) with the given store and bus, and extra
    /// `SWATH_*` variables; waits until `/readyz` answers 200.
    pub async fn start(
        binary: &str,
        database_url: &str,
        nats_url: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Service> {
        let mut service = Service::spawn(binary, database_url, nats_url, extra)?;
        service.wait_ready(Duration::from_secs(60)).await?;
        Ok(service)
    }

    /// Starts it without waiting for anything: the scenarios that kill a replica while it
    /// starts up need the moments before `/readyz` answers 200.
    pub fn spawn(
        binary: &str,
        database_url: &str,
        nats_url: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Service> {
        let dir = TempDir::new("swath-e2e-service");
        let log = dir.path().join("swath.log");
        let port = free_port();
        let file = std::fs::File::create(&log)?;
        let mut command = Command::new(binary);
        command
            .env("SWATH_STORE", "postgres")
            .env("SWATH_DATABASE_URL", database_url)
            .env("SWATH_BUS", "nats")
            .env("SWATH_NATS_URL", nats_url)
            .env("SWATH_SIM_MOWERS", "0")
            .env("SWATH_HTTP_ADDR", format!("127.0.0.1:{port}"))
            // `SWATH_E2E_LOG` sets the replicas' log filter (`swath_nats=debug` to read a
            // partition's batches, say). A failure prints the log's last lines either way;
            // `SWATH_E2E_KEEP_LOGS` keeps the whole of it.
            .env(
                "SWATH_LOG",
                std::env::var("SWATH_E2E_LOG").unwrap_or_else(|_| "info,sqlx=warn".to_owned()),
            )
            // A start-up error's backtrace would push its message out of the log's tail that a
            // failing scenario prints; panics keep theirs.
            .env("RUST_LIB_BACKTRACE", "0")
            .env_remove("SWATH_DEMO_TOKEN")
            .env(
                "SWATH_SESSION_MERGE_GAP_SECONDS",
                E2E_MERGE_GAP.num_seconds().to_string(),
            );
        for (k, v) in extra {
            command.env(k, v);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        Ok(Service {
            port,
            child: Some(child),
            log,
            spawned_at: Instant::now(),
            _dir: dir,
        })
    }

    /// When the process was started.
    pub fn spawned_at(&self) -> Instant {
        self.spawned_at
    }

    /// Whether the process runs (not killed, not exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Whether `/readyz` answers 200 now.
    pub async fn is_ready(&self) -> bool {
        matches!(self.get("/readyz").await, Ok((200, _)))
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    bail!(
                        "swath exited with {status} while starting:\n{}",
                        self.log_tail()
                    );
                }
            }
            if let Ok((200, _)) = self.get("/readyz").await {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!(
                    "swath was not ready within {timeout:?}:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `GET path` on the service: status and body.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        http_get(self.port, path).await
    }

    /// The value of a metric without labels (0 when not recorded yet).
    pub async fn metric(&self, name: &str) -> anyhow::Result<f64> {
        let (status, body) = self.get("/metrics").await?;
        anyhow::ensure!(status == 200, "/metrics answered {status}");
        Ok(metric_value(&body, name))
    }

    /// The value of the sample of `name` with these labels (others may be there too); an
    /// error when the service does not expose it.
    pub async fn labelled_metric(
        &self,
        name: &str,
        labels: &[(&str, &str)],
    ) -> anyhow::Result<f64> {
        let (status, body) = self.get("/metrics").await?;
        anyhow::ensure!(status == 200, "/metrics answered {status}");
        labelled_metric_value(&body, name, labels)
            .with_context(|| format!("/metrics has no {name} with {labels:?}"))
    }

    /// How many partitions of `consumer` (`swath-ingest`, `swath-watcher`) this replica holds:
    /// the `swath_bus_partitions_owned` gauge.
    pub async fn partitions_owned(&self, consumer: &str) -> anyhow::Result<u32> {
        let value = self
            .labelled_metric("swath_bus_partitions_owned", &[("consumer", consumer)])
            .await?;
        Ok(value as u32)
    }

    /// `kill -9`: no drain, no settlement.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `SIGTERM`, and waits for the graceful shutdown. Returns whether it exited in time.
    pub fn terminate(&mut self, timeout: Duration) -> bool {
        match self.child.take() {
            Some(mut child) => {
                signal(child.id(), "TERM");
                wait_exit(&mut child, timeout)
            }
            None => true,
        }
    }

    /// The last lines of the service's log (for failure messages).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The whole log.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill9();
        // `SWATH_E2E_KEEP_LOGS=<dir>` keeps every replica's whole log there (named by the port
        // it served), for reading a failure after the scenario's temporary files are gone.
        if let Some(dir) = std::env::var_os("SWATH_E2E_KEEP_LOGS") {
            let dir = PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::copy(&self.log, dir.join(format!("swath-{}.log", self.port)));
        }
    }
}

/// A minimal HTTP/1.1 `GET` (no client library needed): status and body.
pub async fn http_get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    http_request(port, "GET", path, &[], "").await
}

/// A minimal HTTP/1.1 request with extra headers and a body (empty: none): status and body.
pub async fn http_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> anyhow::Result<(u16, String)> {
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let io = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        anyhow::Ok(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), io)
        .await
        .context("no HTTP answer within 10 s")??;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP header end")?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The value of `name` (a sample without labels) in a Prometheus text exposition; 0 if absent.
pub fn metric_value(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The value of the first sample of `name` carrying every label of `labels` (in any order,
/// among others) in a Prometheus text exposition; `None` when there is none.
pub fn labelled_metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix('{')?;
            let (set, value) = rest.rsplit_once('}')?;
            Some((set, value.trim().parse::<f64>().ok()?))
        })
        .find(|(set, _)| {
            let present: Vec<(&str, &str)> = set
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
                .collect();
            labels.iter().all(|wanted| present.contains(wanted))
        })
        .map(|(_, value)| value)
}

/// CPU time (user + system) a process used so far, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    let rest = stat.rsplit_once(')').context("malformed stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, utime field 14, stime field 15 (1-based, man proc).
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    let ticks = clock_ticks();
    Ok(Duration::from_secs_f64((utime + stime) as f64 / ticks))
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// Resident memory of a process (`VmRSS`), in bytes.
pub fn resident_bytes(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("no VmRSS value")?
        .parse()?;
    Ok(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::{labelled_metric_value, metric_value};

    const EXPOSITION: &str = "\
# TYPE swath_bus_partitions_owned gauge
swath_bus_partitions_owned{consumer=\"swath-watcher\"} 5
swath_bus_partitions_owned{consumer=\"swath-ingest\"} 3
swath_states_stored_total 42
swath_http_requests_total{method=\"GET\",route=\"/readyz\",status=\"200\"} 7
";

    #[test]
    fn a_labelled_sample_is_found_by_its_labels_in_any_order() {
        let owned = |consumer| {
            labelled_metric_value(
                EXPOSITION,
                "swath_bus_partitions_owned",
                &[("consumer", consumer)],
            )
        };
        assert_eq!(owned("swath-ingest"), Some(3.0));
        assert_eq!(owned("swath-watcher"), Some(5.0));
        assert_eq!(owned("swath-other"), None);
        assert_eq!(
            labelled_metric_value(
                EXPOSITION,
                "swath_http_requests_total",
                &[("status", "200"), ("route", "/readyz")]
            ),
            Some(7.0)
        );
        // A name that is a prefix of another is not that other.
        assert_eq!(
            labelled_metric_value(EXPOSITION, "swath_bus_partitions", &[]),
            None
        );
        assert_eq!(metric_value(EXPOSITION, "swath_states_stored_total"), 42.0);
    }
}
