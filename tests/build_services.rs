// Included by the build scripts of `tests` and `swath` (each package needs a build script of its
// own), so that both tell their test targets the same.

/// Tells the test targets which services they may use, so that a suite without its service is
/// reported by `cargo test` as ignored, with the reason, never as passed. Built without
/// `SWATH_TEST_DATABASE_URL`, the PostgreSQL tests carry `cfg(swath_no_postgres)` and are ignored;
/// without `SWATH_TEST_NATS_URL`, the NATS tests carry `cfg(swath_no_nats)`. Cargo rebuilds the
/// tests when either variable changes, so `SWATH_TEST_DATABASE_URL=… cargo test` runs them.
fn service_cfgs() {
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
}
