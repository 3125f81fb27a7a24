//! The cross-tenant suite (every use case method that takes a principal and an id, asked by
//! another account and by a token limited to another site) against PostgreSQL, when
//! `SWATH_TEST_DATABASE_URL` is set.

use swath_tests::cross_tenant::PostgresCrossTenant;
use swath_tests::postgres::{test_database_url, PostgresFactory};

swath_tests::contract_suite!(
    cross_tenant,
    postgres = PostgresCrossTenant(PostgresFactory::new(test_database_url())),
);
