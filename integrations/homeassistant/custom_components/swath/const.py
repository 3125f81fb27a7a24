"""Constants of the Swath integration."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

DOMAIN: Final = "swath"

CONF_SITES: Final = "sites"

# While the stream is up, REST is read this often for what the stream does not carry: mowers
# added, renamed or deleted, health totals, the exact battery and last-seen of quiet mowers.
REFRESH_INTERVAL: Final = timedelta(seconds=60)
# Without the stream, REST is polled this often while it answers, and ever more rarely (doubling
# up to POLL_INTERVAL_MAX) while it does not.
POLL_INTERVAL: Final = timedelta(seconds=30)
POLL_INTERVAL_MAX: Final = timedelta(minutes=5)

# Mowers whose per-mower reads (health, zones, days) of one refresh are in flight at once.
HEALTH_READS_AT_ONCE: Final = 8

# Waits between two attempts to open the stream while Swath answers /healthz: doubled after each
# failure, up to the maximum (a stream refused by a Swath that is up, such as a 429).
STREAM_RETRY_MIN_SECONDS: float = 1.0
STREAM_RETRY_MAX_SECONDS: float = 300.0
# While Swath does not answer at all, /healthz (no token, no store read) is probed this often, so
# that the stream, and one refresh, follow within seconds of Swath coming back.
HEALTH_PROBE_SECONDS: float = 2.0
# Swath sends a keep-alive comment every 15 s: a connection silent for this long is dead.
STREAM_READ_TIMEOUT_SECONDS: float = 45.0

# Event ids already fired, remembered so that a resumed or reloaded stream fires nothing twice.
FIRED_EVENTS_KEPT: Final = 2000
# Pages of GET /v1/events read to catch up on events missed while the stream was down.
EVENT_CATCH_UP_PAGES: Final = 5

# The activities a mower reports (`Activity` in Swath's OpenAPI document).
ACTIVITIES: Final = [
    "mowing",
    "leaving",
    "returning",
    "docked",
    "charging",
    "paused",
    "idle",
    "error",
]
# Those the scheduler counts as busy (`Busy` of `GET /v1/mowers/{id}/busy`).
BUSY_ACTIVITIES: Final = frozenset({"mowing", "leaving", "returning", "paused", "error"})

# The current zone when the mower is in none of its zones.
NO_ZONE: Final = "none"

# The fields of a state that Swath omits when a report lacks them: the last known value is kept.
KEPT_STATE_FIELDS: Final = ("position", "battery_percent")

# The fields of GET /v1/mowers/{id}/health this version needs: a Swath without them is too old.
REQUIRED_HEALTH_FIELDS: Final = ("charge_count", "error_count", "blade_threshold_seconds")

# The derived events Swath sends (`EventKind` in its OpenAPI document).
EVENT_KINDS: Final = [
    "error_raised",
    "error_cleared",
    "geofence_left",
    "geofence_returned",
    "battery_low",
    "mowing_started",
    "mowing_finished",
    "blade_due",
    "zone_entered",
    "zone_left",
    "went_offline",
    "came_online",
    "session_ended",
]

# Why a mowing session ended (`EndReason` in Swath's OpenAPI document, docs/rules.md W8).
END_REASONS: Final = ["docked", "stopped", "error", "silent"]

# The newest sessions each refresh reads (`GET /v1/mowers/{id}/sessions`, newest first): only the
# newest can be open, so the two newest hold both the open session and the last ended one.
SESSIONS_READ: Final = 2
