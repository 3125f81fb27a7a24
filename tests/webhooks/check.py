"""Compares what the receiver recorded with the events feed: every event of the feed delivered
at least once (verified by the receiver), none missing, each mower's first deliveries in the
order of its events' instants, duplicates only with the same webhook-id. Exit status 1 on any difference.

Usage: check.py LOG_FILE FEED_JSON
"""

import json
import sys

log_file, feed_file = sys.argv[1], sys.argv[2]
records = [json.loads(line) for line in open(log_file)]
invalid = [r for r in records if "invalid" in r]
if invalid:
    sys.exit(f"{len(invalid)} deliveries did not verify: {invalid[:3]}")
feed = json.load(open(feed_file))
# The feed is newest first; the watcher commits a mower's events oldest first.
expected = [e["id"] for e in reversed(feed)]
first_seen, ids_of = [], {}
for r in records:
    data = r["message"]["data"]
    if r["message"]["type"] == "alert_cleared" or "id" not in data:
        continue
    event = data["id"]
    ids_of.setdefault(event, set()).add(r["webhook_id"])
    if event not in first_seen:
        first_seen.append(event)
missing = [e for e in expected if e not in ids_of]
if missing:
    sys.exit(f"{len(missing)} of {len(expected)} events never delivered: {missing[:5]}")
twice = {e: ids for e, ids in ids_of.items() if len(ids) > 1}
if twice:
    sys.exit(f"an event delivered under two webhook-ids: {twice}")
# Events of one instant (a state that ends an error and starts mowing) share their time; the
# feed orders those by id, the watcher by its rules: the order is checked on the instants.
# Order is promised per mower (decision 153): mowers of different partitions interleave.
observed = {e["id"]: (e["mower_id"], e["observed_at"]) for e in feed}
for mower in {m for m, _ in observed.values()}:
    order = [observed[e][1] for e in first_seen if e in observed and observed[e][0] == mower]
    if order != sorted(order):
        sys.exit(f"deliveries of mower {mower} out of order: {order}")
duplicates = len([r for r in records if "message" in r]) - len(ids_of)
print(f"{len(expected)} events of {len({m for m, _ in observed.values()})} mowers delivered in order, verified by standardwebhooks; {duplicates} redeliveries de-duplicated by webhook-id.")
