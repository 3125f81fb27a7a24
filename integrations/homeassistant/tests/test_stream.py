"""The stream's resilience against a real Swath: a cut connection resumes, a restart reloads,
a revoked token asks for re-authentication, mowers come and go, and polling takes over when
the stream cannot be had."""

from __future__ import annotations

import asyncio

import pytest

from custom_components.swath import const
from custom_components.swath.const import DOMAIN
from custom_components.swath.api import SwathClient, SwathConnectionError
from homeassistant.config_entries import SOURCE_REAUTH, ConfigEntryState
from homeassistant.const import CONF_API_TOKEN, STATE_UNAVAILABLE
from homeassistant.core import HomeAssistant
from homeassistant.helpers import issue_registry as ir
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import async_fire_time_changed

from .conftest import config_entry, setup_entry
from .helpers import FiredEvents, coordinator_of, device_mower_ids, entity_id, state
from .proxy import CuttableProxy
from .swath import SwathApi, SwathServer, wait_for


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reconnect within a fraction of a second, not the production second and more."""
    monkeypatch.setattr(const, "STREAM_RETRY_MIN_SECONDS", 0.1)
    monkeypatch.setattr(const, "STREAM_RETRY_MAX_SECONDS", 0.5)


async def _mower(api: SwathApi, name: str = "Front lawn", mower_id: str | None = None) -> str:
    site = (await api.sites())[0]["id"]
    body = {"site_id": site, "name": name, "model": "Automower 450X", "serial": f"SN-{name}"}
    if mower_id:
        body["id"] = mower_id
    return (await api.call("POST", "/v1/mowers", body))["id"]


async def _streamed(hass: HomeAssistant, api: SwathApi, mower_id: str) -> None:
    """Post a docked state and wait until it came through the stream (an id to resume from)."""
    coordinator = coordinator_of(hass)
    await wait_for(lambda: coordinator.stats.connected, what="the live stream")
    before = coordinator.stats.states
    await api.post_state(mower_id, activity="docked", battery_percent=100)
    await wait_for(lambda: coordinator.stats.states > before, what="a streamed state")
    assert coordinator.last_event_id is not None


async def test_a_cut_connection_resumes_with_last_event_id(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """What Swath sent while the connection was cut comes on reconnect; no reload, no repeat."""
    a = await _mower(api)
    proxy = CuttableProxy(swath.port)
    await proxy.start()
    entry = config_entry(proxy.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    fired = FiredEvents(hass)
    await _streamed(hass, api, a)

    await proxy.cut()
    await wait_for(lambda: not coordinator.stats.connected, what="the stream to drop")
    await wait_for(lambda: not coordinator.last_update_success, what="the failed poll")
    assert state(hass, "lawn_mower", a, "lawn_mower").state == STATE_UNAVAILABLE
    await api.post_state(a, activity="error", error_code="E_STUCK")

    await proxy.start()
    await wait_for(
        lambda: state(hass, "lawn_mower", a, "lawn_mower").state == "error",
        what="the missed error state",
    )
    await wait_for(lambda: fired.of_type("error_raised"), what="the missed error event")
    assert coordinator.stats.resumed >= 1
    assert coordinator.stats.resets == 0
    assert state(hass, "sensor", a, "error_code").state == "E_STUCK"
    assert (await api.state(a))["error_code"] == "E_STUCK"
    assert len(fired.ids()) == len(set(fired.ids())), fired.ids()
    assert len(fired.of_type("error_raised")) == 1

    fired.remove()
    await hass.config_entries.async_unload(entry.entry_id)
    await proxy.cut()


async def test_a_restarted_swath_resets_and_reloads(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """After a restart the old id is unknown: `reset`, a REST reload, the missed event once."""
    a = await _mower(api)
    proxy = CuttableProxy(swath.port)
    await proxy.start()
    entry = config_entry(proxy.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    fired = FiredEvents(hass)
    await _streamed(hass, api, a)

    await proxy.cut()
    await hass.async_add_executor_job(swath.stop)
    await hass.async_add_executor_job(swath.start)
    # The memory store starts empty: the gateway's mower is added again, with its id.
    await _mower(api, mower_id=a)
    await api.post_state(a, activity="error", error_code="E_LIFTED")
    await wait_for_event(api, a, "error_raised")
    await proxy.start()

    await wait_for(lambda: coordinator.stats.resets == 1, what="the reset event")
    await wait_for(
        lambda: state(hass, "lawn_mower", a, "lawn_mower").state == "error",
        what="the reloaded error state",
    )
    await wait_for(lambda: fired.of_type("error_raised"), what="the caught-up error event")
    assert state(hass, "sensor", a, "error_code").state == "E_LIFTED"
    assert coordinator.last_update_success
    assert len(fired.ids()) == len(set(fired.ids())), fired.ids()
    assert len(fired.of_type("error_raised")) == 1

    fired.remove()
    await hass.config_entries.async_unload(entry.entry_id)
    await proxy.cut()


async def wait_for_event(api: SwathApi, mower_id: str, kind: str) -> None:
    """Wait until Swath lists an event of this kind for the mower."""
    for _ in range(200):
        page = await api.call("GET", f"/v1/events?mower_id={mower_id}&kind={kind}")
        if page["items"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"Swath derived no {kind}")


async def test_a_revoked_token_asks_for_reauthentication(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """DELETE /v1/tokens/{id}: the stream's `end` starts the re-auth flow; a new token heals."""
    await _mower(api)
    created = await api.call("POST", "/v1/tokens", {"name": "ha", "scopes": ["read"]})
    entry = config_entry(swath.url, created["token"], await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    await wait_for(lambda: coordinator.stats.connected, what="the live stream")

    await api.call("DELETE", f"/v1/tokens/{created['id']}")
    flows = await wait_for(
        lambda: [
            f
            for f in hass.config_entries.flow.async_progress()
            if f["context"]["source"] == SOURCE_REAUTH
            and f["context"]["entry_id"] == entry.entry_id
        ],
        what="the re-auth flow",
    )
    assert coordinator.stats.end_reason == "token_revoked"

    fresh = await api.call("POST", "/v1/tokens", {"name": "ha 2", "scopes": ["read"]})
    result = await hass.config_entries.flow.async_configure(
        flows[0]["flow_id"], {CONF_API_TOKEN: fresh["token"]}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reauth_successful"
    assert entry.data[CONF_API_TOKEN] == fresh["token"]
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED
    await hass.config_entries.async_unload(entry.entry_id)


async def test_mowers_added_and_deleted_in_swath_come_and_go(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """The periodic refresh adds a device for a new mower and removes a deleted one's."""
    a = await _mower(api, "Alpha")
    b = await _mower(api, "Bravo")
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    await wait_for(lambda: coordinator.stats.connected, what="the live stream")
    assert device_mower_ids(hass, entry.entry_id) == {a, b}

    c = await _mower(api, "Charlie")
    await api.call("DELETE", f"/v1/mowers/{b}")
    async_fire_time_changed(hass, dt_util.utcnow() + const.POLL_INTERVAL_MAX * 2)

    await wait_for(
        lambda: device_mower_ids(hass, entry.entry_id) == {a, c}, what="the devices to follow"
    )
    await wait_for(
        lambda: entity_id(hass, "lawn_mower", c, "lawn_mower"), what="Charlie's lawn mower"
    )
    assert entity_id(hass, "lawn_mower", b, "lawn_mower") is None
    await hass.config_entries.async_unload(entry.entry_id)


async def test_without_the_stream_polling_takes_over_with_etags_and_back_off(
    hass: HomeAssistant,
    swath: SwathServer,
    api: SwathApi,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No stream: polls bring states and events, 304 while nothing changed, slower on errors."""

    async def no_stream(self, *args, **kwargs):
        raise SwathConnectionError("the stream is blocked by a proxy")
        yield  # an async generator, as the real one

    monkeypatch.setattr(SwathClient, "stream", no_stream)
    a = await _mower(api)
    await api.post_state(a, activity="docked", battery_percent=80)
    proxy = CuttableProxy(swath.port)
    await proxy.start()
    entry = config_entry(proxy.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    fired = FiredEvents(hass)
    answers: list[bool] = []
    original = coordinator.client.mowers

    async def recording(*args, **kwargs):
        answer = await original(*args, **kwargs)
        answers.append(answer.modified)
        return answer

    coordinator.client.mowers = recording
    assert not coordinator.stats.connected
    assert coordinator.update_interval == const.POLL_INTERVAL

    await api.post_state(a, activity="error", error_code="E_RAIN", battery_percent=79)
    await wait_for_event(api, a, "error_raised")
    async_fire_time_changed(hass, dt_util.utcnow() + const.POLL_INTERVAL)
    await wait_for(
        lambda: state(hass, "lawn_mower", a, "lawn_mower").state == "error",
        what="the polled error state",
    )
    await wait_for(lambda: fired.of_type("error_raised"), what="the polled error event")
    assert answers[-1] is True

    # Nothing changed since: the next poll is a 304.
    polls = len(answers)
    async_fire_time_changed(hass, dt_util.utcnow() + const.POLL_INTERVAL * 2)
    await wait_for(lambda: len(answers) > polls, what="a second poll")
    assert answers[-1] is False
    assert state(hass, "lawn_mower", a, "lawn_mower").state == "error"

    # Swath unreachable: unavailable, and the interval doubles after each failure.
    await proxy.cut()
    async_fire_time_changed(hass, dt_util.utcnow() + const.POLL_INTERVAL * 3)
    await wait_for(lambda: not coordinator.last_update_success, what="a failed poll")
    assert coordinator.update_interval == const.POLL_INTERVAL * 2
    assert state(hass, "lawn_mower", a, "lawn_mower").state == STATE_UNAVAILABLE
    async_fire_time_changed(hass, dt_util.utcnow() + const.POLL_INTERVAL * 6)
    await wait_for(
        lambda: coordinator.update_interval == const.POLL_INTERVAL * 4,
        what="the second back-off",
    )

    await proxy.start()
    async_fire_time_changed(hass, dt_util.utcnow() + const.POLL_INTERVAL_MAX * 3)
    await wait_for(lambda: coordinator.last_update_success, what="a poll that succeeds")
    assert coordinator.update_interval == const.POLL_INTERVAL
    assert state(hass, "lawn_mower", a, "lawn_mower").state == "error"
    assert len(fired.of_type("error_raised")) == 1

    fired.remove()
    await hass.config_entries.async_unload(entry.entry_id)
    await proxy.cut()


async def test_a_refused_token_at_start_asks_for_reauthentication(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """A 401 from REST (the token was revoked while Home Assistant was down) starts re-auth."""
    created = await api.call("POST", "/v1/tokens", {"name": "ha", "scopes": ["read"]})
    await api.call("DELETE", f"/v1/tokens/{created['id']}")
    entry = config_entry(swath.url, created["token"], await api.account_id())
    entry.add_to_hass(hass)
    assert not await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.SETUP_ERROR
    flows = [
        f
        for f in hass.config_entries.flow.async_progress()
        if f["context"]["source"] == SOURCE_REAUTH and f["context"]["entry_id"] == entry.entry_id
    ]
    assert len(flows) == 1


async def test_a_swath_shutting_down_ends_the_stream_and_is_rejoined_at_once(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM: the stream's `end` (`shutdown`), no re-auth; Swath back: the stream and the
    entities follow by the /healthz probe, not after a back-off (made an hour long here)."""
    monkeypatch.setattr(const, "STREAM_RETRY_MIN_SECONDS", 3600.0)
    monkeypatch.setattr(const, "STREAM_RETRY_MAX_SECONDS", 3600.0)
    monkeypatch.setattr(const, "HEALTH_PROBE_SECONDS", 0.1)
    a = await _mower(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    await _streamed(hass, api, a)
    opened = coordinator.stats.opened

    await hass.async_add_executor_job(swath.stop)
    await wait_for(lambda: coordinator.stats.shutdowns == 1, what="the end event")
    await wait_for(lambda: coordinator.stats.probes > 0, what="a /healthz probe")
    await hass.async_block_till_done()
    assert state(hass, "lawn_mower", a, "lawn_mower").state == STATE_UNAVAILABLE
    await hass.async_add_executor_job(swath.start)
    await _mower(api, mower_id=a)
    await api.post_state(a, activity="docked", battery_percent=100)

    await wait_for(
        lambda: coordinator.stats.opened > opened, timeout=10, what="the reopened stream"
    )
    await wait_for(
        lambda: state(hass, "lawn_mower", a, "lawn_mower").state == "docked",
        timeout=10,
        what="the entities back",
    )
    assert not [
        f
        for f in hass.config_entries.flow.async_progress()
        if f["context"]["source"] == SOURCE_REAUTH
    ]
    await hass.config_entries.async_unload(entry.entry_id)


async def test_a_stream_refused_for_too_many_streams_raises_a_repair(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """429 (the token holds its streams already): a repair issue, gone once the stream opens."""
    await hass.async_add_executor_job(swath.stop)
    swath.extra_env["SWATH_STREAMS_PER_TOKEN"] = "1"
    await hass.async_add_executor_job(swath.start)
    a = await _mower(api)
    async with api.session.get(
        f"{swath.url}/v1/live/stream",
        headers={"Authorization": f"Bearer {swath.token}"},
    ) as held:
        assert held.status == 200
        entry = config_entry(swath.url, swath.token, await api.account_id())
        await setup_entry(hass, entry)
        issue_id = f"stream_refused_{entry.entry_id}"
        issues = ir.async_get(hass)
        await wait_for(
            lambda: issues.async_get_issue(DOMAIN, issue_id), what="the stream_refused issue"
        )
        coordinator = coordinator_of(hass)
        # Polling keeps the entities available meanwhile.
        assert coordinator.last_update_success
        assert state(hass, "binary_sensor", a, "connectivity").state != STATE_UNAVAILABLE
    await wait_for(lambda: coordinator.stats.connected, what="the stream once a slot is free")
    assert ir.async_get(hass).async_get_issue(DOMAIN, issue_id) is None
    await hass.config_entries.async_unload(entry.entry_id)
