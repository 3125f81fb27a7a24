#!/usr/bin/env bash
# Webhook delivery rate and its cost to the ingest (issue 42, item 12; BENCHMARKS.md, "Webhook
# delivery rate"). On the memory store and bus, the release `swath` ($SWATH_BIN, default
# target/release/swath), a loopback receiver answering 204 at once:
#   - deliveries/s to 1 endpoint and to 50 endpoints (one account): a burst of events (states of
#     20 mowers alternating error and mowing, one request), from the first delivery to the last;
#   - the ingest's states/s with 50 busy endpoints against none: the time from posting 20 000
#     states (40 requests of 500) until every mower's latest state is the last posted.
# Usage: tests/scripts/webhooks-bench/run.sh [RUNS]   (each run: every measure once, alternating)
set -euo pipefail
cd "$(dirname "$0")/../../.."
RUNS=${1:-3}
SWATH=${SWATH_BIN:-target/release/swath}
TOKEN=webhooks-bench-demo-token-0123456789abcdef
WORK=$(mktemp -d -t swath-whbench.XXXXXX)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

RECEIVER_PORT=$(free_port)
python3 tests/scripts/webhooks-bench/receiver.py "$RECEIVER_PORT" "$WORK/received" &
pids+=($!)

# measure ENDPOINTS MODE: starts a fresh swath, prints one result line.
measure() {
  local port
  port=$(free_port)
  : >"$WORK/received"
  env SWATH_HTTP_ADDR=127.0.0.1:$port SWATH_DEMO_TOKEN=$TOKEN SWATH_SIM_MOWERS=0 \
    SWATH_WEBHOOK_ALLOW_PRIVATE=true SWATH_LOG=warn "$SWATH" serve >"$WORK/swath.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 60); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.25; done
  python3 tests/scripts/webhooks-bench/drive.py "$port" "$TOKEN" "$RECEIVER_PORT" "$WORK/received" "$1" "$2"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
}

echo "machine: $(nproc) cores, $(uname -r); $(date -u +%Y-%m-%dT%H:%MZ); binary: $SWATH"
for run in $(seq 1 "$RUNS"); do
  measure 1 deliveries
  measure 50 deliveries
  measure 0 ingest
  measure 50 ingest
done
