//! ARCHITECTURE.md says where each rule lives, as "`Name` (`path.rs`)": every such name must be
//! defined in that file (a `fn`, `struct`, `enum`, `trait`, `const`, `type`, `static` or public
//! field of that name), so that the map stays true when code moves (decision 197). And names
//! say what lives there (decision 206).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() && !name.starts_with('.') && name != "target" {
            rust_files(&path, found);
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

/// The names of a line said to live in a file, with that file: "`A`, `B` and `C` (`path.rs`":
/// the names right before an opening parenthesis whose first span is a path, separated only by
/// commas, "and", "or" or slashes.
fn named_with_paths(line: &str) -> Vec<(&str, &str)> {
    // Even positions are text, odd ones code.
    let parts: Vec<&str> = line.split('`').collect();
    let mut found = Vec::new();
    for k in (1..parts.len()).step_by(2) {
        if !is_path(parts[k]) || parts[k - 1] != " (" || k < 2 {
            continue;
        }
        let mut j = k - 2;
        loop {
            if is_name(parts[j]) {
                found.push((parts[j], parts[k]));
            }
            let separator = parts[j - 1];
            if j < 3 || ![", ", " and ", ", and ", " or ", " / "].contains(&separator) {
                break;
            }
            j -= 2;
        }
    }
    found
}

fn is_path(span: &str) -> bool {
    span.ends_with(".rs") && !span.contains(' ')
}

/// A code name: segments of identifiers joined by `::`, maybe with `()`, that looks like code
/// (a path, a snake case word or a type), not a plain word such as a scope.
fn is_name(span: &str) -> bool {
    let bare = span.trim_end_matches("()");
    let identifiers = bare.split("::").all(|s| {
        !s.is_empty()
            && s.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    });
    identifiers
        && (bare.contains("::") || bare.contains('_') || bare.starts_with(char::is_uppercase))
}

/// Whether `text` holds `word` as a whole word.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, m)| {
        let before = text[..at].chars().next_back();
        let after = text[at + m.len()..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        edge(before) && edge(after)
    })
}

/// Whether `source` defines `name`: an item of that name, a public field of it, or, in a file
/// that defines a macro, any word of it (the extractors are made by one).
fn defines(source: &str, name: &str) -> bool {
    let items = [
        "fn", "struct", "enum", "trait", "const", "type", "static", "pub",
    ];
    items
        .iter()
        .any(|kind| has_word(source, &format!("{kind} {name}")))
        || (source.contains("macro_rules!") && has_word(source, name))
}

#[test]
fn every_function_the_architecture_names_is_where_it_says() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut files = Vec::new();
    for dir in [
        "domain",
        "application",
        "adapters",
        "api",
        "swath",
        "tests",
        "migrations",
    ] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut checked = 0;
    let mut missing = Vec::new();
    for line in text.lines() {
        for (name, path) in named_with_paths(line) {
            let candidates: Vec<&PathBuf> = files
                .iter()
                .filter(|f| f.to_string_lossy().ends_with(&format!("/{path}")))
                .collect();
            let bare = name
                .trim_end_matches("()")
                .rsplit("::")
                .next()
                .unwrap_or(name);
            let found = candidates
                .iter()
                .any(|f| std::fs::read_to_string(f).is_ok_and(|source| defines(&source, bare)));
            checked += 1;
            if !found {
                missing.push(format!("`{name}` in `{path}` ({} files)", candidates.len()));
            }
        }
    }
    assert!(checked > 50, "the names are found ({checked})");
    assert!(missing.is_empty(), "named but not there: {missing:#?}");
}

/// Names that say what lives there (decision 206): no folder of a crate holds both `x.rs` and
/// `xs.rs` (once `import.rs` and `imports.rs`, two different things one letter apart), and the
/// domain and the application share no module name among the ones decision 206 split (once
/// two `access.rs`: who is asking, and who sees what).
#[test]
fn module_names_are_not_one_letter_apart_and_access_is_named_for_what_it_holds() {
    let mut files = Vec::new();
    for krate in ["domain", "application", "api", "adapters", "swath", "tests"] {
        rust_files(&root().join(krate), &mut files);
    }
    let mut pairs = Vec::new();
    for file in &files {
        let Some(stem) = file.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if file.with_file_name(format!("{stem}s.rs")).exists() {
            pairs.push(format!("{}: {stem}.rs and {stem}s.rs", file.display()));
        }
    }
    assert!(pairs.is_empty(), "modules one letter apart: {pairs:?}");
    for stale in ["domain/src/access.rs", "application/src/access.rs"] {
        assert!(
            !root().join(stale).exists(),
            "{stale} is back (decision 206)"
        );
    }
}

/// `MowerReads` reads (decision 206): a mower's deletion, once there, is `FleetDirectory`'s, and
/// no write of a port (or a forget of what a write changed) comes back into `mower_reads/`.
#[test]
fn mower_reads_holds_reads_only() {
    let mut files = Vec::new();
    rust_files(&root().join("application/src/mower_reads"), &mut files);
    assert!(files.len() >= 3, "the module is found");
    let writes = [
        ".delete",
        ".create_",
        ".update_",
        ".put_",
        ".forget(",
        ".mower_changed(",
    ];
    let mut found = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("a source file");
        // Its tests' stand-in ports implement the writes; they do not call them.
        let code = source.split("#[cfg(test)]").next().unwrap_or(&source);
        for write in writes {
            if code.contains(write) {
                found.push(format!("{}: {write}", file.display()));
            }
        }
    }
    assert!(found.is_empty(), "writes in MowerReads: {found:?}");
    assert!(
        !root().join("application/src/mower_data").exists(),
        "application/src/mower_data is back (decision 206)"
    );
}
