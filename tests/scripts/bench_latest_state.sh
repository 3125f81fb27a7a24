#!/usr/bin/env bash
# Requests per second of the latest-state GET (`GET /v1/mowers/{id}/state`) on PostgreSQL, with
# wrk, for one or more `swath` binaries in one sitting (BENCHMARKS.md, "Latest-state GET").
#
#   tests/scripts/bench_latest_state.sh BINARY [BINARY...]
#
# Each binary serves a fresh database (`swath_bench_latest`, dropped and created again) with the
# demo fleet (20 simulated mowers, seed 7, so the same ids every time) and the demo token; once
# the first mower has a state, wrk runs for WRK_SECONDS (15) on 32 connections and 2 threads.
# Needs wrk, psql, curl and jq; PGURL (postgres://postgres@127.0.0.1:5432) names the server.
set -euo pipefail

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
DB=swath_bench_latest
PORT=${PORT:-18480}
WRK_SECONDS=${WRK_SECONDS:-15}
TOKEN=bench-latest-state

for bin in "$@"; do
    psql -q "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
    log=$(mktemp)
    SWATH_STORE=postgres SWATH_DATABASE_URL="$PGURL/$DB?sslmode=disable" \
        SWATH_HTTP_ADDR=127.0.0.1:$PORT SWATH_DEMO_TOKEN=$TOKEN SWATH_SIM_SEED=7 \
        SWATH_LOG=warn "$bin" serve >"$log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    mower=""
    for _ in $(seq 1 120); do
        mower=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/mowers?limit=1" |
            jq -r '.items[0].id // empty' 2>/dev/null || true)
        if [ -n "$mower" ] && curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" \
            "http://127.0.0.1:$PORT/v1/mowers/$mower/state"; then
            break
        fi
        sleep 0.5
    done
    [ -n "$mower" ] || { echo "no mower with a state from $bin"; cat "$log"; exit 1; }
    echo "== $bin (mower $mower)"
    wrk -t2 -c32 -d"${WRK_SECONDS}s" -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:$PORT/v1/mowers/$mower/state"
    kill "$pid"
    wait "$pid" || true
    trap - EXIT
    rm -f "$log"
done
