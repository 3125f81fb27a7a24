"""After set-up every mower is a device with its entities, equal to what Swath's REST answers;
states posted to Swath reach them through the live stream."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from homeassistant.const import STATE_OFF, STATE_ON, STATE_UNAVAILABLE, STATE_UNKNOWN
from homeassistant.core import HomeAssistant
from homeassistant.util import dt as dt_util

from .conftest import config_entry, setup_entry
from .helpers import (
    ENTITIES,
    FiredEvents,
    coordinator_of,
    device_mower_ids,
    entity_id,
    state,
)
from .swath import SwathApi, SwathServer, instant, wait_for


async def _fleet(api: SwathApi) -> tuple[str, str, str]:
    """Mower `a` mowing for two minutes (totals, a position), `b` never reported."""
    site = (await api.sites())[0]["id"]
    a = (await api.create_mower(site, "Front lawn", "SN-1"))["id"]
    b = (await api.create_mower(site, "Back lawn", "SN-2"))["id"]
    start = datetime.now(UTC) - timedelta(minutes=2)
    await api.post_state(
        a,
        observed_at=instant(start),
        battery_percent=91,
        blade_on=True,
        position={"lat": 52.4045, "lon": 13.0230, "accuracy_m": 0.5},
    )
    await api.post_state(
        a,
        observed_at=instant(start + timedelta(seconds=90)),
        battery_percent=87,
        blade_on=True,
        position={"lat": 52.4050, "lon": 13.0240, "accuracy_m": 0.4},
    )
    # Health totals and the latest state are written by the ingest consumer: wait for them.
    await wait_for_api(api, a, lambda h: h["mowing_seconds"] > 0)
    return site, a, b


async def wait_for_api(api: SwathApi, mower_id: str, ready) -> None:
    """Wait until the mower's health satisfies `ready`."""
    for _ in range(200):
        if ready(await api.health(mower_id)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("Swath did not store the states in time")


async def test_every_mower_is_a_device_with_the_rest_answers(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Devices and entities equal GET /v1/mowers, /v1/mowers/{id}/state and /health."""
    _, a, b = await _fleet(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)

    assert device_mower_ids(hass, entry.entry_id) == {a, b}
    for mower_id in (a, b):
        for platform, key in ENTITIES:
            state(hass, platform, mower_id, key)

    # Entity ids come from the device name and the entities' translated names.
    assert {entity_id(hass, platform, a, key) for platform, key in ENTITIES} == {
        "lawn_mower.front_lawn",
        "sensor.front_lawn_battery",
        "sensor.front_lawn_mowing_time",
        "sensor.front_lawn_blade_time",
        "sensor.front_lawn_blade_time_since_reset",
        "sensor.front_lawn_distance",
        "sensor.front_lawn_error_code",
        "sensor.front_lawn_last_seen",
        "binary_sensor.front_lawn_problem",
        "binary_sensor.front_lawn_connectivity",
        "device_tracker.front_lawn_position",
        "event.front_lawn_event",
        "sensor.front_lawn_last_session",
        "calendar.front_lawn_mowing_sessions",
    }

    rest = await api.state(a)
    health = await api.health(a)
    assert state(hass, "lawn_mower", a, "lawn_mower").state == rest["lawn_mower_activity"]
    assert state(hass, "sensor", a, "battery").state == str(rest["battery_percent"])
    tracker = state(hass, "device_tracker", a, "position")
    assert tracker.attributes["latitude"] == rest["position"]["lat"]
    assert tracker.attributes["longitude"] == rest["position"]["lon"]
    assert tracker.attributes["gps_accuracy"] == rest["position"]["accuracy_m"]
    assert float(state(hass, "sensor", a, "mowing_time").state) == pytest.approx(
        health["mowing_seconds"] / 3600
    )
    assert float(state(hass, "sensor", a, "blade_time").state) == pytest.approx(
        health["blade_seconds"] / 3600
    )
    assert float(state(hass, "sensor", a, "blade_since_reset").state) == pytest.approx(
        health["blade_since_reset_seconds"] / 3600
    )
    assert float(state(hass, "sensor", a, "distance").state) == pytest.approx(
        health["distance_m"] / 1000
    )
    assert health["distance_m"] > 0
    assert state(hass, "sensor", a, "error_code").state == STATE_UNKNOWN
    last_seen = dt_util.parse_datetime(state(hass, "sensor", a, "last_seen").state)
    # Home Assistant keeps a timestamp sensor's state to the second.
    assert last_seen == dt_util.parse_datetime(rest["last_seen_at"]).replace(microsecond=0)
    assert state(hass, "binary_sensor", a, "problem").state == STATE_OFF
    assert state(hass, "binary_sensor", a, "connectivity").state == STATE_ON

    # `b` never reported: Swath says it is not online, so what it is doing is unavailable,
    # while its connectivity says why.
    listed = {m["id"]: m for m in await api.mowers()}
    assert listed[b]["online"] is False
    assert state(hass, "lawn_mower", b, "lawn_mower").state == STATE_UNAVAILABLE
    assert state(hass, "device_tracker", b, "position").state == STATE_UNAVAILABLE
    connectivity = state(hass, "binary_sensor", b, "connectivity")
    assert connectivity.state == STATE_OFF
    assert connectivity.attributes["offline_reason"] == "never_reported"

    await hass.config_entries.async_unload(entry.entry_id)


async def test_a_posted_state_reaches_the_entities_through_the_stream(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """An error and a new position posted to POST /v1/states arrive without any REST read."""
    _, a, _ = await _fleet(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    await wait_for(lambda: coordinator.stats.connected, what="the live stream")
    fired = FiredEvents(hass)

    reads = 0
    original = coordinator.client.mowers

    async def counting(*args, **kwargs):
        nonlocal reads
        reads += 1
        return await original(*args, **kwargs)

    # The refresh asked for when the stream opened has run by now or runs before this.
    await wait_for(lambda: coordinator.last_update_success, what="the first refresh")
    coordinator.client.mowers = counting

    await api.post_state(
        a,
        activity="error",
        error_code="E_LIFTED",
        battery_percent=55,
        position={"lat": 52.4100, "lon": 13.0300, "accuracy_m": 1.5},
    )
    await wait_for(
        lambda: state(hass, "lawn_mower", a, "lawn_mower").state == "error",
        what="the error state",
    )
    rest = await api.state(a)
    assert rest["error_code"] == "E_LIFTED"
    assert state(hass, "sensor", a, "error_code").state == "E_LIFTED"
    assert state(hass, "sensor", a, "battery").state == "55"
    tracker = state(hass, "device_tracker", a, "position")
    assert (tracker.attributes["latitude"], tracker.attributes["longitude"]) == (52.41, 13.03)
    assert tracker.attributes["gps_accuracy"] == 1.5
    await wait_for(
        lambda: state(hass, "binary_sensor", a, "problem").state == STATE_ON,
        what="the problem sensor",
    )
    await wait_for(lambda: fired.of_type("error_raised"), what="the error_raised event")
    (raised,) = fired.of_type("error_raised")
    assert raised["error_code"] == "E_LIFTED"
    assert "error" in state(hass, "binary_sensor", a, "problem").attributes["open_alerts"]
    assert reads == 0, "the state came by REST, not by the stream"
    assert coordinator.stats.states >= 1

    fired.remove()
    await hass.config_entries.async_unload(entry.entry_id)


async def test_availability_follows_swath_through_the_stream(
    hass: HomeAssistant, swath_quick_offline: SwathServer
) -> None:
    """`went_offline` makes what the mower does unavailable; its next state brings it back."""
    async with aiohttp.ClientSession() as session:
        api = SwathApi(swath_quick_offline, session)
        site = (await api.sites())[0]["id"]
        a = (await api.create_mower(site, "Front lawn", "SN-1"))["id"]
        await api.post_state(a, activity="mowing", battery_percent=70)
        entry = config_entry(
            swath_quick_offline.url, swath_quick_offline.token, await api.account_id()
        )
        await setup_entry(hass, entry)
        coordinator = coordinator_of(hass)
        fired = FiredEvents(hass)

        await wait_for(lambda: fired.of_type("went_offline"), what="went_offline")
        assert state(hass, "binary_sensor", a, "connectivity").state == STATE_OFF
        assert state(hass, "lawn_mower", a, "lawn_mower").state == STATE_UNAVAILABLE
        assert state(hass, "sensor", a, "battery").state == STATE_UNAVAILABLE
        assert state(hass, "sensor", a, "last_seen").state != STATE_UNAVAILABLE
        assert "offline" in state(hass, "binary_sensor", a, "problem").attributes["open_alerts"]
        listed = {m["id"]: m for m in await api.mowers()}
        assert listed[a]["online"] is False
        assert listed[a]["offline_reason"] == "silent"

        await api.post_state(a, activity="docked", battery_percent=71)
        await wait_for(
            lambda: state(hass, "lawn_mower", a, "lawn_mower").state == "docked",
            what="the mower back online",
        )
        assert state(hass, "binary_sensor", a, "connectivity").state == STATE_ON
        await wait_for(lambda: fired.of_type("came_online"), what="came_online")
        assert coordinator.stats.resets == 0
        fired.remove()
        await hass.config_entries.async_unload(entry.entry_id)
