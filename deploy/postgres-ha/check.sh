#!/usr/bin/env bash
# The failover scenario on the real set (issue 44; docs/e2e.md, "A highly available
# PostgreSQL"): starts the set of start.sh (installing Patroni, etcd and HAProxy from Debian's
# packages when missing), runs swath/tests/e2e_postgres_ha.rs against it (two Swath replicas on
# the pinned NATS, three failovers mid-ingest, every row and event compared with the one-pass and
# the independent references, a steady reader counted), stops the set, and ends with the
# scenario's summary line:
#
#   failover: row_diffs=N events_lost=N events_extra=N storing_again_s=X reads_answered_pct=P
#
# It exits non-zero when the scenario fails (any difference, a read share under 99 %).
#
#   deploy/postgres-ha/check.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

export SWATH_TEST_NATS_SERVER=${SWATH_TEST_NATS_SERVER:-$(.ci/nats-server)}
dir=$(mktemp -d -t swath-postgres-ha.XXXXXX)
log=$(mktemp -t swath-postgres-ha-check.XXXXXX)
cleanup() {
  "$here/start.sh" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir" "$log"
}
trap cleanup EXIT

echo "Starting the highly available PostgreSQL in $dir."
"$here/start.sh" "$dir" >/dev/null

echo "Running the failover scenario (swath/tests/e2e_postgres_ha.rs)."
status=0
SWATH_TEST_HA_DIR=$dir cargo test -p swath --test e2e_postgres_ha -- --ignored --nocapture 2>&1 \
  | tee "$log" || status=$?
summary=$(grep -E '^failover: ' "$log" | tail -n 1 || true)
if [[ -z $summary ]]; then
  echo "The scenario printed no summary line." >&2
  echo "Patroni's last lines:" >&2
  tail -n 20 "$dir"/patroni-node*.log >&2 || true
  exit 1
fi
echo "$summary"
exit "$status"
