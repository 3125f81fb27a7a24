"""One measure of tests/scripts/webhooks-bench/run.sh against a running swath.

Usage: drive.py PORT TOKEN RECEIVER_PORT RECEIVED_LOG ENDPOINTS (deliveries|ingest)
"""

import json
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone

PORT, TOKEN, RECEIVER, LOG, ENDPOINTS, MODE = sys.argv[1:7]
ENDPOINTS = int(ENDPOINTS)
BASE = f"http://127.0.0.1:{PORT}"
MOWERS = 20


def api(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        text = answer.read()
        return json.loads(text) if text else None


def received():
    with open(LOG) as f:
        return [int(line.split()[1]) for line in f if line.strip()]


account = api("GET", "/v1/me")["account"]["id"]
site = api("POST", "/v1/sites", {"name": "Bench", "time_zone": "UTC"})["id"]
mowers = [api("POST", "/v1/mowers", {"site_id": site, "name": f"M{i}", "model": "X",
                                      "serial": f"S{i}"})["id"] for i in range(MOWERS)]
for i in range(ENDPOINTS):
    api("POST", "/v1/webhooks", {"url": f"http://127.0.0.1:{RECEIVER}/hook/{i}",
                                 "kinds": ["error_raised", "error_cleared", "mowing_started"]})
start = datetime.now(timezone.utc) - timedelta(days=1)


def states(mower, first, count):
    out = []
    for i in range(first, first + count):
        at = (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        state = {"mower_id": mower, "account_id": account, "observed_at": at}
        if i % 2:
            state.update(activity="error", error_code=f"E{i}")
        else:
            state.update(activity="mowing")
        out.append(state)
    return out


if MODE == "deliveries":
    # About 20 events per mower; each is a delivery per endpoint.
    per_mower = 20 if ENDPOINTS == 1 else 2
    batch = [s for m in mowers for s in states(m, 0, per_mower)]
    api("POST", "/v1/states", batch)
    deadline = time.monotonic() + 120
    seen, stable_since = 0, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        n = len(received())
        if n != seen:
            seen, stable_since = n, time.monotonic()
        elif n and time.monotonic() - stable_since > 3:
            break
    times = received()
    span = (max(times) - min(times)) / 1e9
    print(f"deliveries endpoints={ENDPOINTS} count={len(times)} seconds={span:.2f} "
          f"per_second={len(times) / span:.0f}", flush=True)
else:
    total, per_request = 20_000, 500
    per_mower = total // MOWERS
    began = time.monotonic()
    for first in range(0, per_mower, per_request // MOWERS):
        api("POST", "/v1/states", [s for m in mowers for s in states(m, first, per_request // MOWERS)])
    last = (start + timedelta(seconds=per_mower - 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    while True:
        latest = [api("GET", f"/v1/mowers/{m}/state") for m in mowers]
        if all(l and l.get("observed_at", "").startswith(last[:19]) for l in latest):
            break
        time.sleep(0.05)
    seconds = time.monotonic() - began
    print(f"ingest endpoints={ENDPOINTS} states={total} seconds={seconds:.2f} "
          f"per_second={total / seconds:.0f} deliveries_meanwhile={len(received())}", flush=True)
