//! The shape the API keeps (decision 197), read from the sources: handlers only translate, so
//! that every rule of who may do what and of what is valid lives once, in the application.
//!
//! - no handler body is longer than [`MAX_HANDLER_LINES`] non-blank lines (its attributes and
//!   signature not counted), except the live stream's and the import's, which frame a stream;
//! - no route module asks visibility or token powers itself, maps an error type or names a
//!   port: no `.access`, `.covers(`, `referenced_site`, `impl From<` or
//!   `swath_application::ports` in `api/src/routes`;
//! - the application has no `fn with_access`: the wiring builds each use case over its one
//!   `Access`, and `AppState::new` takes use cases, never ports;
//! - no route module or DTO validates display text itself (`chars().count()`, a default);
//! - the crate reads no settings itself: no `clap` in its dependencies or its sources (the
//!   settings, with their variables and defaults, are `swath::config`'s, decision 206).

use std::path::{Path, PathBuf};

/// The longest handler body, in non-blank lines.
const MAX_HANDLER_LINES: usize = 15;

/// Handlers that frame a stream of their own: exempt from [`MAX_HANDLER_LINES`].
const EXEMPT: &[&str] = &["live_stream", "create_import"];

fn sources(dir: &Path, found: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            found.push((path, text));
        }
    }
}

fn routes() -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/routes"),
        &mut found,
    );
    assert!(found.len() > 10, "the route modules are found");
    found
}

/// Every `pub async fn` of `source` with the number of non-blank lines of its body: from the
/// line after the one that opens it (the end of its signature) to its closing brace.
fn handler_lengths(source: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        let Some(rest) = line.strip_prefix("pub async fn ") else {
            i += 1;
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut open = i;
        while !lines[open].trim_end().ends_with('{') {
            open += 1;
        }
        let mut depth = 0i32;
        let mut body = 0;
        let mut end = open;
        for (n, text) in lines.iter().enumerate().skip(open) {
            depth += text.matches('{').count() as i32 - text.matches('}').count() as i32;
            end = n;
            if depth == 0 {
                break;
            }
            if n > open && !text.trim().is_empty() {
                body += 1;
            }
        }
        found.push((name, body));
        i = end + 1;
    }
    found
}

#[test]
fn no_handler_body_is_longer_than_fifteen_lines() {
    let mut handlers = 0;
    let mut long = Vec::new();
    for (path, source) in routes() {
        for (name, lines) in handler_lengths(&source) {
            handlers += 1;
            if lines > MAX_HANDLER_LINES && !EXEMPT.contains(&name.as_str()) {
                long.push(format!("{}::{name}: {lines}", path.display()));
            }
        }
    }
    assert!(handlers > 50, "the handlers are found ({handlers})");
    assert!(
        long.is_empty(),
        "handlers over {MAX_HANDLER_LINES} lines: {long:#?}"
    );
}

#[test]
fn the_counter_counts_non_blank_body_lines() {
    let source =
        "pub async fn a(\n    x: u8,\n) -> u8 {\n    let y = {\n        x\n    };\n\n    y\n}\n";
    assert_eq!(handler_lengths(source), vec![("a".to_owned(), 4)]);
}

/// The lines of route modules that hold `needle`, as `path:line`.
fn in_routes(needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for (path, source) in routes() {
        for (n, line) in source.lines().enumerate() {
            if line.contains(needle) {
                hits.push(format!("{}:{}", path.display(), n + 1));
            }
        }
    }
    hits
}

#[test]
fn routes_leave_visibility_powers_and_errors_to_others() {
    let needles = [
        ".access",
        ".covers(",
        "referenced_site",
        "impl From<",
        "swath_application::ports",
    ];
    for needle in needles {
        assert_eq!(
            in_routes(needle),
            Vec::<String>::new(),
            "`{needle}` in a route"
        );
    }
}

#[test]
fn routes_and_documents_validate_no_text_themselves() {
    let mut dto = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/dto"),
        &mut dto,
    );
    let mut hits = in_routes("chars().count()");
    for (path, source) in dto {
        for needle in ["chars().count()", "DEFAULT_BLADE"] {
            if source.contains(needle) {
                hits.push(format!("{} holds `{needle}`", path.display()));
            }
        }
    }
    assert_eq!(hits, Vec::<String>::new());
}

/// The files of `dir` (recursively) whose text holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    sources(dir, &mut found);
    found
        .into_iter()
        .filter(|(_, source)| source.contains(needle))
        .map(|(path, _)| path.display().to_string())
        .collect()
}

#[test]
fn only_the_wiring_builds_the_use_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let application = root.join("application/src");
    assert_eq!(
        files_holding(&application, "fn with_access"),
        Vec::<String>::new()
    );
    let state = std::fs::read_to_string(root.join("api/src/state.rs")).expect("state.rs");
    let app_state = state
        .split_once("pub struct AppState {")
        .and_then(|(_, rest)| rest.split_once("\n}\n"))
        .map(|(fields, _)| fields)
        .expect("the AppState struct");
    assert!(
        !app_state.contains("pub access"),
        "AppState's access is the crate's own"
    );
    assert!(
        !state.contains("swath_application::ports::{"),
        "AppState is built of use cases, not ports"
    );
}

#[test]
fn the_api_crate_reads_no_settings_itself() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("api/Cargo.toml");
    let dependencies = manifest
        .split_once("[dependencies]")
        .and_then(|(_, rest)| rest.split("\n[").next())
        .expect("the dependencies");
    assert!(
        !dependencies
            .lines()
            .any(|l| l.trim_start().starts_with("clap")),
        "clap is a dependency of the api crate"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert_eq!(files_holding(&src, "clap"), Vec::<String>::new());
}
