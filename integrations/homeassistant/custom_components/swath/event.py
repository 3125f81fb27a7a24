"""An event entity per mower, firing Swath's derived events (each once)."""

from __future__ import annotations

import logging
from typing import Any

from homeassistant.components.event import EventEntity
from homeassistant.core import HomeAssistant, callback
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .const import EVENT_KINDS
from .coordinator import SwathConfigEntry, SwathCoordinator
from .entity import SwathEntity, add_entities_per_mower

# Read-only entities updated by the coordinator: no limit on parallel updates.
PARALLEL_UPDATES = 0

_LOGGER = logging.getLogger(__name__)


async def async_setup_entry(
    hass: HomeAssistant,
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add an event entity per mower, now and whenever Swath gains one."""
    add_entities_per_mower(
        entry,
        async_add_entities,
        lambda coordinator, mower_id: [SwathEvent(coordinator, mower_id)],
    )


class SwathEvent(SwathEntity, EventEntity):
    """The events Swath's watcher derives for the mower, with their details as attributes."""

    _attr_translation_key = "mower_event"
    _attr_event_types = EVENT_KINDS

    def __init__(self, coordinator: SwathCoordinator, mower_id: str) -> None:
        """The event entity of this mower."""
        super().__init__(coordinator, mower_id, "event")

    async def async_added_to_hass(self) -> None:
        """Receive this mower's events from the coordinator."""
        await super().async_added_to_hass()
        self.async_on_remove(
            self.coordinator.async_add_event_listener(self.mower_id, self._fire)
        )

    @callback
    def _fire(self, event: dict[str, Any]) -> None:
        if event["kind"] not in EVENT_KINDS:
            _LOGGER.debug("Ignored an event of a kind this version does not know: %s", event["kind"])
            return
        details = {k: v for k, v in event.get("details", {}).items() if k != "kind"}
        attributes = {
            **details,
            "event_id": event["id"],
            "observed_at": event["observed_at"],
        }
        if event.get("alert") is not None:
            attributes["alert"] = event["alert"]
        self._trigger_event(event["kind"], attributes)
        self.async_write_ha_state()
