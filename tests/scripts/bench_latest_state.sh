#!/usr/bin/env bash
# Requests per second of the latest-state GET (`GET /v1/mowers/{id}/state`) on PostgreSQL, with
# wrk, for one or more `swath` binaries in one sitting (BENCHMARKS.md, "Latest-state GET").
#
#   tests/scripts/bench_latest_state.sh BINARY [BINARY...]
#
# Each binary serves a fresh database ($DB, `swath_bench_latest`, dropped and created again) with
# the demo fleet (20 simulated mowers, seed 7, so the same ids every time) and the demo token;
# once the first mower has a state, wrk runs for WRK_SECONDS (15) on 32 connections and 2 threads.
# After wrk's own report, one line gives the CPU time each party spent per request during the run
# (from /proc: the `swath` process, the PostgreSQL backends connected to $DB, wrk itself) and the
# load average: CPU per request depends far less on what else the machine runs than requests per
# second do.
# Needs wrk, psql, curl and jq; PGURL (postgres://postgres@127.0.0.1:5432) names the server.
set -euo pipefail

# shellcheck source=tests/scripts/latest_state_lib.sh
source "$(dirname "$0")/latest_state_lib.sh"

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
DB=${DB:-swath_bench_latest}
PORT=${PORT:-18480}
WRK_SECONDS=${WRK_SECONDS:-15}
TOKEN=bench-latest-state-a-token-of-32-chars-or-more
TICKS=$(getconf CLK_TCK)

# CPU ticks of the processes whose ids are given, summed, as "user system"; gone ones count 0.
ticks() {
    local user=0 system=0 pid fields
    for pid in "$@"; do
        fields=$(cut -d')' -f2- "/proc/$pid/stat" 2>/dev/null) || continue
        # After "pid (comm)": state is field 1, utime field 12, stime field 13.
        user=$((user + $(awk '{print $12}' <<<"$fields")))
        system=$((system + $(awk '{print $13}' <<<"$fields")))
    done
    echo "$user $system"
}

# The PostgreSQL backends serving $DB (the bench's server and its pool).
backends() {
    psql -Atq "$PGURL/postgres" -c "SELECT pid FROM pg_stat_activity WHERE datname = '$DB'"
}

for bin in "$@"; do
    psql -q "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
    log=$(mktemp)
    SWATH_STORE=postgres SWATH_DATABASE_URL="$PGURL/$DB?sslmode=disable" \
        SWATH_HTTP_ADDR=127.0.0.1:$PORT SWATH_DEMO_TOKEN=$TOKEN SWATH_SIM_SEED=7 \
        SWATH_LOG=warn "$bin" serve >"$log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    mower=$(first_mower_with_a_state 120 "$log" "$bin")
    echo "== $bin (mower $mower)"
    # Fill the pool first, so that every backend that serves the run is counted.
    wrk -t2 -c32 -d1s -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:$PORT/v1/mowers/$mower/state" >/dev/null
    # Backends open now count from now; those opened during the run (a connection closed when
    # wrk cut a request midway is replaced) count whole; those closed during the run are lost.
    mapfile -t pg < <(backends)
    declare -A pg_start=()
    for p in "${pg[@]}"; do pg_start[$p]=$(ticks "$p"); done
    swath_before=$(ticks "$pid")
    wrk_log=$(mktemp)
    wrk_times=$( { TIMEFORMAT='%U %S'; time wrk -t2 -c32 -d"${WRK_SECONDS}s" \
        -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/mowers/$mower/state" \
        >"$wrk_log"; } 2>&1)
    swath_after=$(ticks "$pid")
    mapfile -t pg < <(backends)
    pg_before="0 0"
    for p in "${pg[@]}"; do
        [ -n "${pg_start[$p]:-}" ] && pg_before=$(awk '{print $1 + $3, $2 + $4}' <<<"$pg_before ${pg_start[$p]}")
    done
    pg_after=$(ticks "${pg[@]}")
    unset pg_start
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    cat "$wrk_log"
    requests=$(awk '/requests in/ {print $1}' "$wrk_log")
    awk -v r="$requests" -v hz="$TICKS" -v s0="$swath_before" -v s1="$swath_after" \
        -v p0="$pg_before" -v p1="$pg_after" -v w="$wrk_times" -v n="${#pg[@]}" -v loadavg="$load" \
        'BEGIN {
            split(s0, a, " "); split(s1, b, " "); split(p0, c, " "); split(p1, d, " ");
            split(w, t, " ");
            us = 1e6 / hz / r;
            printf "cpu per request (user + system): swath %.1f + %.1f us, postgres %.1f + %.1f us (%d backends), wrk %.1f + %.1f us; load average %s\n",
                (b[1] - a[1]) * us, (b[2] - a[2]) * us, (d[1] - c[1]) * us, (d[2] - c[2]) * us, n,
                t[1] / r * 1e6, t[2] / r * 1e6, loadavg
        }'
    rm -f "$wrk_log"
    kill "$pid"
    wait "$pid" || true
    trap - EXIT
    rm -f "$log"
done
