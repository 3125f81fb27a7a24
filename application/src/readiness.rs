//! Whether this process can serve (`/readyz`): the store and the bus answer, and the ingest
//! consumer makes progress.

use crate::ports::{chain, EventBus, TelemetryStore};
use crate::Ingest;
use std::sync::Arc;
use std::time::Duration;

/// How long a store or the bus may take to answer a readiness check.
pub const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// What a readiness check found: each `Err` says why that part is down.
#[derive(Clone, Debug)]
pub struct ReadinessReport {
    pub store: Result<(), String>,
    pub bus: Result<(), String>,
    /// How long the ingest consumer has failed every batch, once that is too long.
    pub stalled: Option<Duration>,
}

/// The readiness use case (see the module).
#[derive(Clone)]
pub struct Readiness {
    telemetry: Arc<dyn TelemetryStore>,
    bus: Arc<dyn EventBus>,
    ingest: Arc<Ingest>,
}

impl Readiness {
    pub fn new(
        telemetry: Arc<dyn TelemetryStore>,
        bus: Arc<dyn EventBus>,
        ingest: Arc<Ingest>,
    ) -> Self {
        Self {
            telemetry,
            bus,
            ingest,
        }
    }

    /// Pings the store and the bus at once, each for at most [`PING_TIMEOUT`].
    pub async fn check(&self) -> ReadinessReport {
        let store = async {
            match tokio::time::timeout(PING_TIMEOUT, self.telemetry.ping()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(chain(&e).to_string()),
                Err(_) => Err(timed_out()),
            }
        };
        let bus = async {
            match tokio::time::timeout(PING_TIMEOUT, self.bus.ping()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(chain(&e).to_string()),
                Err(_) => Err(timed_out()),
            }
        };
        let (store, bus) = tokio::join!(store, bus);
        ReadinessReport {
            store,
            bus,
            stalled: self.ingest.stalled_for(),
        }
    }
}

fn timed_out() -> String {
    format!("no answer within {} s", PING_TIMEOUT.as_secs())
}
