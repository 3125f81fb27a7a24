//! The one wiring of Swath, from the settings to a running service: the adapters the settings
//! name ([`StoreArgs::open`], [`ServeArgs::open_bus`]), the use cases and the API state over their
//! ports ([`wire`]), and the background tasks that feed them ([`Wired::start`]).
//!
//! `swath serve`, the command-line tools and the in-process test app (`swath/tests/helpers`) all
//! build through here, and the end-to-end harness runs the binary that does; so a test serves the
//! same ports as production, and this crate is the only one that names an adapter (`swath-api`
//! sees ports only).
//!
//! # Layout
//! - [`Stores`]: one store seen through each port it implements; [`Stores::memory`],
//!   [`Stores::postgres`].
//! - [`wire`] and [`Wired`]: ingest, watcher, busy check, retention and the [`AppState`].
//! - [`Wired::start`] and [`Background`]: the ingest and watcher consumers, the offline sweep,
//!   retention on its schedule, the partition gauge; [`Background::stop`] drains and stops them.

use crate::config::{BusKind, ServeArgs, StoreArgs, StoreKind, WebhookArgs};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use swath_api::{AppState, UseCases};
use swath_application::latest_cache::LatestCache;
use swath_application::live_feed::SharedFeed;
use swath_application::live_streams::LiveStreams;
use swath_application::ports::{
    chain, Assignments, BatchSettings, Clock, Directory, DirectoryAdmin, EventBus, GeofenceStore,
    NotificationFeed, NotificationPorts, Partitioning, ProjectionStore, RetentionStore,
    SessionStore, StartAt, Subscription, TelemetryStore, TokenStore, WatchStore, WebhookStore,
    ZoneStore,
};
use swath_application::read_routing::{
    ReadRouted, ReadRoutedDirectory, ReadRoutedProjections, ReadRoutedSessions, ReadRoutedTokens,
};
use swath_application::ticks::Ticks;
use swath_application::webhooks::delivery::{
    DeliverySettings, Dispatcher, Enqueuer, WEBHOOK_CONSUMER, WEBHOOK_SUBJECTS,
};
use swath_application::webhooks::wake::{Wake, WakingStore};
use swath_application::webhooks::WebhookLimits;
use swath_application::{
    subjects, Access, CreationLimits, CreationRate, Exports, FleetDirectory, Imports, Ingest,
    MowerReads, MowerSettings, Projections, Readiness, Retention, RetentionPolicy, Revocations,
    SchedulerStatus, Sessions, Submissions, TokenAdmin, Watcher, Webhooks,
};
use swath_memory::{
    MemoryBus, MemoryBusSettings, MemoryProjections, MemoryStore, MemoryStoreSettings,
    MemoryWebhooks,
};
use swath_postgres::{PoolSettings, PostgresStore};
use swath_webhook_http::{HttpSender, SenderSettings};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The store, seen through each port it implements.
pub struct Stores {
    pub directory: Arc<dyn Directory>,
    /// The same directory as the API manages it.
    pub admin: Arc<dyn DirectoryAdmin>,
    pub tokens: Arc<dyn TokenStore>,
    pub telemetry: Arc<dyn TelemetryStore>,
    /// The notification side: watch rows, the watcher's units of work and busy statuses; virtual
    /// zones (W7) and their occupancy; geofences; the events feed, open alerts and blade resets.
    pub notifications: NotificationPorts,
    /// Retention and downsampling of history and positions.
    pub retention: Arc<dyn RetentionStore>,
    /// The live projections' reads and the operator assignments.
    pub projections: Arc<dyn ProjectionStore>,
    pub assignments: Arc<dyn Assignments>,
    /// Webhook endpoints and their queues of deliveries.
    pub webhooks: Arc<dyn WebhookStore>,
    /// W8's sessions (written by the telemetry batches, read by the API).
    pub sessions: Arc<dyn SessionStore>,
}

impl Stores {
    /// PostgreSQL behind every port, the live projections included.
    pub fn postgres(store: PostgresStore) -> Stores {
        let store = Arc::new(store);
        Stores::of(store.clone(), store.clone(), store.clone(), store)
    }

    /// PostgreSQL behind every port, with the read-only API's reads (telemetry, the live
    /// projections and the sessions' pages) on `reads` and falling back to `store` when it does not answer, and the
    /// token and directory lookups on `store` and falling back to `reads` (decision 196).
    pub fn postgres_with_reads(store: PostgresStore, reads: PostgresStore) -> Stores {
        let mut stores = Stores::postgres(store);
        let reads = Arc::new(reads);
        stores.telemetry = Arc::new(ReadRouted::new(stores.telemetry, reads.clone()));
        stores.projections = Arc::new(ReadRoutedProjections::new(
            stores.projections,
            reads.clone(),
        ));
        let directory = Arc::new(ReadRoutedDirectory::new(stores.admin, reads.clone()));
        stores.directory = directory.clone();
        stores.admin = directory;
        stores.sessions = Arc::new(ReadRoutedSessions::new(stores.sessions, reads.clone()));
        stores.tokens = Arc::new(ReadRoutedTokens::new(stores.tokens, reads));
        stores
    }

    /// The memory adapters: `store` behind every port, and the live projections over the same
    /// data.
    pub fn memory(store: MemoryStore) -> Stores {
        let store = Arc::new(store);
        let projections = Arc::new(MemoryProjections::new((*store).clone()));
        Stores::of(
            store,
            projections.clone(),
            projections,
            Arc::new(MemoryWebhooks::default()),
        )
    }

    /// `store` behind every port but the live projections', the assignments' and the webhooks'.
    fn of<S>(
        store: Arc<S>,
        projections: Arc<dyn ProjectionStore>,
        assignments: Arc<dyn Assignments>,
        webhooks: Arc<dyn WebhookStore>,
    ) -> Stores
    where
        S: DirectoryAdmin + TokenStore + TelemetryStore + RetentionStore + SessionStore + 'static,
        S: WatchStore + ZoneStore + GeofenceStore + NotificationFeed,
    {
        Stores {
            projections,
            assignments,
            webhooks,
            directory: store.clone(),
            admin: store.clone(),
            tokens: store.clone(),
            telemetry: store.clone(),
            sessions: store.clone(),
            notifications: NotificationPorts::of(store.clone()),
            retention: store,
        }
    }
}

impl StoreArgs {
    /// Opens the configured store; PostgreSQL is migrated first (under an advisory lock, so
    /// replicas starting together do not race) and its partitions for the coming months made.
    pub async fn open(&self) -> anyhow::Result<Stores> {
        match self.store {
            StoreKind::Memory => {
                let history_per_mower = usize::try_from(self.memory_history_per_mower)
                    .context("SWATH_MEMORY_HISTORY_PER_MOWER is too large")?;
                Ok(Stores::memory(MemoryStore::new(MemoryStoreSettings {
                    history_per_mower,
                })))
            }
            StoreKind::Postgres => {
                let url = self
                    .database_url
                    .as_deref()
                    .context("SWATH_DATABASE_URL is required with SWATH_STORE=postgres")?;
                // At once and with the cause ("connection refused"), not after a pool's timeout.
                swath_postgres::probe(url)
                    .await
                    .context("could not connect to PostgreSQL (SWATH_DATABASE_URL)")?;
                swath_migrations::migrate(url)
                    .await
                    .context("could not migrate the database at SWATH_DATABASE_URL")?;
                let pool = self.pool_settings();
                let store = PostgresStore::connect_with(url, &pool)
                    .await
                    .context("could not connect to SWATH_DATABASE_URL")?;
                let created = store
                    .ensure_partitions(3)
                    .await
                    .context("could not create the partitions of the coming months")?;
                tracing::info!(
                    partitions_created = created,
                    "Connected to PostgreSQL and migrated it."
                );
                let Some(read_url) = self.database_read_url.as_deref() else {
                    return Ok(Stores::postgres(store));
                };
                // Lazily: a standby that is down at start-up delays nothing, its reads go to
                // the primary until it answers.
                let reads = PostgresStore::connect_lazy_with(read_url, &pool)
                    .context("SWATH_DATABASE_READ_URL")?;
                tokio::spawn(watch_replay_lag(reads.clone()));
                tracing::info!("The read-only API reads from SWATH_DATABASE_READ_URL.");
                Ok(Stores::postgres_with_reads(store, reads))
            }
        }
    }

    /// The pool's settings (`SWATH_DATABASE_*`).
    pub fn pool_settings(&self) -> PoolSettings {
        PoolSettings {
            max_connections: self.database_max_connections,
            connect_timeout: self.database_connect_timeout,
            statement_timeout: self.database_statement_timeout,
            idle_in_transaction_timeout: self.database_idle_in_transaction_timeout,
            tcp_keepalive: self.database_tcp_keepalive,
        }
    }
}

/// How often the read store's replay lag is measured.
const REPLAY_LAG_PERIOD: Duration = Duration::from_secs(5);

/// Exports the read store's replay lag (`swath_store_replica_lag_seconds`) and whether it
/// answers (`swath_store_replica_up`), for as long as the process runs: the bound of what a read
/// from it may miss (docs/operations.md).
async fn watch_replay_lag(reads: PostgresStore) {
    let mut tick = tokio::time::interval(REPLAY_LAG_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match tokio::time::timeout(REPLAY_LAG_PERIOD, reads.replay_lag()).await {
            Ok(Ok(lag)) => {
                metrics::gauge!("swath_store_replica_lag_seconds").set(lag);
                metrics::gauge!("swath_store_replica_up").set(1.0);
            }
            Ok(Err(_)) | Err(_) => metrics::gauge!("swath_store_replica_up").set(0.0),
        }
    }
}

impl ServeArgs {
    /// Connects the configured bus.
    pub async fn open_bus(&self) -> anyhow::Result<Arc<dyn EventBus>> {
        Ok(match self.bus {
            BusKind::Memory => Arc::new(MemoryBus::new(MemoryBusSettings {
                partitioning: Some(
                    Partitioning::new(subjects::TELEMETRY_ALL, self.telemetry_partitions)
                        .context("SWATH_TELEMETRY_PARTITIONS")?,
                ),
                ..MemoryBusSettings::default()
            })),
            BusKind::Nats => {
                let url = self
                    .nats_url
                    .as_deref()
                    .context("SWATH_NATS_URL is required with SWATH_BUS=nats")?;
                let settings = swath_nats::NatsBusSettings {
                    ack_wait: self.nats_ack_wait,
                    streams: vec![
                        swath_nats::StreamSpec::telemetry().partitioned(self.telemetry_partitions),
                        swath_nats::StreamSpec::notifications(),
                    ],
                    replicas: self.nats_replicas.map(usize::from),
                    credentials: self.nats_creds.clone(),
                    tls_ca: self.nats_tls_ca.clone(),
                    ..swath_nats::NatsBusSettings::default()
                };
                let bus = swath_nats::NatsBus::connect(url, settings)
                    .await
                    .context("could not connect to NATS at SWATH_NATS_URL")?;
                tracing::info!("Connected to NATS JetStream and provisioned its streams.");
                Arc::new(bus)
            }
        })
    }
}

impl WebhookArgs {
    /// The wiring's webhook settings.
    pub fn settings(&self) -> WebhookSettings {
        WebhookSettings {
            allow_private: self.allow_private,
            dispatch: self.dispatch,
            timeout: self.timeout,
            limits: WebhookLimits {
                per_account: self.per_account as usize,
                tests_per_minute: self.tests_per_minute as usize,
            },
            delivery: DeliverySettings {
                horizon: self.retry_horizon,
                first_backoff: self.first_retry,
                concurrency: self.concurrency as usize,
                per_account: self.account_concurrency as usize,
                // Longer than an attempt may take, so that no other replica attempts the same
                // endpoint meanwhile.
                claim: self.timeout + Duration::from_secs(30),
                ..DeliverySettings::default()
            },
        }
    }
}

/// What the use cases are built with besides the ports.
#[derive(Clone, Debug)]
pub struct Settings {
    /// A mower silent this long goes offline (`SWATH_OFFLINE_AFTER_SECONDS`).
    pub offline_after: chrono::Duration,
    /// What retention keeps (`SWATH_RETENTION_*`).
    pub retention: RetentionPolicy,
    /// How long a mower's latest state is answered from memory (`SWATH_LATEST_CACHE_SECONDS`;
    /// zero: every read asks the store). Decision 134.
    pub latest_cache: Duration,
    /// How webhooks are delivered (`SWATH_WEBHOOK_*`).
    pub webhooks: WebhookSettings,
    /// The longest an ingest batch's unit of work may take (`SWATH_DATABASE_BATCH_TIMEOUT_SECONDS`).
    pub batch_timeout: Duration,
    /// How long token principals and mower placements are answered from memory (decisions 78,
    /// 108): `swath serve` keeps them [`swath_application::visibility::PRINCIPAL_CACHE_TTL`]; zero asks the stores every time.
    pub cache_ttl: Duration,
    /// W8's merge gap (`SWATH_SESSION_MERGE_GAP_SECONDS`).
    pub session_merge_gap: chrono::Duration,
}

/// How webhooks are delivered.
#[derive(Clone, Debug)]
pub struct WebhookSettings {
    /// Plain `http` and private addresses allowed (`SWATH_WEBHOOK_ALLOW_PRIVATE`).
    pub allow_private: bool,
    /// Whether this replica makes delivery attempts (`SWATH_WEBHOOK_DISPATCH`).
    pub dispatch: bool,
    /// One attempt's total time-out (`SWATH_WEBHOOK_TIMEOUT_SECONDS`); zero: the sender's
    /// default.
    pub timeout: Duration,
    /// Endpoints per account and test messages per endpoint (`SWATH_WEBHOOKS_PER_ACCOUNT`,
    /// `SWATH_WEBHOOK_TESTS_PER_MINUTE`).
    pub limits: WebhookLimits,
    pub delivery: DeliverySettings,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow_private: false,
            dispatch: true,
            timeout: Duration::ZERO,
            limits: WebhookLimits::default(),
            delivery: DeliverySettings::default(),
        }
    }
}

/// The use cases over one set of ports, and the API state that serves them.
pub struct Wired {
    /// What the router serves: the use cases a route reaches.
    pub state: AppState,
    /// The directory the demo fleet is seeded into.
    pub directory: Arc<dyn Directory>,
    /// The same directory as the API manages it (tests seed accounts into it).
    pub admin: Arc<dyn DirectoryAdmin>,
    /// The token store the demo token is installed into.
    pub tokens: Arc<dyn TokenStore>,
    /// The event bus the consumers subscribe to and the simulator publishes on.
    pub bus: Arc<dyn EventBus>,
    pub clock: Arc<dyn Clock>,
    pub ingest: Arc<Ingest>,
    /// The notification rules, the second consumer of every state.
    pub watcher: Arc<Watcher>,
    /// The busy check, run on the watcher's batches.
    pub scheduler: Arc<SchedulerStatus>,
    pub retention: Arc<Retention>,
    /// The webhook store the delivery reads and writes, and how it delivers.
    pub webhooks: Arc<dyn WebhookStore>,
    /// Wakes the dispatcher: given by `webhooks` on each write that can make a delivery due.
    pub wake: Wake,
    pub webhook_settings: WebhookSettings,
}

/// Builds the use cases and the API state over `stores`, `bus` and `clock`. Nothing runs yet:
/// [`Wired::start`] subscribes the consumers and starts the periodic tasks.
pub fn wire(
    stores: Stores,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
    settings: Settings,
) -> Wired {
    let Stores {
        directory,
        admin,
        tokens,
        telemetry,
        notifications,
        retention,
        projections,
        assignments,
        webhooks,
        sessions,
    } = stores;
    // One wrapped store for every writer and reader, so that each commit of this process
    // forgets the latest rows it replaced before a read can be answered from memory.
    let telemetry = LatestCache::wrap(telemetry, Arc::clone(&clock), settings.latest_cache);
    let ingest = Arc::new(
        Ingest::new(Arc::clone(&telemetry), Arc::clone(&bus), Arc::clone(&clock))
            .with_zones(Arc::clone(&notifications.zones))
            .with_unit_deadline(settings.batch_timeout)
            .with_session_merge_gap(settings.session_merge_gap),
    );
    let watcher = Arc::new(
        Watcher::new(
            Arc::clone(&notifications.watch),
            Arc::clone(&bus),
            Arc::clone(&clock),
            settings.offline_after,
        )
        .with_session_merge_gap(settings.session_merge_gap),
    );
    let scheduler = Arc::new(SchedulerStatus::new(
        Arc::clone(&notifications.watch),
        Arc::clone(&clock),
    ));
    // Every writer of this process wakes the dispatcher through the store (decision 176).
    let wake = Wake::default();
    let webhooks = WakingStore::wrap(webhooks, wake.clone());
    let retention = Arc::new(
        Retention::new(retention, Arc::clone(&clock), settings.retention)
            .with_webhooks(Arc::clone(&webhooks)),
    );
    let state = AppState::new(use_cases(
        Ports {
            directory: Arc::clone(&admin),
            tokens: Arc::clone(&tokens),
            telemetry,
            notifications,
            projections,
            assignments,
            webhooks: Arc::clone(&webhooks),
            sessions,
            bus: Arc::clone(&bus),
            clock: Arc::clone(&clock),
        },
        Arc::clone(&ingest),
        &settings,
    ));
    Wired {
        webhooks,
        wake,
        webhook_settings: settings.webhooks,
        state,
        directory,
        admin,
        tokens,
        bus,
        clock,
        ingest,
        watcher,
        scheduler,
        retention,
    }
}

/// The ports the API's use cases are built over.
struct Ports {
    directory: Arc<dyn DirectoryAdmin>,
    tokens: Arc<dyn TokenStore>,
    telemetry: Arc<dyn TelemetryStore>,
    notifications: NotificationPorts,
    projections: Arc<dyn ProjectionStore>,
    assignments: Arc<dyn Assignments>,
    webhooks: Arc<dyn WebhookStore>,
    sessions: Arc<dyn SessionStore>,
    bus: Arc<dyn EventBus>,
    clock: Arc<dyn Clock>,
}

/// The API's use cases over `ports`: the one place they are built, each over the same
/// [`Access`] (one cache of principals and placements, one set of revocations) and the same
/// creation rate.
fn use_cases(ports: Ports, ingest: Arc<Ingest>, settings: &Settings) -> UseCases {
    let Ports {
        directory,
        tokens,
        telemetry,
        notifications,
        projections,
        assignments,
        webhooks,
        sessions,
        bus,
        clock,
    } = ports;
    let access = Access::new(
        Arc::clone(&directory),
        tokens.clone(),
        Arc::clone(&clock),
        Revocations::default(),
    )
    .with_cache_ttl(settings.cache_ttl);
    let rate = CreationRate::new(CreationLimits::default(), Arc::clone(&clock));
    let token_admin = TokenAdmin::new(access.clone(), tokens, rate.clone());
    let mower_reads = MowerReads::new(
        access.clone(),
        Arc::clone(&directory),
        Arc::clone(&telemetry),
        None,
    )
    .with_notifications(notifications.clone());
    let mower_settings = MowerSettings::new(access.clone(), Arc::clone(&bus), Arc::clone(&clock))
        .with_notifications(Some(notifications))
        .with_assignments(Some(assignments));
    let webhooks = Webhooks::new(
        webhooks,
        access.clone(),
        Arc::clone(&clock),
        settings.webhooks.allow_private,
    )
    .with_limits(settings.webhooks.limits);
    UseCases {
        fleet: FleetDirectory::new(
            access.clone(),
            directory,
            Arc::clone(&telemetry),
            token_admin.clone(),
            rate.clone(),
        ),
        exports: Exports::new(access.clone(), Arc::clone(&telemetry))
            .with_sessions(Arc::clone(&sessions)),
        mowing_sessions: Some(Sessions::new(access.clone(), sessions)),
        submissions: Submissions::new(access.clone(), Arc::clone(&ingest), Arc::clone(&bus)),
        imports: Imports::new(access.clone(), Arc::clone(&telemetry), Arc::clone(&clock)),
        readiness: Readiness::new(telemetry, Arc::clone(&bus), ingest),
        live_streams: LiveStreams::new(
            access.clone(),
            SharedFeed::new(bus, Arc::clone(&clock)),
            swath_api::limits::RequestLimits::default().streams,
        ),
        webhooks: Some(webhooks),
        live_views: Some(Projections::new(projections)),
        token_admin,
        mower_reads,
        mower_settings,
        creation_rate: rate,
        access,
        clock,
    }
}

/// How the background tasks run (`swath serve`'s settings).
#[derive(Clone, Debug)]
pub struct BackgroundSettings {
    /// The most states, and the longest linger, of one ingest batch.
    pub ingest_batch_max: usize,
    pub ingest_batch_wait: Duration,
    /// The same for the watcher's batches.
    pub notifications_batch_max: usize,
    pub notifications_batch_wait: Duration,
    /// How often the offline sweep runs.
    pub offline_sweep_period: Duration,
    /// How often retention runs; zero: never on a schedule.
    pub retention_interval: Duration,
}

/// The running background tasks; [`Background::stop`] drains and stops them.
pub struct Background {
    ingest: Subscription,
    watcher: Subscription,
    webhooks: Subscription,
    /// `None` when this replica makes no delivery attempt (`SWATH_WEBHOOK_DISPATCH=false`).
    dispatcher: Option<JoinHandle<()>>,
    stop: watch::Sender<bool>,
    sweep: JoinHandle<()>,
    retention: Option<JoinHandle<()>>,
}

impl Wired {
    /// Subscribes the ingest and watcher consumers and starts the offline sweep, retention on
    /// its schedule and the partition gauge.
    pub async fn start(&self, settings: &BackgroundSettings) -> anyhow::Result<Background> {
        let bus = &self.bus;
        // The consumer exists before the first state is published, so that none is missed.
        let ingest = bus
            .subscribe_batch(
                subjects::TELEMETRY_ALL,
                subjects::INGEST_CONSUMER,
                BatchSettings {
                    max_batch: settings.ingest_batch_max,
                    max_wait: settings.ingest_batch_wait,
                    // Nothing the stream holds is skipped, even what came before the first start.
                    start: StartAt::Stored,
                    ..BatchSettings::default()
                },
                self.ingest.handler(),
            )
            .await
            .context("could not subscribe the ingest consumer")?;
        // The watcher is the second consumer of every state (with the busy check on its batches).
        let watcher = bus
            .subscribe_batch(
                subjects::TELEMETRY_ALL,
                subjects::WATCHER_CONSUMER,
                BatchSettings {
                    max_batch: settings.notifications_batch_max,
                    max_wait: settings.notifications_batch_wait,
                    ..BatchSettings::default()
                },
                self.watcher.handler(Some(Arc::clone(&self.scheduler))),
            )
            .await
            .context("could not subscribe the watcher consumer")?;
        // Webhooks: every message of the notifications stream is matched against the endpoints,
        // and acknowledged once its deliveries are stored. Exclusive: one replica at a time
        // enqueues, in stream order, and a dead one's unsettled messages come to the next before
        // anything newer, so each endpoint's queue is in stream order (decision 153).
        let enqueuer = Enqueuer::new(
            Arc::clone(&self.webhooks),
            Arc::clone(&self.directory),
            Arc::clone(&self.clock),
        );
        let webhooks = bus
            .subscribe_batch(
                WEBHOOK_SUBJECTS,
                WEBHOOK_CONSUMER,
                BatchSettings {
                    max_batch: settings.notifications_batch_max,
                    max_wait: settings.notifications_batch_wait,
                    exclusive: true,
                    ..BatchSettings::default()
                },
                Arc::new(enqueuer),
            )
            .await
            .context("could not subscribe the webhook consumer")?;
        let (stop, stopped) = watch::channel(false);
        // Off, this replica sends nothing: no HTTP client exists to reach beyond this machine.
        let dispatcher = if self.webhook_settings.dispatch {
            let defaults = SenderSettings::default();
            let sender = HttpSender::new(SenderSettings {
                allow_private: self.webhook_settings.allow_private,
                total_timeout: if self.webhook_settings.timeout.is_zero() {
                    defaults.total_timeout
                } else {
                    self.webhook_settings.timeout
                },
                connect_timeout: defaults.connect_timeout.min(
                    self.webhook_settings
                        .timeout
                        .max(Duration::from_millis(100)),
                ),
            })
            .context("could not build the webhook HTTP client")?;
            let dispatcher = Arc::new(
                Dispatcher::new(
                    Arc::clone(&self.webhooks),
                    Arc::new(sender),
                    Arc::clone(bus),
                    Arc::clone(&self.clock),
                    self.webhook_settings.delivery,
                )
                .waking_on(self.wake.clone()),
            );
            Some(tokio::spawn(dispatcher.run(stopped.clone())))
        } else {
            tracing::warn!("Webhook delivery is off on this replica (SWATH_WEBHOOK_DISPATCH=false): deliveries wait for a replica that delivers.");
            None
        };
        tokio::spawn(report_webhook_backlog(
            Arc::clone(&self.webhooks),
            stopped.clone(),
        ));
        tokio::spawn(report_partitions_owned(
            [
                (subjects::INGEST_CONSUMER, ingest.partitions_owned_counter()),
                (
                    subjects::WATCHER_CONSUMER,
                    watcher.partitions_owned_counter(),
                ),
                (WEBHOOK_CONSUMER, webhooks.partitions_owned_counter()),
            ],
            stopped.clone(),
        ));
        let sweep = tokio::spawn(offline_sweep(
            Arc::clone(&self.watcher),
            settings.offline_sweep_period,
            stopped.clone(),
        ));
        // Retention on its schedule, stopped (between two steps) with the sweep.
        let retention = (!settings.retention_interval.is_zero()).then(|| {
            tokio::spawn(swath_application::retention::run_every(
                Arc::clone(&self.retention),
                settings.retention_interval,
                stopped,
            ))
        });
        Ok(Background {
            ingest,
            watcher,
            webhooks,
            dispatcher,
            stop,
            sweep,
            retention,
        })
    }
}

impl Background {
    /// Drains the ingest and watcher consumers, then stops the sweep, retention and the gauge.
    pub async fn stop(self) {
        tokio::join!(
            self.ingest.unsubscribe(),
            self.watcher.unsubscribe(),
            self.webhooks.unsubscribe()
        );
        let _ = self.stop.send(true);
        // An attempt cut short is made again (at least once): its endpoint's claim lapses.
        if let Some(Err(e)) = match self.dispatcher {
            Some(task) => Some(task.await),
            None => None,
        } {
            tracing::error!(error = %e, "The webhook dispatcher ended abnormally.");
        }
        if let Err(e) = self.sweep.await {
            tracing::error!(error = %e, "The offline sweep ended abnormally.");
        }
        if let Some(Err(e)) = match self.retention {
            Some(task) => Some(task.await),
            None => None,
        } {
            tracing::error!(error = %e, "The retention schedule ended abnormally.");
        }
    }
}

/// Keeps `swath_bus_partitions_owned{consumer}` at how many partitions of each consumer this
/// replica holds (the balance across replicas, docs/operations.md), every second until `stop`.
async fn report_partitions_owned(
    consumers: [(&'static str, Arc<std::sync::atomic::AtomicUsize>); 3],
    mut stop: watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        for (consumer, owned) in &consumers {
            let held = owned.load(std::sync::atomic::Ordering::Relaxed);
            metrics::gauge!("swath_bus_partitions_owned", "consumer" => *consumer).set(held as f64);
        }
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    }
}

/// Keeps `swath_webhook_backlog{webhook_id}` (pending deliveries per endpoint) and
/// `swath_webhook_endpoints_pending` current, every 10 s until `stop`. Endpoints whose backlog
/// emptied are set to zero, so that a gauge never shows a stale backlog.
async fn report_webhook_backlog(store: Arc<dyn WebhookStore>, stop: watch::Receiver<bool>) {
    let mut ticks = Ticks::new(Duration::from_secs(10), stop);
    let mut shown: std::collections::HashSet<String> = std::collections::HashSet::new();
    while ticks.next().await {
        match store.backlog().await {
            Ok(backlog) => {
                let now: std::collections::HashSet<String> =
                    backlog.iter().map(|(id, _)| id.to_string()).collect();
                for gone in shown.difference(&now) {
                    metrics::gauge!("swath_webhook_backlog", "webhook_id" => gone.clone()).set(0.0);
                }
                for (id, pending) in &backlog {
                    metrics::gauge!("swath_webhook_backlog", "webhook_id" => id.to_string())
                        .set(*pending as f64);
                }
                metrics::gauge!("swath_webhook_endpoints_pending").set(backlog.len() as f64);
                shown = now;
            }
            Err(e) => {
                tracing::warn!(error = %chain(&e), "Could not read the webhook backlog.")
            }
        }
    }
}

/// Runs the offline sweep every `period` until `stop` turns `true`. A failed sweep is logged and
/// tried again at the next period (what it did not commit, it did not do).
async fn offline_sweep(watcher: Arc<Watcher>, period: Duration, stop: watch::Receiver<bool>) {
    let mut ticks = Ticks::new(period, stop);
    while ticks.next().await {
        match watcher.sweep_offline().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(mowers = n, "Marked silent mowers offline."),
            Err(e) => {
                tracing::warn!(error = %chain(&e), "The offline sweep failed; it will run again.")
            }
        }
    }
}
