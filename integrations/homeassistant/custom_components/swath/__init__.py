"""Swath: robot lawn mower telemetry in Home Assistant, pushed by Swath's live stream."""

from __future__ import annotations

from homeassistant.const import CONF_API_TOKEN, CONF_URL, Platform
from homeassistant.core import HomeAssistant
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers.aiohttp_client import async_get_clientsession

from .api import SwathClient
from .const import CONF_SITES, DOMAIN
from .coordinator import SwathConfigEntry, SwathCoordinator

PLATFORMS: list[Platform] = [
    Platform.BINARY_SENSOR,
    Platform.BUTTON,
    Platform.CALENDAR,
    Platform.DEVICE_TRACKER,
    Platform.EVENT,
    Platform.LAWN_MOWER,
    Platform.SENSOR,
]


async def async_setup_entry(hass: HomeAssistant, entry: SwathConfigEntry) -> bool:
    """Load the mowers through REST, add their entities, then follow the live stream."""
    client = SwathClient(
        async_get_clientsession(hass), entry.data[CONF_URL], entry.data[CONF_API_TOKEN]
    )
    coordinator = SwathCoordinator(hass, entry, client)
    await coordinator.async_config_entry_first_refresh()
    entry.runtime_data = coordinator
    await hass.config_entries.async_forward_entry_setups(entry, PLATFORMS)
    # Cancelled when the entry unloads.
    entry.async_create_background_task(
        hass, coordinator.async_run_stream(), f"{DOMAIN} live stream {entry.entry_id}"
    )
    entry.async_on_unload(entry.add_update_listener(_async_options_updated))
    return True


async def async_unload_entry(hass: HomeAssistant, entry: SwathConfigEntry) -> bool:
    """Unload the platforms; the stream task ends with the entry."""
    return await hass.config_entries.async_unload_platforms(entry, PLATFORMS)


async def _async_options_updated(hass: HomeAssistant, entry: SwathConfigEntry) -> None:
    """Reload when the sites changed; re-auth and reconfigure reload the entry themselves."""
    if set(entry.options.get(CONF_SITES) or []) != (entry.runtime_data.sites or set()):
        await hass.config_entries.async_reload(entry.entry_id)


async def async_remove_config_entry_device(
    hass: HomeAssistant, entry: SwathConfigEntry, device: dr.DeviceEntry
) -> bool:
    """A device may be removed by hand only once Swath no longer has its mower."""
    data = entry.runtime_data.data or {}
    return not any(domain == DOMAIN and i in data for domain, i in device.identifiers)
