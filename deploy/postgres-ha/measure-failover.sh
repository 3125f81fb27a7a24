#!/usr/bin/env bash
# One measured failover (issue 44, BENCHMARKS.md): against a set started by start.sh (DIR) and a
# running Swath at URL on its primary port (SWATH_DATABASE_URL, with SWATH_DATABASE_READ_URL set),
# a steady reader asks one mower's latest state every 0.1 s for 40 s; 3 s in, the primary's
# postmaster is killed (kill -9). Prints the seconds from the kill to the first ingest commit
# after it (swath_ingest_last_commit_timestamp_seconds), whether /readyz said 503 meanwhile, and
# the reads answered 200. Not the end-to-end check (issue 44 item 3, not built): nothing is
# compared here.
#
#   deploy/postgres-ha/measure-failover.sh DIR URL TOKEN
set -euo pipefail
dir=${1:?usage: measure-failover.sh DIR URL TOKEN}; url=${2:?}; token=${3:?}
# shellcheck disable=SC1091
source "$dir/env"
auth="Authorization: Bearer $token"
mower=$(curl -fsS -H "$auth" "$url/v1/mowers?limit=1" | python3 -c \
  'import json, sys; print(json.load(sys.stdin)["items"][0]["id"])')
(
  ok=0 all=0 end=$((SECONDS + 40))
  while ((SECONDS < end)); do
    all=$((all + 1))
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "$auth" "$url/v1/mowers/$mower/state")
    [[ $code == 200 ]] && ok=$((ok + 1))
    sleep 0.1
  done
  echo "reads answered: $ok of $all"
) &
reader=$!
sleep 3
node=node2
curl -fsS "http://127.0.0.1:$REST1_PORT/primary" >/dev/null 2>&1 && node=node1
killed_at=$(date +%s.%N)
kill -9 "$(head -n 1 "$HA_DIR/$node/postmaster.pid")"
saw_503=no
while :; do
  [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$url/readyz") == 503 ]] && saw_503=yes
  last=$(curl -s --max-time 3 "$url/metrics" | awk '/^swath_ingest_last_commit_timestamp_seconds/ {print $2}')
  if [[ -n $last ]] && python3 -c "import sys; sys.exit(0 if $last > $killed_at + 0.5 else 1)"; then break; fi
  sleep 0.25
done
echo "killed $node: storing again after $(python3 -c "print(round($last - $killed_at, 2))") s; /readyz said 503: $saw_503"
wait "$reader"
