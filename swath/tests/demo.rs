//! The demo and the command line as a new user meets them, through the `swath` binary: a seed gives
//! the same mower ids on every run, the banner says what is served, logs written to a pipe carry no
//! colour codes, a host name is a valid listening address, subcommands print only their answer,
//! a refused database connection is said at once, with the URL's password redacted, and a live
//! stream open at shutdown ends with its `end` event instead of being cut.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "demo-test-token";

/// A `swath` serving the memory store on a free port; killed when dropped.
struct Served {
    child: Child,
    banner: String,
    base: String,
}

impl Served {
    fn start(env: &[(&str, &str)]) -> Served {
        Self::launch(env, Some(TOKEN))
    }

    /// `swath` with `env`, and `SWATH_DEMO_TOKEN` when `demo_token` is given.
    fn launch(env: &[(&str, &str)], demo_token: Option<&str>) -> Served {
        let mut command = Command::new(env!("CARGO_BIN_EXE_swath"));
        command.env_clear();
        if let Some(token) = demo_token {
            command.env("SWATH_DEMO_TOKEN", token);
        }
        let mut child = command
            .env("SWATH_HTTP_ADDR", "127.0.0.1:0")
            .env("SWATH_RETENTION_INTERVAL_SECONDS", "0")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start swath");
        let stdout = child.stdout.take().expect("piped");
        let banner = read_banner(stdout);
        let base = banner
            .lines()
            .find_map(|l| l.trim().strip_prefix("API:"))
            .and_then(|api| api.trim().strip_suffix("/v1/mowers"))
            .unwrap_or_else(|| panic!("no API line in the banner:\n{banner}"))
            .to_owned();
        Served {
            child,
            banner,
            base,
        }
    }

    /// `GET path` with the demo token: the status and the body.
    fn get(&self, path: &str) -> (u16, String) {
        let authority = self.base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(authority).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read the answer");
        let status = answer[9..12].parse().expect("a status code");
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        // The lists are small: one chunk, or no chunking at all.
        let body = match body.split_once("\r\n") {
            Some((size, rest)) if u64::from_str_radix(size, 16).is_ok() => {
                rest.rsplit_once("\r\n0\r\n").map_or(rest, |(b, _)| b)
            }
            _ => body,
        };
        (status, body.to_owned())
    }

    /// Stops the process and answers what it wrote on stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        stderr
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The banner's lines, up to the blank line that ends it (a hang guard of 60 s, not a figure).
fn read_banner(stdout: ChildStdout) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut banner = String::new();
        let mut started = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            started |= line.starts_with("Swath is serving");
            if started && line.is_empty() {
                break;
            }
            banner.push_str(&line);
            banner.push('\n');
        }
        let _ = tx.send(banner);
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("swath printed no banner")
}

fn mower_ids(served: &Served) -> Vec<String> {
    let (status, body) = served.get("/v1/mowers");
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value = serde_json::from_str(&body).expect("a JSON page");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|m| m["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[test]
fn the_same_seed_lists_the_same_mower_ids_on_every_run() {
    let seeded = [("SWATH_SIM_SEED", "7"), ("SWATH_SIM_MOWERS", "5")];
    let first = Served::start(&seeded);
    let ids = mower_ids(&first);
    drop(first);
    let second = Served::start(&seeded);
    assert_eq!(mower_ids(&second), ids);
    assert_eq!(ids.len(), 5);
    drop(second);

    let other = Served::start(&[("SWATH_SIM_SEED", "8"), ("SWATH_SIM_MOWERS", "5")]);
    let others = mower_ids(&other);
    assert!(others.iter().all(|id| !ids.contains(id)), "{others:?}");
}

#[test]
fn the_banner_says_what_is_served_and_logs_to_a_pipe_have_no_colour_codes() {
    let none = Served::start(&[("SWATH_SIM_MOWERS", "0")]);
    assert!(
        none.banner.contains("no simulated mowers"),
        "{}",
        none.banner
    );
    assert!(!none.banner.contains("simulated fleet of"));
    let (status, body) = none.get("/v1/me");
    assert_eq!(status, 200, "{body}");
    let me: serde_json::Value = serde_json::from_str(&body).unwrap();
    let account = me["account"]["id"].as_str().expect("the account id");
    assert!(
        none.banner.contains(&format!("Account id:   {account}")),
        "{}",
        none.banner
    );
    let stderr = none.stop();
    assert!(stderr.contains("Serving HTTP."), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a pipe: {stderr:?}"
    );

    let three = Served::start(&[("SWATH_SIM_MOWERS", "3")]);
    assert!(
        three.banner.contains("a simulated fleet of 3 mowers"),
        "{}",
        three.banner
    );
}

#[test]
fn without_the_simulator_nor_a_demo_token_there_is_no_demo() {
    let served = Served::launch(&[("SWATH_SIM_MOWERS", "0")], None);
    assert!(
        served.banner.contains("without a demo"),
        "{}",
        served.banner
    );
    assert!(!served.banner.contains("Demo token"), "{}", served.banner);
    assert_eq!(served.get("/healthz").0, 200);
    let stderr = served.stop();
    assert!(stderr.contains("No demo"), "{stderr}");
    assert!(!stderr.contains("Seeded the demo fleet"), "{stderr}");
}

#[test]
fn a_host_name_is_a_listening_address() {
    let served = Served::start(&[
        ("SWATH_SIM_MOWERS", "1"),
        ("SWATH_HTTP_ADDR", "localhost:0"),
    ]);
    assert_eq!(served.get("/healthz").0, 200);
}

/// A live stream open when SIGTERM comes gets its last event `end` (`shutdown`) and the clean end
/// of a chunked body, and the process exits cleanly: before, the stream held the HTTP grace
/// period and was then cut mid-body (no last chunk), which clients report as a transfer error.
#[test]
fn shutdown_ends_an_open_live_stream_with_its_end_event() {
    let mut served = Served::start(&[("SWATH_SIM_MOWERS", "0")]);
    let authority = served.base.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&authority).expect("connect");
    // A hang guard, not a figure.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET /v1/live/stream HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Accept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        assert_ne!(
            reader.read_line(&mut head).expect("read the head"),
            0,
            "{head}"
        );
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );

    let terminated = Command::new("kill")
        .arg("-TERM")
        .arg(served.child.id().to_string())
        .status()
        .expect("run kill");
    assert!(terminated.success());
    let mut body = String::new();
    reader
        .read_to_string(&mut body)
        .expect("read the stream to its end");
    assert!(
        body.contains("event: end\ndata: {\"reason\":\"shutdown\"}\n\n"),
        "no end event: {body:?}"
    );
    assert!(
        body.ends_with("\r\n0\r\n\r\n"),
        "the body was cut, not ended: {body:?}"
    );
    assert!(served.child.wait().expect("wait for swath").success());
}

/// Runs a subcommand to its end (a hang guard of 60 s, not a figure): status, stdout, stderr.
fn run(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_swath"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start swath");
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let started = Instant::now();
    let output = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            let _ = Command::new("kill").arg("-9").arg(id.to_string()).status();
            panic!("swath {args:?} did not end in {:?}", started.elapsed())
        })
        .expect("run swath");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_subcommand_prints_its_answer_and_no_info_logs_unless_asked() {
    let (ok, stdout, stderr) = run(&["account", "create", "--name", "Quiet"], &[]);
    assert!(ok, "{stderr}");
    let id = stdout.trim();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{stdout:?}");
    assert!(!stderr.contains("INFO"), "{stderr}");

    // Retention logs its run at INFO: shown with -v only.
    let retention = ["maintenance", "retention", "--dry-run"];
    let (ok, _, quiet) = run(&retention, &[]);
    assert!(ok, "{quiet}");
    assert!(!quiet.contains("Retention run started."), "{quiet}");
    let verbose: Vec<&str> = std::iter::once("-v").chain(retention).collect();
    let (ok, _, loud) = run(&verbose, &[]);
    assert!(ok, "{loud}");
    assert!(loud.contains("Retention run started."), "{loud}");
}

#[test]
fn a_refused_database_connection_is_named_with_the_password_redacted() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("postgres://swath:hunter2@127.0.0.1:{port}/swath");
    let (ok, _, stderr) = run(
        &["account", "create", "--name", "Nowhere"],
        &[("SWATH_STORE", "postgres"), ("SWATH_DATABASE_URL", &url)],
    );
    assert!(!ok);
    assert!(stderr.contains("refused"), "{stderr}");
    assert!(
        stderr.contains(&format!("postgres://swath:***@127.0.0.1:{port}/swath")),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!stderr.contains("timed out"), "{stderr}");
}

#[test]
fn simulate_writes_the_demo_fleets_history_as_reports() {
    let (ok, stdout, stderr) = run(
        &["simulate", "--hours", "0.05"],
        &[("SWATH_SIM_MOWERS", "2"), ("SWATH_SIM_SEED", "1")],
    );
    assert!(ok, "{stderr}");
    let reports: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one report per line"))
        .collect();
    // 3 minutes of two mowers reporting every second, changes on top.
    assert!(reports.len() >= 2 * 179, "{} reports", reports.len());
    let mowers: std::collections::HashSet<&str> = reports
        .iter()
        .map(|r| r["mower_id"].as_str().unwrap())
        .collect();
    assert_eq!(mowers.len(), 2);
    assert!(reports.iter().all(|r| r["observed_at"].is_string()));
}
