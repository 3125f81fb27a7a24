"""The simulated demo fleet, as a new user would add it: every mower a device, moving."""

from __future__ import annotations

import aiohttp

from custom_components.swath.diagnostics import async_get_config_entry_diagnostics
from homeassistant.core import HomeAssistant

from .conftest import config_entry, setup_entry
from .helpers import coordinator_of, device_mower_ids, state
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

        positions = [m.state["position"] for m in coordinator.data.values() if m.state]
        diagnostics = await async_get_config_entry_diagnostics(hass, entry)
        await hass.config_entries.async_unload(entry.entry_id)

    # Diagnostics name no token and no coordinate.
    text = repr(diagnostics)
    assert swath_sim.token not in text
    assert positions and all(p is not None for p in positions)
    for position in positions:
        assert repr(position["lat"]) not in text
        assert repr(position["lon"]) not in text
    any_mower = next(iter(diagnostics["mowers"].values()))
    assert any_mower["state"]["position"]["lat"] == "**REDACTED**"
    assert diagnostics["entry"]["data"]["api_token"] == "**REDACTED**"
    assert diagnostics["stream"]["opened"] >= 1
