//! A mower id that changes hands (`reuse_contract`) on PostgreSQL (when
//! `SWATH_TEST_DATABASE_URL` is set): 60 rounds, each deletion at a random moment while the
//! ingest and the watcher run.

use swath_tests::postgres::{test_database_url, PostgresFactory};
use swath_tests::watch_contract::PostgresWatch;

swath_tests::contract_suite!(
    reuse_contract,
    postgres = PostgresWatch(PostgresFactory::new(test_database_url())),
);
