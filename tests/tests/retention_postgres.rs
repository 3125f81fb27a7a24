//! The retention contract against PostgreSQL (when `SWATH_TEST_DATABASE_URL` is set), and what
//! only PostgreSQL can show: whole partitions dropped, another replica on its own pool.

use async_trait::async_trait;
use sqlx::postgres::PgPoolOptions;
use std::sync::Arc;
use swath_application::ports::RetentionStore;
use swath_postgres::PostgresStore;
use swath_tests::postgres::{test_database_url, PostgresFactory};
use swath_tests::retention_contract::{self as contract, RetentionFactory};
use swath_tests::support::TestStore;

struct Postgres(PostgresFactory);

#[async_trait]
impl RetentionFactory for Postgres {
    async fn fresh(&self) -> (TestStore, Arc<dyn RetentionStore>) {
        let store = self.0.fresh_store().await;
        (
            TestStore {
                directory: Arc::new(store.clone()),
                telemetry: Arc::new(store.clone()),
                sessions: Arc::new(store.clone()),
                postgres: Some(store.clone()),
            },
            Arc::new(store),
        )
    }

    /// A second store on the same database with its own pool, like another replica.
    async fn replica(&self, store: &TestStore) -> Arc<dyn RetentionStore> {
        let pool = store.postgres.as_ref().expect("a PostgreSQL store").pool();
        let options = (*pool.connect_options()).clone();
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .expect("connect the replica");
        Arc::new(PostgresStore::from_pool(pool))
    }
}

fn factory() -> Postgres {
    Postgres(PostgresFactory::new(test_database_url()))
}

swath_tests::contract_suite!(retention_contract, postgres = factory(),);

swath_tests::postgres_tests!(
    on_postgres:
    whole_months_are_dropped_as_partitions,
);

mod on_postgres {
    use super::*;

    /// Months entirely past the limits go as whole partitions; the month the limit falls in keeps
    /// its partition (its rows went in chunks); newer partitions stay.
    pub(super) async fn whole_months_are_dropped_as_partitions(factory: PostgresFactory) {
        let f = Postgres(factory);
        let h = contract::Harness::new(&f).await;
        let (stored, _, _) = contract::boundary_trace();
        h.store_states(h.fleet.mowers[0], &stored).await;
        let summary = h.run(false).await;
        let pool = h.store.postgres.as_ref().unwrap().pool().clone();
        let exists = |name: &'static str| {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, bool>("SELECT to_regclass($1) IS NOT NULL")
                    .bind(name)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        };
        assert!(!exists("positions_202510").await, "October 2025 dropped");
        assert!(!exists("state_history_202510").await);
        assert!(exists("positions_202511").await, "the limit's month stays");
        assert!(exists("state_history_202511").await);
        assert!(
            exists("positions_default").await,
            "the default partition stays"
        );
        assert!(summary
            .partitions_dropped
            .iter()
            .any(|(p, _)| p.name == "positions_202510"));
        assert!(summary
            .partitions_dropped
            .iter()
            .all(|(p, _)| p.end <= contract::cutoffs().positions_before));
    }
}
