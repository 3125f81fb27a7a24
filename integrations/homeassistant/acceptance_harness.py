"""The processes and clients of acceptance.py: swath's database, `hass`, the calls to both.

What the acceptance test does with them is acceptance.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
import json
import os
from pathlib import Path
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import aiohttp

from tests.swath import SwathServer, free_port

HERE = Path(__file__).resolve().parent
DOMAIN = "swath"
HASS_START_DEADLINE = 180.0
CONFIGURATION = """\
# Only what onboarding, the config-flow API and the websocket API need: no default_config, so
# that nothing reaches outside this machine.
homeassistant:
  name: Swath acceptance
  latitude: 52.37
  longitude: 4.89
  elevation: 0
  unit_system: metric
  currency: EUR
  country: NL
  time_zone: UTC
http:
  server_host: 127.0.0.1
  server_port: {port}
api:
config:
websocket_api:
onboarding:
logger:
  default: info
"""


class Failure(Exception):
    """A check that did not hold."""


def check(condition: object, message: str) -> None:
    """Fail the run, loudly, when `condition` is false."""
    if not condition:
        raise Failure(message)


def say(message: str) -> None:
    """A progress line, flushed at once (test.sh's output interleaves with it)."""
    print(f"acceptance: {message}", flush=True)


async def until(
    probe: Callable[[], Awaitable[Any]], deadline: float, what: str, every: float = 0.02
) -> tuple[Any, float]:
    """Poll `probe` until it returns something truthy; its value and the seconds it took."""
    start = time.monotonic()
    last: Any = None
    while True:
        last = await probe()
        elapsed = time.monotonic() - start
        if last:
            return last, elapsed
        if elapsed > deadline:
            raise Failure(f"{what}: not within {deadline} s")
        await asyncio.sleep(every)


class Postgres:
    """A database of the run's own on the test server, so that swath's restart keeps its data."""

    def __init__(self, admin_url: str) -> None:
        """Name the database; nothing is created yet."""
        self.admin_url = admin_url
        self.name = f"swath_ha_acceptance_{os.getpid()}"
        base, _, _ = admin_url.rpartition("/")
        self.url = f"{base}/{self.name}"

    def _psql(self, sql: str) -> None:
        done = subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", self.admin_url, "-c", sql],
            capture_output=True,
            text=True,
            check=False,
        )
        check(done.returncode == 0, f"psql {sql!r}: {done.stderr.strip()}")

    def create(self) -> None:
        """A new, empty database (swath migrates it at start-up)."""
        self._psql(f"DROP DATABASE IF EXISTS {self.name}")
        self._psql(f"CREATE DATABASE {self.name}")

    def drop(self) -> None:
        """Drop it, even while a connection lingers."""
        self._psql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


class Hass:
    """`hass -c <dir>` with the component, on a free port."""

    def __init__(self, work: Path) -> None:
        """Lay out the configuration directory; nothing runs yet."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = work / "hass"
        self.log = self.config / "home-assistant.log"
        self.console = work / "hass-console.log"
        self.process: subprocess.Popen[bytes] | None = None
        (self.config / "custom_components").mkdir(parents=True)
        shutil.copytree(
            HERE / "custom_components" / DOMAIN,
            self.config / "custom_components" / DOMAIN,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        (self.config / "configuration.yaml").write_text(CONFIGURATION.format(port=self.port))

    def start(self) -> None:
        """Start it; `hass` of this virtual environment, never installing anything."""
        hass = Path(sys.executable).parent / "hass"
        # What it prints before its log file is open (an import error at start-up).
        console = open(self.console, "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                str(hass),
                "-c",
                str(self.config),
                "--skip-pip",
                "--log-no-color",
                "--log-file",
                str(self.log),
            ],
            stdout=console,
            stderr=subprocess.STDOUT,
        )
        console.close()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_excerpt(self) -> str:
        """Its warnings and errors (with their tracebacks), then the last lines of its log."""
        if not self.log.exists():
            if not self.console.exists():
                return "(no log)"
            return "\n".join(self.console.read_text(errors="replace").splitlines()[-40:])
        lines = self.log.read_text(errors="replace").splitlines()
        notable: list[str] = []
        keep = False
        for line in lines:
            # A record starts with its date; a traceback's lines continue the record above.
            if line[:2] == "20":
                keep = " WARNING " in line or " ERROR " in line or " CRITICAL " in line
            if keep:
                notable.append(line)
        return "\n".join(
            ["(warnings and errors)", *notable[-60:], "(the last lines)", *lines[-20:]]
        )


class Clients:
    """The run's HTTP calls: to Swath with its admin token, to Home Assistant with the user's."""

    def __init__(self, session: aiohttp.ClientSession, swath: SwathServer, hass: Hass) -> None:
        """Nothing is called yet; the Home Assistant token comes with onboarding."""
        self.session = session
        self.swath = swath
        self.hass = hass
        self.hass_token = ""
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.ws_id = 0

    async def swath_call(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> Any:
        """A call to Swath; its JSON answer (None for 204), failing on any error status."""
        async with self.session.request(
            method,
            f"{self.swath.url}{path}",
            json=body,
            headers={"Authorization": f"Bearer {token or self.swath.token}"},
        ) as resp:
            text = await resp.text()
            check(resp.status < 400, f"Swath {method} {path}: {resp.status} {text}")
            return json.loads(text) if text else None

    async def hass_call(self, method: str, path: str, body: Any = None) -> Any:
        """A call to Home Assistant's REST API as the onboarded user."""
        async with self.session.request(
            method,
            f"{self.hass.url}{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.hass_token}"},
        ) as resp:
            text = await resp.text()
            check(resp.status < 400, f"Home Assistant {method} {path}: {resp.status} {text}")
            return json.loads(text) if text else None

    async def entity_state(self, entity_id: str) -> dict[str, Any]:
        """`GET /api/states/{entity_id}`."""
        answer: dict[str, Any] = await self.hass_call("GET", f"/api/states/{entity_id}")
        return answer

    async def ws_command(self, command: str, **fields: Any) -> Any:
        """One websocket command; its result, failing when it did not succeed."""
        assert self.ws is not None
        self.ws_id += 1
        await self.ws.send_json({"id": self.ws_id, "type": command, **fields})
        while True:
            message = await self.ws.receive_json(timeout=30)
            if message.get("id") == self.ws_id and message.get("type") == "result":
                check(message["success"], f"websocket {command}: {message}")
                return message["result"]


async def wait_for_hass(clients: Clients, hass: Hass) -> None:
    """Until Home Assistant's HTTP server answers the onboarding status (it is then running)."""
    start = time.monotonic()
    while time.monotonic() - start < HASS_START_DEADLINE:
        if hass.process is not None and hass.process.poll() is not None:
            raise Failure(f"hass exited at start-up with {hass.process.returncode}")
        try:
            async with clients.session.get(f"{hass.url}/api/onboarding") as resp:
                if resp.status == 200:
                    say(f"Home Assistant answers after {time.monotonic() - start:.1f} s.")
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.5)
    raise Failure(f"Home Assistant did not answer within {HASS_START_DEADLINE} s")
