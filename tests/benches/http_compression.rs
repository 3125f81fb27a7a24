//! What gzip costs and saves on the polled reads (issue 17, decision 91), in process through the
//! whole router (`swath_api::router`, its layers included; no socket): the size of the 20-mower
//! list (`GET /v1/mowers`) and of the fleet dashboard (`GET /v1/live/fleet`) plain and gzip, and
//! requests per second on one thread of each, plain, gzip, and as a gzip poller whose
//! `If-None-Match` names the current tag (`304`). The variants alternate inside one run (the
//! machine is shared: compare the ratios, not the absolute figures). Last, gzip alone (flate2,
//! what the layer runs) on the list's body at the fastest and the default level: size and time.
//!
//! The fleet is the demo's (20 mowers on 3 sites, seed 7) on the memory store, each with a minute
//! of the simulator's states ingested, as `swath serve` shows it after a minute.
//!
//! Run: `cargo bench -p swath-tests --bench http_compression` (optional args: seconds per
//! measurement (2), rounds (3)).

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, StatusCode};
use axum::Router;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use swath::wiring::Stores;
use swath_application::ports::SystemClock;
use swath_domain::Scope;
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_simulator::{replay, seed_demo_fleet, SimulatorSettings};
use swath_tests::support::http::{add_token, wire_app};
use tower::ServiceExt;

mod args;
mod stats;
use args::Args;
use stats::median;

const TOKEN: &str = "bench-http-compression";
const PATHS: [&str; 2] = ["/v1/mowers", "/v1/live/fleet"];

async fn app() -> Router {
    let store = MemoryStore::new(MemoryStoreSettings::default());
    let wired = wire_app(Stores::memory(store.clone()), Arc::new(SystemClock));
    let settings = SimulatorSettings {
        mowers: 20,
        seed: Some(7),
        ..SimulatorSettings::default()
    };
    let fleet = seed_demo_fleet(wired.directory.as_ref(), &settings)
        .await
        .unwrap();
    let now = chrono::Utc::now();
    let mut reports = Vec::new();
    replay(
        &fleet,
        &settings,
        now - chrono::Duration::minutes(1),
        now,
        |r| reports.push(Ok(r.clone())),
    );
    for batch in reports.chunks(64) {
        wired.ingest.record_states(batch.to_vec()).await.unwrap();
    }
    add_token(&store, TOKEN, fleet.account.id, vec![Scope::Read], None).await;
    swath_api::router(wired.state)
}

/// Status, `ETag` and body of one GET.
async fn get_body(
    app: &Router,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, String, bytes::Bytes) {
    let mut request = Request::get(path).header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let etag = response
        .headers()
        .get(header::ETAG)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, etag, body)
}

/// Status, `ETag` and body size of one GET.
async fn get(app: &Router, path: &str, headers: &[(&str, &str)]) -> (StatusCode, String, usize) {
    let (status, etag, body) = get_body(app, path, headers).await;
    (status, etag, body.len())
}

/// Size and microseconds per body of gzip at `level` on `body`.
fn gzip_alone(body: &[u8], level: Compression, seconds: f64) -> (usize, f64) {
    let zip = || {
        let mut encoder = GzEncoder::new(Vec::new(), level);
        encoder.write_all(body).unwrap();
        encoder.finish().unwrap()
    };
    let size = zip().len();
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        for _ in 0..16 {
            std::hint::black_box(zip());
        }
        done += 16;
    }
    (size, start.elapsed().as_secs_f64() * 1e6 / done as f64)
}

/// Requests per second of `path` with `headers` for `seconds`, one request at a time.
async fn rate(app: &Router, path: &str, headers: &[(&str, &str)], seconds: f64) -> f64 {
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        for _ in 0..16 {
            get(app, path, headers).await;
        }
        done += 16;
    }
    done as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::new(|a| a != "--bench");
    let seconds: f64 = args.get(0, 2.0);
    let rounds: usize = args.get(1, 3);
    let app = app().await;
    let gzip = ("accept-encoding", "gzip");

    println!("| path | plain bytes | gzip bytes | gzip / plain |");
    println!("|---|---|---|---|");
    for path in PATHS {
        let (status, _, plain) = get(&app, path, &[]).await;
        assert_eq!(status, StatusCode::OK);
        let (_, _, zipped) = get(&app, path, &[gzip]).await;
        println!(
            "| `{path}` | {plain} | {zipped} | {:.1} % |",
            100.0 * zipped as f64 / plain as f64
        );
    }

    println!();
    println!(
        "| path | plain req/s | gzip req/s | gzip / plain | 304 poll (gzip + If-None-Match) req/s |"
    );
    println!("|---|---|---|---|---|");
    for path in PATHS {
        let (_, etag, _) = get(&app, path, &[gzip]).await;
        let poll = [gzip, ("if-none-match", etag.as_str())];
        assert_eq!(get(&app, path, &poll).await.0, StatusCode::NOT_MODIFIED);
        let (mut plain, mut zipped, mut polled) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            plain.push(rate(&app, path, &[], seconds).await);
            zipped.push(rate(&app, path, &[gzip], seconds).await);
            polled.push(rate(&app, path, &poll, seconds).await);
        }
        let (plain, zipped, polled) = (median(plain), median(zipped), median(polled));
        println!(
            "| `{path}` | {plain:.0} | {zipped:.0} | {:.2} | {polled:.0} |",
            zipped / plain
        );
    }
    println!();
    println!("| gzip alone on the `/v1/mowers` body | bytes | µs per body |");
    println!("|---|---|---|");
    let (_, _, body) = get_body(&app, PATHS[0], &[]).await;
    for (name, level) in [
        ("fastest (1, the layer's)", Compression::fast()),
        ("default (6)", Compression::default()),
    ] {
        let (size, micros) = gzip_alone(&body, level, seconds);
        println!("| {name} | {size} | {micros:.1} |");
    }
}
