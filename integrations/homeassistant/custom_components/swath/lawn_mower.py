"""The lawn mower entity: Swath's `lawn_mower_activity`; Swath sends mowers no commands."""

from __future__ import annotations

from homeassistant.components.lawn_mower import LawnMowerEntity
from homeassistant.components.lawn_mower.const import LawnMowerActivity, LawnMowerEntityFeature
from homeassistant.core import HomeAssistant
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .coordinator import SwathConfigEntry, SwathCoordinator
from .entity import SwathEntity, add_entities_per_mower

# Read-only entities updated by the coordinator: no limit on parallel updates.
PARALLEL_UPDATES = 0


async def async_setup_entry(
    hass: HomeAssistant,
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add a lawn mower per mower, now and whenever Swath gains one."""
    add_entities_per_mower(
        entry,
        async_add_entities,
        lambda coordinator, mower_id: [SwathLawnMower(coordinator, mower_id)],
    )


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
