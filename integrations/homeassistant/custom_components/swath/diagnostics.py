"""Diagnostics: the entry and what the coordinator holds, without the token or any coordinate."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from homeassistant.components.diagnostics import async_redact_data
from homeassistant.const import CONF_API_TOKEN
from homeassistant.core import HomeAssistant

from .coordinator import SwathConfigEntry

# The token, every coordinate (positions, geofence events), and the gateways' free-form fields,
# which may hold anything.
TO_REDACT = {
    CONF_API_TOKEN,
    "lat",
    "lon",
    "latitude",
    "longitude",
    "accuracy_m",
    "heading_deg",
    "extra",
    "unknown_fields",
}


async def async_get_config_entry_diagnostics(
    hass: HomeAssistant, entry: SwathConfigEntry
) -> dict[str, Any]:
    """The entry, the stream's counters and each mower's data."""
    coordinator = entry.runtime_data
    return async_redact_data(
        {
            "entry": {"data": dict(entry.data), "options": dict(entry.options)},
            "stream": asdict(coordinator.stats),
            "last_update_success": coordinator.last_update_success,
            "mowers": {
                mower_id: {
                    "summary": mower.summary,
                    "state": mower.state,
                    "health": mower.health,
                    "alerts": mower.alerts,
                    # Their first and last positions are redacted like the state's.
                    "sessions": mower.sessions,
                }
                for mower_id, mower in (coordinator.data or {}).items()
            },
        },
        TO_REDACT,
    )
