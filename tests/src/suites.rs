//! Every contract suite's tests, from one macro: [`contract_suite!`](crate::contract_suite) names
//! each suite's scenarios and turns each into a `#[test]` for the adapter of the file that calls
//! it (the shape of every contract suite, docs/testing.md):
//!
//! ```ignore
//! swath_tests::contract_suite!(
//!     api_contract,
//!     #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//!     factory = swath_tests::api_contract::MemoryApiFactory { history_per_mower: 100_000 },
//! );
//! swath_tests::contract_suite!(
//!     zone_contract,
//!     postgres = PostgresWatch(PostgresFactory::new(test_database_url())),
//! );
//! swath_tests::contract_suite!(
//!     bus_contract,
//!     #[tokio::test(start_paused = true)]
//!     bus = async { std::sync::Arc::new(MemoryBus::default()) as swath_tests::bus_contract::DynBus },
//!     root = "contract",
//! );
//! swath_tests::contract_suite!(
//!     partition_contract,
//!     #[tokio::test(start_paused = true)]
//!     bus = |pattern: String| async move { memory_bus_partitioning(&pattern) },
//!     root = "partitions",
//! );
//! ```
//!
//! The first argument is the suite's module. Its scenarios take one of three kinds of argument:
//!
//! - a factory (`api_contract`, `telemetry_contract`, `projections_contract`,
//!   `retention_contract`, `watch_contract`, `zone_contract`, `geofence_contract`,
//!   `feed_contract`, `reuse_contract`,
//!   `webhook_contract`, `webhook_access`, `cross_tenant`): the adapter gives `#[test] factory = <expr>`, the
//!   expression evaluated once per test, so that every test has a factory of its own;
//! - a bus and a subject prefix (`bus_contract`): `#[test] bus = <future of a DynBus>,
//!   root = <first subject tokens>`; each test gets a run-unique prefix
//!   ([`unique_prefix`](crate::bus_contract::unique_prefix));
//! - a bus and a partitioned pattern (`partition_contract`): `#[test] bus = <fn(String) ->
//!   future of a DynBus>, root = <first pattern tokens>`, a function path or a closure called
//!   with the test's run-unique pattern ([`unique_pattern`](crate::partition_contract::unique_pattern)),
//!   whose bus partitions it into [`PARTITIONS`](crate::partition_contract::PARTITIONS).
//!
//! A second attribute after the test attribute goes on every test too: an adapter that needs a
//! server passes `#[cfg_attr(…, ignore = "…")]`, so that its tests are reported as ignored, never
//! as passed, when the server's variable is not set. `postgres = <expr>` stands for
//! `factory = <expr>` with the test attribute and the gate of every PostgreSQL suite.

/// The tests of one contract suite for one adapter (see [the module](crate::suites)).
#[macro_export]
macro_rules! contract_suite {
    (api_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory api_contract [$($adapter)*]
            lists_page_in_order,
            updates_and_deletes_keep_to_their_account,
            a_deleted_mower_takes_its_telemetry_along,
            a_site_is_never_deleted_under_a_new_mower,
            tokens_are_listed_within_powers_and_revoked,
            reads_answer_the_window,
            paging_while_ingesting_returns_each_row_once,
        );
    };
    (telemetry_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory telemetry_contract [$($adapter)*]
            redelivered_batch_changes_nothing,
            bad_reports_are_refused_alone,
            an_uncommitted_batch_stores_nothing,
            reads_answer_committed_rows,
            a_read_after_a_commit_sees_it,
            blade_due_is_published_once,
            concurrent_batches_all_commit,
            import_stores_what_live_ingest_stores,
            import_backfill_counts_in_the_totals,
            late_states_with_far_neighbours_merge_as_in_time_order,
            runs_of_late_states_over_stored_ones_merge_as_in_time_order,
            reads_say_where_the_kept_rows_begin,
        );
    };
    (projections_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory projections_contract [$($adapter)*]
            an_empty_tenant_costs_one_read,
            the_sentinel_row_decides_truncation,
            foreign_rows_never_use_up_a_window,
            children_inserted_out_of_order_come_back_in_order,
            the_wall_filters_before_the_cutoff_and_health_counts_everything,
            the_operator_on_duty_is_ranked_by_the_store,
            reads_are_constant_in_the_tenant_size,
            every_read_is_bounded_at_ten_thousand_mowers,
            the_map_reads_one_site_its_mowers_positions_and_errors,
        );
    };
    (retention_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory retention_contract [$($adapter)*]
            boundaries,
            first_point_of_each_minute,
            interrupted_runs_resume,
            concurrent_runs_do_the_work_once,
            an_abandoned_run_releases_the_lock,
            late_states_after_retention,
            sessions_outlive_history_and_are_never_refolded_from_what_is_left,
        );
    };
    (watch_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory watch_contract [$($adapter)*]
            redelivery_and_older_states_derive_nothing,
            silent_mowers_go_offline_and_come_back,
            the_busy_status_is_throttled,
            a_session_ends_once_whatever_the_batches,
            a_docked_mower_that_goes_quiet_ends_its_session_from_the_sweep,
            a_pending_session_survives_every_batch_boundary,
        );
    };
    (zone_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory zone_contract [$($adapter)*]
            zones_are_entered_and_left,
            a_failed_zone_step_still_publishes_blade_due_once,
        );
    };
    (geofence_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory geofence_contract [$($adapter)*]
            a_geofence_is_parsed_once_per_version,
            jitter_within_accuracy_raises_no_alarm,
            a_geofence_replaced_during_a_watcher_batch_never_clears_the_alarm,
        );
    };
    (cross_tenant, $($adapter:tt)*) => {
        $crate::contract_tests!(factory cross_tenant [$($adapter)*]
            another_account_sees_nothing_of_an_id,
            a_site_limited_token_sees_nothing_of_another_site,
            the_owner_is_answered,
            a_token_is_issued_only_within_its_issuers_powers,
        );
    };
    (webhook_access, $($adapter:tt)*) => {
        $crate::contract_tests!(factory webhook_access [$($adapter)*]
            an_endpoint_naming_a_mower_off_the_tokens_sites_is_absent,
            a_mower_moved_off_the_tokens_sites_hides_its_endpoints,
            endpoints_per_account_are_capped_exactly,
            test_messages_are_limited_per_endpoint,
        );
    };
    (webhook_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory webhook_contract [$($adapter)*]
            endpoints_are_kept_to_their_account,
            enqueue_is_idempotent,
            deliveries_are_claimed_in_order_one_per_endpoint,
            concurrent_claims_never_share_an_endpoint,
            disabling_fails_pending_and_retry_revives,
            claims_leave_each_account_its_share,
            settled_deliveries_expire_pending_ones_never,
        );
    };
    (feed_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory feed_contract [$($adapter)*]
            events_are_stored_published_and_alert,
            blade_due_alerts_until_the_blade_is_reset,
        );
    };
    (reuse_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(factory reuse_contract [$($adapter)*]
            a_re_created_mower_id_shows_nothing_of_its_previous_owner,
        );
    };
    (bus_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(bus bus_contract [$($adapter)*]
            linger_collects_what_arrives_within_max_wait,
            zero_wait_batches_what_queued_during_the_previous_batch,
            max_batch_is_respected,
            durable_consumer_keeps_messages_while_unsubscribed,
            order_is_kept_across_batches_and_redeliveries,
            batches_never_overlap,
            per_message_outcomes,
            handler_error_redelivers_the_whole_batch,
            wrong_number_of_answers_redelivers_the_whole_batch,
            unsubscribe_drains_the_running_batch,
            unsettled_after_the_drain_timeout_are_redelivered,
            redeliveries_of_a_vanished_subscriber_come_before_newer_messages,
            in_flight_is_bounded,
            subscriptions_of_one_consumer_share_its_messages,
            durable_consumers_match_wildcards,
            ackless_subscribe_refuses_acknowledged_durable_and_queue_consumers,
            live_subscribers_get_matching_messages_from_subscription_on,
            publish_with_a_seen_dedup_id_is_a_no_op,
            publish_all_stores_in_order_and_answers_each,
        );
    };
    (partition_contract, $($adapter:tt)*) => {
        $crate::contract_tests!(partition partition_contract [$($adapter)*]
            per_key_order_holds_across_two_subscriptions,
            partitions_run_concurrently_inside_one_subscription,
            batches_of_one_partition_never_overlap_across_subscriptions,
            a_vanished_holder_leaves_its_unsettled_to_the_next_holder,
            a_filter_overlapping_the_pattern_is_refused,
            subscriptions_share_and_balance_the_partitions,
            a_new_consumer_starts_with_what_is_published_after_it,
        );
    };
}

/// The tests of a suite whose scenarios are named: one `#[test]` per scenario, of the kind
/// (`factory`, `bus`, `partition`) that [`contract_suite!`](crate::contract_suite) gives.
#[doc(hidden)]
#[macro_export]
macro_rules! contract_tests {
    ($kind:ident $module:ident [postgres = $factory:expr $(,)?] $($scenario:ident),* $(,)?) => {
        $crate::contract_tests!($kind $module [
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(swath_no_postgres, ignore = "needs PostgreSQL: set SWATH_TEST_DATABASE_URL")]
            factory = $factory
        ] $($scenario),*);
    };
    // Without a gate, a doc line takes its place (an optional attribute cannot be repeated once
    // per scenario).
    ($kind:ident $module:ident [#[$test:meta] $($key:ident = $value:expr),+ $(,)?]
        $($scenario:ident),* $(,)?) => {
        $crate::contract_tests!($kind $module [
            #[$test]
            #[doc = concat!("A scenario of `", stringify!($module), "`.")]
            $($key = $value),+
        ] $($scenario),*);
    };
    (factory $module:ident [#[$test:meta] #[$gate:meta] factory = $factory:expr $(,)?]
        $($scenario:ident),* $(,)?) => {
        $(
            #[$test]
            #[$gate]
            async fn $scenario() {
                let factory = $factory;
                $crate::$module::$scenario(&factory).await;
            }
        )*
    };
    (bus $module:ident [#[$test:meta] #[$gate:meta] bus = $bus:expr, root = $root:expr $(,)?]
        $($scenario:ident),* $(,)?) => {
        $(
            #[$test]
            #[$gate]
            async fn $scenario() {
                let bus: $crate::bus_contract::DynBus = $bus.await;
                let prefix = $crate::bus_contract::unique_prefix($root, stringify!($scenario));
                $crate::$module::$scenario(bus, &prefix).await;
            }
        )*
    };
    (partition $module:ident [#[$test:meta] #[$gate:meta] bus = $bus:expr, root = $root:expr $(,)?]
        $($scenario:ident),* $(,)?) => {
        $(
            #[$test]
            #[$gate]
            async fn $scenario() {
                let pattern =
                    $crate::partition_contract::unique_pattern($root, stringify!($scenario));
                let bus: $crate::bus_contract::DynBus = ($bus)(pattern.clone()).await;
                $crate::$module::$scenario(bus, &pattern).await;
            }
        )*
    };
}
