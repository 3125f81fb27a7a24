"""A small client of Swath's public REST API and live stream (aiohttp, no other dependency).

It speaks only the documented API (Swath's `openapi/openapi.json`): a bearer token, JSON
answers, weak ETags with `If-None-Match`, and the Server-Sent Events of `GET /v1/live/stream`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from .const import STREAM_READ_TIMEOUT_SECONDS

REST_TIMEOUT = aiohttp.ClientTimeout(total=20)
PAGE_LIMIT = 1000


class SwathError(Exception):
    """Swath answered something this client cannot use."""


class SwathConnectionError(SwathError):
    """Swath could not be reached, timed out, or answered a server error (5xx)."""


class SwathAuthError(SwathError):
    """The token was refused (401: unknown or revoked) or may not read (403)."""


class SwathNotFoundError(SwathError):
    """The resource is gone (404), such as a mower deleted meanwhile."""


class SwathForbiddenError(SwathAuthError):
    """The token is valid but may not do this (403), such as a `read` token resetting a blade."""


class SwathNotSwathError(SwathError):
    """Something answered that is not Swath's API: not JSON, or no such route."""


class SwathRateLimitedError(SwathError):
    """Swath answered 429: the token holds as many live streams as it may, or asks too often."""


def normalize_url(url: str) -> str:
    """The base URL as entries keep it: scheme and host in lower case, no trailing slash.

    Raises ValueError when it is not an http(s) URL with a host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, "", ""))


@dataclass(slots=True)
class Conditional:
    """The answer to a conditional GET: `body` is None when Swath answered 304."""

    etag: str | None
    body: Any

    @property
    def modified(self) -> bool:
        """Whether a new document came (not a 304)."""
        return self.body is not None


@dataclass(slots=True)
class SseEvent:
    """One Server-Sent Event as the stream dispatched it."""

    event: str
    data: str
    id: str | None


class SwathClient:
    """Reads one Swath deployment with one token, through a shared aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str) -> None:
        """Keep the session (Home Assistant's shared one), the base URL and the token."""
        self._session = session
        self.url = normalize_url(url)
        self._token = token

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/json",
        }
        if extra:
            headers.update(extra)
        return headers

    async def _get(
        self,
        path: str,
        params: dict[str, str] | None = None,
        etag: str | None = None,
    ) -> Conditional:
        extra = {"If-None-Match": etag} if etag else None
        try:
            async with self._session.get(
                f"{self.url}{path}",
                params=params,
                headers=self._headers(extra),
                timeout=REST_TIMEOUT,
            ) as resp:
                _raise_for_status(resp)
                new_etag = resp.headers.get("ETag")
                if resp.status == 304:
                    return Conditional(new_etag or etag, None)
                return Conditional(new_etag, await _json(resp))
        except (aiohttp.ClientError, TimeoutError) as err:
            raise SwathConnectionError(f"GET {path}: {err!r}") from err

    async def healthz(self) -> bool:
        """`GET /healthz` (no token, no store read): whether Swath's process answers at all."""
        try:
            async with self._session.get(
                f"{self.url}/healthz", timeout=aiohttp.ClientTimeout(total=5)
            ) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def blade_reset(self, mower_id: str) -> None:
        """`POST /v1/mowers/{id}/blade-reset`: the blade was replaced (needs `write`)."""
        try:
            async with self._session.post(
                f"{self.url}/v1/mowers/{mower_id}/blade-reset",
                headers=self._headers(),
                timeout=REST_TIMEOUT,
            ) as resp:
                _raise_for_status(resp)
        except (aiohttp.ClientError, TimeoutError) as err:
            raise SwathConnectionError(f"POST blade-reset: {err!r}") from err

    async def _pages(self, path: str, params: dict[str, str] | None = None) -> list[Any]:
        """Every item of a paged list (`items`, `next_cursor`)."""
        items: list[Any] = []
        query = {"limit": str(PAGE_LIMIT), **(params or {})}
        while True:
            page = (await self._get(path, query)).body
            items.extend(page["items"])
            cursor = page.get("next_cursor")
            if not cursor:
                return items
            query = {**query, "cursor": cursor}

    async def me(self) -> dict[str, Any]:
        """`GET /v1/me`: the token's account, scopes and sites."""
        body: dict[str, Any] = (await self._get("/v1/me")).body
        return body

    async def sites(self) -> list[dict[str, Any]]:
        """`GET /v1/sites`: the sites the token sees."""
        return await self._pages("/v1/sites")

    async def mowers(self, etag: str | None = None) -> Conditional:
        """`GET /v1/mowers` with `If-None-Match`: the mowers with availability and latest state.

        The ETag is only used while the fleet fits in one page: a longer fleet is read whole.
        """
        first = await self._get("/v1/mowers", {"limit": str(PAGE_LIMIT)}, etag)
        if not first.modified:
            return first
        items = list(first.body["items"])
        cursor = first.body.get("next_cursor")
        if not cursor:
            return Conditional(first.etag, items)
        items.extend(await self._pages("/v1/mowers", {"cursor": cursor}))
        return Conditional(None, items)

    async def health(self, mower_id: str, etag: str | None = None) -> Conditional:
        """`GET /v1/mowers/{id}/health` with `If-None-Match`: the mower's running totals."""
        return await self._get(f"/v1/mowers/{mower_id}/health", etag=etag)

    async def alerts(self) -> list[dict[str, Any]]:
        """`GET /v1/alerts`: every open alert the token sees."""
        return await self._pages("/v1/alerts")

    async def zones(self, mower_id: str) -> list[dict[str, Any]]:
        """`GET /v1/mowers/{id}/zones`: the mower's zones, each with whether it is in it now."""
        body: dict[str, Any] = (await self._get(f"/v1/mowers/{mower_id}/zones")).body
        return list(body["items"])

    async def days(self, mower_id: str, first: date, last: date) -> dict[str, Any]:
        """`GET /v1/mowers/{id}/days`: the mower's totals per local day of its site."""
        params = {"from": first.isoformat(), "to": last.isoformat()}
        body: dict[str, Any] = (await self._get(f"/v1/mowers/{mower_id}/days", params)).body
        return body

    async def sessions(self, mower_id: str, limit: int) -> list[dict[str, Any]]:
        """`GET /v1/mowers/{id}/sessions`: the mower's newest `limit` sessions, newest first."""
        path = f"/v1/mowers/{mower_id}/sessions"
        body: dict[str, Any] = (await self._get(path, {"limit": str(limit)})).body
        return list(body["items"])

    async def sessions_between(
        self, mower_id: str, start: datetime, end: datetime
    ) -> list[dict[str, Any]]:
        """Every session of the mower that overlaps `[start, end)`, newest first (all pages)."""
        # Home Assistant's datetimes are aware: isoformat() is RFC 3339 with the offset.
        params = {"from": start.isoformat(), "to": end.isoformat()}
        return await self._pages(f"/v1/mowers/{mower_id}/sessions", params)

    async def events(self, cursor: str | None = None, limit: int = 100) -> dict[str, Any]:
        """`GET /v1/events`: a page of derived events, newest first."""
        params = {"limit": str(limit)}
        if cursor:
            params["cursor"] = cursor
        body: dict[str, Any] = (await self._get("/v1/events", params)).body
        return body

    async def stream(
        self,
        params: dict[str, str],
        last_event_id: str | None,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncGenerator[SseEvent]:
        """`GET /v1/live/stream`: its events, until the connection ends or fails.

        `on_open` is called once the stream answered 200. Raises SwathAuthError on 401/403 and
        SwathConnectionError when the connection cannot be had or breaks (a silence longer than
        two keep-alives included).
        """
        extra = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_event_id:
            extra["Last-Event-ID"] = last_event_id
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=10, sock_read=STREAM_READ_TIMEOUT_SECONDS
        )
        try:
            async with self._session.get(
                f"{self.url}/v1/live/stream",
                params=params,
                headers=self._headers(extra),
                timeout=timeout,
            ) as resp:
                _raise_for_status(resp)
                if on_open is not None:
                    on_open()
                parser = SseParser()
                async for raw in resp.content:
                    event = parser.feed(raw.decode("utf-8"))
                    if event is not None:
                        yield event
        except (aiohttp.ClientError, TimeoutError) as err:
            raise SwathConnectionError(f"live stream: {err!r}") from err


async def _json(resp: aiohttp.ClientResponse) -> Any:
    """The JSON body; SwathNotSwathError when it is not JSON (a web server that is not Swath)."""
    try:
        return await resp.json()
    except (aiohttp.ContentTypeError, ValueError) as err:
        raise SwathNotSwathError(f"{resp.url.path} answered {resp.content_type}") from err


def _raise_for_status(resp: aiohttp.ClientResponse) -> None:
    if resp.status == 401:
        raise SwathAuthError(f"{resp.status} {resp.reason}")
    if resp.status == 403:
        raise SwathForbiddenError(f"{resp.status} {resp.reason}")
    if resp.status == 404:
        raise SwathNotFoundError(f"{resp.status} {resp.url.path}")
    if resp.status == 429:
        raise SwathRateLimitedError(f"{resp.status} {resp.reason}")
    if resp.status >= 500:
        raise SwathConnectionError(f"{resp.status} {resp.reason}")
    if resp.status >= 400:
        raise SwathError(f"{resp.status} {resp.reason}")


class SseParser:
    """The Server-Sent Events line protocol (WHATWG HTML, "Interpreting an event stream")."""

    def __init__(self) -> None:
        """Start with an empty event."""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        """One line (with or without its line break); the event it completes, if any."""
        line = line.rstrip("\r\n")
        if not line:
            if not self._data and not self._event:
                self._id = None
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._id = "", [], None
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id" and "\0" not in value:
            self._id = value
        return None
