//! The memory store's sessions (W8): the `SessionStore` reads over the sessions each mower's rows
//! keep (`store::telemetry_rows`), written by the telemetry batch's commit.

use crate::store::{read, MemoryStore};
use async_trait::async_trait;
use std::cmp::Reverse;
use swath_application::ports::{SessionError, SessionQuery, SessionStore};
use swath_domain::sessions::SessionRow;

#[async_trait]
impl SessionStore for MemoryStore {
    async fn page(&self, query: &SessionQuery) -> Result<Vec<SessionRow>, SessionError> {
        let telemetry = read(&self.telemetry);
        let mut rows: Vec<&SessionRow> = query
            .mowers
            .iter()
            .filter_map(|m| telemetry.get(m))
            .flat_map(|rows| rows.sessions.values())
            .filter(|row| {
                let s = &row.session;
                row.account_id == query.account
                    && query.to.is_none_or(|to| s.started_at < to)
                    && query
                        .from
                        .is_none_or(|from| s.ended_at.is_none_or(|end| end > from))
                    && query
                        .before
                        .is_none_or(|key| (s.started_at, s.mower_id) < key)
            })
            .collect();
        rows.sort_by_key(|row| Reverse((row.session.started_at, row.session.mower_id)));
        rows.dedup_by_key(|row| (row.session.started_at, row.session.mower_id));
        Ok(rows.into_iter().take(query.limit).cloned().collect())
    }
}
