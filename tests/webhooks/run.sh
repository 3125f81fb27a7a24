#!/usr/bin/env bash
# Webhooks end to end, from the outside (issue 31): a running `swath` delivers a mower's events to
# tests/webhooks/receiver.py, which verifies every delivery with the Standard Webhooks Python
# package (pinned, in a venv under target/) and answers 500 to its first requests; then
# tests/webhooks/check.py compares what it received with the events feed: every event delivered,
# in order, de-duplicable by webhook-id.
#   1. memory store and bus, one replica; then a burst: 50 states each of 4 more mowers in one
#      request (about 200 events), every event delivered within 60 s of the post, in order per
#      mower (issue 42, item 12);
#   2. with SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_SERVER (CI sets both): PostgreSQL (a
#      database of its own) and a private NATS server, two replicas, the one that enqueues killed
#      with `kill -9` while it holds notifications (SWATH_WEBHOOKS_KILL_AFTER seconds after its
#      states were posted, 1.5 by default, during its batch's one-second linger), more events
#      after the kill: the other takes the notifications consumer over with the killed one's
#      unacknowledged messages first, so the order holds (decision 153).
# Called by .ci/run after .ci/api-conformance, whose release build it reuses; runs alone too.
# Everything it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

STANDARDWEBHOOKS_VERSION=1.1.0
VENV=target/webhooks-venv
WORK=$(mktemp -d -t swath-webhooks.XXXXXX)
# At least 32 characters: on PostgreSQL a shorter demo token is refused at start-up (decision 142).
TOKEN=webhooks-end-to-end-demo-token-0123456789
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [[ -n ${DB_NAME:-} ]]; then psql "$SWATH_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS $DB_NAME" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf '\n== %s\n' "$*"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "standardwebhooks==$STANDARDWEBHOOKS_VERSION"
cargo build -q --release --bin swath
SWATH=${CARGO_TARGET_DIR:-target}/release/swath

# start_swath PORT [VAR=VALUE…]: a replica with the receiver allowed (loopback, plain http).
start_swath() {
  local port=$1; shift
  env SWATH_HTTP_ADDR=127.0.0.1:$port SWATH_DEMO_TOKEN=$TOKEN SWATH_SIM_MOWERS=0 \
    SWATH_WEBHOOK_ALLOW_PRIVATE=true SWATH_WEBHOOK_FIRST_RETRY_SECONDS=0.5 \
    SWATH_NOTIFICATIONS_STATE_BATCH_WAIT_SECONDS=0.05 SWATH_LOG=warn "$@" \
    "$SWATH" serve >"$WORK/swath-$port.log" 2>&1 &
  pids+=($!)
  last_pid=$!
  disown "$last_pid"
  for _ in $(seq 1 60); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
    sleep 0.5
  done
  cat "$WORK/swath-$port.log" >&2
  echo "swath on port $port did not come up" >&2
  return 1
}

api() { # METHOD PORT PATH [BODY]
  curl -sf -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    "http://127.0.0.1:$2$3" ${4:+--data "$4"}
}

# setup PORT: a site, a mower and a webhook for every kind; sets MOWER and ACCOUNT.
setup() {
  local port=$1
  ACCOUNT=$(api GET "$port" /v1/me | python3 -c 'import json,sys; print(json.load(sys.stdin)["account"]["id"])')
  site=$(api POST "$port" /v1/sites '{"name":"Webhooks","time_zone":"Europe/Berlin"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  MOWER=$(api POST "$port" /v1/mowers "{\"site_id\":\"$site\",\"name\":\"Hooked\",\"model\":\"X\",\"serial\":\"W1\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  api POST "$port" /v1/webhooks "{\"url\":\"http://127.0.0.1:$RECEIVER_PORT/hook\",\"kinds\":[\"error_raised\",\"error_cleared\",\"mowing_started\",\"mowing_finished\",\"alert_cleared\"]}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])' >"$WORK/secret"
}

# add_mower PORT N: another mower on the setup's site; prints its id.
add_mower() {
  api POST "$1" /v1/mowers "{\"site_id\":\"$site\",\"name\":\"Burst $2\",\"model\":\"X\",\"serial\":\"B$2\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}

# states PORT FROM TO [MOWER…]: states FROM..TO-1 seconds after the run's start of each MOWER
# ($MOWER when none is named), alternating error and mowing, so that each makes an event.
states() {
  local port=$1 body="[" sep="" from=$2 to=$3
  shift 3
  local m mowers=("${@:-$MOWER}")
  for m in "${mowers[@]}"; do
  local MOWER=$m
  for i in $(seq "$from" $((to - 1))); do
    local at activity
    at=$(date -u -d "@$((START + i))" +%Y-%m-%dT%H:%M:%SZ)
    if ((i % 2)); then activity='"error","error_code":"E'$i'"'; else activity='"mowing"'; fi
    body+="$sep{\"mower_id\":\"$MOWER\",\"account_id\":\"$ACCOUNT\",\"observed_at\":\"$at\",\"activity\":$activity}"
    sep=","
  done
  done
  api POST "$port" /v1/states "$body]" >/dev/null
}

# verify PORT EXPECTED [QUERY]: waits (60 s at most) for the receiver to have every event of the
# feed (`mower_id=$MOWER` unless QUERY is given; an empty QUERY: every mower), then checks.
verify() {
  local port=$1 expected=$2 query=${3-mower_id=$MOWER}
  for _ in $(seq 1 120); do
    api GET "$port" "/v1/events?${query:+$query&}limit=1000" | python3 -c 'import json,sys; json.dump(json.load(sys.stdin)["items"], sys.stdout)' >"$WORK/feed.json"
    local have
    have=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$WORK/feed.json")
    if ((have >= expected)) && "$VENV/bin/python" tests/webhooks/check.py "$WORK/received" "$WORK/feed.json" 2>/dev/null; then
      return 0
    fi
    sleep 0.5
  done
  echo "feed: $have events, $expected expected" >&2
  "$VENV/bin/python" tests/webhooks/check.py "$WORK/received" "$WORK/feed.json"
}

# holder_of PORT…: the port of the replica holding the webhooks' notifications consumer
# (`swath_bus_partitions_owned{consumer="swath-webhooks"} 1` on its /metrics, kept every second).
holder_of() {
  for _ in $(seq 1 30); do
    for port in "$@"; do
      if api GET "$port" /metrics | grep -q '^swath_bus_partitions_owned{consumer="swath-webhooks"} 1'; then
        echo "$port"
        return 0
      fi
    done
    sleep 0.5
  done
  echo "no replica holds swath-webhooks" >&2
  return 1
}

start_receiver() {
  RECEIVER_PORT=$(free_port)
  : >"$WORK/received"
  : >"$WORK/secret"
  "$VENV/bin/python" tests/webhooks/receiver.py "$RECEIVER_PORT" "$WORK/secret" "$WORK/received" 3 &
  pids+=($!)
  disown $!
}

START=$(($(date +%s) - 300))

log "Webhooks on the memory store and bus"
start_receiver
port=$(free_port)
start_swath "$port"
setup "$port"
states "$port" 0 20
verify "$port" 20
burst=()
for n in 1 2 3 4; do burst+=("$(add_mower "$port" "$n")"); done
posted=$SECONDS
states "$port" 0 50 "${burst[@]}"
verify "$port" 220 ""
took=$((SECONDS - posted))
echo "The burst's events all arrived $took s after they were posted."
((took <= 60)) || { echo "the burst took longer than 60 s" >&2; exit 1; }
kill -TERM "$last_pid"

if [[ -z ${SWATH_TEST_DATABASE_URL:-} || -z ${SWATH_TEST_NATS_SERVER:-} ]]; then
  log "NOT RUN: two replicas and a kill -9 (set SWATH_TEST_DATABASE_URL and SWATH_TEST_NATS_SERVER)"
else
  log "Webhooks on PostgreSQL and NATS, two replicas, one killed with kill -9"
  DB_NAME=swath_webhooks_$$
  psql "$SWATH_TEST_DATABASE_URL" -qc "CREATE DATABASE $DB_NAME" >/dev/null
  db_url=${SWATH_TEST_DATABASE_URL%/*}/$DB_NAME
  phase_start=$SECONDS
  nats_port=$(free_port)
  "$SWATH_TEST_NATS_SERVER" -a 127.0.0.1 -p "$nats_port" -js -sd "$WORK/nats" -l "$WORK/nats.log" &
  pids+=($!)
  disown $!
  sleep 1
  start_receiver
  # Batches that linger a second (the watcher's and the webhooks' consumer's): the kill, during
  # the enqueuer's linger, leaves it holding notifications it had pulled and not acknowledged.
  shared=(SWATH_STORE=postgres "SWATH_DATABASE_URL=$db_url" SWATH_BUS=nats "SWATH_NATS_URL=nats://127.0.0.1:$nats_port"
    SWATH_NOTIFICATIONS_STATE_BATCH_WAIT_SECONDS=1 SWATH_LOG=warn,swath_nats::worker=debug SWATH_LOG_FORMAT=json)
  a=$(free_port)
  start_swath "$a" "${shared[@]}"
  a_pid=$last_pid
  b=$(free_port)
  start_swath "$b" "${shared[@]}"
  b_pid=$last_pid
  setup "$a"
  states "$a" 0 10
  verify "$a" 10
  # Kill the replica that holds the notifications consumer (it enqueues), with events on their
  # way to it; the other gets the rest.
  holder=$(holder_of "$a" "$b")
  if [[ $holder == "$a" ]]; then victim=$a_pid other=$b; else victim=$b_pid other=$a; fi
  echo "The replica on port $holder holds swath-webhooks; killing it with kill -9."
  states "$holder" 10 30
  sleep "${SWATH_WEBHOOKS_KILL_AFTER:-1.5}"
  kill -KILL "$victim"
  states "$other" 30 40
  verify "$other" 40
  # What the kill left to the other replica, from its log of the NATS worker's batches
  # (informative: a kill between two of the enqueuer's batches leaves nothing to redeliver).
  python3 - "$WORK/swath-$other.log" <<'PY' || true
import json, sys
batches = redelivered = 0
for line in open(sys.argv[1]):
    try:
        fields = json.loads(line).get("fields", {})
    except ValueError:
        continue
    if fields.get("consumer") == "swath-webhooks-p0" and fields.get("message") == "Handling a batch.":
        batches += 1
        redelivered += int(fields.get("redelivered", 0))
print(f"The surviving replica handled {batches} batches of swath-webhooks-p0, {redelivered} notifications in them redelivered from the killed one.")
PY
  echo "Two replicas and a kill -9: $((SECONDS - phase_start)) s."
fi

log "Webhooks end to end: every event delivered, in order, verified by standardwebhooks."
