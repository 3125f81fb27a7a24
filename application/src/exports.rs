//! Fleet-wide exports (issue 45): every visible mower's history or day totals over a range,
//! read page by page so that the range is never held in memory (decision 194).
//!
//! The use case ([`Exports`]) decides what a principal may export: the mowers it sees
//! ([`Access`]), of one site when the request names one (a site it cannot see answers what an
//! unknown site answers). What it answers is an [`Export`]: a producer that reads one keyset page
//! of one mower at a time from the telemetry store the other history reads go to (the read store
//! when there is one: `read_routing`), checks the request's token before every page, and logs its
//! progress. The caller pulls pages ([`Export::next_page`]); when it stops pulling (an HTTP
//! client went away and its body was dropped) the producer reads nothing more.
//!
//! A new kind of export is an [`ExportSource`]: how to read one page of one mower, and the key a
//! page ends at.

use crate::ports::{
    chain, DirectoryError, SessionQuery, SessionStore, StoreError, TelemetryStore, TimeWindow,
    TokenHash,
};
use crate::visibility::{Access, AccessError};
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swath_domain::sessions::SessionRow;
use swath_domain::{AccountId, DayTotals, HistoryRow, MowerId, Principal, SiteId};

/// The rows one page reads of one mower (and the most an export holds at a time, beside the
/// list of its mowers).
pub const EXPORT_PAGE_ROWS: usize = 1000;

/// The longest range one export may ask for, in days (history: `to - from`; days: `from..=to`).
pub const MAX_EXPORT_DAYS: i64 = 366;

/// How often a running export logs its progress at most (and at least every
/// [`PROGRESS_EVERY_PAGES`] pages).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Pages between two progress lines, whatever the time.
pub const PROGRESS_EVERY_PAGES: u64 = 500;

/// Why an export was refused, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The request is not valid: each problem as a JSON Pointer into the query's parameters and
    /// a sentence.
    #[error("the export request is not valid: {0:?}")]
    Invalid(Vec<(String, String)>),
    /// The site named is not visible (or visibility could not be decided).
    #[error(transparent)]
    Access(#[from] AccessError),
    /// The directory failed.
    #[error(transparent)]
    Directory(#[from] DirectoryError),
    /// The telemetry store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The export's token was revoked (or its scopes or sites changed) while it ran.
    #[error("the export's token was revoked while it ran")]
    Revoked,
}

/// A validated history export: `from <= observed_at < to`, of one site or all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryExport {
    pub site: Option<SiteId>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl HistoryExport {
    /// Checks the range: `from` before `to`, at most [`MAX_EXPORT_DAYS`] apart.
    pub fn new(
        site: Option<SiteId>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Self, ExportError> {
        if from >= to {
            return Err(invalid("/to", "`to` must be after `from`."));
        }
        if to - from > chrono::Duration::days(MAX_EXPORT_DAYS) {
            return Err(invalid(
                "/to",
                format!("An export covers at most {MAX_EXPORT_DAYS} days; ask for fewer."),
            ));
        }
        Ok(Self { site, from, to })
    }
}

/// A validated day totals export: the local days `from..=to`, of one site or all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaysExport {
    pub site: Option<SiteId>,
    pub from: NaiveDate,
    pub to: NaiveDate,
}

impl DaysExport {
    /// Checks the range: `from` not after `to`, at most [`MAX_EXPORT_DAYS`] days.
    pub fn new(site: Option<SiteId>, from: NaiveDate, to: NaiveDate) -> Result<Self, ExportError> {
        if from > to {
            return Err(invalid("/to", "`to` must not be before `from`."));
        }
        if (to - from).num_days() >= MAX_EXPORT_DAYS {
            return Err(invalid(
                "/to",
                format!("An export covers at most {MAX_EXPORT_DAYS} days; ask for fewer."),
            ));
        }
        Ok(Self { site, from, to })
    }
}

/// A validated sessions export: the sessions overlapping `[from, to)` (started before `to`,
/// ended after `from`, open ones always), of one site or all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionsExport {
    pub site: Option<SiteId>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl SessionsExport {
    /// Checks the range as a history export's ([`HistoryExport::new`]).
    pub fn new(
        site: Option<SiteId>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Self, ExportError> {
        let HistoryExport { site, from, to } = HistoryExport::new(site, from, to)?;
        Ok(Self { site, from, to })
    }
}

/// A [`SessionsExport`] with the store it reads and the account whose sessions it answers: each
/// mower's sessions newest first, as the sessions lists answer them.
pub struct SessionsSource {
    request: SessionsExport,
    store: Arc<dyn SessionStore>,
    account: AccountId,
}

#[async_trait]
impl ExportSource for SessionsSource {
    type Row = SessionRow;
    type Key = (DateTime<Utc>, MowerId);
    const NAME: &'static str = "sessions";

    async fn page(
        &self,
        _telemetry: &dyn TelemetryStore,
        mower: MowerId,
        after: Option<(DateTime<Utc>, MowerId)>,
        limit: usize,
    ) -> Result<Vec<SessionRow>, StoreError> {
        let query = SessionQuery {
            account: self.account,
            mowers: vec![mower],
            from: Some(self.request.from),
            to: Some(self.request.to),
            before: after,
            limit,
        };
        self.store
            .page(&query)
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))
    }

    fn key(row: &SessionRow) -> (DateTime<Utc>, MowerId) {
        (row.session.started_at, row.session.mower_id)
    }
}

fn invalid(pointer: &str, detail: impl Into<String>) -> ExportError {
    ExportError::Invalid(vec![(pointer.to_owned(), detail.into())])
}

/// One kind of export: how to read a page of one mower's rows.
#[async_trait]
pub trait ExportSource: Send + Sync + 'static {
    /// The rows exported.
    type Row: Send + 'static;
    /// Where a page ends: the next page of the same mower starts after it.
    type Key: Clone + Send + Sync + 'static;
    /// The export's name in the logs (`history`, `days`).
    const NAME: &'static str;

    /// At most `limit` rows of `mower` after `after` (from the start when `None`), in key order.
    async fn page(
        &self,
        telemetry: &dyn TelemetryStore,
        mower: MowerId,
        after: Option<Self::Key>,
        limit: usize,
    ) -> Result<Vec<Self::Row>, StoreError>;

    /// The key of a row.
    fn key(row: &Self::Row) -> Self::Key;
}

#[async_trait]
impl ExportSource for HistoryExport {
    type Row = HistoryRow;
    type Key = DateTime<Utc>;
    const NAME: &'static str = "history";

    async fn page(
        &self,
        telemetry: &dyn TelemetryStore,
        mower: MowerId,
        after: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<HistoryRow>, StoreError> {
        let window = TimeWindow {
            from: Some(self.from),
            to: Some(self.to),
            after,
            limit,
        };
        Ok(telemetry.history(mower, &window).await?.rows)
    }

    fn key(row: &HistoryRow) -> DateTime<Utc> {
        row.observed_at
    }
}

#[async_trait]
impl ExportSource for DaysExport {
    type Row = DayTotals;
    type Key = NaiveDate;
    const NAME: &'static str = "days";

    /// A mower's days of the range are few (at most [`MAX_EXPORT_DAYS`]): read at once, cut to
    /// the page after `after`.
    async fn page(
        &self,
        telemetry: &dyn TelemetryStore,
        mower: MowerId,
        after: Option<NaiveDate>,
        limit: usize,
    ) -> Result<Vec<DayTotals>, StoreError> {
        let from = match after {
            Some(day) => match day.succ_opt() {
                Some(next) if next <= self.to => next,
                _ => return Ok(Vec::new()),
            },
            None => self.from,
        };
        let mut days = telemetry.days(mower, from, self.to).await?;
        days.truncate(limit);
        Ok(days)
    }

    fn key(row: &DayTotals) -> NaiveDate {
        row.day
    }
}

/// The use case of fleet-wide exports (see the module).
#[derive(Clone)]
pub struct Exports {
    access: Access,
    telemetry: Arc<dyn TelemetryStore>,
    sessions: Option<Arc<dyn SessionStore>>,
    page_rows: usize,
}

impl Exports {
    pub fn new(access: Access, telemetry: Arc<dyn TelemetryStore>) -> Self {
        Self {
            access,
            telemetry,
            sessions: None,
            page_rows: EXPORT_PAGE_ROWS,
        }
    }

    /// Exports W8's sessions from `store` too ([`Exports::sessions`]).
    pub fn with_sessions(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(store);
        self
    }

    /// The same reading `rows` rows per page (tests: many pages of few rows).
    pub fn with_page_rows(mut self, rows: usize) -> Self {
        self.page_rows = rows.max(1);
        self
    }

    /// An export of `source` for `principal`, whose request came with the token `token`: the
    /// mowers it sees, of `site` when given (a site it cannot see is refused as not visible),
    /// in mower id order. Nothing is read of their rows until the first page is pulled.
    pub async fn start<S: ExportSource>(
        &self,
        principal: &Principal,
        token: TokenHash,
        site: Option<SiteId>,
        source: S,
    ) -> Result<Export<S>, ExportError> {
        if let Some(site) = site {
            self.access.visible_site(principal, site).await?;
        }
        let mut mowers: Vec<MowerId> = self
            .access
            .visible_mower_list(principal)
            .await?
            .into_iter()
            .filter(|m| site.is_none_or(|s| m.site_id == s))
            .map(|m| m.id)
            .collect();
        mowers.sort_unstable();
        tracing::info!(
            export = S::NAME,
            account_id = %principal.account_id,
            mowers = mowers.len(),
            "Export started."
        );
        Ok(Export {
            source,
            access: self.access.clone(),
            telemetry: Arc::clone(&self.telemetry),
            principal: principal.clone(),
            token,
            mowers,
            next_mower: 0,
            after: None,
            page_rows: self.page_rows,
            rows: 0,
            pages: 0,
            logged_at: Instant::now(),
            logged_pages: 0,
            state: State::Running,
        })
    }

    /// A history export ([`Exports::start`] of a [`HistoryExport`]).
    pub async fn history(
        &self,
        principal: &Principal,
        token: TokenHash,
        request: HistoryExport,
    ) -> Result<Export<HistoryExport>, ExportError> {
        self.start(principal, token, request.site, request).await
    }

    /// A sessions export ([`Exports::start`] of a [`SessionsExport`]); the store is unavailable
    /// when this use case has no sessions store.
    pub async fn sessions(
        &self,
        principal: &Principal,
        token: TokenHash,
        request: SessionsExport,
    ) -> Result<Export<SessionsSource>, ExportError> {
        let Some(store) = self.sessions.clone() else {
            let cause = "no sessions store is configured";
            return Err(ExportError::Store(StoreError::Unavailable(cause.into())));
        };
        let site = request.site;
        let source = SessionsSource {
            request,
            store,
            account: principal.account_id,
        };
        self.start(principal, token, site, source).await
    }

    /// A day totals export ([`Exports::start`] of a [`DaysExport`]).
    pub async fn days(
        &self,
        principal: &Principal,
        token: TokenHash,
        request: DaysExport,
    ) -> Result<Export<DaysExport>, ExportError> {
        self.start(principal, token, request.site, request).await
    }
}

/// Where an export is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    /// Every row was answered.
    Finished,
    /// Stopped by a revocation or a store failure (logged when it happened).
    Failed,
}

/// A running export (see the module): pull its pages with [`Export::next_page`].
pub struct Export<S: ExportSource> {
    source: S,
    access: Access,
    telemetry: Arc<dyn TelemetryStore>,
    principal: Principal,
    token: TokenHash,
    /// The mowers to export, in order; those before `next_mower` are done.
    mowers: Vec<MowerId>,
    next_mower: usize,
    /// The key the current mower's last page ended at.
    after: Option<S::Key>,
    page_rows: usize,
    rows: u64,
    pages: u64,
    logged_at: Instant,
    logged_pages: u64,
    state: State,
}

impl<S: ExportSource> Export<S> {
    /// The rows answered so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The next page of rows (never empty), or `None` once every mower's rows were answered.
    /// Checks the token first: revoked (or changed), the export stops with
    /// [`ExportError::Revoked`]. After an error it answers `None`.
    pub async fn next_page(&mut self) -> Result<Option<Vec<S::Row>>, ExportError> {
        if self.state != State::Running {
            return Ok(None);
        }
        match self.read_page().await {
            Ok(Some(rows)) => Ok(Some(rows)),
            Ok(None) => {
                self.state = State::Finished;
                tracing::info!(
                    export = S::NAME,
                    account_id = %self.principal.account_id,
                    rows = self.rows,
                    pages = self.pages,
                    "Export finished."
                );
                Ok(None)
            }
            Err(e) => {
                self.state = State::Failed;
                match &e {
                    ExportError::Revoked => tracing::info!(
                        export = S::NAME,
                        account_id = %self.principal.account_id,
                        rows = self.rows,
                        "Export stopped: its token was revoked."
                    ),
                    other => tracing::warn!(
                        export = S::NAME,
                        account_id = %self.principal.account_id,
                        rows = self.rows,
                        error = %chain(other),
                        "Export stopped: a read failed."
                    ),
                }
                Err(e)
            }
        }
    }

    async fn read_page(&mut self) -> Result<Option<Vec<S::Row>>, ExportError> {
        self.check_token().await?;
        while let Some(&mower) = self.mowers.get(self.next_mower) {
            let rows = self
                .source
                .page(
                    self.telemetry.as_ref(),
                    mower,
                    self.after.clone(),
                    self.page_rows,
                )
                .await?;
            self.pages += 1;
            if rows.len() < self.page_rows {
                // The mower's last page: the next read starts the next mower.
                self.next_mower += 1;
                self.after = None;
            } else {
                self.after = rows.last().map(S::key);
            }
            if !rows.is_empty() {
                self.rows += rows.len() as u64;
                self.progress();
                return Ok(Some(rows));
            }
        }
        Ok(None)
    }

    /// Whether the request's token still gives the export's principal, asked of the token
    /// store itself (a revocation through another replica counts too). A store that does not
    /// answer is no revocation: the page's own read says whether the store is back.
    async fn check_token(&self) -> Result<(), ExportError> {
        match self.access.principal_uncached(&self.token).await {
            Ok(Some(principal)) if principal == self.principal => Ok(()),
            Ok(_) => Err(ExportError::Revoked),
            Err(e) => {
                tracing::warn!(error = %chain(&e), "Could not check an export's token; going on.");
                Ok(())
            }
        }
    }

    /// Logs the rows so far every [`PROGRESS_EVERY`] or [`PROGRESS_EVERY_PAGES`] pages.
    fn progress(&mut self) {
        if self.pages - self.logged_pages < PROGRESS_EVERY_PAGES
            && self.logged_at.elapsed() < PROGRESS_EVERY
        {
            return;
        }
        self.logged_at = Instant::now();
        self.logged_pages = self.pages;
        tracing::info!(
            export = S::NAME,
            account_id = %self.principal.account_id,
            rows = self.rows,
            pages = self.pages,
            mowers_done = self.next_mower,
            mowers = self.mowers.len(),
            "Export progressing."
        );
    }
}

impl<S: ExportSource> Drop for Export<S> {
    /// An export dropped while it ran: its reader went away (the HTTP client disconnected).
    fn drop(&mut self) {
        if self.state == State::Running {
            tracing::info!(
                export = S::NAME,
                account_id = %self.principal.account_id,
                rows = self.rows,
                "Export stopped: its reader went away."
            );
        }
    }
}
