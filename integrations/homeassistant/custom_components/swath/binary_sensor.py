"""Binary sensors: a problem (error, open alerts, blade due) and Swath's availability."""

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

from .coordinator import MowerData, SwathConfigEntry, SwathCoordinator
from .entity import SwathEntity, add_entities_per_mower


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
    attributes: Callable[[MowerData], dict[str, Any]]


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
    """A yes-or-no of a mower; available while Swath is, whatever the mower's availability."""

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

    @property
    def is_on(self) -> bool | None:
        """The value, None once the mower is gone."""
        mower = self.mower
        return None if mower is None else self.entity_description.is_on(mower)

    @property
    def extra_state_attributes(self) -> dict[str, Any] | None:
        """What the value rests on."""
        mower = self.mower
        return None if mower is None else self.entity_description.attributes(mower)
