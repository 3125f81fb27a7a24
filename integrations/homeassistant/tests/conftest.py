"""Fixtures: a real swath per test, Home Assistant with the integration, and the API helper."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
from aiohttp import web
import pytest

from custom_components.swath.const import DOMAIN
from homeassistant.const import CONF_API_TOKEN, CONF_URL
from homeassistant.core import HomeAssistant
from pytest_homeassistant_custom_component.common import MockConfigEntry

from .swath import SwathApi, SwathServer, free_port


@pytest.fixture(autouse=True)
def auto_enable_custom_integrations(enable_custom_integrations: None) -> None:
    """Load `custom_components.swath` from this folder."""


@pytest.fixture(autouse=True)
def sockets(socket_enabled: None) -> None:
    """The tests talk to a real swath on 127.0.0.1 (Home Assistant's plugin blocks sockets)."""


def _server(
    tmp_path: Path, sim_mowers: int, env: dict[str, str] | None = None
) -> Iterator[SwathServer]:
    server = SwathServer(tmp_path, sim_mowers=sim_mowers, env=env)
    try:
        server.start()
    except RuntimeError as err:
        # Never a skip: the integration is only tested against a real Swath.
        pytest.fail(str(err))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def swath(tmp_path: Path) -> Iterator[SwathServer]:
    """swath with the demo account and no simulated mowers (the tests make their own)."""
    yield from _server(tmp_path, sim_mowers=0)


@pytest.fixture
def swath_sim(tmp_path: Path) -> Iterator[SwathServer]:
    """swath with three simulated mowers."""
    yield from _server(tmp_path, sim_mowers=3)


@pytest.fixture
def swath_quick_offline(tmp_path: Path) -> Iterator[SwathServer]:
    """swath whose mowers go offline after 2 s of silence (swept every second)."""
    yield from _server(
        tmp_path,
        sim_mowers=0,
        env={"SWATH_OFFLINE_AFTER_SECONDS": "2", "SWATH_OFFLINE_SWEEP_SECONDS": "1"},
    )


@pytest.fixture
def swath_no_merge_gap(tmp_path: Path) -> Iterator[SwathServer]:
    """swath whose sessions never merge (SWATH_SESSION_MERGE_GAP_SECONDS=0): a session is over,
    and `session_ended` raised, as soon as it ends."""
    yield from _server(tmp_path, sim_mowers=0, env={"SWATH_SESSION_MERGE_GAP_SECONDS": "0"})


@pytest.fixture
async def api(swath: SwathServer) -> AsyncIterator[SwathApi]:
    """The test's own client of Swath (not Home Assistant's session)."""
    async with aiohttp.ClientSession() as session:
        yield SwathApi(swath, session)


def config_entry(url: str, token: str, account_id: str) -> MockConfigEntry:
    """An entry as the config flow creates it."""
    return MockConfigEntry(
        domain=DOMAIN,
        title="Demo Gardens",
        unique_id=f"{account_id}@{url}",
        data={CONF_URL: url, CONF_API_TOKEN: token},
    )


async def setup_entry(hass: HomeAssistant, entry: MockConfigEntry) -> None:
    """Add the entry and set it up; asserts it loaded."""
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()


class OtherServer:
    """A web server that is not Swath: it answers `GET /v1/me` as a test tells it to."""

    def __init__(self) -> None:
        """Nothing listens yet; `answer` is what `/v1/me` answers."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.answer: web.Response = web.Response(text="<html>a router's page</html>")

    async def me(self, request: web.Request) -> web.Response:
        """Whatever the test set."""
        return self.answer


@pytest.fixture
async def other_server() -> AsyncIterator[OtherServer]:
    """A web server that is not Swath, on a free port."""
    server = OtherServer()
    app = web.Application()
    app.router.add_get("/v1/me", server.me)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", server.port)
    await site.start()
    yield server
    await runner.cleanup()
