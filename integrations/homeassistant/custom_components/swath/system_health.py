"""System health: whether Home Assistant reaches Swath, and how many live streams are up."""

from __future__ import annotations

from typing import Any

from homeassistant.components import system_health
from homeassistant.core import HomeAssistant, callback

from .const import DOMAIN


@callback
def async_register(
    hass: HomeAssistant, register: system_health.SystemHealthRegistration
) -> None:
    """Register the information shown under Settings → System → Repairs → System information."""
    register.async_register_info(system_health_info)


async def system_health_info(hass: HomeAssistant) -> dict[str, Any]:
    """The loaded entries, their connected live streams, and the first one's `/healthz`."""
    entries = hass.config_entries.async_loaded_entries(DOMAIN)
    info: dict[str, Any] = {
        "entries": len(entries),
        "streams_connected": sum(1 for e in entries if e.runtime_data.stats.connected),
    }
    if entries:
        info["can_reach_server"] = system_health.async_check_can_reach_url(
            hass, f"{entries[0].runtime_data.client.url}/healthz"
        )
    return info
