//! Tells the test targets which services they may use (`service_cfgs`, shared with
//! `tests/build.rs`, which looks for a browser too).

include!("../tests/build_services.rs");

fn main() {
    service_cfgs();
}
