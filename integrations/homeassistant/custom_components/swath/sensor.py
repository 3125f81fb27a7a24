"""Sensors: battery, activity, health totals, blade, zone, today's totals, error, last seen, and
the last mowing session (when it ended, with its details; its mowing time and distance)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from homeassistant.components.sensor import (
    SensorDeviceClass,
    SensorEntity,
    SensorEntityDescription,
    SensorStateClass,
)
from homeassistant.const import PERCENTAGE, EntityCategory, UnitOfLength, UnitOfTime
from homeassistant.core import HomeAssistant
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback
from homeassistant.util import dt as dt_util

from .const import ACTIVITIES, NO_ZONE
from .coordinator import SwathConfigEntry, SwathCoordinator
from .model import MowerData, parse_instant
from .entity import SwathEntity, add_entities_per_mower

# Read-only entities updated by the coordinator: no limit on parallel updates.
PARALLEL_UPDATES = 0


@dataclass(frozen=True, kw_only=True)
class SwathSensorDescription(SensorEntityDescription):
    """A sensor and where its value is read."""

    value: Callable[[MowerData], Any]
    follows_mower_availability: bool = False
    options_of: Callable[[MowerData], list[str]] | None = None
    """The options of an enum sensor whose options depend on the mower (its zones)."""
    attributes_of: Callable[[MowerData], dict[str, Any] | None] | None = None
    """Extra state attributes read from the mower."""


def _state(key: str) -> Callable[[MowerData], Any]:
    return lambda mower: mower.state.get(key) if mower.state else None


def _health(key: str) -> Callable[[MowerData], Any]:
    return lambda mower: mower.health.get(key) if mower.health else None


def _today(key: str) -> Callable[[MowerData], Any]:
    return lambda mower: (mower.today or {}).get(key, 0) if mower.today is not None else None


def _blade_remaining(mower: MowerData) -> float | None:
    health = mower.health
    if not health or "blade_threshold_seconds" not in health:
        return None
    remaining = float(health["blade_threshold_seconds"]) - float(health["blade_since_reset_seconds"])
    return max(0.0, remaining)


def _zone(mower: MowerData) -> str:
    return mower.zone or NO_ZONE


def _zone_options(mower: MowerData) -> list[str]:
    return [NO_ZONE, *sorted({z["name"] for z in mower.zones})]


def _last_seen(mower: MowerData) -> datetime | None:
    value = mower.summary.get("last_seen_at")
    return dt_util.parse_datetime(value) if value else None


def _last_session(key: str) -> Callable[[MowerData], Any]:
    return lambda mower: (mower.last_session or {}).get(key)


def _last_session_end(mower: MowerData) -> datetime | None:
    session = mower.last_session
    return parse_instant(session["ended_at"]) if session else None


def _last_session_details(mower: MowerData) -> dict[str, Any] | None:
    """The last session's details, rounded as the sensors show them (attributes have no unit)."""
    session = mower.last_session
    if session is None:
        return None
    started = parse_instant(session["started_at"])
    ended = parse_instant(session["ended_at"])
    return {
        "session_id": session["id"],
        "started_at": started,
        # From start to end, the merged breaks (a charge, a rain stop) included.
        "duration_minutes": round((ended - started).total_seconds() / 60),
        "mowing_minutes": round(float(session["mowing_seconds"]) / 60),
        "distance_km": round(float(session["distance_m"]) / 1000, 2),
        "end_reason": session["end_reason"],
        "error_code": session.get("error_code"),
        "breaks": session["breaks"],
    }


SENSORS: tuple[SwathSensorDescription, ...] = (
    SwathSensorDescription(
        key="battery",
        device_class=SensorDeviceClass.BATTERY,
        native_unit_of_measurement=PERCENTAGE,
        state_class=SensorStateClass.MEASUREMENT,
        value=_state("battery_percent"),
        follows_mower_availability=True,
    ),
    SwathSensorDescription(
        key="mowing_time",
        translation_key="mowing_time",
        device_class=SensorDeviceClass.DURATION,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_unit_of_measurement=UnitOfTime.HOURS,
        suggested_display_precision=1,
        state_class=SensorStateClass.TOTAL_INCREASING,
        value=_health("mowing_seconds"),
    ),
    SwathSensorDescription(
        key="blade_time",
        translation_key="blade_time",
        device_class=SensorDeviceClass.DURATION,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_unit_of_measurement=UnitOfTime.HOURS,
        suggested_display_precision=1,
        state_class=SensorStateClass.TOTAL_INCREASING,
        value=_health("blade_seconds"),
    ),
    SwathSensorDescription(
        key="blade_since_reset",
        translation_key="blade_since_reset",
        device_class=SensorDeviceClass.DURATION,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_unit_of_measurement=UnitOfTime.HOURS,
        suggested_display_precision=1,
        # Falls to zero when the blade is replaced: a new cycle of a total.
        state_class=SensorStateClass.TOTAL_INCREASING,
        value=_health("blade_since_reset_seconds"),
    ),
    SwathSensorDescription(
        key="distance",
        translation_key="distance",
        device_class=SensorDeviceClass.DISTANCE,
        native_unit_of_measurement=UnitOfLength.METERS,
        suggested_unit_of_measurement=UnitOfLength.KILOMETERS,
        suggested_display_precision=2,
        state_class=SensorStateClass.TOTAL_INCREASING,
        value=_health("distance_m"),
    ),
    SwathSensorDescription(
        key="activity",
        translation_key="activity",
        device_class=SensorDeviceClass.ENUM,
        options=ACTIVITIES,
        value=_state("activity"),
        follows_mower_availability=True,
    ),
    SwathSensorDescription(
        key="charging_cycles",
        translation_key="charging_cycles",
        state_class=SensorStateClass.TOTAL_INCREASING,
        entity_category=EntityCategory.DIAGNOSTIC,
        value=_health("charge_count"),
    ),
    SwathSensorDescription(
        key="error_count",
        translation_key="error_count",
        state_class=SensorStateClass.TOTAL_INCREASING,
        entity_category=EntityCategory.DIAGNOSTIC,
        entity_registry_enabled_default=False,
        value=_health("error_count"),
    ),
    SwathSensorDescription(
        key="blade_remaining",
        translation_key="blade_remaining",
        device_class=SensorDeviceClass.DURATION,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_unit_of_measurement=UnitOfTime.HOURS,
        suggested_display_precision=1,
        state_class=SensorStateClass.MEASUREMENT,
        value=_blade_remaining,
    ),
    SwathSensorDescription(
        key="blade_threshold",
        translation_key="blade_threshold",
        device_class=SensorDeviceClass.DURATION,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_unit_of_measurement=UnitOfTime.HOURS,
        suggested_display_precision=0,
        entity_category=EntityCategory.DIAGNOSTIC,
        entity_registry_enabled_default=False,
        value=_health("blade_threshold_seconds"),
    ),
    SwathSensorDescription(
        key="zone",
        translation_key="zone",
        device_class=SensorDeviceClass.ENUM,
        value=_zone,
        options_of=_zone_options,
    ),
    SwathSensorDescription(
        key="today_mowing_time",
        translation_key="today_mowing_time",
        device_class=SensorDeviceClass.DURATION,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_unit_of_measurement=UnitOfTime.HOURS,
        suggested_display_precision=1,
        # Starts again from zero each local day of the site.
        state_class=SensorStateClass.TOTAL_INCREASING,
        value=_today("mowing_seconds"),
    ),
    SwathSensorDescription(
        key="today_distance",
        translation_key="today_distance",
        device_class=SensorDeviceClass.DISTANCE,
        native_unit_of_measurement=UnitOfLength.METERS,
        suggested_unit_of_measurement=UnitOfLength.KILOMETERS,
        suggested_display_precision=2,
        state_class=SensorStateClass.TOTAL_INCREASING,
        value=_today("distance_m"),
    ),
    SwathSensorDescription(
        key="error_code",
        translation_key="error_code",
        value=_state("error_code"),
    ),
    SwathSensorDescription(
        key="last_session",
        translation_key="last_session",
        device_class=SensorDeviceClass.TIMESTAMP,
        value=_last_session_end,
        attributes_of=_last_session_details,
    ),
    SwathSensorDescription(
        key="last_session_mowing_time",
        translation_key="last_session_mowing_time",
        device_class=SensorDeviceClass.DURATION,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_unit_of_measurement=UnitOfTime.MINUTES,
        suggested_display_precision=0,
        state_class=SensorStateClass.MEASUREMENT,
        value=_last_session("mowing_seconds"),
    ),
    SwathSensorDescription(
        key="last_session_distance",
        translation_key="last_session_distance",
        device_class=SensorDeviceClass.DISTANCE,
        native_unit_of_measurement=UnitOfLength.METERS,
        suggested_unit_of_measurement=UnitOfLength.KILOMETERS,
        suggested_display_precision=2,
        state_class=SensorStateClass.MEASUREMENT,
        value=_last_session("distance_m"),
    ),
    SwathSensorDescription(
        key="last_seen",
        translation_key="last_seen",
        device_class=SensorDeviceClass.TIMESTAMP,
        entity_category=EntityCategory.DIAGNOSTIC,
        value=_last_seen,
    ),
)


async def async_setup_entry(
    hass: HomeAssistant,
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add the sensors of each mower, now and whenever Swath gains one."""
    add_entities_per_mower(
        entry,
        async_add_entities,
        lambda coordinator, mower_id: (
            SwathSensor(coordinator, mower_id, description) for description in SENSORS
        ),
    )


class SwathSensor(SwathEntity, SensorEntity):
    """One value of a mower's state, health or directory entry."""

    entity_description: SwathSensorDescription

    def __init__(
        self,
        coordinator: SwathCoordinator,
        mower_id: str,
        description: SwathSensorDescription,
    ) -> None:
        """A sensor of this mower."""
        super().__init__(coordinator, mower_id, description.key)
        self.entity_description = description
        self.follows_mower_availability = description.follows_mower_availability

    @property
    def native_value(self) -> Any:
        """The value as Swath answered it."""
        mower = self.mower
        return None if mower is None else self.entity_description.value(mower)

    @property
    def extra_state_attributes(self) -> dict[str, Any] | None:
        """The attributes its description reads, if any."""
        attributes_of = self.entity_description.attributes_of
        mower = self.mower
        if attributes_of is None or mower is None:
            return None
        return attributes_of(mower)

    @property
    def options(self) -> list[str] | None:
        """An enum sensor's options: fixed, or the mower's own (its zones' names)."""
        options_of = self.entity_description.options_of
        mower = self.mower
        if options_of is not None and mower is not None:
            return options_of(mower)
        return super().options
