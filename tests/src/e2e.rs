//! End-to-end harness: private NATS and PostgreSQL servers (to restart them without disturbing
//! anyone), databases of their own on the shared server, and the `swath` binary as a child
//! process (`service`), all stopped when dropped, also when a test fails; several replicas of it
//! killed at chosen moments, also while they start up, and the partitions each holds
//! (`replicas`); what the scenarios share, their plans and their verdict against both
//! references ([`scenario`]).
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

pub(crate) fn wait_for(
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<()> {
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
pub(crate) fn wait_exit(child: &mut Child, timeout: Duration) -> bool {
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
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("nats.log"))?;
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
        // `SWATH_E2E_KEEP_LOGS=<dir>` keeps the server's log beside the replicas' (named by its
        // port), restarts included: the log file is appended to by every launch.
        if let Some(dir) = std::env::var_os("SWATH_E2E_KEEP_LOGS") {
            let dir = PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::copy(
                self.dir.path().join("nats.log"),
                dir.join(format!("nats-{}.log", self.port)),
            );
        }
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
        // A failing scenario run with `SWATH_E2E_KEEP_LOGS` keeps its database to be read.
        if std::thread::panicking() && std::env::var_os("SWATH_E2E_KEEP_LOGS").is_some() {
            eprintln!("kept the database {} for reading", self.name);
            return;
        }
        crate::postgres::drop_databases(&self.server_url, vec![self.name.clone()]);
    }
}

// ---------------------------------------------------------------------------------------------
// The service, its replicas, and what the scenarios share

pub mod postgres_ha;
mod replicas;
pub mod scenario;
mod service;
pub mod setup;

pub use replicas::{partition_counts, wait_every_partition_grows, Dice, Kill, Replicas};
pub use service::{
    cpu_time, http_get, http_request, labelled_metric_value, metric_value, resident_bytes, Service,
};
