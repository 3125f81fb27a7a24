//! `swath serve`: start-up in dependency order, then shutdown in reverse. Up: the adapters and
//! the use cases ([`crate::wiring`]), the consumers and periodic tasks, the demo fleet and its
//! token and the simulator (only for a demo: [`crate::demo`]), HTTP. Down: HTTP first (no new
//! requests; the live streams get their last event `end` at once and close, the other requests
//! get the grace period), then the simulator (no new states), then the ingest and watcher
//! consumers are drained and the periodic tasks stopped.

use crate::cli::Cli;
use crate::config::ServeArgs;
use crate::demo;
use crate::wiring::{wire, BackgroundSettings, Settings};
use anyhow::Context;
use rand::RngCore;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use swath_api::router;
use swath_application::ports::SystemClock;
use swath_simulator::{seed_demo_fleet, DemoFleet, Simulator, SimulatorSettings, DEMO_ACCOUNT_ID};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How long open HTTP requests may take to finish once shutdown began.
const HTTP_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until Ctrl-C or SIGTERM, then shuts down in order and returns.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Before anything is opened: a refused setting is a usage error, as clap's own.
    if let Err(e) = demo::check_token(args.store.store, args.demo_token.as_deref()) {
        use clap::CommandFactory;
        Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, e)
            .exit()
    }
    // Before anything records a metric, so that `/metrics` sees every one.
    swath_api::routes::operations::metrics_handle();
    let retention_policy = args.retention.retention.policy::<Cli>();
    let stores = args.store.open().await?;
    let bus = args.open_bus().await?;
    let offline_after = chrono::Duration::from_std(args.offline_after)
        .context("SWATH_OFFLINE_AFTER_SECONDS is too large")?;
    let wired = wire(
        stores,
        bus,
        Arc::new(SystemClock),
        Settings {
            offline_after,
            retention: retention_policy,
            latest_cache: args.latest_cache,
            webhooks: args.webhooks.settings(),
            batch_timeout: args.store.database_batch_timeout,
            // Principals and mower placements cached for a short while (decisions 78, 108); the
            // in-process test app leaves it off.
            cache_ttl: swath_application::visibility::PRINCIPAL_CACHE_TTL,
            session_merge_gap: session_merge_gap(&args.store),
        },
    );
    let background = wired.start(&args.background()).await?;

    let sim_settings = SimulatorSettings {
        mowers: args.sim_mowers as usize,
        state_period: args.sim_state_period,
        seed: args.sim_seed,
    };
    let (stop_simulator, simulator_stop) = watch::channel(false);
    let mut simulator = None;
    let demo = if demo::wanted(args.sim_mowers, args.demo_token.as_deref()) {
        let fleet = seed_demo_fleet(wired.directory.as_ref(), &sim_settings)
            .await
            .context("could not seed the demo fleet")?;
        let (token, generated) = match args.demo_token.clone() {
            Some(token) => (token, false),
            None => (random_token(), true),
        };
        let revoked = demo::install_token(wired.tokens.as_ref(), fleet.account.id, &token)
            .await
            .context("could not store the demo token")?;
        tracing::info!(
            account_id = %fleet.account.id,
            sites = fleet.sites.len(),
            mowers = fleet.mowers.len(),
            revoked_demo_tokens = revoked,
            "Seeded the demo fleet; its token replaces the earlier demo tokens."
        );
        if !fleet.mowers.is_empty() {
            simulator = Some(Simulator::spawn(
                Arc::clone(&wired.bus),
                Arc::clone(&wired.clock),
                &fleet,
                sim_settings,
                simulator_stop,
            ));
        }
        Some(Demo {
            token,
            generated,
            fleet,
        })
    } else {
        // A demo token an earlier start stored (it outlives that process on PostgreSQL) would
        // still open the demo account: a start without a demo revokes them all (decision 182).
        let revoked = demo::revoke_all(wired.tokens.as_ref(), DEMO_ACCOUNT_ID)
            .await
            .context("could not revoke the earlier demo tokens")?;
        tracing::info!(
            revoked_demo_tokens = revoked,
            "No demo: SWATH_SIM_MOWERS is 0 and SWATH_DEMO_TOKEN is not set, so no demo account \
             or token is made, and every earlier demo token of the demo account is revoked."
        );
        None
    };
    let state = match &args.session_secret {
        Some(secret) => wired.state.with_session_secret(secret.as_bytes()),
        None => {
            tracing::info!(
                "SWATH_SESSION_SECRET is not set: the live pages' sessions are signed with a \
                 random key of this process; they end when it stops, and other replicas do not \
                 accept them."
            );
            wired.state
        }
    };

    let listener = TcpListener::bind(args.http_addr.as_str())
        .await
        .with_context(|| format!("could not listen on {} (SWATH_HTTP_ADDR)", args.http_addr))?;
    let addr = listener
        .local_addr()
        .context("could not read the listening address")?;
    print_banner(addr, demo.as_ref());
    tracing::info!(%addr, "Serving HTTP.");

    let http = args.http.limits();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = shutdown_tx.send(true);
    });
    let server = swath_api::server::serve(
        listener,
        router(
            state
                .with_map_tile_url(&args.map_tile_url)
                .with_http_limits(&http)
                // A stream never finishes by itself: without this it would hold the grace period
                // and then be cut mid-chunk.
                .with_shutdown(shutdown_rx.clone())
                .with_creation_limits(swath_application::CreationLimits {
                    accounts_per_hour: args.accounts_per_hour,
                    tokens_per_hour: args.tokens_per_hour,
                }),
        ),
        http,
        wait_for(shutdown_rx.clone()),
    );
    let drain_deadline = async {
        wait_for(shutdown_rx).await;
        tokio::time::sleep(HTTP_DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        served = server => served.context("the HTTP server failed")?,
        () = drain_deadline => tracing::warn!(
            timeout_seconds = HTTP_DRAIN_TIMEOUT.as_secs(),
            "Open HTTP requests did not finish in time; closing them."
        ),
    }
    tracing::info!("HTTP stopped; stopping the simulator.");

    let _ = stop_simulator.send(true);
    if let Some(simulator) = simulator {
        if let Err(e) = simulator.await {
            tracing::error!(error = %e, "The simulator ended abnormally.");
        }
    }
    tracing::info!("Simulator stopped; draining the ingest and watcher consumers.");
    background.stop().await;
    tracing::info!("Shut down cleanly.");
    Ok(())
}

impl ServeArgs {
    /// The background tasks' settings.
    fn background(&self) -> BackgroundSettings {
        BackgroundSettings {
            ingest_batch_max: self.ingest_batch_max as usize,
            ingest_batch_wait: self.ingest_batch_wait,
            notifications_batch_max: self.notifications_batch_max as usize,
            notifications_batch_wait: self.notifications_batch_wait,
            offline_sweep_period: self.offline_sweep_period,
            retention_interval: self.retention.interval,
        }
    }
}

/// 32 random bytes, hex encoded.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The demo this start serves: its fleet and token.
struct Demo {
    token: String,
    /// The token is random (no `SWATH_DEMO_TOKEN`).
    generated: bool,
    fleet: DemoFleet,
}

/// What a person needs to try the API. On stdout, so it shows whatever the log filter.
fn print_banner(addr: SocketAddr, demo: Option<&Demo>) {
    let base = format!("http://{addr}");
    println!();
    let Some(Demo {
        token,
        generated,
        fleet,
    }) = demo
    else {
        println!("Swath is serving, without a demo (SWATH_SIM_MOWERS=0, no SWATH_DEMO_TOKEN).");
        println!("  API:          {base}/v1/mowers");
        println!("  Docs:         {base}/docs");
        println!("  OpenAPI:      {base}/openapi.json");
        println!("  Tokens:       swath account create --name …; swath token create --account …");
        println!();
        return;
    };
    let origin = if *generated {
        " (random; set SWATH_DEMO_TOKEN to choose it)"
    } else {
        ""
    };
    match fleet.mowers.len() {
        0 => println!(
            "Swath is serving the demo account, with no simulated mowers (SWATH_SIM_MOWERS=0)."
        ),
        1 => println!("Swath is serving a simulated fleet of 1 mower."),
        n => println!("Swath is serving a simulated fleet of {n} mowers."),
    }
    println!("  Account id:   {} (also GET /v1/me)", fleet.account.id);
    println!("  API:          {base}/v1/mowers");
    println!("  Docs:         {base}/docs");
    println!("  Live view:    {base}/live/fleet (sign in with the demo token)");
    println!("  OpenAPI:      {base}/openapi.json");
    println!("  Demo token:   {token}{origin}");
    println!("  Try:          curl -s -H 'Authorization: Bearer {token}' {base}/v1/mowers");
    println!();
}

/// Resolves once `flag` is `true` (or its sender is gone).
async fn wait_for(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|stop| *stop).await;
}

/// Ctrl-C, or SIGTERM on Unix (what `docker stop` and `kill` send).
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "Could not listen for Ctrl-C.");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "Could not listen for SIGTERM.");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Received Ctrl-C; shutting down."),
        () = terminate => tracing::info!("Received SIGTERM; shutting down."),
    }
}

/// `SWATH_SESSION_MERGE_GAP_SECONDS` as the rules take it.
pub(crate) fn session_merge_gap(store: &crate::config::StoreArgs) -> chrono::Duration {
    chrono::Duration::from_std(store.session_merge_gap).unwrap_or(chrono::Duration::MAX)
}
