"""The entities of issue 46 against a real Swath: activity, charging, busy, health counts, blade
remaining and threshold, zone, today's totals, the Reset blade button; the last known position and
battery kept; the tracker written only on change; system health and repairs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from custom_components.swath.button import SwathBladeResetButton
from custom_components.swath.const import DOMAIN
from homeassistant.const import STATE_OFF, STATE_ON
from homeassistant.core import Event, HomeAssistant, callback
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import (
    device_registry as dr,
    entity_registry as er,
    issue_registry as ir,
)
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import get_system_health_info

from .conftest import config_entry, setup_entry
from .helpers import coordinator_of, entity_id, state
from .swath import SwathApi, SwathServer, instant, wait_for

# A square of about 110 m around the mower's positions below.
ZONE = {
    "type": "Polygon",
    "coordinates": [
        [[13.0230, 52.4040], [13.0250, 52.4040], [13.0250, 52.4060], [13.0230, 52.4060], [13.0230, 52.4040]]
    ],
}


async def _mowing_in_a_zone(api: SwathApi) -> str:
    """A mower with a zone "Roses", mowing in it for 90 s."""
    site = (await api.sites())[0]["id"]
    a = (await api.create_mower(site, "Front lawn", "SN-1"))["id"]
    await api.call("POST", f"/v1/mowers/{a}/zones", {"name": "Roses", "polygon": ZONE})
    start = datetime.now(UTC) - timedelta(minutes=2)
    for seconds, battery in ((0, 91), (90, 87)):
        await api.post_state(
            a,
            observed_at=instant(start + timedelta(seconds=seconds)),
            battery_percent=battery,
            blade_on=True,
            position={"lat": 52.4050, "lon": 13.0240, "accuracy_m": 0.4},
        )
    await wait_for_rest(api, a)
    return a


async def wait_for_rest(api: SwathApi, mower_id: str) -> None:
    """Until the ingest consumer stored the totals and the watcher put the mower in its zone."""
    for _ in range(200):
        health = await api.health(mower_id)
        zones = (await api.call("GET", f"/v1/mowers/{mower_id}/zones"))["items"]
        if health["mowing_seconds"] > 0 and any(z["occupied"] for z in zones):
            return
        await wait_for(lambda: True)
    raise AssertionError("Swath did not store the states in time")


def _today(days: dict[str, Any]) -> dict[str, Any]:
    (item,) = days["items"]
    return item


async def test_the_new_entities_equal_the_rest_answers(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Activity, charging, counts, blade, zone and today's totals as Swath's REST answers them."""
    a = await _mowing_in_a_zone(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)

    rest = await api.state(a)
    health = await api.health(a)
    now = datetime.now(UTC).date()
    days = await api.call(
        "GET", f"/v1/mowers/{a}/days?from={now - timedelta(days=1)}&to={now + timedelta(days=1)}"
    )
    today = _today(days)
    assert state(hass, "sensor", a, "activity").state == rest["activity"] == "mowing"
    assert state(hass, "sensor", a, "activity").attributes["options"] == [
        "mowing", "leaving", "returning", "docked", "charging", "paused", "idle", "error"
    ]
    assert state(hass, "binary_sensor", a, "charging").state == STATE_OFF
    assert state(hass, "sensor", a, "charging_cycles").state == str(health["charge_count"])
    remaining = health["blade_threshold_seconds"] - health["blade_since_reset_seconds"]
    assert float(state(hass, "sensor", a, "blade_remaining").state) == pytest.approx(
        remaining / 3600
    )
    assert state(hass, "sensor", a, "zone").state == "Roses"
    assert state(hass, "sensor", a, "zone").attributes["options"] == ["none", "Roses"]
    assert today["mowing_seconds"] > 0
    assert float(state(hass, "sensor", a, "today_mowing_time").state) == pytest.approx(
        today["mowing_seconds"] / 3600
    )
    assert float(state(hass, "sensor", a, "today_distance").state) == pytest.approx(
        today["distance_m"] / 1000
    )

    registry = er.async_get(hass)
    for platform, key in (
        ("sensor", "error_count"),
        ("sensor", "blade_threshold"),
        ("binary_sensor", "busy"),
    ):
        eid = entity_id(hass, platform, a, key)
        assert eid is not None, key
        assert registry.async_get(eid).disabled_by is er.RegistryEntryDisabler.INTEGRATION
    for key, digits in (("mowing_time", 1), ("distance", 2), ("today_distance", 2)):
        options = registry.async_get(entity_id(hass, "sensor", a, key)).options
        assert options["sensor"]["suggested_display_precision"] == digits, key

    device = dr.async_get(hass).async_get_device(identifiers={(DOMAIN, a)})
    assert device is not None
    assert device.configuration_url == f"{swath.url}/live/fleet"
    await hass.config_entries.async_unload(entry.entry_id)


async def test_a_report_without_position_or_battery_keeps_the_last_known(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Charging with neither position nor battery: the tracker and battery keep their values."""
    a = await _mowing_in_a_zone(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    await wait_for(lambda: coordinator.stats.connected, what="the live stream")

    await api.post_state(a, activity="charging")
    await wait_for(
        lambda: state(hass, "binary_sensor", a, "charging").state == STATE_ON,
        what="the charging state",
    )
    assert state(hass, "sensor", a, "activity").state == "charging"
    assert state(hass, "sensor", a, "battery").state == "87"
    tracker = state(hass, "device_tracker", a, "position")
    assert (tracker.attributes["latitude"], tracker.attributes["longitude"]) == (52.405, 13.024)
    # A REST refresh keeps them too (Swath's latest state has none).
    await coordinator.async_refresh()
    assert state(hass, "sensor", a, "battery").state == "87"
    assert state(hass, "device_tracker", a, "position").attributes["latitude"] == 52.405

    # Leaving the zone is pushed by its event.
    await api.post_state(
        a, activity="mowing", position={"lat": 52.4100, "lon": 13.0300, "accuracy_m": 0.4}
    )
    await wait_for(
        lambda: state(hass, "sensor", a, "zone").state == "none", what="the zone left"
    )
    await hass.config_entries.async_unload(entry.entry_id)


async def test_the_tracker_writes_only_when_the_position_changes(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Refreshes that change nothing write no tracker state (no recorder churn)."""
    a = await _mowing_in_a_zone(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    await wait_for(lambda: coordinator.stats.connected, what="the live stream")
    await hass.async_block_till_done()
    tracker = entity_id(hass, "device_tracker", a, "position")
    writes: list[str] = []

    @callback
    def written(event: Event) -> None:
        if event.data["entity_id"] == tracker:
            writes.append(event.event_type)

    @callback
    def of_tracker(data: Any) -> bool:
        return bool(data["entity_id"] == tracker)

    removers = [
        hass.bus.async_listen("state_changed", written),
        hass.bus.async_listen("state_reported", written, event_filter=of_tracker),
    ]
    for _ in range(3):
        await coordinator.async_refresh()
    await hass.async_block_till_done()
    assert writes == []
    await api.post_state(
        a, activity="mowing", position={"lat": 52.4052, "lon": 13.0242, "accuracy_m": 0.4}
    )
    await wait_for(lambda: writes, what="the moved tracker")
    assert writes == ["state_changed"]
    for remove in removers:
        remove()
    await hass.config_entries.async_unload(entry.entry_id)


async def test_the_reset_blade_button_needs_a_write_token(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """A write token: the button resets the blade in Swath. A read token: no button; a press
    refused by Swath (403) is a translated error."""
    a = await _mowing_in_a_zone(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    button = entity_id(hass, "button", a, "blade_reset")
    assert button == "button.front_lawn_reset_blade"
    assert (await api.health(a))["blade_since_reset_seconds"] > 0
    await hass.services.async_call("button", "press", {"entity_id": button}, blocking=True)
    assert (await api.health(a))["blade_since_reset_seconds"] == 0
    await hass.config_entries.async_unload(entry.entry_id)
    await hass.config_entries.async_remove(entry.entry_id)

    read = await api.call("POST", "/v1/tokens", {"name": "ha", "scopes": ["read"]})
    entry = config_entry(swath.url, read["token"], await api.account_id())
    await setup_entry(hass, entry)
    assert entity_id(hass, "button", a, "blade_reset") is None
    pressed = SwathBladeResetButton(coordinator_of(hass), a)
    with pytest.raises(HomeAssistantError) as refused:
        await pressed.async_press()
    assert refused.value.translation_key == "blade_reset_forbidden"
    await hass.config_entries.async_unload(entry.entry_id)


async def test_system_health_says_whether_swath_answers(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """One entry, its stream connected, Swath's /healthz reachable."""
    assert await async_setup_component(hass, "system_health", {})
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    await wait_for(lambda: coordinator_of(hass).stats.connected, what="the live stream")
    info = await get_system_health_info(hass, DOMAIN)
    # Home Assistant awaits the check when it shows the page.
    info["can_reach_server"] = await info["can_reach_server"]
    assert info == {"entries": 1, "streams_connected": 1, "can_reach_server": "ok"}
    await hass.config_entries.async_unload(entry.entry_id)


async def test_a_swath_without_the_fields_this_version_reads_raises_a_repair(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Health answers without `charge_count`: a repair issue, gone once they are back."""
    await _mowing_in_a_zone(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    issues = ir.async_get(hass)
    issue_id = f"api_too_old_{entry.entry_id}"
    assert issues.async_get_issue(DOMAIN, issue_id) is None

    data = dict(coordinator.data)
    (mower,) = data.values()
    complete = dict(mower.health)
    del mower.health["charge_count"]
    coordinator._check_api(data)
    issue = issues.async_get_issue(DOMAIN, issue_id)
    assert issue is not None
    assert issue.translation_key == "api_too_old"
    assert issue.translation_placeholders["missing"] == "charge_count"
    mower.health = complete
    coordinator._check_api(data)
    assert issues.async_get_issue(DOMAIN, issue_id) is None
    await hass.config_entries.async_unload(entry.entry_id)
