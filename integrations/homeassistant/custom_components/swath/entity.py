"""The base of every Swath entity: one device per mower, updated per mower by the stream."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from homeassistant.core import callback
from homeassistant.helpers.device_registry import DeviceInfo
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback
from homeassistant.helpers.update_coordinator import CoordinatorEntity

from .const import DOMAIN
from .coordinator import SwathConfigEntry, SwathCoordinator
from .model import MowerData


class SwathEntity(CoordinatorEntity[SwathCoordinator]):
    """An entity of one mower."""

    _attr_has_entity_name = True
    # Entities that say what the mower is doing now are unavailable while Swath says it is
    # offline; those about its connection, totals and history stay available.
    follows_mower_availability = False

    def __init__(self, coordinator: SwathCoordinator, mower_id: str, key: str) -> None:
        """Name the entity by its mower and key; describe the mower's device."""
        super().__init__(coordinator)
        self.mower_id = mower_id
        self._attr_unique_id = f"{mower_id}_{key}"
        summary = coordinator.data[mower_id].summary
        self._attr_device_info = DeviceInfo(
            identifiers={(DOMAIN, mower_id)},
            name=summary["name"],
            model=summary["model"],
            serial_number=summary["serial"],
            suggested_area=summary.get("site_name"),
            # Swath's live fleet page, where the mower is on the map.
            configuration_url=f"{coordinator.client.url}/live/fleet",
        )

    @property
    def mower(self) -> MowerData | None:
        """The mower's data, None once it is gone from Swath."""
        return (self.coordinator.data or {}).get(self.mower_id)

    @property
    def available(self) -> bool:
        """Connected to Swath, the mower still exists, and (for some) Swath says it is online."""
        mower = self.mower
        if not super().available or mower is None:
            return False
        return mower.online or not self.follows_mower_availability

    async def async_added_to_hass(self) -> None:
        """Also listen to the stream's updates of this mower alone."""
        await super().async_added_to_hass()
        self.async_on_remove(
            self.coordinator.async_add_mower_listener(
                self.mower_id, self._handle_coordinator_update
            )
        )


def new_mowers(coordinator: SwathCoordinator, known: set[str]) -> set[str]:
    """The mowers that have no entities of a platform yet; forgets the ones that are gone."""
    current = set(coordinator.data or {})
    known &= current
    added = current - known
    known |= added
    return added


def add_entities_per_mower(
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
    entities_of: Callable[[SwathCoordinator, str], Iterable[SwathEntity]],
) -> None:
    """Add a platform's entities of each mower, now and whenever Swath gains one."""
    coordinator = entry.runtime_data
    known: set[str] = set()

    @callback
    def add() -> None:
        async_add_entities(
            entity
            for mower_id in new_mowers(coordinator, known)
            for entity in entities_of(coordinator, mower_id)
        )

    add()
    entry.async_on_unload(coordinator.async_add_listener(add))
