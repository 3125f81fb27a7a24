"""A real `swath` process for the tests, and a small client of its API for arranging them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
import os
from pathlib import Path
import secrets
import socket
import subprocess
import time
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[3]


def swath_binary() -> Path:
    """The binary test.sh built (SWATH_BIN), or this repository's target/release/swath."""
    return Path(os.environ.get("SWATH_BIN") or ROOT / "target" / "release" / "swath")


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def instant(at: datetime | None = None) -> str:
    """An RFC 3339 instant, now by default."""
    return (at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")


class SwathServer:
    """`swath serve` on the memory store, with the demo account and a known token."""

    def __init__(
        self,
        log_dir: Path,
        sim_mowers: int = 0,
        seed: int = 7,
        env: dict[str, str] | None = None,
    ) -> None:
        """Choose a port and a token; nothing runs yet."""
        self.binary = swath_binary()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # At least 32 characters: what the demo token rules accept.
        self.token = "ha-test-" + secrets.token_hex(24)
        self.sim_mowers = sim_mowers
        self.seed = seed
        self.log_dir = log_dir
        self.extra_env = env or {}
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        """Start it and wait until it answers /healthz (fails the test when it cannot)."""
        if not self.binary.is_file():
            raise RuntimeError(
                f"{self.binary} is missing: build it (cargo build --release --bin swath) "
                "or run integrations/homeassistant/test.sh"
            )
        self.starts += 1
        log = open(self.log_dir / f"swath-{self.port}-{self.starts}.log", "wb")  # noqa: SIM115
        env = {
            **os.environ,
            "SWATH_HTTP_ADDR": f"127.0.0.1:{self.port}",
            "SWATH_DEMO_TOKEN": self.token,
            "SWATH_SIM_MOWERS": str(self.sim_mowers),
            "SWATH_SIM_SEED": str(self.seed),
            "SWATH_STORE": "memory",
            "SWATH_BUS": "memory",
            "SWATH_LOG": "info",
            "SWATH_LOG_FORMAT": "json",
            **self.extra_env,
        }
        self.process = subprocess.Popen(
            [str(self.binary), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"swath exited at start-up: {self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"swath did not listen on {self.url}: {self.log_text()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def log_text(self) -> str:
        """Every log of this server so far."""
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.log_dir.glob(f"swath-{self.port}-*"))
        )


class SwathApi:
    """The calls the tests make to arrange Swath (with the demo account's admin token)."""

    def __init__(self, server: SwathServer, session: aiohttp.ClientSession) -> None:
        """Talk to `server` with `session`."""
        self.server = server
        self.session = session

    async def call(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> Any:
        """One request; the JSON answer, None for 204. Fails on any other error."""
        async with self.session.request(
            method,
            f"{self.server.url}{path}",
            json=body,
            headers={"Authorization": f"Bearer {token or self.server.token}"},
        ) as resp:
            text = await resp.text()
            assert resp.status < 400, f"{method} {path}: {resp.status} {text}"
            return None if resp.status == 204 or not text else await resp.json()

    async def account_id(self) -> str:
        """The demo account's id."""
        return (await self.call("GET", "/v1/me"))["account"]["id"]

    async def sites(self) -> list[dict[str, Any]]:
        """The demo account's sites."""
        return (await self.call("GET", "/v1/sites"))["items"]

    async def create_mower(self, site_id: str, name: str, serial: str) -> dict[str, Any]:
        """A new mower on a site."""
        return await self.call(
            "POST",
            "/v1/mowers",
            {"site_id": site_id, "name": name, "model": "Automower 450X", "serial": serial},
        )

    async def post_state(self, mower_id: str, **fields: Any) -> dict[str, Any]:
        """Report one state of a mower, as a gateway would; asserts it was stored."""
        report = {
            "mower_id": mower_id,
            "account_id": await self.account_id(),
            "observed_at": instant(),
            "activity": "mowing",
            **fields,
        }
        answer = await self.call("POST", "/v1/states", [report])
        assert answer["stored"] == 1, answer
        return answer

    async def state(self, mower_id: str) -> dict[str, Any]:
        """`GET /v1/mowers/{id}/state`."""
        return await self.call("GET", f"/v1/mowers/{mower_id}/state")

    async def health(self, mower_id: str) -> dict[str, Any]:
        """`GET /v1/mowers/{id}/health`."""
        return await self.call("GET", f"/v1/mowers/{mower_id}/health")

    async def mowers(self) -> list[dict[str, Any]]:
        """`GET /v1/mowers`."""
        return (await self.call("GET", "/v1/mowers?limit=1000"))["items"]


async def wait_for(
    condition: Callable[[], Any], timeout: float = 15, what: str = "the condition"
) -> Any:
    """Poll `condition` every 50 ms until it is truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


def minutes_ago(minutes: float) -> str:
    """An instant some minutes back."""
    return instant(datetime.now(UTC) - timedelta(minutes=minutes))
