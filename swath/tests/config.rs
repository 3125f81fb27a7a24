//! Configuration: the `swath` binary started with each invalid setting stops before it serves,
//! with a non-zero exit status and a message that names the variable and the expected form;
//! every setting `swath --help` lists is in README's table (and the other way round) and has a
//! case here.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use swath::config::HttpArgs;
use swath_api::server::HttpLimits;

/// One invalid setting: the variables set (the first is the one under test), and what the
/// message must say besides the variable's name.
struct Case {
    env: &'static [(&'static str, &'static str)],
    expected: &'static str,
}

const CASES: &[Case] = &[
    Case {
        env: &[("SWATH_BEHIND_TLS", "maybe")],
        expected: "invalid value",
    },
    Case {
        env: &[("SWATH_MAP_TILE_URL", "ftp://tiles.example/{z}/{x}/{y}.png")],
        expected: "with {z}, {x} and {y}",
    },
    Case {
        env: &[("SWATH_HTTP_HEADER_READ_TIMEOUT_SECONDS", "0")],
        expected: "between 0.001 and 86400 seconds",
    },
    Case {
        env: &[("SWATH_HTTP_IDLE_TIMEOUT_SECONDS", "soon")],
        expected: "number of seconds",
    },
    Case {
        env: &[("SWATH_HTTP_MAX_CONNECTIONS", "0")],
        expected: "1..=1000000",
    },
    Case {
        env: &[("SWATH_HTTP_ADDR", "localhost")],
        expected: "socket address",
    },
    Case {
        env: &[("SWATH_DEMO_TOKEN", "has a space")],
        expected: "printable ASCII",
    },
    // A demo token that outlives the process must not be guessable; refused before the store is
    // opened (nothing listens at this URL).
    Case {
        env: &[
            ("SWATH_DEMO_TOKEN", "demo"),
            ("SWATH_STORE", "postgres"),
            ("SWATH_DATABASE_URL", "postgres://nobody@127.0.0.1:9/none"),
        ],
        expected: "needs at least 32",
    },
    Case {
        env: &[("SWATH_SESSION_SECRET", "too short")],
        expected: "at least 32",
    },
    Case {
        env: &[("SWATH_STREAMS_PER_TOKEN", "0")],
        expected: "1..=1000000",
    },
    Case {
        env: &[("SWATH_STREAMS_PER_ACCOUNT", "0")],
        expected: "1..=1000000",
    },
    Case {
        env: &[("SWATH_ACCOUNTS_PER_HOUR", "0")],
        expected: "1..=1000000",
    },
    Case {
        env: &[("SWATH_TOKENS_PER_HOUR", "0")],
        expected: "1..=1000000",
    },
    Case {
        env: &[("SWATH_HTTP_BODY_IDLE_TIMEOUT_SECONDS", "0")],
        expected: "between 0.001 and 86400 seconds",
    },
    Case {
        env: &[("SWATH_HTTP_BODY_TIMEOUT_SECONDS", "0")],
        expected: "between 0.001 and 86400 seconds",
    },
    Case {
        env: &[("SWATH_IMPORT_BODY_TIMEOUT_SECONDS", "soon")],
        expected: "is not a number of seconds",
    },
    Case {
        env: &[("SWATH_SIM_MOWERS", "-1")],
        expected: "0..=100000",
    },
    Case {
        env: &[("SWATH_SIM_MOWERS", "many")],
        expected: "invalid digit",
    },
    Case {
        env: &[("SWATH_SIM_STATE_PERIOD_SECONDS", "0")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_SIM_SEED", "seed")],
        expected: "invalid digit",
    },
    Case {
        env: &[("SWATH_TELEMETRY_INGEST_BATCH_MAX", "0")],
        expected: "1..=1000",
    },
    Case {
        env: &[("SWATH_TELEMETRY_INGEST_BATCH_WAIT_SECONDS", "-1")],
        expected: "seconds >= 0",
    },
    Case {
        env: &[("SWATH_NOTIFICATIONS_STATE_BATCH_MAX", "1001")],
        expected: "1..=1000",
    },
    Case {
        env: &[("SWATH_NOTIFICATIONS_STATE_BATCH_WAIT_SECONDS", "soon")],
        expected: "number of seconds",
    },
    Case {
        env: &[("SWATH_OFFLINE_AFTER_SECONDS", "0")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_OFFLINE_SWEEP_SECONDS", "inf")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_LATEST_CACHE_SECONDS", "-1")],
        expected: "seconds >= 0",
    },
    Case {
        env: &[("SWATH_WEBHOOK_ALLOW_PRIVATE", "maybe")],
        expected: "true",
    },
    Case {
        env: &[("SWATH_WEBHOOK_RETRY_HORIZON_SECONDS", "0")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_WEBHOOK_FIRST_RETRY_SECONDS", "-3")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_WEBHOOK_TIMEOUT_SECONDS", "0")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_WEBHOOK_CONCURRENCY", "0")],
        expected: "1..=1000",
    },
    Case {
        env: &[("SWATH_WEBHOOK_DISPATCH", "off")],
        expected: "true",
    },
    Case {
        env: &[("SWATH_WEBHOOKS_PER_ACCOUNT", "0")],
        expected: "1..=10000",
    },
    Case {
        env: &[("SWATH_WEBHOOK_TESTS_PER_MINUTE", "0")],
        expected: "1..=1000",
    },
    Case {
        env: &[("SWATH_WEBHOOK_ACCOUNT_CONCURRENCY", "0")],
        expected: "1..=1000",
    },
    Case {
        env: &[("SWATH_WEBHOOK_DELIVERIES_KEEP_DAYS", "0")],
        expected: "1..=36500",
    },
    Case {
        env: &[("SWATH_STORE", "sqlite")],
        expected: "memory, postgres",
    },
    Case {
        env: &[("SWATH_DATABASE_URL", "mysql://db/swath")],
        expected: "postgres://",
    },
    Case {
        env: &[("SWATH_STORE", "postgres")],
        expected: "SWATH_DATABASE_URL",
    },
    Case {
        env: &[("SWATH_DATABASE_MAX_CONNECTIONS", "0")],
        expected: "1..=1000",
    },
    Case {
        env: &[("SWATH_DATABASE_READ_URL", "mysql://db/swath")],
        expected: "postgres://",
    },
    Case {
        env: &[("SWATH_DATABASE_CONNECT_TIMEOUT_SECONDS", "0")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_DATABASE_BATCH_TIMEOUT_SECONDS", "0")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_DATABASE_STATEMENT_TIMEOUT_SECONDS", "-1")],
        expected: "seconds >= 0",
    },
    Case {
        env: &[("SWATH_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", "soon")],
        expected: "not a number of seconds",
    },
    Case {
        env: &[("SWATH_DATABASE_TCP_KEEPALIVE_SECONDS", "inf")],
        expected: "seconds >= 0",
    },
    Case {
        env: &[("SWATH_MEMORY_HISTORY_PER_MOWER", "0")],
        expected: "1..=10000000",
    },
    Case {
        env: &[("SWATH_BUS", "kafka")],
        expected: "memory, nats",
    },
    Case {
        env: &[("SWATH_NATS_URL", "http://nats:4222")],
        expected: "nats://host:port",
    },
    Case {
        env: &[("SWATH_BUS", "nats")],
        expected: "SWATH_NATS_URL",
    },
    Case {
        env: &[("SWATH_NATS_ACK_WAIT_SECONDS", "0")],
        expected: "seconds > 0",
    },
    Case {
        env: &[("SWATH_TELEMETRY_PARTITIONS", "0")],
        expected: "1..=64",
    },
    Case {
        env: &[("SWATH_NATS_REPLICAS", "7")],
        expected: "1..=5",
    },
    Case {
        env: &[("SWATH_NATS_CREDS", "/nonexistent/swath.creds")],
        expected: "is not a file",
    },
    Case {
        env: &[("SWATH_NATS_TLS_CA", "/nonexistent/ca.pem")],
        expected: "is not a file",
    },
    Case {
        env: &[("SWATH_NATS_URL", "nats://n1:4222,nats://n2:notaport")],
        expected: "n2:notaport",
    },
    Case {
        env: &[("SWATH_RETENTION_INTERVAL_SECONDS", "hourly")],
        expected: "number of seconds",
    },
    Case {
        env: &[("SWATH_TRACK_FULL_DAYS", "0")],
        expected: "1..=36500",
    },
    Case {
        env: &[("SWATH_TRACK_KEEP_DAYS", "x")],
        expected: "invalid digit",
    },
    Case {
        env: &[("SWATH_HISTORY_KEEP_DAYS", "0")],
        expected: "1..=36500",
    },
    // Valid alone, inconsistent together: named with the other variable.
    Case {
        env: &[
            ("SWATH_TRACK_FULL_DAYS", "400"),
            ("SWATH_TRACK_KEEP_DAYS", "365"),
        ],
        expected: "must not exceed SWATH_TRACK_KEEP_DAYS",
    },
    Case {
        env: &[("SWATH_SESSIONS_KEEP_DAYS", "30")],
        expected: "must not be shorter than SWATH_HISTORY_KEEP_DAYS",
    },
    Case {
        env: &[("SWATH_SESSION_MERGE_GAP_SECONDS", "-1")],
        expected: "number of seconds",
    },
    Case {
        env: &[("SWATH_LOG", "info,[")],
        expected: "tracing filter",
    },
    Case {
        env: &[("SWATH_LOG_FORMAT", "xml")],
        expected: "pretty, json",
    },
];

/// Runs `swath` with a clean environment plus `env`, and answers its exit status and stderr. A
/// process still running after 30 s (it started despite the setting) is killed and fails.
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_swath"))
        .args(args)
        .env_clear()
        // Should a case wrongly start, it must not clash with anything.
        .env("SWATH_HTTP_ADDR", "127.0.0.1:0")
        .env("SWATH_SIM_MOWERS", "0")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start swath");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("swath started with {env:?}: the invalid setting was not refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("stderr");
    (status.code(), stderr)
}

#[test]
fn each_invalid_setting_stops_start_up_naming_the_variable() {
    let mut failures = Vec::new();
    for case in CASES {
        let (variable, _) = case.env[0];
        let (code, stderr) = run(&[], case.env);
        let named = stderr.contains(variable);
        let explained = stderr.contains(case.expected);
        let no_panic = !stderr.contains("panicked");
        // clap's usage errors exit with 2.
        if code != Some(2) || !named || !explained || !no_panic {
            failures.push(format!(
                "{:?}: exit {code:?}, names the variable: {named}, says {:?}: {explained}\n{stderr}",
                case.env, case.expected
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}

#[test]
fn subcommands_check_their_settings_too() {
    let (code, stderr) = run(
        &["maintenance", "retention", "--dry-run"],
        &[
            ("SWATH_TRACK_FULL_DAYS", "31"),
            ("SWATH_TRACK_KEEP_DAYS", "30"),
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("SWATH_TRACK_FULL_DAYS"), "{stderr}");
    let (code, stderr) = run(
        &["maintenance", "retention"],
        &[("SWATH_STORE", "postgres"), ("SWATH_DATABASE_URL", "db")],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("postgres://"), "{stderr}");
}

#[test]
fn a_dry_run_of_retention_on_memory_prints_a_summary() {
    let out = Command::new(env!("CARGO_BIN_EXE_swath"))
        .args(["maintenance", "retention", "--dry-run"])
        .env_clear()
        .output()
        .expect("run swath");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Retention done (dry run)"), "{stdout}");
    assert!(stdout.contains("downsampled to one per minute"), "{stdout}");
}

/// What `swath --help` prints (run without environment, so no default is overridden; it must
/// succeed) and README.md, which the two tests below compare.
fn help_and_readme() -> (String, String) {
    let help = Command::new(env!("CARGO_BIN_EXE_swath"))
        .arg("--help")
        .env_clear()
        .output()
        .expect("swath --help");
    assert!(help.status.success());
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    (String::from_utf8_lossy(&help.stdout).into_owned(), readme)
}

/// Every default `swath --help` gives (`SWATH_X [default]`) is the one README's configuration
/// table gives, so that raising a default (as `SWATH_MEMORY_HISTORY_PER_MOWER`'s, decision 52)
/// cannot leave the README behind. Settings without a default (`[-]`) are described in words.
#[test]
fn the_readme_table_gives_the_defaults_of_the_help() {
    let (help, readme) = help_and_readme();
    let mut compared = 0;
    for line in help.lines() {
        let Some((name, default)) = line
            .trim()
            .strip_prefix("SWATH_")
            .and_then(|l| l.strip_suffix(']'))
            .and_then(|l| l.split_once(" ["))
        else {
            continue;
        };
        if default == "-" {
            continue;
        }
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `SWATH_{name}` |")))
            .unwrap_or_else(|| panic!("SWATH_{name} is not in README's table"));
        let in_readme = row.split('|').nth(2).map(str::trim);
        assert_eq!(
            in_readme,
            Some(format!("`{default}`").as_str()),
            "the default of SWATH_{name}"
        );
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} defaults found in the help");
}

/// The `SWATH_*` names in a text.
fn variables(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("SWATH_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].trim_end_matches('_').to_owned());
        rest = &tail[end..];
    }
    names
}

#[test]
fn every_setting_is_in_the_help_the_readme_table_and_this_test() {
    let (help, readme) = help_and_readme();
    let in_help = variables(&help);

    let table: String = readme
        .lines()
        .filter(|l| l.starts_with("| `SWATH_"))
        .collect::<Vec<_>>()
        .join("\n");
    let in_readme = variables(&table);
    assert_eq!(
        in_help, in_readme,
        "swath --help and README's configuration table differ"
    );

    let tested: BTreeSet<String> = CASES.iter().map(|c| c.env[0].0.to_owned()).collect();
    let untested: Vec<&String> = in_help.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "settings without an invalid case: {untested:?}"
    );
}

/// The HTTP server's defaults are declared once as settings (`swath::config::HttpArgs`, whose
/// defaults `swath --help` and README's table give) and once as the API crate's plain
/// `HttpLimits::default()`, which a router built without settings (the test app) serves with:
/// they are the same values. Parsed without the variables, so that none overrides a default.
#[test]
fn the_http_defaults_are_the_api_crates() {
    use clap::{Args, FromArgMatches};
    let command = HttpArgs::augment_args(clap::Command::new("serve"))
        .mut_args(|arg| arg.env(None::<&'static str>));
    let matches = command
        .try_get_matches_from(["serve"])
        .expect("the defaults parse");
    let args = HttpArgs::from_arg_matches(&matches).expect("the HTTP settings");
    assert_eq!(args.limits(), HttpLimits::default());
}
