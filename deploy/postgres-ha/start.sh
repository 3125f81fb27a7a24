#!/usr/bin/env bash
# Starts Swath's highly available PostgreSQL on this machine, from Debian's packages (issue 44):
# etcd, two PostgreSQL 15 nodes under Patroni (synchronous mode, pg_rewind) and HAProxy with a
# primary and a replica port. Installs patroni, etcd-server and haproxy when missing (their own
# services are left stopped). Everything runs on free ports of its own, with its data in DIR
# (default: a new temp dir); PostgreSQL refuses root, so Patroni runs as the postgres OS user.
#
#   deploy/postgres-ha/start.sh [DIR]   start; prints and writes DIR/env (the URLs, ports, pids)
#   deploy/postgres-ha/start.sh stop DIR
#
# DIR/env sets SWATH_DATABASE_URL (the primary port), SWATH_DATABASE_READ_URL (the replica
# port), PATRONICTL (patronictl with this set's configuration) and the ports and pids.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

fail() { echo "postgres-ha/start.sh: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # what, seconds, command...
  local what=$1 seconds=$2; shift 2
  for _ in $(seq 1 "$((seconds * 2))"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  fail "$what did not happen within ${seconds} s (logs in $dir)"
}

if [[ ${1:-} == stop ]]; then
  dir=${2:?usage: start.sh stop DIR}
  # shellcheck disable=SC1091
  source "$dir/env"
  for pid in $HAPROXY_PID $PATRONI1_PID $PATRONI2_PID; do kill "$pid" 2>/dev/null || true; done
  sleep 2
  # A postmaster Patroni left behind (it stops its own on SIGTERM; not after a kill -9 of it).
  for node in node1 node2; do
    [[ -f $dir/$node/postmaster.pid ]] && kill -9 "$(head -n 1 "$dir/$node/postmaster.pid")" 2>/dev/null || true
  done
  kill "$ETCD_PID" 2>/dev/null || true
  # What a wrapper's signal did not reach (runuser's child, say): found by its command line.
  for pattern in "patroni $dir/node" "haproxy -f $dir/haproxy.cfg" "etcd --name swath-ha --data-dir $dir/etcd"; do
    pkill -f -- "$pattern" 2>/dev/null || true
  done
  sleep 1
  for pattern in "patroni $dir/node" "haproxy -f $dir/haproxy.cfg" "etcd --name swath-ha --data-dir $dir/etcd"; do
    pkill -KILL -f -- "$pattern" 2>/dev/null || true
  done
  exit 0
fi

missing=()
command -v patroni >/dev/null || missing+=(patroni)
command -v etcd >/dev/null || missing+=(etcd-server)
command -v haproxy >/dev/null || missing+=(haproxy)
if ((${#missing[@]})); then
  echo "Installing ${missing[*]} from Debian's packages."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") >/tmp/postgres-ha-apt.log 2>&1 \
    || { cat /tmp/postgres-ha-apt.log >&2; fail "could not install ${missing[*]}"; }
  # The packages' own services are not ours to run.
  for service in patroni etcd haproxy; do service "$service" stop >/dev/null 2>&1 || true; done
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
id postgres >/dev/null || fail "the postgres OS user is missing"

dir=${1:-$(mktemp -d -t swath-postgres-ha.XXXXXX)}
mkdir -p "$dir"
chown postgres: "$dir"
chmod 700 "$dir"

etcd_port=$(free_port); etcd_peer=$(free_port)
pg1=$(free_port); pg2=$(free_port); rest1=$(free_port); rest2=$(free_port)
primary_port=$(free_port); replica_port=$(free_port)

runuser -u postgres -- etcd --name swath-ha --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "swath-ha=http://127.0.0.1:$etcd_peer" >"$dir/etcd.log" 2>&1 &
etcd_pid=$!
wait_for "etcd to answer" 30 curl -fsS "http://127.0.0.1:$etcd_port/health"

fill() { # template, output, NAME PG_PORT REST_PORT
  sed -e "s|@NAME@|$3|g" -e "s|@PG_PORT@|$4|g" -e "s|@REST_PORT@|$5|g" -e "s|@ETCD_PORT@|$etcd_port|g" \
    -e "s|@DATA@|$dir|g" -e "s|@BIN@|$bin|g" -e "s|@PRIMARY_PORT@|$primary_port|g" \
    -e "s|@REPLICA_PORT@|$replica_port|g" -e "s|@PG1@|$pg1|g" -e "s|@PG2@|$pg2|g" \
    -e "s|@REST1@|$rest1|g" -e "s|@REST2@|$rest2|g" "$1" >"$2"
}
fill "$here/patroni.yml.in" "$dir/node1.yml" node1 "$pg1" "$rest1"
fill "$here/patroni.yml.in" "$dir/node2.yml" node2 "$pg2" "$rest2"
fill "$here/haproxy.cfg.in" "$dir/haproxy.cfg" - - -
chown postgres: "$dir"/*.yml

runuser -u postgres -- patroni "$dir/node1.yml" >"$dir/patroni-node1.log" 2>&1 &
patroni1_pid=$!
wait_for "node1 to become the primary" 90 curl -fsS "http://127.0.0.1:$rest1/primary"
runuser -u postgres -- patroni "$dir/node2.yml" >"$dir/patroni-node2.log" 2>&1 &
patroni2_pid=$!
wait_for "node2 to stream as the synchronous standby" 120 bash -c \
  "curl -fsS http://127.0.0.1:$rest2/sync >/dev/null"

haproxy -f "$dir/haproxy.cfg" -db >"$dir/haproxy.log" 2>&1 &
haproxy_pid=$!
wait_for "HAProxy's primary port" 30 pg_isready -h 127.0.0.1 -p "$primary_port"
wait_for "HAProxy's replica port" 30 psql -qAt "postgres://postgres@127.0.0.1:$replica_port/postgres" -c "SELECT pg_is_in_recovery()"

cat >"$dir/env" <<ENV
export SWATH_DATABASE_URL=postgres://postgres@127.0.0.1:$primary_port/postgres?sslmode=disable
export SWATH_DATABASE_READ_URL=postgres://postgres@127.0.0.1:$replica_port/postgres?sslmode=disable
export PATRONICTL="runuser -u postgres -- patronictl -c $dir/node1.yml"
export HA_DIR=$dir PG1_PORT=$pg1 PG2_PORT=$pg2 REST1_PORT=$rest1 REST2_PORT=$rest2
export ETCD_PID=$etcd_pid PATRONI1_PID=$patroni1_pid PATRONI2_PID=$patroni2_pid HAPROXY_PID=$haproxy_pid
ENV
cat "$dir/env"
echo "Started; stop with: $0 stop $dir"
