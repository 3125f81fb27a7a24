#!/usr/bin/env bash
# Proves deploy/ against the real thing (issue 33):
#   1. promtool: the scrape configuration and the rules are valid, the rules' unit tests pass;
#   2. two live Swaths (memory store with the simulator; PostgreSQL + NATS with the simulator)
#      and a real Prometheus scraping both: `promtool check metrics` on each /metrics reports
#      nothing, every dashboard panel's expression returns at least one series, every alert
#      expression evaluates without error, and every metric a rule or panel names is exported;
#   3. a fault: the PostgreSQL replica's database is dropped, and SwathNotReady{check="store"}
#      goes pending.
# Prometheus comes from Debian's package, installed when missing; its own service is left
# stopped: this script runs its own prometheus on a free port, with its storage in a temp dir.
# Takes target/release/swath (SWATH_BIN to use another), building it when needed. Uses the
# PostgreSQL of SWATH_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
# for a private database, and a private NATS server (.ci/nats-server).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }
fail() { echo "deploy/check.sh: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # what, seconds, command...
  local what=$1 seconds=$2; shift 2
  for _ in $(seq 1 "$seconds"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  fail "$what did not happen within ${seconds} s"
}

work=$(mktemp -d -t swath-deploy-check.XXXXXX)
pids=()
base_url=${SWATH_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db=swath_deploy_check_$$
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  psql -q "$base_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  if [[ $status -ne 0 ]]; then
    echo "Logs kept in $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

log "Prometheus"
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "Installing Debian's prometheus package."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus) >"$work/apt.log" 2>&1 \
    || { cat "$work/apt.log" >&2; fail "could not install prometheus"; }
  # The package's own service is not ours to run (it would hold port 9090).
  service prometheus stop >/dev/null 2>&1 || true
fi
prometheus --version 2>&1 | head -n 1
python3 -c 'import yaml' 2>/dev/null || {
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml) >/dev/null 2>&1 \
    || fail "python3-yaml is missing and could not be installed"
}

log "promtool: configuration, rules, unit tests"
promtool check config deploy/prometheus/prometheus.yml
promtool check rules deploy/prometheus/rules.yml
promtool test rules deploy/prometheus/rules_test.yml
# The highly available PostgreSQL's rules (issue 44), loaded beside these where it is used.
promtool check rules deploy/postgres-ha/rules.yml
promtool test rules deploy/postgres-ha/rules_test.yml
if grep -q '\${DS_' deploy/grafana/dashboards/*.json; then
  fail "a dashboard has a \${DS_…} placeholder, which provisioning does not substitute"
fi

log "Swath: the release binary"
swath=${SWATH_BIN:-}
if [[ -z $swath ]]; then
  cargo build --release -p swath --bin swath
  swath=${CARGO_TARGET_DIR:-target}/release/swath
fi
[[ -x $swath ]] || fail "$swath is not executable"

token=deploy-check-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
mem_port=$(free_port)
echo "Memory store with the simulator on 127.0.0.1:$mem_port."
SWATH_HTTP_ADDR=127.0.0.1:$mem_port SWATH_SIM_MOWERS=20 SWATH_DEMO_TOKEN=$token SWATH_LOG=warn \
  "$swath" serve >"$work/swath-memory.log" 2>&1 &
pids+=($!)

echo "PostgreSQL (database $db) and NATS with the simulator."
psql -q "$base_url" -c "CREATE DATABASE $db" >/dev/null
db_url=${base_url%/*}/$db
nats_port=$(free_port)
nats=$(.ci/nats-server)
"$nats" -a 127.0.0.1 -p "$nats_port" -js -sd "$work/nats" -l "$work/nats.log" &
pids+=($!)
wait_for "NATS on port $nats_port" 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$nats_port && head -c 4 <&3 | grep -q INFO"
pg_port=$(free_port)
SWATH_HTTP_ADDR=127.0.0.1:$pg_port SWATH_STORE=postgres SWATH_DATABASE_URL=$db_url \
  SWATH_BUS=nats SWATH_NATS_URL=nats://127.0.0.1:$nats_port SWATH_SIM_MOWERS=10 \
  SWATH_DEMO_TOKEN=$token SWATH_LOG=warn \
  "$swath" serve >"$work/swath-postgres.log" 2>&1 &
pids+=($!)
wait_for "the memory Swath to be ready" 60 curl -fsS "http://127.0.0.1:$mem_port/readyz"
wait_for "the PostgreSQL Swath to be ready" 60 curl -fsS "http://127.0.0.1:$pg_port/readyz"

# Some traffic, so that the HTTP series exist: reads, a 404, a live stream held open.
for port in "$mem_port" "$pg_port"; do
  curl -fsS -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port/v1/mowers"
  curl -sS -o /dev/null "http://127.0.0.1:$port/no/such/route"
  curl -sS -N -o /dev/null --max-time 600 -H "Authorization: Bearer $token" \
    "http://127.0.0.1:$port/v1/live/stream" &
  pids+=($!)
done

log "promtool check metrics on each live /metrics"
for port in "$mem_port" "$pg_port"; do
  curl -fsS "http://127.0.0.1:$port/metrics" >"$work/metrics-$port.txt"
  if ! out=$(promtool check metrics <"$work/metrics-$port.txt" 2>&1) || [[ -n $out ]]; then
    echo "$out" >&2
    fail "promtool check metrics reports problems on the Swath at port $port"
  fi
  echo "127.0.0.1:$port: clean."
done

log "A real Prometheus scraping both"
prom_port=$(free_port)
cp deploy/prometheus/rules.yml "$work/rules.yml"
# The shipped configuration with the two live targets and a short interval (so that rates have
# samples within seconds).
python3 - "$work" "$mem_port" "$pg_port" <<'EOF'
import sys, yaml
work, mem, pg = sys.argv[1:]
config = yaml.safe_load(open("deploy/prometheus/prometheus.yml"))
config["global"] = {"scrape_interval": "2s", "evaluation_interval": "2s"}
config["rule_files"] = [f"{work}/rules.yml"]
config["scrape_configs"][0]["static_configs"] = [{"targets": [f"127.0.0.1:{mem}", f"127.0.0.1:{pg}"]}]
yaml.safe_dump(config, open(f"{work}/prometheus.yml", "w"))
EOF
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus-data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
prom=http://127.0.0.1:$prom_port
wait_for "Prometheus to be ready" 60 curl -fsS "$prom/-/ready"
# Both targets up, and enough scrapes for rate() over [5m] to have two samples and more.
wait_for "both targets to be scraped" 60 bash -c \
  "curl -fsS '$prom/api/v1/query?query=sum(up%7Bjob%3D%22swath%22%7D)' | grep -q '\"2\"\]'"
sleep 6

log "Every panel and every rule, through Prometheus's HTTP API"
python3 - "$prom" <<'EOF'
import json, re, sys, time, urllib.parse, urllib.request, yaml
prom = sys.argv[1]

def query(expr):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            body = json.load(answer)
    except urllib.error.HTTPError as e:
        body = json.load(e)
    return body

def exported_names():
    with urllib.request.urlopen(f"{prom}/api/v1/label/__name__/values", timeout=30) as answer:
        return set(json.load(answer)["data"])

def names(expr):
    """The metric names an expression reads (Swath's, and process_*)."""
    found = set()
    for name in re.findall(r"\b((?:swath|process)_[a-z0-9_]+)\b", expr):
        found.add(name)
    return found

# A series appears once first recorded: the simulator's first events may take a while. Wait (up
# to 90 s) until every name the dashboards and rules use is there; a name that never comes is
# reported below.
dashboards = ["deploy/grafana/dashboards/swath.json"]
rule_groups = yaml.safe_load(open("deploy/prometheus/rules.yml"))["groups"]
wanted = set()
for path in dashboards:
    for panel in json.load(open(path))["panels"]:
        for target in panel.get("targets", []):
            wanted |= names(target["expr"])
for group in rule_groups:
    for rule in group["rules"]:
        wanted |= names(rule["expr"])
deadline = time.monotonic() + 90
while not wanted <= (exported := exported_names()) and time.monotonic() < deadline:
    time.sleep(2)
# rate() needs two samples of a series born just now.
time.sleep(5)

problems = []
def check_names(where, expr):
    for name in names(expr):
        if name not in exported:
            problems.append(f"{where}: names {name}, which Swath does not export")

panels = 0
for path in dashboards:
    dash = json.load(open(path))
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            where = f"{path}: panel {panel['title']!r} ({target['refId']})"
            check_names(where, expr)
            body = query(expr)
            panels += 1
            if body.get("status") != "success":
                problems.append(f"{where}: {body.get('error')}")
            elif not body["data"]["result"]:
                problems.append(f"{where}: no series for {expr}")

rules = 0
for group in rule_groups:
    for rule in group["rules"]:
        where = f"rules.yml: {rule.get('alert') or rule.get('record')}"
        check_names(where, rule["expr"])
        body = query(rule["expr"])
        rules += 1
        if body.get("status") != "success":
            problems.append(f"{where}: {body.get('error')}")

with urllib.request.urlopen(f"{prom}/api/v1/rules", timeout=30) as answer:
    for group in json.load(answer)["data"]["groups"]:
        for rule in group["rules"]:
            if rule.get("health") != "ok":
                problems.append(f"rule {rule['name']}: {rule.get('health')} {rule.get('lastError')}")

print(f"{panels} panel expressions, each with series; {rules} alert expressions evaluated.")
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
EOF

log "Fault: the PostgreSQL replica's database is dropped"
psql -q "$base_url" -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
alert_state() {
  curl -fsS "$prom/api/v1/alerts" | python3 -c '
import json, sys
port = sys.argv[1]
for a in json.load(sys.stdin)["data"]["alerts"]:
    l = a["labels"]
    if l.get("alertname") == "SwathNotReady" and l.get("check") == "store" and l.get("instance", "").endswith(":" + port):
        print(a["state"])
' "$pg_port"
}
wait_for "SwathNotReady{check=\"store\"} to go pending" 60 bash -c "$(declare -f alert_state); prom=$prom pg_port=$pg_port alert_state | grep -qE 'pending|firing'"
echo "SwathNotReady{check=\"store\"} is $(alert_state) for the PostgreSQL replica."

log "deploy/ checks passed"
