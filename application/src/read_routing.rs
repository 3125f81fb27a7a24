//! The read-only API on a second store (`SWATH_DATABASE_READ_URL`: a standby behind the router's
//! replica port), falling back to the primary when that store does not answer (issue 44).
//!
//! What goes to the read store: a mower's latest state, history, track and day rows
//! ([`ReadRouted`]), every read of the live projections ([`ReadRoutedProjections`]) and the
//! pages of mowing sessions ([`ReadRoutedSessions`]; the fleet's CSV exports read through these
//! same ports). Everything
//! else stays on the primary: the batch units of work and anything that locks, the health totals
//! (read by the watcher's side), the export, and the ping (`/readyz` says whether the primary
//! answers: a replica alone cannot ingest).
//!
//! The lookups every read makes first (its token, the mower's or site's place) go the other way
//! round: the primary first, the read store when the primary does not answer
//! ([`ReadRoutedDirectory`], [`ReadRoutedTokens`]), so that reads go on through a failover
//! without giving up read-your-writes or an immediate revocation while the primary answers.
//!
//! Only [`StoreError::Unavailable`] (and the other ports' `Unavailable`) fall back: a standby
//! that answers with a corrupt row says something about the data, not about where to read it.
//! A read from the standby may be as stale as its replay lag (`swath_store_replica_lag_seconds`,
//! docs/operations.md); the fallback reads the primary, which is never stale.

use crate::ports::{
    AlertCard, HealthCard, MowerCard, MowerFilter, ProjectionError, ProjectionStore, SessionError,
    SessionQuery, SessionStore, SiteCard, StoreError, TelemetryBatch, TelemetryStore, TimeWindow,
    Visibility, WindowRows,
};
use async_trait::async_trait;
use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use swath_domain::sessions::SessionRow;
use swath_domain::{
    Assignment, DayTotals, HealthTotals, HistoryRow, LatestRow, MowerId, MowerSnapshot,
    PositionRow, SiteId, TelemetryRows,
};

mod identity;
pub use identity::{ReadRoutedDirectory, ReadRoutedTokens};

/// Counts a read that the read store failed and the primary was asked for instead, and says why
/// (a warning: an operator sees a standby that stopped answering).
fn fell_back(read: &'static str, error: &(dyn std::error::Error + 'static)) {
    metrics::counter!("swath_store_read_fallbacks_total", "read" => read).increment(1);
    tracing::warn!(
        read,
        error = %crate::ports::chain(error),
        "The read store did not answer; the primary answers instead."
    );
}

/// An error that says the store did not answer (the only kind of failure that falls back).
trait Unanswered: std::error::Error + 'static {
    fn unanswered(&self) -> bool;
}

impl Unanswered for StoreError {
    fn unanswered(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

impl Unanswered for ProjectionError {
    fn unanswered(&self) -> bool {
        matches!(self, ProjectionError::Unavailable(_))
    }
}

impl Unanswered for SessionError {
    fn unanswered(&self) -> bool {
        matches!(self, SessionError::Unavailable(_))
    }
}

/// `on_replica`, or `on_primary` when the replica is unavailable.
///
/// When the primary does not answer either, the read store is asked once more: the router cuts
/// every session to a node it marks down (a standby being promoted leaves the standbys' port),
/// so the first try may have failed on a cut session while a node stands behind the port again;
/// the second try takes a new one. Otherwise that second it would answer 503 while the primary
/// is gone, the moment a read store matters most.
async fn routed_read<T, E, R, F, P>(
    read: &'static str,
    on_replica: R,
    on_primary: P,
) -> Result<T, E>
where
    E: Unanswered,
    R: Fn() -> F,
    F: Future<Output = Result<T, E>>,
    P: Future<Output = Result<T, E>>,
{
    match on_replica().await {
        Err(error) if error.unanswered() => {
            fell_back(read, &error);
            match on_primary.await {
                Err(error) if error.unanswered() => on_replica().await,
                answer => answer,
            }
        }
        answer => answer,
    }
}

/// The telemetry store with its API reads on a second store (see the module).
pub struct ReadRouted {
    primary: Arc<dyn TelemetryStore>,
    replica: Arc<dyn TelemetryStore>,
}

impl ReadRouted {
    pub fn new(primary: Arc<dyn TelemetryStore>, replica: Arc<dyn TelemetryStore>) -> Self {
        Self { primary, replica }
    }
}

#[async_trait]
impl TelemetryStore for ReadRouted {
    async fn begin(
        &self,
        mowers: &[MowerId],
    ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError> {
        self.primary.begin(mowers).await
    }

    async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
        routed_read(
            "latest",
            || self.replica.latest(mowers),
            self.primary.latest(mowers),
        )
        .await
    }

    async fn health(&self, mower: MowerId) -> Result<Option<HealthTotals>, StoreError> {
        self.primary.health(mower).await
    }

    async fn export(&self, mowers: &[MowerId]) -> Result<TelemetryRows, StoreError> {
        self.primary.export(mowers).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.primary.ping().await
    }

    async fn history(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<HistoryRow>, StoreError> {
        routed_read(
            "history",
            || self.replica.history(mower, window),
            self.primary.history(mower, window),
        )
        .await
    }

    async fn track(
        &self,
        mower: MowerId,
        window: &TimeWindow,
    ) -> Result<WindowRows<PositionRow>, StoreError> {
        routed_read(
            "track",
            || self.replica.track(mower, window),
            self.primary.track(mower, window),
        )
        .await
    }

    async fn days(
        &self,
        mower: MowerId,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<DayTotals>, StoreError> {
        routed_read(
            "days",
            || self.replica.days(mower, from, to),
            self.primary.days(mower, from, to),
        )
        .await
    }

    fn forget(&self, mowers: &[MowerId]) {
        self.primary.forget(mowers);
        self.replica.forget(mowers);
    }
}

/// The live projections' reads on a second store (see the module).
pub struct ReadRoutedProjections {
    primary: Arc<dyn ProjectionStore>,
    replica: Arc<dyn ProjectionStore>,
}

impl ReadRoutedProjections {
    pub fn new(primary: Arc<dyn ProjectionStore>, replica: Arc<dyn ProjectionStore>) -> Self {
        Self { primary, replica }
    }
}

#[async_trait]
impl ProjectionStore for ReadRoutedProjections {
    async fn window_mowers(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        routed_read(
            "window_mowers",
            || self.replica.window_mowers(who, limit),
            self.primary.window_mowers(who, limit),
        )
        .await
    }

    async fn window_sites(
        &self,
        who: &Visibility,
        limit: usize,
    ) -> Result<Vec<SiteCard>, ProjectionError> {
        routed_read(
            "window_sites",
            || self.replica.window_sites(who, limit),
            self.primary.window_sites(who, limit),
        )
        .await
    }

    async fn site_mowers(
        &self,
        who: &Visibility,
        sites: &[SiteId],
        filter: MowerFilter,
        per_site: usize,
    ) -> Result<Vec<MowerCard>, ProjectionError> {
        routed_read(
            "site_mowers",
            || self.replica.site_mowers(who, sites, filter, per_site),
            self.primary.site_mowers(who, sites, filter, per_site),
        )
        .await
    }

    async fn open_alerts(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
        per_mower: usize,
    ) -> Result<Vec<AlertCard>, ProjectionError> {
        routed_read(
            "open_alerts",
            || self.replica.open_alerts(who, mowers, per_mower),
            self.primary.open_alerts(who, mowers, per_mower),
        )
        .await
    }

    async fn health(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<HealthCard>, ProjectionError> {
        routed_read(
            "health",
            || self.replica.health(who, mowers),
            self.primary.health(who, mowers),
        )
        .await
    }

    async fn operators_on_duty(
        &self,
        who: &Visibility,
        mowers: &[MowerId],
    ) -> Result<Vec<Assignment>, ProjectionError> {
        routed_read(
            "operators_on_duty",
            || self.replica.operators_on_duty(who, mowers),
            self.primary.operators_on_duty(who, mowers),
        )
        .await
    }
}

/// The stored sessions' pages on a second store (see the module). Sessions are written by the
/// telemetry batches, on the primary.
pub struct ReadRoutedSessions {
    primary: Arc<dyn SessionStore>,
    replica: Arc<dyn SessionStore>,
}

impl ReadRoutedSessions {
    pub fn new(primary: Arc<dyn SessionStore>, replica: Arc<dyn SessionStore>) -> Self {
        Self { primary, replica }
    }
}

#[async_trait]
impl SessionStore for ReadRoutedSessions {
    async fn page(&self, query: &SessionQuery) -> Result<Vec<SessionRow>, SessionError> {
        routed_read(
            "sessions",
            || self.replica.page(query),
            self.primary.page(query),
        )
        .await
    }
}
