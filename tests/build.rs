//! Tells the test targets which services they may use, so that a suite without its service is
//! reported by `cargo test` as ignored, with the reason, never as passed. Built without
//! `SWATH_TEST_DATABASE_URL`, the PostgreSQL tests carry `cfg(swath_no_postgres)` and are ignored;
//! without `SWATH_TEST_NATS_URL`, the NATS tests carry `cfg(swath_no_nats)`. Cargo rebuilds the
//! tests when either variable changes, so `SWATH_TEST_DATABASE_URL=… cargo test` runs them. The
//! browser test is ignored when no chromium is on the `PATH` at build time.
//! (`swath/build.rs` is the same file: each package needs its own build script.)

fn main() {
    for (variable, cfg) in [
        ("SWATH_TEST_DATABASE_URL", "swath_no_postgres"),
        ("SWATH_TEST_NATS_URL", "swath_no_nats"),
    ] {
        println!("cargo::rerun-if-env-changed={variable}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        let set = std::env::var(variable).is_ok_and(|value| !value.trim().is_empty());
        if !set {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    // The live pages' browser test drives a headless chromium: ignored when none is installed.
    println!("cargo::rustc-check-cfg=cfg(swath_no_chromium)");
    let browsers = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .flat_map(|dir| browsers.iter().map(move |b| dir.join(b)))
        .find(|candidate| candidate.is_file());
    match found {
        // Rebuilt when the browser is removed or upgraded.
        Some(browser) => println!("cargo::rerun-if-changed={}", browser.display()),
        None => println!("cargo::rustc-cfg=swath_no_chromium"),
    }
    println!("cargo::rerun-if-env-changed=PATH");
}
