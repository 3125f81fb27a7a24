"""The lawn mower entity: Swath's `lawn_mower_activity`; Swath sends mowers no commands."""

from __future__ import annotations

from homeassistant.components.lawn_mower import (
    LawnMowerActivity,
    LawnMowerEntity,
    LawnMowerEntityFeature,
)
from homeassistant.core import HomeAssistant, callback
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .coordinator import SwathConfigEntry, SwathCoordinator
from .entity import SwathEntity, new_mowers


async def async_setup_entry(
    hass: HomeAssistant,
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add a lawn mower per mower, now and whenever Swath gains one."""
    coordinator = entry.runtime_data
    known: set[str] = set()

    @callback
    def add() -> None:
        async_add_entities(
            SwathLawnMower(coordinator, mower_id) for mower_id in new_mowers(coordinator, known)
        )

    add()
    entry.async_on_unload(coordinator.async_add_listener(add))


class SwathLawnMower(SwathEntity, LawnMowerEntity):
    """What the mower is doing, as Home Assistant's five activities."""

    _attr_name = None
    _attr_supported_features = LawnMowerEntityFeature(0)
    follows_mower_availability = True

    def __init__(self, coordinator: SwathCoordinator, mower_id: str) -> None:
        """The mower's main entity, named as its device."""
        super().__init__(coordinator, mower_id, "lawn_mower")

    @property
    def activity(self) -> LawnMowerActivity | None:
        """The latest state's `lawn_mower_activity`; None before the first report."""
        mower = self.mower
        if mower is None or mower.state is None:
            return None
        return LawnMowerActivity(mower.state["lawn_mower_activity"])
