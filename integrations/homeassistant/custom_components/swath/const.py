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

# Health reads of one refresh in flight at once.
HEALTH_READS_AT_ONCE: Final = 8

# Waits between two attempts to open the stream: doubled after each failure, up to the maximum.
STREAM_RETRY_MIN_SECONDS: float = 1.0
STREAM_RETRY_MAX_SECONDS: float = 300.0
# Swath sends a keep-alive comment every 15 s: a connection silent for this long is dead.
STREAM_READ_TIMEOUT_SECONDS: float = 45.0

# Event ids already fired, remembered so that a resumed or reloaded stream fires nothing twice.
FIRED_EVENTS_KEPT: Final = 2000
# Pages of GET /v1/events read to catch up on events missed while the stream was down.
EVENT_CATCH_UP_PAGES: Final = 5

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
]
