//! End-to-end harness: private NATS and PostgreSQL servers (to restart them without disturbing
//! anyone), databases of their own on the shared server, and the `swath` binary as a child
//! process, all stopped when dropped, also when a test fails.
//!
//! The end-to-end tests run when both `SWATH_TEST_DATABASE_URL` and `SWATH_TEST_NATS_URL` are
//! set (see [`services`]); built without them, they are reported as ignored; set, a missing
//! `nats-server` or PostgreSQL binary is a failure.

use anyhow::{bail, Context};
use sqlx::{Connection, Executor, PgConnection};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The NATS server binary the private servers run: `SWATH_TEST_NATS_SERVER` (CI sets it to the
/// release the project pins, `.ci/nats-server`), else Debian's `nats-server` package, else the
/// first `nats-server` on the `PATH`.
pub fn nats_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SWATH_TEST_NATS_SERVER") {
        return PathBuf::from(path);
    }
    let mut candidates = vec![
        PathBuf::from("/usr/sbin/nats-server"),
        PathBuf::from("/usr/bin/nats-server"),
    ];
    if let Some(paths) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&paths).map(|p| p.join("nats-server")));
    }
    let fallback = candidates[0].clone();
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or(fallback)
}

/// The shared PostgreSQL server's URL. The shared NATS is not used by the end-to-end tests (each
/// starts its own, so that the service's fixed stream and consumer names are its own), but its
/// variable says that NATS tests are wanted. The tests are ignored when either variable was unset
/// at build time (`build.rs`), so reaching here without them fails.
pub fn services() -> String {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    match (set("SWATH_TEST_DATABASE_URL"), set("SWATH_TEST_NATS_URL")) {
        (Some(database), Some(_)) => database,
        _ => panic!(
            "SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_URL must both be set for the end-to-end \
             tests: run them through `cargo test` with both set"
        ),
    }
}

/// A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A directory under the system's temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > timeout {
            bail!("{what} did not come up within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Sends `signal` (`TERM`, `KILL`, …) to a process.
pub fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

/// Waits up to `timeout` for a child to exit; kills it past that. Returns whether it exited on
/// its own.
fn wait_exit(child: &mut Child, timeout: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

// ---------------------------------------------------------------------------------------------
// NATS

/// A private `nats-server` with JetStream, on a free port, its storage in a temp dir. Stopped
/// (and its storage removed) when dropped.
pub struct NatsServer {
    pub port: u16,
    dir: TempDir,
    child: Option<Child>,
}

impl NatsServer {
    pub fn start() -> anyhow::Result<NatsServer> {
        let binary = nats_server_binary();
        anyhow::ensure!(
            binary.exists(),
            "{} is missing (run .ci/nats-server and set SWATH_TEST_NATS_SERVER to the path it \
             prints, or apt-get install nats-server)",
            binary.display()
        );
        let mut server = NatsServer {
            port: free_port(),
            dir: TempDir::new("swath-e2e-nats"),
            child: None,
        };
        server.launch()?;
        Ok(server)
    }

    fn launch(&mut self) -> anyhow::Result<()> {
        let log = std::fs::File::create(self.dir.path().join("nats.log"))?;
        let child = Command::new(nats_server_binary())
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path().join("store"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting nats-server")?;
        self.child = Some(child);
        let port = self.port;
        wait_for("nats-server", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's process id (0 when stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Stops the server the way an operator restarts it (`SIGTERM`: JetStream flushes its
    /// state), or crashes it (`SIGKILL`) when `crash`.
    pub fn stop(&mut self, crash: bool) {
        if let Some(mut child) = self.child.take() {
            if crash {
                let _ = child.kill();
                let _ = child.wait();
            } else {
                signal(child.id(), "TERM");
                wait_exit(&mut child, Duration::from_secs(20));
            }
        }
    }

    /// Starts it again on the same port, with the same storage.
    pub fn restart_after(&mut self, down_for: Duration) -> anyhow::Result<()> {
        self.stop(false);
        std::thread::sleep(down_for);
        self.launch()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop(true);
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/// The PostgreSQL binaries' directory (Debian's layout); the newest installed.
fn pg_bin() -> anyhow::Result<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .context("PostgreSQL is not installed in /usr/lib/postgresql")?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .context("no pg_ctl in /usr/lib/postgresql/*/bin")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Runs a PostgreSQL tool, as the `postgres` OS user when we are root (initdb and the server
/// refuse to run as root).
fn pg_command(tool: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(tool);
        c
    } else {
        Command::new(tool)
    }
}

/// A private PostgreSQL server (trust authentication, user `postgres`) on a free port, its data
/// in a temp dir. Stopped and removed when dropped.
pub struct PgServer {
    pub port: u16,
    bin: PathBuf,
    dir: TempDir,
}

impl PgServer {
    pub fn start() -> anyhow::Result<PgServer> {
        let bin = pg_bin()?;
        let dir = TempDir::new("swath-e2e-pg");
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()?;
            anyhow::ensure!(status.success(), "chown of the PostgreSQL temp dir failed");
        }
        let output = pg_command(&bin.join("initdb"))
            .args(["-D"])
            .arg(dir.path().join("data"))
            .args(["-U", "postgres", "-A", "trust", "--no-sync"])
            .output()
            .context("running initdb")?;
        anyhow::ensure!(
            output.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let server = PgServer {
            port: free_port(),
            bin,
            dir,
        };
        server.pg_ctl_start()?;
        Ok(server)
    }

    fn pg_ctl_start(&self) -> anyhow::Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let output = pg_command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-o", &options, "-l"])
            .arg(self.dir.path().join("pg.log"))
            .args(["-w", "-t", "60", "start"])
            .output()
            .context("running pg_ctl start")?;
        anyhow::ensure!(
            output.status.success(),
            "pg_ctl start failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(())
    }

    /// Stops the server: `fast` (clean shutdown, sessions ended) or `immediate` (a crash:
    /// recovery at the next start).
    pub fn stop(&self, mode: &str) {
        let _ = pg_command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", mode, "-w", "-t", "60", "stop"])
            .output();
    }

    /// Stops it (`mode`), waits `down_for`, and starts it again on the same port.
    pub fn restart_after(&self, mode: &str, down_for: Duration) -> anyhow::Result<()> {
        self.stop(mode);
        std::thread::sleep(down_for);
        self.pg_ctl_start()
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop("immediate");
    }
}

// ---------------------------------------------------------------------------------------------
// Databases

/// A database of its own on a PostgreSQL server, dropped when dropped.
pub struct TestDatabase {
    server_url: String,
    pub name: String,
    pub url: String,
}

impl TestDatabase {
    pub async fn create(server_url: &str) -> anyhow::Result<TestDatabase> {
        let name = format!("swath_e2e_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(server_url)
            .await
            .context("the PostgreSQL server does not answer")?;
        admin
            .execute(format!("CREATE DATABASE {name}").as_str())
            .await?;
        let url = crate::postgres::with_database(server_url, &name);
        Ok(TestDatabase {
            server_url: server_url.to_owned(),
            name,
            url,
        })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (url, name) = (self.server_url.clone(), self.name.clone());
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                if let Ok(mut admin) = PgConnection::connect(&url).await {
                    let _ = admin
                        .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                        .await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

// ---------------------------------------------------------------------------------------------
// The service

/// A `swath` process on PostgreSQL and NATS, without a simulated fleet, its logs in a file.
/// Killed when dropped.
pub struct Service {
    pub port: u16,
    child: Option<Child>,
    pub log: PathBuf,
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
            .env("SWATH_LOG", "info,sqlx=warn")
            .env_remove("SWATH_DEMO_TOKEN");
        for (k, v) in extra {
            command.env(k, v);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        let mut service = Service {
            port,
            child: Some(child),
            log,
            _dir: dir,
        };
        service.wait_ready(Duration::from_secs(60)).await?;
        Ok(service)
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
    }
}

/// A minimal HTTP/1.1 `GET` (no client library needed): status and body.
pub async fn http_get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let io = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
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
