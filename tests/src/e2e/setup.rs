//! The set-up and the verdict most `swath/tests/e2e_*.rs` scenarios share, so that each file
//! shows only what its scenario does to the service.

use super::scenario::{database, plan, verify};
use super::{NatsServer, Service, TestDatabase};
use crate::load::{Checked, Plan};
use crate::reference::WatchChecked;
use swath_postgres::PostgresStore;

/// A scenario's plan (`scenario::plan(seed, mowers, states)`), its private NATS server and its
/// database on `server_url` seeded with the plan, in the order the scenarios bind them: bound
/// with one `let (plan, nats, db, store) = …`, they are dropped in reverse, the store's pool
/// before its database, as when they were bound one by one.
pub async fn start_scenario(
    server_url: &str,
    seed: u64,
    mowers: usize,
    states: usize,
) -> (Plan, NatsServer, TestDatabase, PostgresStore) {
    let plan = plan(seed, mowers, states);
    let nats = NatsServer::start().expect("a private NATS server");
    let (db, store) = database(server_url, &plan).await;
    (plan, nats, db, store)
}

/// The verdict of every scenario: `scenario::verify` with every table checked, the watcher's
/// included.
pub async fn verify_everything(store: &PostgresStore, plan: &Plan, services: &[&Service]) {
    verify(
        store,
        plan,
        Checked::Everything,
        WatchChecked::Everything,
        services,
    )
    .await;
}
