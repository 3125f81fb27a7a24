#!/usr/bin/env bash
# Issue 45 item 4 (decision 194): exports a million history rows from a release `swath` on the
# memory store and checks
#  (a) its resident memory (VmRSS of /proc/<pid>/status, sampled every 10 ms) during the export
#      stays within 1.2x of the idle process's (measured after the rows were imported), and
#  (b) the CSV parses with Python's csv module into exactly the rows of the JSON API (every
#      row of the first SAMPLE mowers compared field by field with their JSON pages).
# Usage: cargo build --release -p swath && tests/scripts/export_memory.sh
# Settings: SWATH_BIN (default target/release/swath), PORT, MOWERS (20), HOURS (14: one state a
# second per mower, 20 x 14 h = 1 008 000 rows), SAMPLE (3).
set -euo pipefail
BIN=${SWATH_BIN:-${CARGO_TARGET_DIR:-target}/release/swath}
PORT=${PORT:-18088}
MOWERS=${MOWERS:-20}
HOURS=${HOURS:-14}
SAMPLE=${SAMPLE:-3}
TOKEN=bench-export
API=http://127.0.0.1:$PORT
WORK=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT

export SWATH_SIM_SEED=7 SWATH_SIM_MOWERS=$MOWERS SWATH_MEMORY_HISTORY_PER_MOWER=100000
TO=$(date -u +%FT%TZ)
FROM=$(date -u -d "-$((HOURS + 1)) hours" +%FT%TZ)
"$BIN" simulate --hours "$HOURS" 2>/dev/null > "$WORK/states.ndjson"
echo "Generated $(wc -l < "$WORK/states.ndjson") states."

SWATH_DEMO_TOKEN=$TOKEN SWATH_HTTP_ADDR=127.0.0.1:$PORT RUST_LOG=info "$BIN" > "$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do curl -sf "$API/healthz" > /dev/null && break; sleep 0.2; done

split -l 100000 "$WORK/states.ndjson" "$WORK/part."
for part in "$WORK"/part.*; do
  curl -sf -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/x-ndjson' \
    --data-binary @"$part" "$API/v1/imports" > /dev/null
done
sleep 2
rss() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
IDLE=$(rss)
echo "Idle VmRSS after the import: $IDLE kB."

( while kill -0 $PID 2>/dev/null; do rss; sleep 0.01; done ) > "$WORK/rss" &
SAMPLER=$!
START=$(date +%s.%N)
curl -sf -H "Authorization: Bearer $TOKEN" -o "$WORK/history.csv" \
  "$API/v1/exports/history.csv?from=$FROM&to=$TO"
END=$(date +%s.%N)
kill $SAMPLER
PEAK=$(sort -n "$WORK/rss" | tail -1)
echo "VmRSS samples during the export: $(wc -l < "$WORK/rss")."
echo "Export: $(($(wc -l < "$WORK/history.csv") - 1)) rows, $(du -m "$WORK/history.csv" | cut -f1) MiB in $(echo "$END - $START" | bc) s; peak VmRSS $PEAK kB."

python3 - "$WORK/history.csv" "$API" "$TOKEN" "$FROM" "$TO" "$IDLE" "$PEAK" "$SAMPLE" <<'PY'
import csv, json, sys, urllib.request, urllib.parse
from collections import defaultdict
path, api, token, start, end, idle, peak, sample = sys.argv[1:]
idle, peak, sample = int(idle), int(peak), int(sample)
rows = defaultdict(list)
with open(path, newline="", encoding="utf-8") as f:
    reader = csv.reader(f)
    header = next(reader)
    for r in reader:
        rows[r[0]].append(r)
total = sum(len(v) for v in rows.values())
assert total >= 1_000_000, f"only {total} rows exported"

def get(url):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)

def cell(v):
    if v is None: return ""
    if isinstance(v, bool): return "true" if v else "false"
    return str(v)

compared = 0
for n, mower in enumerate(sorted(rows)[:sample]):
    cursor, json_rows = None, []
    while True:
        q = {"from": start, "to": end, "limit": 1000}
        if cursor: q["cursor"] = cursor
        page = get(f"{api}/v1/mowers/{mower}/history?" + urllib.parse.urlencode(q))
        json_rows += page["items"]
        cursor = page["next_cursor"]
        if not cursor: break
    assert len(json_rows) == len(rows[mower]), (mower, len(json_rows), len(rows[mower]))
    for j, c in zip(json_rows, rows[mower]):
        fields = dict(zip(header, c))
        for key in ("activity", "lawn_mower_activity", "battery_percent", "error_code", "blade_on"):
            assert fields[key] == cell(j[key]), (key, fields[key], j[key])
        assert fields["observed_at"] == j["observed_at"], (fields["observed_at"], j["observed_at"])
        compared += 1
ratio = peak / idle
print(f"Parsed {total} rows of {len(rows)} mowers with Python's csv; {compared} rows compared with the JSON API, all equal.")
print(f"Peak VmRSS / idle VmRSS = {peak} / {idle} kB = {ratio:.3f} (limit 1.2).")
assert ratio <= 1.2, "resident memory grew with the export"
PY
grep -c "Export progressing." "$WORK/server.log" | sed 's/^/Progress lines logged: /'
