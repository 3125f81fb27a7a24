"""Reading the integration's entities and devices back in the tests."""

from __future__ import annotations

from typing import Any

from custom_components.swath.const import DOMAIN
from custom_components.swath.coordinator import SwathCoordinator
from homeassistant.core import Event, HomeAssistant, State, callback
from homeassistant.helpers import device_registry as dr, entity_registry as er

ENTITIES = [
    ("lawn_mower", "lawn_mower"),
    ("sensor", "battery"),
    ("sensor", "mowing_time"),
    ("sensor", "blade_time"),
    ("sensor", "blade_since_reset"),
    ("sensor", "distance"),
    ("sensor", "error_code"),
    ("sensor", "last_seen"),
    ("binary_sensor", "problem"),
    ("binary_sensor", "connectivity"),
    ("device_tracker", "position"),
    ("event", "event"),
    ("sensor", "last_session"),
    ("calendar", "sessions"),
]


def entity_id(hass: HomeAssistant, platform: str, mower_id: str, key: str) -> str | None:
    """The entity id of a mower's entity, by its unique id."""
    return er.async_get(hass).async_get_entity_id(platform, DOMAIN, f"{mower_id}_{key}")


def state(hass: HomeAssistant, platform: str, mower_id: str, key: str) -> State:
    """The current state of a mower's entity; fails when it does not exist."""
    eid = entity_id(hass, platform, mower_id, key)
    assert eid is not None, f"no {platform} {key} for {mower_id}"
    current = hass.states.get(eid)
    assert current is not None, eid
    return current


def device_mower_ids(hass: HomeAssistant, entry_id: str) -> set[str]:
    """The mower ids of the entry's devices."""
    registry = dr.async_get(hass)
    return {
        i
        for device in dr.async_entries_for_config_entry(registry, entry_id)
        for domain, i in device.identifiers
        if domain == DOMAIN
    }


def coordinator_of(hass: HomeAssistant) -> SwathCoordinator:
    """The coordinator of the only entry."""
    (entry,) = hass.config_entries.async_entries(DOMAIN)
    return entry.runtime_data


class FiredEvents:
    """Every event the mowers' event entities fired, from their state changes."""

    def __init__(self, hass: HomeAssistant) -> None:
        """Start listening."""
        self.fired: list[dict[str, Any]] = []
        # An event entity's state is the instant it last fired, and comes back unchanged after
        # the entity was unavailable (which is not a firing). Two events fired in one go (such as
        # `mowing_finished` and `session_ended` of one state) may share that instant: a firing
        # is a new instant or a new event id.
        last_fired: dict[str, tuple[str, str]] = {}

        @callback
        def changed(event: Event) -> None:
            entity = event.data["entity_id"]
            new = event.data["new_state"]
            if not entity.startswith("event.") or new is None:
                return
            fired = (new.state, new.attributes.get("event_id"))
            if not fired[1] or last_fired.get(entity) == fired:
                return
            last_fired[entity] = fired
            self.fired.append(dict(new.attributes))

        self.remove = hass.bus.async_listen("state_changed", changed)

    def ids(self) -> list[str]:
        """The fired event ids, in order (duplicates kept)."""
        return [f["event_id"] for f in self.fired]

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        """The fired events of one type."""
        return [f for f in self.fired if f["event_type"] == event_type]
