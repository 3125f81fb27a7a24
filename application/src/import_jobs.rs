//! Imports made over the API (`POST /v1/imports`): the same NDJSON import as `swath import`
//! ([`import_lines`]) on behalf of a token's principal, with a record of each import that its
//! importer can read: updated after each batch, listed from the moment it starts
//! ([`Imports::list`], so a client still sending a long body can follow it from another
//! connection), and answered by id once the body is read (its id is logged when it starts).
//!
//! Like `swath import`, an import stores history: the events W6 raises are stored (the events
//! feed) but not published on the bus, and virtual zones (W7) are not evaluated, so an import of
//! the past pages no one (decision 105). The records are kept in this process's memory, the last
//! [`KEPT_IMPORTS`] of each account (decision 106; per account since issue 35, so that one
//! tenant's imports never push another's out).

use crate::import_lines::{import_lines, ImportError, ImportSummary, Importer};
use crate::ingest::Ingest;
use crate::ports::{chain, BusError, Clock, TelemetryStore, TokenHash};
use crate::publish_only::{PublishOnly, Publisher};
use crate::visibility::Access;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use swath_domain::Principal;
use swath_domain::{AccountId, SiteId};
use tokio::io::AsyncBufRead;
use uuid::Uuid;

/// The import records a process keeps per account: the account's oldest finished ones evicted
/// first.
pub const KEPT_IMPORTS: usize = 100;

/// Where an import is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportStatus {
    /// Lines are being read and stored; the counts grow after each batch.
    Running,
    /// Every line was read; the counts are final.
    Done,
    /// The import stopped (`error` says why); what it stored before stays stored, and importing
    /// the same lines again is safe.
    Failed,
}

/// Why an import stopped, for people (the causes are logged, never shown: a store's error may
/// name its internals).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportFailure {
    /// The input could not be read to its end (the client went away, or sent more than
    /// allowed): the reader's error.
    Input(String),
    /// The store or the directory failed; nothing of the failed batch is stored.
    Store,
    /// The importer's token was revoked while the import ran; nothing after its last stored
    /// batch is stored.
    TokenRevoked,
}

/// One import, as its importer sees it.
#[derive(Clone, Debug)]
pub struct ImportRecord {
    pub id: Uuid,
    pub status: ImportStatus,
    pub started_at: DateTime<Utc>,
    /// When it ended (done or failed).
    pub finished_at: Option<DateTime<Utc>>,
    /// The counts and the first refused lines, so far.
    pub summary: ImportSummary,
    /// Why it failed.
    pub failure: Option<ImportFailure>,
    account_id: AccountId,
    /// The importer's sites (`None`: every site of the account).
    sites: Option<Vec<SiteId>>,
}

impl ImportRecord {
    /// Whether `principal` may read this record: a principal of the same account that sees at
    /// least every site the importer saw (its refused lines may name what those sites hold).
    fn visible_to(&self, principal: &Principal) -> bool {
        principal.account_id == self.account_id
            && match (&principal.sites, &self.sites) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(theirs), Some(ours)) => ours.iter().all(|s| theirs.contains(s)),
            }
    }
}

/// The import use case of the API.
#[derive(Clone)]
pub struct Imports {
    access: Access,
    ingest: Arc<Ingest>,
    clock: Arc<dyn Clock>,
    records: Arc<Mutex<Kept>>,
}

/// The records kept, per account (each its last [`KEPT_IMPORTS`]), and whose each id is.
#[derive(Default)]
struct Kept {
    by_account: HashMap<AccountId, VecDeque<ImportRecord>>,
    accounts: HashMap<Uuid, AccountId>,
}

impl Kept {
    fn find(&mut self, id: Uuid) -> Option<&mut ImportRecord> {
        let account = self.accounts.get(&id)?;
        self.by_account
            .get_mut(account)?
            .iter_mut()
            .find(|r| r.id == id)
    }
}

impl Imports {
    /// Imports into `telemetry` through an ingest use case of their own, whose bus publishes
    /// nothing (see the module).
    pub fn new(access: Access, telemetry: Arc<dyn TelemetryStore>, clock: Arc<dyn Clock>) -> Self {
        let ingest = Ingest::new(
            telemetry,
            Arc::new(PublishOnly(Unpublished)),
            Arc::clone(&clock),
        );
        Self {
            access,
            ingest: Arc::new(ingest),
            clock,
            records: Arc::default(),
        }
    }

    /// Imports `input` on behalf of `principal`, the principal of `token`: a record is made at
    /// once (its id logged), updated after each batch, and answered when the input is read to its
    /// end or the import failed (or `token` was revoked meanwhile).
    pub async fn run<R: AsyncBufRead + Unpin>(
        &self,
        principal: &Principal,
        token: &TokenHash,
        input: R,
    ) -> ImportRecord {
        let id = Uuid::now_v7();
        self.keep(ImportRecord {
            id,
            status: ImportStatus::Running,
            started_at: self.clock.now(),
            finished_at: None,
            summary: ImportSummary::default(),
            failure: None,
            account_id: principal.account_id,
            sites: principal.sites.clone(),
        });
        tracing::info!(import_id = %id, account_id = %principal.account_id, "Import started.");
        let importer = Importer::Principal {
            access: &self.access,
            principal,
            token,
        };
        let result = import_lines(&self.ingest, importer, input, |summary, _| {
            self.update(id, |r| r.summary = summary.clone());
        })
        .await;
        let finished_at = self.clock.now();
        let (status, failure) = match &result {
            Ok(summary) => {
                tracing::info!(import_id = %id, account_id = %principal.account_id, reports = summary.reports, stored = summary.stored, "Import done.");
                (ImportStatus::Done, None)
            }
            Err(e) => {
                tracing::warn!(import_id = %id, account_id = %principal.account_id, error = %chain(e), "Import failed; what it stored before stays stored.");
                let failure = match e {
                    ImportError::Read(e) => ImportFailure::Input(e.to_string()),
                    ImportError::Revoked { .. } => ImportFailure::TokenRevoked,
                    ImportError::Store { .. } | ImportError::Directory { .. } => {
                        ImportFailure::Store
                    }
                };
                (ImportStatus::Failed, Some(failure))
            }
        };
        let mut record = None;
        self.update(id, |r| {
            if let Ok(summary) = result {
                r.summary = summary;
            }
            r.status = status;
            r.failure = failure.clone();
            r.finished_at = Some(finished_at);
            record = Some(r.clone());
        });
        // Evicted while it ran (more than `KEPT_IMPORTS` of its account running at once): what it had
        // counted is answered all the same.
        record.unwrap_or_else(|| ImportRecord {
            id,
            status,
            started_at: finished_at,
            finished_at: Some(finished_at),
            summary: ImportSummary::default(),
            failure,
            account_id: principal.account_id,
            sites: principal.sites.clone(),
        })
    }

    /// The record of import `id`, when `principal` may read it; `None` for an unknown id, one
    /// evicted, one made by another replica, another account's, or one of sites the principal
    /// does not see, alike.
    pub fn get(&self, principal: &Principal, id: Uuid) -> Option<ImportRecord> {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records
            .find(id)
            .filter(|r| r.visible_to(principal))
            .cloned()
    }

    /// The records `principal` may read, newest first: those started before the import `before`
    /// (the whole list when `None`), at most `limit`. Running imports are listed with their counts
    /// so far, so a client still sending a long body can follow it from another connection.
    pub fn list(
        &self,
        principal: &Principal,
        before: Option<Uuid>,
        limit: usize,
    ) -> Vec<ImportRecord> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let Some(account) = records.by_account.get(&principal.account_id) else {
            return Vec::new();
        };
        // Ids are UUIDv7, made when each import starts: their order is the imports' order.
        let mut visible: Vec<ImportRecord> = account
            .iter()
            .filter(|r| r.visible_to(principal) && before.is_none_or(|b| r.id < b))
            .cloned()
            .collect();
        visible.sort_by_key(|r| std::cmp::Reverse(r.id));
        visible.truncate(limit);
        visible
    }

    /// Keeps `record`, evicting its account's oldest finished record (or, when all run, its
    /// oldest) beyond [`KEPT_IMPORTS`]: another account's records are never evicted for it.
    fn keep(&self, record: ImportRecord) {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let Kept {
            by_account,
            accounts,
        } = &mut *records;
        let kept = by_account.entry(record.account_id).or_default();
        if kept.len() >= KEPT_IMPORTS {
            let oldest_finished = kept
                .iter()
                .position(|r| r.status != ImportStatus::Running)
                .unwrap_or(0);
            if let Some(evicted) = kept.remove(oldest_finished) {
                accounts.remove(&evicted.id);
            }
        }
        accounts.insert(record.id, record.account_id);
        kept.push_back(record);
    }

    fn update(&self, id: Uuid, change: impl FnOnce(&mut ImportRecord)) {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(record) = records.find(id) {
            change(record);
        }
    }
}

/// The bus of an import's ingest: a publication goes nowhere (an import of history pages no
/// one); subscriptions are refused, nothing subscribes to it.
struct Unpublished;

impl Publisher for Unpublished {
    const REFUSAL: &'static str = "an import's bus publishes nothing to subscribe to";

    fn publish(&self, _: &str, _: Bytes, _: Option<String>) -> Result<(), BusError> {
        Ok(())
    }
}
