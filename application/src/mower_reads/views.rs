//! A mower as every read of it shows it: its directory fields, its site's name, its latest state
//! (of the principal's account only) and its availability.

use super::{MowerReads, MowerReadsError};
use crate::availability::{availability, Availability, OfflineReason};
use crate::visibility::of_account;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use swath_domain::{LatestRow, Mower, MowerId, Principal, SiteId};

/// A mower with what a read shows beside it.
#[derive(Clone, Debug)]
pub struct MowerView {
    pub mower: Mower,
    /// Its site's name (empty if the site went away meanwhile).
    pub site_name: String,
    /// Its latest state of the principal's account; `None` while it has not reported.
    pub latest: Option<LatestRow>,
    pub availability: Availability,
}

impl MowerView {
    /// A mower just added: no state yet, so not online.
    pub fn unreported(mower: Mower, site_name: String) -> Self {
        Self {
            mower,
            site_name,
            latest: None,
            availability: never_reported(),
        }
    }
}

impl MowerReads {
    /// The latest states of `mowers` that were written for `principal`'s account, by mower: the
    /// one account filter of the latest-state read (decision 134). A replica may keep, for a
    /// second, the last state of a deleted mower whose id another account has taken since; such
    /// a row is never answered.
    pub(crate) async fn latest_states(
        &self,
        principal: &Principal,
        mowers: &[MowerId],
    ) -> Result<HashMap<MowerId, LatestRow>, MowerReadsError> {
        let asked: HashSet<MowerId> = mowers.iter().copied().collect();
        let rows = self.telemetry.latest(mowers).await?;
        let rows = rows.into_iter().filter(|row| asked.contains(&row.mower_id));
        Ok(of_account(principal, rows)
            .into_iter()
            .map(|row| (row.mower_id, row))
            .collect())
    }

    /// The mower `id` as a read shows it, if `principal` may see it.
    pub async fn view(
        &self,
        principal: &Principal,
        id: MowerId,
    ) -> Result<MowerView, MowerReadsError> {
        let mower = self.access.visible_mower(principal, id).await?;
        let mut views = self.views(principal, vec![mower]).await?;
        Ok(views.remove(0))
    }

    /// `mowers`, found visible to `principal` (a page of its list, a mower just changed), as
    /// every read shows them: one read of their latest states, one of the account's sites (their
    /// names) and one of their open `offline` alerts, whatever the number of mowers.
    pub async fn views(
        &self,
        principal: &Principal,
        mowers: Vec<Mower>,
    ) -> Result<Vec<MowerView>, MowerReadsError> {
        let account = principal.account_id;
        let ids: Vec<MowerId> = mowers.iter().map(|m| m.id).collect();
        let latest = self.latest_states(principal, &ids).await?;
        let sites: HashMap<SiteId, String> = self
            .directory
            .sites(account)
            .await?
            .into_iter()
            .map(|s| (s.id, s.name))
            .collect();
        let seen: Vec<(MowerId, Option<DateTime<Utc>>)> = ids
            .iter()
            .map(|m| (*m, latest.get(m).map(|row| row.last_seen_at)))
            .collect();
        let feed = self.notifications.as_ref().map(|n| n.feed.as_ref());
        let available = availability(feed, account, &seen).await?;
        Ok(mowers
            .into_iter()
            .map(|mower| MowerView {
                site_name: sites.get(&mower.site_id).cloned().unwrap_or_default(),
                latest: latest.get(&mower.id).cloned(),
                availability: available
                    .get(&mower.id)
                    .cloned()
                    .unwrap_or_else(never_reported),
                mower,
            })
            .collect())
    }
}

/// The availability of a mower that never reported.
fn never_reported() -> Availability {
    Availability {
        online: false,
        last_seen_at: None,
        offline_reason: Some(OfflineReason::NeverReported),
        offline_since: None,
    }
}

#[cfg(test)]
mod tests {
    //! The account filter of the latest-state read (decision 134): a mower id changes hands
    //! (account A deletes it, account B creates it), and a store or a replica's cache still
    //! answers A's last state for it. B must never be shown that row.

    use super::*;
    use crate::ports::{
        Directory, DirectoryAdmin, DirectoryError, ListQuery, ManualClock, NewToken, StoreError,
        TelemetryBatch, TelemetryStore, TimeWindow, TokenError, TokenHash, TokenId, TokenInfo,
        TokenQuery, TokenStore, WindowRows,
    };
    use crate::visibility::{Access, Revocations};
    use async_trait::async_trait;
    use chrono::{NaiveDate, TimeZone};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use swath_domain::{
        Account, AccountId, DayTotals, HealthTotals, HistoryRow, MowerSnapshot, PositionRow, Scope,
        Site, StateReport, TelemetryRows,
    };

    const NOT_READ: &str = "not read by the latest-state reads";

    /// One site and one mower of account B.
    struct OneMower {
        site: Site,
        mower: Mower,
    }

    #[async_trait]
    impl Directory for OneMower {
        async fn create_account(&self, _: Account) -> Result<(), DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn create_site(&self, _: Site) -> Result<(), DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn create_mower(&self, _: Mower) -> Result<(), DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn account(&self, _: AccountId) -> Result<Option<Account>, DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn mower(&self, id: MowerId) -> Result<Option<Mower>, DirectoryError> {
            Ok((id == self.mower.id).then(|| self.mower.clone()))
        }
        async fn sites(&self, account: AccountId) -> Result<Vec<Site>, DirectoryError> {
            Ok(vec![self.site.clone()]
                .into_iter()
                .filter(|s| s.account_id == account)
                .collect())
        }
        async fn mowers(&self, _: AccountId) -> Result<Vec<Mower>, DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
    }

    #[async_trait]
    impl DirectoryAdmin for OneMower {
        async fn site(&self, _: SiteId) -> Result<Option<Site>, DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn mowers_by_id(&self, _: &[MowerId]) -> Result<Vec<Mower>, DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn list_sites(&self, _: &ListQuery) -> Result<Vec<Site>, DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn list_mowers(&self, _: &ListQuery) -> Result<Vec<Mower>, DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn update_site(&self, _: Site) -> Result<(), DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn delete_site(&self, _: AccountId, _: SiteId) -> Result<(), DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn update_mower(&self, _: Mower) -> Result<(), DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
        async fn delete_mower(&self, _: AccountId, _: MowerId) -> Result<(), DirectoryError> {
            unimplemented!("{NOT_READ}")
        }
    }

    struct NoTokens;

    #[async_trait]
    impl TokenStore for NoTokens {
        async fn create_token(&self, _: TokenHash, _: NewToken) -> Result<(), TokenError> {
            unimplemented!("{NOT_READ}")
        }
        async fn principal(&self, _: &TokenHash) -> Result<Option<Principal>, TokenError> {
            unimplemented!("{NOT_READ}")
        }
        async fn tokens(&self, _: &TokenQuery) -> Result<Vec<TokenInfo>, TokenError> {
            unimplemented!("{NOT_READ}")
        }
        async fn token(&self, _: TokenId) -> Result<Option<TokenInfo>, TokenError> {
            unimplemented!("{NOT_READ}")
        }
        async fn token_by_hash(&self, _: &TokenHash) -> Result<Option<TokenInfo>, TokenError> {
            unimplemented!("{NOT_READ}")
        }
        async fn revoke_token(&self, _: TokenId) -> Result<bool, TokenError> {
            unimplemented!("{NOT_READ}")
        }
    }

    /// Answers whatever latest rows it holds, of any account, like a cache that kept a row
    /// past the mower's deletion.
    #[derive(Default)]
    struct KeptLatest(Mutex<Vec<LatestRow>>);

    #[async_trait]
    impl TelemetryStore for KeptLatest {
        async fn begin(
            &self,
            _: &[MowerId],
        ) -> Result<(BTreeMap<MowerId, MowerSnapshot>, Box<dyn TelemetryBatch>), StoreError>
        {
            unimplemented!("{NOT_READ}")
        }
        async fn latest(&self, mowers: &[MowerId]) -> Result<Vec<LatestRow>, StoreError> {
            let rows = self.0.lock().unwrap();
            Ok(rows
                .iter()
                .filter(|r| mowers.contains(&r.mower_id))
                .cloned()
                .collect())
        }
        async fn health(&self, _: MowerId) -> Result<Option<HealthTotals>, StoreError> {
            unimplemented!("{NOT_READ}")
        }
        async fn export(&self, _: &[MowerId]) -> Result<TelemetryRows, StoreError> {
            unimplemented!("{NOT_READ}")
        }
        async fn ping(&self) -> Result<(), StoreError> {
            unimplemented!("{NOT_READ}")
        }
        async fn history(
            &self,
            _: MowerId,
            _: &TimeWindow,
        ) -> Result<WindowRows<HistoryRow>, StoreError> {
            unimplemented!("{NOT_READ}")
        }
        async fn track(
            &self,
            _: MowerId,
            _: &TimeWindow,
        ) -> Result<WindowRows<PositionRow>, StoreError> {
            unimplemented!("{NOT_READ}")
        }
        async fn days(
            &self,
            _: MowerId,
            _: NaiveDate,
            _: NaiveDate,
        ) -> Result<Vec<DayTotals>, StoreError> {
            unimplemented!("{NOT_READ}")
        }
    }

    fn latest_row(mower: MowerId, account: AccountId) -> LatestRow {
        let at = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap();
        let report = serde_json::json!({
            "mower_id": mower, "account_id": account, "observed_at": at.to_rfc3339(),
            "activity": "mowing", "battery_percent": 60,
        });
        LatestRow {
            mower_id: mower,
            account_id: account,
            observed_at: at,
            last_seen_at: at,
            state: StateReport::from_value(report, at).expect("a valid report"),
        }
    }

    /// Account B's mower X, with a latest-state store that holds `rows`, and B's principal.
    fn mower_of_b(
        rows: impl Fn(MowerId, AccountId) -> Vec<LatestRow>,
    ) -> (MowerReads, Principal, MowerId) {
        let b = AccountId::new();
        let site = Site {
            id: SiteId::new(),
            account_id: b,
            name: "North".into(),
            time_zone: chrono_tz::UTC,
            display_order: 0,
        };
        let mower = Mower {
            id: MowerId::new(),
            account_id: b,
            site_id: site.id,
            name: "X".into(),
            model: "M".into(),
            serial: "1".into(),
            display_order: 0,
            blade_threshold_ms: 1,
        };
        let id = mower.id;
        let directory = Arc::new(OneMower { site, mower });
        let telemetry = Arc::new(KeptLatest(Mutex::new(rows(id, b))));
        let clock = Arc::new(ManualClock::new(Utc::now()));
        let access = Access::new(
            directory.clone(),
            Arc::new(NoTokens),
            clock,
            Revocations::default(),
        );
        let principal = Principal {
            account_id: b,
            scopes: vec![Scope::Read],
            sites: None,
        };
        (
            MowerReads::new(access, directory, telemetry, None),
            principal,
            id,
        )
    }

    #[tokio::test]
    async fn a_kept_latest_state_of_another_account_is_never_answered() {
        let a = AccountId::new();
        let (data, b, x) = mower_of_b(|x, _| vec![latest_row(x, a)]);

        assert!(data.latest_states(&b, &[x]).await.unwrap().is_empty());
        assert!(data.latest(&b, x).await.unwrap().is_none());
        let view = data.view(&b, x).await.unwrap();
        assert!(view.latest.is_none(), "the view shows account A's state");
        assert_eq!(
            view.availability.offline_reason,
            Some(OfflineReason::NeverReported),
            "the view counts account A's state as B's mower reporting"
        );
    }

    #[tokio::test]
    async fn the_latest_state_of_the_principals_account_is_answered() {
        let (data, b, x) = mower_of_b(|x, b| vec![latest_row(x, b)]);

        let row = data.latest(&b, x).await.unwrap().expect("B's state");
        assert_eq!(row.account_id, b.account_id);
        let view = data.view(&b, x).await.unwrap();
        assert_eq!(view.latest.map(|r| r.mower_id), Some(x));
        assert!(view.availability.online);
    }
}
