//! The live projections' contract against PostgreSQL (when `SWATH_TEST_DATABASE_URL` is set): the
//! same scenarios as memory, and every read checked against the adapter's statement counter.

use async_trait::async_trait;
use std::sync::Arc;
use swath_domain::{AccountId, SiteId};
use swath_tests::postgres::{test_database_url, PostgresFactory};
use swath_tests::projections_contract::{self as contract, ProjectionFactory, ProjectionHarness};
use swath_tests::support::DEFAULT_THRESHOLD;

struct Postgres(PostgresFactory);

#[async_trait]
impl ProjectionFactory for Postgres {
    async fn fresh(&self) -> ProjectionHarness {
        let store = self.0.fresh_store().await;
        ProjectionHarness {
            directory: Arc::new(store.clone()),
            telemetry: Arc::new(store.clone()),
            watch: Arc::new(store.clone()),
            projections: Arc::new(store.clone()),
            assignments: Arc::new(store.clone()),
            postgres: Some(store),
        }
    }

    /// One statement for any number of mowers (the trigger makes their watch rows).
    async fn bulk_mowers(&self, h: &ProjectionHarness, account: AccountId, site: SiteId, n: usize) {
        let store = h.postgres.as_ref().expect("a PostgreSQL harness");
        sqlx::query(
            "INSERT INTO mowers (id, account_id, site_id, name, model, serial, display_order, \
             blade_threshold_ms) SELECT gen_random_uuid(), $1, $2, \
             'bulk-' || lpad(g::text, 5, '0'), 'M1', 'SN' || g, 10, $4 \
             FROM generate_series(1, $3) AS g",
        )
        .bind(account.0)
        .bind(site.0)
        .bind(n as i32)
        .bind(DEFAULT_THRESHOLD)
        .execute(store.pool())
        .await
        .unwrap();
    }

    /// One statement for every mower of the account (the port would take three per assignment).
    async fn bulk_assignments(&self, h: &ProjectionHarness, account: AccountId, per_mower: usize) {
        let store = h.postgres.as_ref().expect("a PostgreSQL harness");
        sqlx::query(
            "INSERT INTO assignments (id, mower_id, account_id, operator, priority, active, \
             updated_at) SELECT gen_random_uuid(), m.id, m.account_id, 'op-' || g, \
             (ARRAY['low', 'normal', 'high'])[1 + (g - 1) % 3], true, $3 \
             FROM mowers m CROSS JOIN generate_series(1, $2) AS g WHERE m.account_id = $1",
        )
        .bind(account.0)
        .bind(per_mower as i32)
        .bind(contract::at(0))
        .execute(store.pool())
        .await
        .unwrap();
    }
}

swath_tests::contract_suite!(
    projections_contract,
    postgres = Postgres(PostgresFactory::new(test_database_url())),
);
