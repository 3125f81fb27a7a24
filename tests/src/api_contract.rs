//! The contract of what the REST API needs from a store, beyond ingestion: the directory as the
//! API manages it (`DirectoryAdmin`: pages, updates, deletes), API tokens (`TokenStore`), and the
//! telemetry reads (`history`, `track`, `days`). Every scenario is a `pub async fn` taking an
//! [`ApiStoreFactory`]; `tests/api_store_memory.rs` and `tests/api_store_postgres.rs` run them
//! against the memory store and PostgreSQL.

use crate::postgres::PostgresFactory;
use crate::support::{first_rows, trace_start, Fleet, RecordingBus, DEFAULT_THRESHOLD};
use crate::traces::ingest_clock;
use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use swath_application::ports::{
    Directory, DirectoryAdmin, DirectoryError, ListQuery, ManualClock, NewToken, TelemetryStore,
    TimeWindow, TokenError, TokenHash, TokenId, TokenQuery, TokenStore,
};
use swath_application::Ingest;
use swath_domain::{
    Account, AccountId, DropReason, Mower, MowerId, OrderKey, Principal, Scope, Site, SiteId,
    StateOutcome,
};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use uuid::Uuid;

/// One adapter's store, seen through every port the API uses.
#[derive(Clone)]
pub struct ApiStore {
    pub directory: Arc<dyn Directory>,
    pub admin: Arc<dyn DirectoryAdmin>,
    pub tokens: Arc<dyn TokenStore>,
    pub telemetry: Arc<dyn TelemetryStore>,
}

/// Makes a fresh, empty [`ApiStore`].
#[async_trait]
pub trait ApiStoreFactory: Send + Sync {
    async fn fresh(&self) -> ApiStore;
}

/// Memory stores, keeping `history_per_mower` rows of history per mower.
pub struct MemoryApiFactory {
    pub history_per_mower: usize,
}

#[async_trait]
impl ApiStoreFactory for MemoryApiFactory {
    async fn fresh(&self) -> ApiStore {
        let store = Arc::new(MemoryStore::new(MemoryStoreSettings {
            history_per_mower: self.history_per_mower,
        }));
        ApiStore {
            directory: store.clone(),
            admin: store.clone(),
            tokens: store.clone(),
            telemetry: store,
        }
    }
}

#[async_trait]
impl ApiStoreFactory for PostgresFactory {
    async fn fresh(&self) -> ApiStore {
        let store = Arc::new(self.fresh_store().await);
        ApiStore {
            directory: store.clone(),
            admin: store.clone(),
            tokens: store.clone(),
            telemetry: store,
        }
    }
}

/// A store with the shared fleet seeded, and the ingest use case on it.
pub struct ApiHarness {
    pub store: ApiStore,
    pub ingest: Arc<Ingest>,
    pub fleet: Fleet,
}

impl ApiHarness {
    pub async fn new(factory: &dyn ApiStoreFactory) -> Self {
        let store = factory.fresh().await;
        let fleet = Fleet::new();
        fleet
            .seed(store.directory.as_ref(), DEFAULT_THRESHOLD)
            .await;
        let ingest = Arc::new(Ingest::new(
            store.telemetry.clone(),
            Arc::new(RecordingBus::default()),
            Arc::new(ManualClock::new(ingest_clock())),
        ));
        Self {
            store,
            ingest,
            fleet,
        }
    }

    /// Parses and records one batch of JSON reports.
    pub async fn ingest(&self, reports: &[Value]) -> Vec<StateOutcome> {
        crate::support::ingest_json(&self.ingest, reports).await
    }

    /// A report of fleet mower `mower` at `trace_start() + ms` milliseconds; every third one
    /// without a position.
    pub fn report(&self, mower: usize, ms: i64) -> Value {
        let mower_id = self.fleet.mowers[mower];
        let mut report = json!({
            "mower_id": mower_id,
            "account_id": self.fleet.account_of(mower_id),
            "observed_at": at(ms).to_rfc3339(),
            "activity": "mowing",
            "blade_on": true,
            "battery_percent": 60,
        });
        if ms % 3 != 0 {
            report["position"] = json!({"lat": 52.5 + ms as f64 * 1e-7, "lon": 13.4});
        }
        report
    }
}

fn at(ms: i64) -> DateTime<Utc> {
    trace_start() + Duration::milliseconds(ms)
}

fn account(n: u128) -> Account {
    Account {
        id: AccountId(Uuid::from_u128(0xacc0 + n)),
        name: format!("Account {n}"),
    }
}

fn site(account: AccountId, n: u128, name: &str, order: i32) -> Site {
    Site {
        id: SiteId(Uuid::from_u128(0x5170 + n)),
        account_id: account,
        name: name.to_owned(),
        time_zone: chrono_tz::Europe::Berlin,
        display_order: order,
    }
}

fn mower(account: AccountId, site: SiteId, n: u128, name: &str, order: i32) -> Mower {
    Mower {
        id: MowerId(Uuid::from_u128(0x3030 + n)),
        account_id: account,
        site_id: site,
        name: name.to_owned(),
        model: "M1".to_owned(),
        serial: format!("SN{n}"),
        display_order: order,
        blade_threshold_ms: DEFAULT_THRESHOLD,
    }
}

/// Pages through a list with `limit`, returning the ids in order.
async fn walk<T, F, Fut>(limit: usize, key: impl Fn(&T) -> OrderKey, fetch: F) -> Vec<T>
where
    F: Fn(Option<OrderKey>, usize) -> Fut,
    Fut: std::future::Future<Output = Vec<T>>,
{
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = fetch(after.clone(), limit).await;
        assert!(page.len() <= limit);
        let done = page.len() < limit;
        after = page.last().map(&key);
        all.extend(page);
        if done {
            return all;
        }
    }
}

/// Sites and mowers list in `(display_order, name byte by byte, id)` order, page by keyset
/// without repeating or skipping, keep to their account, and honour a site filter before the
/// limit.
pub async fn lists_page_in_order(factory: &dyn ApiStoreFactory) {
    let store = factory.fresh().await;
    let (a, b) = (account(1), account(2));
    store.directory.create_account(a.clone()).await.unwrap();
    store.directory.create_account(b.clone()).await.unwrap();
    // Byte order: uppercase before lowercase, ASCII before the rest.
    let names = ["beta", "Beta", "alpha", "Ärger", "Zed", "beta"];
    for (n, name) in names.iter().enumerate() {
        let order = if n == 4 { -1 } else { 0 };
        store
            .directory
            .create_site(site(a.id, n as u128, name, order))
            .await
            .unwrap();
    }
    store
        .directory
        .create_site(site(b.id, 99, "alpha", 0))
        .await
        .unwrap();
    let query = |after, limit| {
        let admin = store.admin.clone();
        async move {
            admin
                .list_sites(&ListQuery {
                    account: a.id,
                    sites: None,
                    after,
                    limit,
                })
                .await
                .unwrap()
        }
    };
    let listed: Vec<String> = walk(2, Site::order_key, query)
        .await
        .into_iter()
        .map(|s| format!("{}:{}", s.name, s.id.0.as_u128() - 0x5170))
        .collect();
    assert_eq!(
        listed,
        ["Zed:4", "Beta:1", "alpha:2", "beta:0", "beta:5", "Ärger:3"],
        "display order, then name byte by byte, then id; account A only"
    );

    let s0 = SiteId(Uuid::from_u128(0x5170));
    let s4 = SiteId(Uuid::from_u128(0x5174));
    for (n, (site_id, name, order)) in [
        (s0, "m-b", 1),
        (s4, "m-a", 1),
        (s0, "m-c", 0),
        (s4, "m-d", 2),
        (s0, "m-a", 1),
    ]
    .into_iter()
    .enumerate()
    {
        store
            .directory
            .create_mower(mower(a.id, site_id, n as u128, name, order))
            .await
            .unwrap();
    }
    let only_s4 = |after, limit| {
        let admin = store.admin.clone();
        async move {
            admin
                .list_mowers(&ListQuery {
                    account: a.id,
                    sites: Some(vec![s4]),
                    after,
                    limit,
                })
                .await
                .unwrap()
        }
    };
    let listed: Vec<String> = walk(1, Mower::order_key, only_s4)
        .await
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(
        listed,
        ["m-a", "m-d"],
        "the site filter comes before the limit"
    );
    let all = store.directory.mowers(a.id).await.unwrap();
    let names: Vec<(String, u128)> = all
        .iter()
        .map(|m| (m.name.clone(), m.id.0.as_u128() - 0x3030))
        .collect();
    assert_eq!(
        names,
        [
            ("m-c".to_owned(), 2),
            ("m-a".to_owned(), 1),
            ("m-a".to_owned(), 4),
            ("m-b".to_owned(), 0),
            ("m-d".to_owned(), 3)
        ]
    );
    let none_of_b = store
        .admin
        .list_mowers(&ListQuery {
            account: b.id,
            sites: None,
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert!(none_of_b.is_empty());

    let ids = [
        MowerId(Uuid::from_u128(0x3034)),
        MowerId(Uuid::new_v4()),
        MowerId(Uuid::from_u128(0x3030)),
    ];
    let by_id: Vec<u128> = store
        .admin
        .mowers_by_id(&ids)
        .await
        .unwrap()
        .iter()
        .map(|m| m.id.0.as_u128() - 0x3030)
        .collect();
    assert_eq!(by_id, [0, 4], "mower id order, unknown ids left out");
}

/// Updates replace the row of the same id and account only; a site with mowers is not deleted;
/// a mower moves only to a site of its account.
pub async fn updates_and_deletes_keep_to_their_account(factory: &dyn ApiStoreFactory) {
    let store = factory.fresh().await;
    let (a, b) = (account(1), account(2));
    store.directory.create_account(a.clone()).await.unwrap();
    store.directory.create_account(b.clone()).await.unwrap();
    let s1 = site(a.id, 1, "One", 0);
    let s2 = site(a.id, 2, "Two", 1);
    let sb = site(b.id, 3, "B", 0);
    for s in [&s1, &s2, &sb] {
        store.directory.create_site(s.clone()).await.unwrap();
    }
    let m = mower(a.id, s1.id, 1, "Mower", 0);
    store.directory.create_mower(m.clone()).await.unwrap();

    let mut renamed = s1.clone();
    renamed.name = "Uno".into();
    renamed.time_zone = chrono_tz::Pacific::Auckland;
    renamed.display_order = 7;
    store.admin.update_site(renamed.clone()).await.unwrap();
    assert_eq!(store.admin.site(s1.id).await.unwrap(), Some(renamed));
    let mut stolen = sb.clone();
    stolen.account_id = a.id;
    stolen.name = "Mine".into();
    assert!(matches!(
        store.admin.update_site(stolen).await,
        Err(DirectoryError::NotFound(_))
    ));
    assert_eq!(store.admin.site(sb.id).await.unwrap(), Some(sb.clone()));

    let mut moved = m.clone();
    moved.site_id = s2.id;
    moved.name = "Moved".into();
    moved.blade_threshold_ms = 3_600_000;
    store.admin.update_mower(moved.clone()).await.unwrap();
    assert_eq!(
        store.directory.mower(m.id).await.unwrap(),
        Some(moved.clone())
    );
    let mut to_b = moved.clone();
    to_b.site_id = sb.id;
    assert!(matches!(
        store.admin.update_mower(to_b).await,
        Err(DirectoryError::NotFound(_))
    ));
    let mut foreign = moved.clone();
    foreign.account_id = b.id;
    foreign.site_id = sb.id;
    assert!(matches!(
        store.admin.update_mower(foreign).await,
        Err(DirectoryError::NotFound(_))
    ));
    assert_eq!(store.directory.mower(m.id).await.unwrap(), Some(moved));

    assert!(matches!(
        store.admin.delete_site(a.id, s2.id).await,
        Err(DirectoryError::InUse(_))
    ));
    assert!(matches!(
        store.admin.delete_site(b.id, s1.id).await,
        Err(DirectoryError::NotFound(_))
    ));
    store.admin.delete_site(a.id, s1.id).await.unwrap();
    assert_eq!(store.admin.site(s1.id).await.unwrap(), None);
    assert!(matches!(
        store.admin.delete_mower(b.id, m.id).await,
        Err(DirectoryError::NotFound(_))
    ));
    store.admin.delete_mower(a.id, m.id).await.unwrap();
    assert_eq!(store.directory.mower(m.id).await.unwrap(), None);
    assert!(matches!(
        store.admin.delete_mower(a.id, m.id).await,
        Err(DirectoryError::NotFound(_))
    ));
    store.admin.delete_site(a.id, s2.id).await.unwrap();
}

/// Deleting a mower removes every telemetry row of it, also while batches of it are being
/// ingested; its later states are dropped as `unknown_mower`.
pub async fn a_deleted_mower_takes_its_telemetry_along(factory: &dyn ApiStoreFactory) {
    let h = ApiHarness::new(factory).await;
    let (m0, m1) = (h.fleet.mowers[0], h.fleet.mowers[1]);
    let first: Vec<Value> = (0..50)
        .flat_map(|i| [h.report(0, i * 1000), h.report(1, i * 1000)])
        .collect();
    h.ingest(&first).await;

    // Batches keep coming while the mower is deleted.
    let writer = {
        let ingest = h.ingest.clone();
        let batches: Vec<Vec<Value>> = (0..20)
            .map(|b| {
                (0..10)
                    .map(|i| h.report(0, 50_000 + (b * 10 + i) * 1000))
                    .collect()
            })
            .collect();
        tokio::spawn(async move {
            for batch in batches {
                let parsed = batch
                    .iter()
                    .map(|r| ingest.parse(r.to_string().as_bytes()))
                    .collect();
                ingest.record_states(parsed).await.expect("batch");
            }
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    h.store
        .admin
        .delete_mower(h.fleet.account_a, m0)
        .await
        .unwrap();
    writer.await.unwrap();

    let rows = h.store.telemetry.export(&[m0]).await.unwrap();
    assert_eq!(
        rows,
        Default::default(),
        "no row of the deleted mower is left"
    );
    let kept = h.store.telemetry.export(&[m1]).await.unwrap();
    assert_eq!(kept.history.len(), 50, "the other mower keeps its rows");
    assert_eq!(
        h.ingest(&[h.report(0, 999_000)]).await,
        vec![StateOutcome::Dropped(DropReason::UnknownMower)]
    );
}

/// A site deleted while a mower is added to it: either the site stays with the mower, or it is
/// gone and the mower was refused. Never a mower on a deleted site.
pub async fn a_site_is_never_deleted_under_a_new_mower(factory: &dyn ApiStoreFactory) {
    let store = factory.fresh().await;
    let a = account(1);
    store.directory.create_account(a.clone()).await.unwrap();
    for n in 0..20u128 {
        let s = site(a.id, n, "S", 0);
        store.directory.create_site(s.clone()).await.unwrap();
        let m = mower(a.id, s.id, n, "M", 0);
        let (add, delete) = tokio::join!(
            {
                let directory = store.directory.clone();
                let m = m.clone();
                async move { directory.create_mower(m).await }
            },
            store.admin.delete_site(a.id, s.id)
        );
        match (add, delete) {
            (Ok(()), Err(DirectoryError::InUse(_))) => {
                assert!(store.admin.site(s.id).await.unwrap().is_some());
                assert!(store.directory.mower(m.id).await.unwrap().is_some());
            }
            (Err(DirectoryError::NotFound(_)), Ok(())) => {
                assert!(store.admin.site(s.id).await.unwrap().is_none());
                assert!(store.directory.mower(m.id).await.unwrap().is_none());
            }
            other => panic!("round {n}: {other:?}"),
        }
    }
}

fn hash(n: u8) -> TokenHash {
    TokenHash(format!("{n:064x}"))
}

/// Tokens: stored by hash, resolved, listed within a principal's powers by id, revoked.
pub async fn tokens_are_listed_within_powers_and_revoked(factory: &dyn ApiStoreFactory) {
    let store = factory.fresh().await;
    let (a, b) = (account(1), account(2));
    store.directory.create_account(a.clone()).await.unwrap();
    store.directory.create_account(b.clone()).await.unwrap();
    let (s1, s2) = (site(a.id, 1, "One", 0), site(a.id, 2, "Two", 0));
    store.directory.create_site(s1.clone()).await.unwrap();
    store.directory.create_site(s2.clone()).await.unwrap();
    let principal = |account: AccountId, scopes: &[Scope], sites: Option<Vec<SiteId>>| Principal {
        account_id: account,
        scopes: scopes.to_vec(),
        sites,
    };
    let all = [Scope::Read, Scope::Write, Scope::Admin];
    let tokens = [
        principal(a.id, &all, None),
        principal(a.id, &[Scope::Read], None),
        principal(a.id, &all, Some(vec![s1.id])),
        principal(a.id, &[Scope::Read], Some(vec![s1.id, s2.id])),
        principal(a.id, &[Scope::Read], Some(vec![s1.id])),
        principal(b.id, &all, None),
    ];
    let ids: Vec<TokenId> = (0..tokens.len())
        .map(|n| TokenId(Uuid::from_u128(0x70c0 + n as u128)))
        .collect();
    for (n, p) in tokens.iter().enumerate() {
        store
            .tokens
            .create_token(
                hash(n as u8),
                NewToken {
                    id: ids[n],
                    name: format!("token {n}"),
                    principal: p.clone(),
                },
            )
            .await
            .unwrap();
    }
    assert_eq!(
        store.tokens.principal(&hash(3)).await.unwrap(),
        Some(tokens[3].clone())
    );
    assert_eq!(store.tokens.principal(&hash(99)).await.unwrap(), None);
    assert!(matches!(
        store
            .tokens
            .create_token(
                hash(0),
                NewToken {
                    id: TokenId::new(),
                    name: String::new(),
                    principal: tokens[0].clone()
                }
            )
            .await,
        Err(TokenError::Conflict)
    ));
    assert!(matches!(
        store
            .tokens
            .create_token(
                hash(50),
                NewToken {
                    id: ids[0],
                    name: String::new(),
                    principal: tokens[0].clone()
                }
            )
            .await,
        Err(TokenError::Conflict)
    ));
    // A store that can check the account refuses an unknown one; none stores it elsewhere.
    match store
        .tokens
        .create_token(
            hash(51),
            NewToken {
                id: TokenId::new(),
                name: String::new(),
                principal: principal(AccountId::new(), &[Scope::Read], None),
            },
        )
        .await
    {
        Ok(()) | Err(TokenError::UnknownAccount(_)) => {}
        Err(e) => panic!("{e}"),
    }

    let listed = |within: Principal, limit: usize| {
        let tokens = store.tokens.clone();
        async move {
            let mut all = Vec::new();
            let mut after = None;
            loop {
                let page = tokens
                    .tokens(&TokenQuery {
                        within: within.clone(),
                        after,
                        limit,
                    })
                    .await
                    .unwrap();
                let done = page.len() < limit;
                after = page.last().map(|t| t.id);
                all.extend(page.into_iter().map(|t| t.id.0.as_u128() - 0x70c0));
                if done {
                    return all;
                }
            }
        }
    };
    assert_eq!(listed(tokens[0].clone(), 2).await, [0, 1, 2, 3, 4]);
    assert_eq!(listed(tokens[2].clone(), 1).await, [2, 4]);
    assert_eq!(listed(tokens[1].clone(), 10).await, [1, 3, 4]);
    assert_eq!(listed(tokens[5].clone(), 10).await, [5]);

    let info = store.tokens.token(ids[3]).await.unwrap().unwrap();
    assert_eq!(info.name, "token 3");
    assert_eq!(info.principal, tokens[3]);
    // By its hash: the same token (a live page's sign-in names the session by this id).
    let by_hash = store.tokens.token_by_hash(&hash(3)).await.unwrap();
    assert_eq!(by_hash, Some(info));
    assert_eq!(store.tokens.token_by_hash(&hash(99)).await.unwrap(), None);
    assert!(store.tokens.revoke_token(ids[3]).await.unwrap());
    assert_eq!(store.tokens.token_by_hash(&hash(3)).await.unwrap(), None);
    assert_eq!(store.tokens.principal(&hash(3)).await.unwrap(), None);
    assert_eq!(store.tokens.token(ids[3]).await.unwrap(), None);
    assert!(!store.tokens.revoke_token(ids[3]).await.unwrap());
}

/// History and track answer exactly the rows of the window: `from` inclusive, `to` exclusive,
/// strictly after the cursor, in `observed_at` order, at most `limit`; days `from..=to`.
pub async fn reads_answer_the_window(factory: &dyn ApiStoreFactory) {
    let h = ApiHarness::new(factory).await;
    let reports: Vec<Value> = (0..60)
        .map(|i| h.report(0, i * 1000 + (i % 7) * 13))
        .chain((0..10).map(|i| h.report(1, i * 1000)))
        .collect();
    h.ingest(&reports).await;
    let m = h.fleet.mowers[0];
    let rows = h.store.telemetry.export(&[m]).await.unwrap();
    let windows = [
        (None, None, None, 1000),
        (Some(at(10_000)), Some(at(20_000)), None, 1000),
        (Some(at(10_013)), Some(at(20_000)), None, 3),
        (Some(at(10_000)), None, Some(at(15_000)), 4),
        (None, Some(at(30_000)), Some(at(29_000)), 10),
        (Some(at(50_000)), Some(at(40_000)), None, 10),
        (
            Some(at(5_000) + Duration::nanoseconds(1)),
            Some(at(9_065) + Duration::nanoseconds(1)),
            None,
            10,
        ),
        (Some(at(20_000)), None, Some(at(5_000)), 2),
    ];
    for (from, to, after, limit) in windows {
        let window = TimeWindow {
            from,
            to,
            after,
            limit,
        };
        let inside = |t: DateTime<Utc>| {
            from.is_none_or(|f| t >= f) && to.is_none_or(|u| t < u) && after.is_none_or(|a| t > a)
        };
        let expected: Vec<_> = rows
            .history
            .iter()
            .filter(|r| inside(r.observed_at))
            .take(limit)
            .cloned()
            .collect();
        let history = h.store.telemetry.history(m, &window).await.unwrap().rows;
        assert_eq!(history, expected, "{window:?}");
        let expected: Vec<_> = rows
            .positions
            .iter()
            .filter(|r| inside(r.observed_at))
            .take(limit)
            .cloned()
            .collect();
        let track = h.store.telemetry.track(m, &window).await.unwrap().rows;
        assert_eq!(track, expected, "{window:?}");
    }
    let window = first_rows(10);
    let unknown = h.store.telemetry.history(h.fleet.unknown_mower, &window);
    let unknown = unknown.await.unwrap();
    assert!(unknown.rows.is_empty());
    assert_eq!(unknown.oldest_kept, None, "nothing stored, nothing removed");

    // Days: the seeded mower 0 is in Berlin; trace_start is 22:00 local, so the trace spans two
    // local days.
    let day = |s: &str| s.parse::<NaiveDate>().unwrap();
    let all_days = h
        .store
        .telemetry
        .days(m, day("2026-01-01"), day("2026-12-31"))
        .await
        .unwrap();
    assert_eq!(all_days, rows.days);
    let one = h
        .store
        .telemetry
        .days(m, all_days[0].day, all_days[0].day)
        .await
        .unwrap();
    assert_eq!(one, rows.days[..1]);
    let inverted = h
        .store
        .telemetry
        .days(m, day("2026-12-31"), day("2026-01-01"))
        .await
        .unwrap();
    assert!(inverted.is_empty());
}

/// Paging through 10 000 history rows with a keyset cursor while ingestion goes on returns each
/// of them exactly once, in order. Every page is read while a batch is being ingested: newer rows,
/// and rows between stored ones ahead of the cursor; those are seen once too, never a row twice.
pub async fn paging_while_ingesting_returns_each_row_once(factory: &dyn ApiStoreFactory) {
    const ROWS: i64 = 10_000;
    const PAGE: usize = 500;
    let h = ApiHarness::new(factory).await;
    let m = h.fleet.mowers[0];
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(1000) {
        let batch: Vec<Value> = chunk.iter().map(|i| h.report(0, i * 100)).collect();
        h.ingest(&batch).await;
    }
    let mut seen: Vec<DateTime<Utc>> = Vec::new();
    let mut inserted_ahead: Vec<DateTime<Utc>> = Vec::new();
    let mut after = None;
    let mut round = 0i64;
    loop {
        // Newer rows, and rows half-way between stored rows well ahead of the cursor.
        let next = seen.len() as i64;
        let mut batch: Vec<Value> = (0..20)
            .map(|i| h.report(0, (ROWS + round * 20 + i) * 100))
            .collect();
        for k in 0..5 {
            let index = next + 1_000 + k * 37;
            if index < ROWS {
                batch.push(h.report(0, index * 100 + 50));
                inserted_ahead.push(at(index * 100 + 50));
            }
        }
        let window = TimeWindow {
            from: None,
            to: None,
            after,
            limit: PAGE + 1,
        };
        let (page, outcomes) =
            tokio::join!(h.store.telemetry.history(m, &window), h.ingest(&batch));
        assert!(outcomes.iter().all(|o| *o == StateOutcome::Stored));
        round += 1;
        let page = page.unwrap().rows;
        let more = page.len() > PAGE;
        let page = &page[..page.len().min(PAGE)];
        seen.extend(page.iter().map(|r| r.observed_at));
        after = page.last().map(|r| r.observed_at);
        // Stop once the rows stored before the walk are behind us (new ones keep coming).
        if !more || seen.last().is_some_and(|t| *t >= at(ROWS * 100)) {
            break;
        }
    }
    assert!(round >= 20, "{round} pages");
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing: no row twice"
    );
    let initial: Vec<DateTime<Utc>> = seen
        .iter()
        .copied()
        .filter(|t| *t < at(ROWS * 100) && (*t - trace_start()).num_milliseconds() % 100 == 0)
        .collect();
    let expected: Vec<DateTime<Utc>> = (0..ROWS).map(|i| at(i * 100)).collect();
    assert_eq!(
        initial, expected,
        "each row stored before the walk once, in order"
    );
    for t in &inserted_ahead {
        assert!(
            seen.binary_search(t).is_ok(),
            "a row stored ahead of the cursor is seen: {t}"
        );
    }
}
