"""Binary sensors: a problem, charging, busy, and Swath's availability of the mower."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from homeassistant.components.binary_sensor import (
    BinarySensorDeviceClass,
    BinarySensorEntity,
    BinarySensorEntityDescription,
)
from homeassistant.const import EntityCategory
from homeassistant.core import HomeAssistant
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .const import BUSY_ACTIVITIES
from .coordinator import SwathConfigEntry, SwathCoordinator
from .model import MowerData
from .entity import SwathEntity, add_entities_per_mower

# Read-only entities updated by the coordinator: no limit on parallel updates.
PARALLEL_UPDATES = 0


def _activity(mower: MowerData) -> str | None:
    return (mower.state or {}).get("activity")


def has_problem(mower: MowerData) -> bool:
    """An error reported, an open alert, or the blade due."""
    state = mower.state or {}
    return bool(
        state.get("activity") == "error"
        or state.get("error_code")
        or mower.alerts
        or (mower.health or {}).get("blade_due")
    )


def _problem_attributes(mower: MowerData) -> dict[str, Any]:
    return {
        "error_code": (mower.state or {}).get("error_code"),
        "open_alerts": sorted(mower.alerts),
        "blade_due": bool((mower.health or {}).get("blade_due")),
    }


def _connectivity_attributes(mower: MowerData) -> dict[str, Any]:
    return {
        "offline_reason": mower.summary.get("offline_reason"),
        "offline_since": mower.summary.get("offline_since"),
    }


@dataclass(frozen=True, kw_only=True)
class SwathBinarySensorDescription(BinarySensorEntityDescription):
    """A binary sensor, its value and its attributes."""

    is_on: Callable[[MowerData], bool]
    attributes: Callable[[MowerData], dict[str, Any]] | None = None
    follows_mower_availability: bool = False


BINARY_SENSORS: tuple[SwathBinarySensorDescription, ...] = (
    SwathBinarySensorDescription(
        key="problem",
        device_class=BinarySensorDeviceClass.PROBLEM,
        is_on=has_problem,
        attributes=_problem_attributes,
    ),
    SwathBinarySensorDescription(
        key="connectivity",
        device_class=BinarySensorDeviceClass.CONNECTIVITY,
        entity_category=EntityCategory.DIAGNOSTIC,
        is_on=lambda mower: mower.online,
        attributes=_connectivity_attributes,
    ),
    SwathBinarySensorDescription(
        key="charging",
        device_class=BinarySensorDeviceClass.BATTERY_CHARGING,
        is_on=lambda mower: _activity(mower) == "charging",
        follows_mower_availability=True,
    ),
    SwathBinarySensorDescription(
        key="busy",
        translation_key="busy",
        # The scheduler's view (`GET /v1/mowers/{id}/busy`), rarely wanted on a dashboard.
        entity_registry_enabled_default=False,
        is_on=lambda mower: _activity(mower) in BUSY_ACTIVITIES,
        follows_mower_availability=True,
    ),
)


async def async_setup_entry(
    hass: HomeAssistant,
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add the binary sensors of each mower, now and whenever Swath gains one."""
    add_entities_per_mower(
        entry,
        async_add_entities,
        lambda coordinator, mower_id: (
            SwathBinarySensor(coordinator, mower_id, description)
            for description in BINARY_SENSORS
        ),
    )


class SwathBinarySensor(SwathEntity, BinarySensorEntity):
    """A yes-or-no of a mower; those of its activity follow the mower's availability."""

    entity_description: SwathBinarySensorDescription

    def __init__(
        self,
        coordinator: SwathCoordinator,
        mower_id: str,
        description: SwathBinarySensorDescription,
    ) -> None:
        """A binary sensor of this mower."""
        super().__init__(coordinator, mower_id, description.key)
        self.entity_description = description
        self.follows_mower_availability = description.follows_mower_availability

    @property
    def is_on(self) -> bool | None:
        """The value, None once the mower is gone."""
        mower = self.mower
        return None if mower is None else self.entity_description.is_on(mower)

    @property
    def extra_state_attributes(self) -> dict[str, Any] | None:
        """What the value rests on."""
        mower = self.mower
        attributes = self.entity_description.attributes
        return None if mower is None or attributes is None else attributes(mower)
