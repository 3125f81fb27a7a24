//! End to end on a highly available PostgreSQL (docs/e2e.md, docs/operations.md "A highly
//! available PostgreSQL"): two PostgreSQL nodes under Patroni in synchronous mode, etcd and
//! HAProxy (`deploy/postgres-ha/start.sh`), a private NATS server, and two replicas of the real
//! `swath` binary writing through HAProxy's primary port and reading through its replica port
//! (`SWATH_DATABASE_READ_URL`). States are published at a steady rate while the primary fails
//! three times: its postmaster killed (`kill -9`), the old primary rejoining as the synchronous
//! standby (pg_rewind) and the new primary killed in turn (a failover back to it), then a
//! planned switchover. Then every row and event is compared with the one-pass and the
//! independent references, and a steady reader's answers during the failovers are counted.
//!
//! It needs the set running: `deploy/postgres-ha/check.sh` starts it, runs this test with
//! `SWATH_TEST_HA_DIR` set and `--ignored`, and prints its last line. A plain `cargo test`
//! reports it as ignored.

use std::time::{Duration, Instant};
use swath_application::ports::{generate_token, hash_token, TokenStore};
use swath_domain::{Principal, Scope};
use swath_postgres::PostgresStore;
use swath_tests::e2e::postgres_ha::{unix_now, wait_storing_again, HaSet, SteadyReader, NODES};
use swath_tests::e2e::scenario::{database, plan, publisher, verdict, wait_for_count, Trickle};
use swath_tests::e2e::{NatsServer, Replicas};
use swath_tests::load::{Checked, Plan};
use swath_tests::reference::WatchChecked;

const SWATH: &str = env!("CARGO_BIN_EXE_swath");

/// What is done to the primary, in turn.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `kill -9` of its postmaster: Patroni promotes the synchronous standby.
    Kill,
    /// `POST /switchover` to Patroni: the primary steps down, the standby is promoted.
    Switchover,
}

/// The reads that must be answered during the failovers.
const READS_ANSWERED_PCT: f64 = 99.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the highly available PostgreSQL of deploy/postgres-ha: run deploy/postgres-ha/check.sh"]
async fn failovers_mid_ingest_lose_and_double_nothing() {
    let started = Instant::now();
    let ha = HaSet::from_env().expect("the set of deploy/postgres-ha/start.sh");
    let mut primary = ha
        .wait_whole(Duration::from_secs(120))
        .await
        .expect("the set is whole");
    // More states than are published before the trickle is stopped.
    let plan = plan(4_400, 50, 400_000);
    let nats = NatsServer::start().expect("a private NATS server");
    let (db, mut store) = database(&ha.write_url, &plan).await;
    let read_url = swath_tests::postgres::with_database(&ha.read_url, &db.name);

    let token = generate_token();
    store
        .store_token(
            hash_token(&token),
            Principal {
                account_id: plan.account(),
                scopes: vec![Scope::Read],
                sites: None,
            },
        )
        .await
        .expect("a read token");
    let env = [
        ("SWATH_DATABASE_READ_URL", read_url.as_str()),
        // Short, so that the deliveries of a batch whose commit failed come back soon.
        ("SWATH_NATS_ACK_WAIT_SECONDS", "5"),
    ];
    let replicas = Replicas::start(SWATH, &db.url, &nats.url(), &env, 2)
        .await
        .expect("two replicas start");
    let trickle = Trickle::start(publisher(&nats.url()).await, plan, 300.0);
    let reader = SteadyReader::start(
        replicas.service(0).port,
        // A history page: read from the read store (the latest state may come from the cache).
        format!(
            "/v1/mowers/{}/history?from={}&limit=5",
            plan.mower(0),
            plan.start.format("%Y-%m-%dT%H:%M:%SZ")
        ),
        token,
        Duration::from_millis(100),
    );

    let mut stored = 3_000;
    let mut windows = Vec::new();
    let mut storing_again = Vec::new();
    for fault in [Fault::Kill, Fault::Kill, Fault::Switchover] {
        wait_for_count(&store, &plan, stored).await;
        let (from, since) = (Instant::now(), unix_now());
        match fault {
            Fault::Kill => {
                ha.kill_postmaster(primary).expect("kill the primary");
            }
            Fault::Switchover => ha.switchover(primary).await.expect("a switchover"),
        }
        ha.wait_not_primary(primary, Duration::from_secs(120))
            .await
            .expect("the faulted node steps down");
        // Commits counted from here: one finishing at the fault would be the old primary's.
        let gone = unix_now();
        let services = replicas.all_services();
        let (took, said_503) =
            match wait_storing_again(&services, gone, Duration::from_secs(120)).await {
                Ok(found) => found,
                Err(e) => {
                    replicas.print_logs();
                    panic!("after {fault:?} of {}: {e}", NODES[primary]);
                }
            };
        let took = took + Duration::from_secs_f64(gone - since);
        let was = primary;
        primary = ha
            .wait_whole(Duration::from_secs(180))
            .await
            .expect("the set is whole again");
        windows.push((from, Instant::now()));
        eprintln!(
            "{fault:?} of {}: storing again after {:.2} s (/readyz said 503 meanwhile: {said_503}); \
             {} is the primary, {} its synchronous standby, {:.0} s after the fault",
            NODES[was],
            took.as_secs_f64(),
            NODES[primary],
            NODES[1 - primary],
            from.elapsed().as_secs_f64()
        );
        assert_ne!(primary, was, "the other node took over");
        if let Fault::Kill = fault {
            // The store was down for a while, and readiness said so.
            assert!(
                said_503,
                "/readyz never said 503 while the primary was gone"
            );
            storing_again.push(took);
        }
        // Ingest goes on through the new primary before the next fault. The test's own pool
        // had sessions to the old primary, cut by the router: a new one.
        store = PostgresStore::connect(&db.url, 4)
            .await
            .expect("connect through the new primary");
        stored = count_stored(&store, &plan).await + 1_000;
    }
    // Two replicas stay up through it all: no process exited.
    for i in 0..replicas.len() {
        assert!(replicas.is_up(i), "replica {i} exited");
    }

    let published = trickle.stop().await;
    let reads = reader.stop().await;
    let plan = Plan {
        states: published,
        ..plan
    };
    let verdict = verdict(&store, &plan, Checked::Everything, WatchChecked::Everything).await;
    let (answered, asked) = reads.within(&windows);
    let pct = 100.0 * answered as f64 / asked.max(1) as f64;
    let worst = storing_again.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{published} states, {} s in all; reads during the failovers: {answered} of {asked} answered 200; \
         not answered 200 in the whole run, by status (0: no answer): {:?}",
        started.elapsed().as_secs(),
        reads.failures()
    );
    if !verdict.failures.is_empty() {
        replicas.print_logs();
        eprintln!("{}", verdict.failures.join("\n\n"));
    }
    // The summary line deploy/postgres-ha/check.sh ends with (storing again: the slower kill).
    println!(
        "failover: row_diffs={} events_lost={} events_extra={} storing_again_s={:.2} reads_answered_pct={:.1}",
        verdict.row_diffs,
        verdict.events_lost,
        verdict.events_extra,
        worst.as_secs_f64(),
        pct
    );
    assert!(
        verdict.failures.is_empty(),
        "the stored rows or events differ from the references"
    );
    assert!(asked > 0, "the reader asked nothing during the failovers");
    assert!(
        pct >= READS_ANSWERED_PCT,
        "only {pct:.1} % of the reads during the failovers were answered"
    );
}

/// The plan's stored states, asked again while the router still cuts sessions to a demoted node.
async fn count_stored(store: &PostgresStore, plan: &Plan) -> usize {
    let mowers = plan.mower_ids();
    let mut last_error = None;
    for _ in 0..100 {
        match swath_tests::load::stored_count(store.pool(), &mowers).await {
            Ok(count) => return count,
            Err(e) => last_error = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("counting the stored states: {last_error:?}");
}
