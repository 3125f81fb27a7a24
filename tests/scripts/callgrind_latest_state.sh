#!/usr/bin/env bash
# Instructions per latest-state request (`GET /v1/mowers/{id}/state`) of one `swath` binary on
# PostgreSQL, counted by callgrind (BENCHMARKS.md, "Without the release ping, one decode pass").
# Instruction counts do not depend on what else the machine runs, unlike req/s.
#
#   tests/scripts/callgrind_latest_state.sh BINARY [CALLGRIND_OUT]
#
# The binary serves a fresh database (`swath_bench_latest_cg`) with the demo fleet slowed to one
# state per 600 s, under `valgrind --tool=callgrind --instr-atstart=no`; wrk warms it up for 5 s,
# then instrumentation is on for CG_SECONDS (15) of `wrk -t1 -c8`. Prints the requests, the
# instructions and their quotient. Needs valgrind, wrk, psql, curl and jq.
set -euo pipefail

# shellcheck source=tests/scripts/latest_state_lib.sh
source "$(dirname "$0")/latest_state_lib.sh"

bin=$1
out=${2:-$(mktemp -t callgrind.out.XXXXXX)}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
DB=swath_bench_latest_cg
PORT=${PORT:-18346}
CG_SECONDS=${CG_SECONDS:-15}
TOKEN=bench-latest-state-a-token-of-32-chars-or-more
log=$(mktemp)
wrk_log=$(mktemp)

psql -q "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
SWATH_STORE=postgres SWATH_DATABASE_URL="$PGURL/$DB?sslmode=disable" \
    SWATH_HTTP_ADDR=127.0.0.1:$PORT SWATH_DEMO_TOKEN=$TOKEN SWATH_SIM_SEED=7 \
    SWATH_SIM_STATE_PERIOD_SECONDS=600 SWATH_LOG=warn \
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "$bin" serve \
    >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
mower=$(first_mower_with_a_state 240 "$log" "$bin")
url="http://127.0.0.1:$PORT/v1/mowers/$mower/state"
wrk -t1 -c8 -d5s -H "Authorization: Bearer $TOKEN" "$url" >/dev/null
callgrind_control -i on $pid >/dev/null
wrk -t1 -c8 -d"${CG_SECONDS}s" -H "Authorization: Bearer $TOKEN" "$url" | tee "$wrk_log"
callgrind_control -i off $pid >/dev/null
requests=$(awk '/requests in/ {print $1}' "$wrk_log")
kill -INT $pid
wait $pid || true
trap - EXIT
psql -q "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "== $bin: $requests requests, $total instructions, $((total / requests)) per request ($out)"
