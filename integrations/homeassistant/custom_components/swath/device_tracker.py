"""The mower's position: latitude, longitude and accuracy of its latest state."""

from __future__ import annotations

from typing import Any

from homeassistant.components.device_tracker.config_entry import TrackerEntity
from homeassistant.components.device_tracker.const import SourceType
from homeassistant.core import HomeAssistant, callback
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
    """Add a tracker per mower, now and whenever Swath gains one."""
    add_entities_per_mower(
        entry,
        async_add_entities,
        lambda coordinator, mower_id: [SwathTracker(coordinator, mower_id)],
    )


class SwathTracker(SwathEntity, TrackerEntity):
    """Where the mower was when it last reported a position."""

    _attr_translation_key = "position"
    _attr_source_type = SourceType.GPS
    follows_mower_availability = True

    def __init__(self, coordinator: SwathCoordinator, mower_id: str) -> None:
        """The tracker of this mower."""
        super().__init__(coordinator, mower_id, "position")
        self._written: tuple[Any, ...] | None = None

    async def async_added_to_hass(self) -> None:
        """Remember what was written when the entity was added."""
        await super().async_added_to_hass()
        self._written = self._written_key()

    def _written_key(self) -> tuple[Any, ...]:
        return (self.available, self.latitude, self.longitude, self.location_accuracy)

    @callback
    def _handle_coordinator_update(self) -> None:
        """Write only when the position or availability changed (no recorder churn)."""
        key = self._written_key()
        if key != self._written:
            self._written = key
            self.async_write_ha_state()

    def _position(self) -> dict[str, Any] | None:
        mower = self.mower
        if mower is None or mower.state is None:
            return None
        position: dict[str, Any] | None = mower.state.get("position")
        return position

    @property
    def latitude(self) -> float | None:
        """The reported latitude."""
        position = self._position()
        return None if position is None else float(position["lat"])

    @property
    def longitude(self) -> float | None:
        """The reported longitude."""
        position = self._position()
        return None if position is None else float(position["lon"])

    @property
    # Home Assistant 2025.4 types it `int`, newer releases `float`; mowers report decimetres.
    def location_accuracy(self) -> float:  # type: ignore[override]
        """The reported accuracy radius in metres (0 when the mower does not know it)."""
        position = self._position()
        if position is None or position.get("accuracy_m") is None:
            return 0
        return float(position["accuracy_m"])
