//! Which replicas subscribe to a partitioned consumer: a heartbeat in a JetStream key-value
//! bucket, so that each replica can hold its share of the partitions (`pinning.rs`).
//!
//! Each subscription writes `<consumer>.<replica>` every `membership_heartbeat` into the bucket
//! [`MEMBERSHIP_BUCKET`], whose entries expire after three heartbeats, and counts the keys of its
//! consumer. A replica killed with `kill -9` is thus forgotten within three heartbeats; one that
//! unsubscribes deletes its key at once, so the others take its partitions without waiting.

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures::StreamExt;
use std::time::Duration;
use swath_application::bus_rules::{is_stopped, stopped};
use swath_application::ports::{cause, chain, BusError};
use tokio::sync::watch;

/// The key-value bucket of replicas' heartbeats.
pub const MEMBERSHIP_BUCKET: &str = "SWATH_REPLICAS";

/// A replica's membership of one consumer. The count of members is published on `members`
/// until the subscription stops (its `stop` turns `true`).
pub(crate) struct Membership {
    pub members: watch::Receiver<usize>,
    pub task: tokio::task::JoinHandle<()>,
}

async fn bucket(
    js: &jetstream::Context,
    heartbeat: Duration,
    replicas: Option<usize>,
) -> Result<kv::Store, BusError> {
    if let Ok(store) = js.get_key_value(MEMBERSHIP_BUCKET).await {
        return Ok(store);
    }
    let config = kv::Config {
        bucket: MEMBERSHIP_BUCKET.to_owned(),
        description: "Swath replicas subscribed to each partitioned consumer".to_owned(),
        history: 1,
        max_age: heartbeat * 3,
        // Heartbeats are worth nothing after a NATS restart: memory is enough.
        storage: jetstream::stream::StorageType::Memory,
        num_replicas: replicas.unwrap_or(1).max(1),
        ..Default::default()
    };
    match js.create_key_value(config).await {
        Ok(store) => Ok(store),
        // Another replica may have created it meanwhile.
        Err(create) => js.get_key_value(MEMBERSHIP_BUCKET).await.map_err(|_| {
            BusError::Unavailable(cause::context("creating the membership bucket", create))
        }),
    }
}

/// Joins the replicas of `consumer` as `replica`; counts them until `stop`.
pub(crate) async fn join(
    js: jetstream::Context,
    consumer: String,
    replica: String,
    heartbeat: Duration,
    replicas: Option<usize>,
    mut stop: watch::Receiver<bool>,
) -> Result<Membership, BusError> {
    let store = bucket(&js, heartbeat, replicas).await?;
    let key = format!("{consumer}.{replica}");
    let prefix = format!("{consumer}.");
    let members = count(&store, &key, &prefix).await.unwrap_or(1);
    let (tx, rx) = watch::channel(members);
    let task = tokio::spawn(async move {
        let mut store = store;
        let mut ticks = tokio::time::interval(heartbeat);
        loop {
            tokio::select! {
                () = stopped(&mut stop) => break,
                _ = ticks.tick() => {}
            }
            match count(&store, &key, &prefix).await {
                Ok(n) => {
                    tx.send_if_modified(|members| std::mem::replace(members, n) != n);
                }
                Err(e) => {
                    tracing::debug!(consumer = %prefix.trim_end_matches('.'), error = %chain(&e), "Could not renew the replica's membership; retrying.");
                    // A NATS restart may have lost the (memory) bucket.
                    if let Ok(again) = bucket(&js, heartbeat, replicas).await {
                        store = again;
                    }
                }
            }
            if is_stopped(&stop) {
                break;
            }
        }
        // Leaving: the other replicas need not wait for the entry to expire.
        let _ = tokio::time::timeout(Duration::from_secs(2), store.purge(&key)).await;
    });
    Ok(Membership { members: rx, task })
}

/// Renews `key` and counts the live keys under `prefix` (at least this replica).
async fn count(store: &kv::Store, key: &str, prefix: &str) -> Result<usize, BusError> {
    store.put(key, Bytes::new()).await.map_err(|e| {
        BusError::Unavailable(cause::context(format!("renewing membership {key}"), e))
    })?;
    let mut keys = store
        .keys()
        .await
        .map_err(|e| BusError::Unavailable(cause::context("listing members", e)))?;
    let mut n = 0;
    while let Some(k) = keys.next().await {
        if k.map(|k| k.starts_with(prefix)).unwrap_or(false) {
            n += 1;
        }
    }
    Ok(n.max(1))
}
