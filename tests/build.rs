//! Tells the test targets which services they may use (`service_cfgs`, shared with
//! `swath/build.rs`): a suite without its service is reported by `cargo test` as ignored, with the
//! reason, never as passed. The browser test is ignored when no chromium is on the `PATH` at build
//! time.

include!("build_services.rs");

fn main() {
    service_cfgs();
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
