"""The simulated demo fleet, as a new user would add it: every mower a device, moving."""

from __future__ import annotations

import aiohttp

from custom_components.swath.diagnostics import async_get_config_entry_diagnostics
from homeassistant.core import HomeAssistant

from .conftest import config_entry, setup_entry
from .helpers import FiredEvents, coordinator_of, device_mower_ids, state
from .swath import SwathApi, SwathServer, wait_for


async def test_the_demo_fleet_moves_on_the_dashboard(
    hass: HomeAssistant, swath_sim: SwathServer
) -> None:
    """Three simulated mowers: three devices, and the stream keeps their states coming."""
    async with aiohttp.ClientSession() as session:
        api = SwathApi(swath_sim, session)
        listed = await api.mowers()
        entry = config_entry(swath_sim.url, swath_sim.token, await api.account_id())
        await setup_entry(hass, entry)
        assert len(listed) == 3
        assert device_mower_ids(hass, entry.entry_id) == {m["id"] for m in listed}
        for mower in listed:
            assert state(hass, "binary_sensor", mower["id"], "connectivity").state in ("on", "off")

        coordinator = coordinator_of(hass)
        first = {m: (d.state or {}).get("observed_at") for m, d in coordinator.data.items()}
        await wait_for(
            lambda: coordinator.stats.states >= 3
            and any(
                (d.state or {}).get("observed_at") != first[m]
                for m, d in coordinator.data.items()
            ),
            timeout=60,
            what="the simulated mowers' states through the stream",
        )
        # Each mower's lawn mower entity shows the activity of the state the stream last sent.
        for mower_id, mower in coordinator.data.items():
            if mower.state is not None and mower.online:
                assert (
                    state(hass, "lawn_mower", mower_id, "lawn_mower").state
                    == mower.state["lawn_mower_activity"]
                )

        # An error reported for a demo mower raises an event on its event entity.
        fired = FiredEvents(hass)
        target = listed[0]["id"]
        await api.post_state(target, activity="error", error_code="E_DEMO")
        await wait_for(
            lambda: [f for f in fired.of_type("error_raised") if f["error_code"] == "E_DEMO"],
            what="the demo mower's error event",
        )
        fired.remove()

        positions = [
            m.state["position"]
            for m in coordinator.data.values()
            if m.state and m.state["position"]
        ]
        session_positions = [
            s[key]
            for m in coordinator.data.values()
            for s in m.sessions
            for key in ("first_position", "last_position")
            if s.get(key)
        ]
        diagnostics = await async_get_config_entry_diagnostics(hass, entry)
        await hass.config_entries.async_unload(entry.entry_id)

    # Diagnostics name no token and no coordinate.
    text = repr(diagnostics)
    assert swath_sim.token not in text
    assert positions
    for position in positions:
        assert repr(position["lat"]) not in text
        assert repr(position["lon"]) not in text
    redacted = [
        m["state"]["position"]
        for m in diagnostics["mowers"].values()
        if m["state"] and m["state"]["position"]
    ]
    assert len(redacted) == len(positions)
    assert all(p["lat"] == p["lon"] == "**REDACTED**" for p in redacted)
    # The simulated mowers mow: their sessions' positions are redacted too.
    assert session_positions
    for position in session_positions:
        assert repr(position["lat"]) not in text
        assert repr(position["lon"]) not in text
    assert diagnostics["entry"]["data"]["api_token"] == "**REDACTED**"
    assert diagnostics["stream"]["opened"] >= 1
