"""The Swath coordinator: a REST load, then the live stream, with ETag polling as its fallback.

- First load and every refresh: `GET /v1/mowers` (directory, availability, latest state),
  per mower its health, zones, today's totals and two newest sessions, and `GET /v1/alerts`,
  each conditional where Swath offers an ETag (a 304 costs neither side anything). A
  `session_ended` event on the stream brings the ended session's summary itself.
- Push: `GET /v1/live/stream?changes_only=true`, run as a background task of the config entry.
  After a dropped connection it reconnects with `Last-Event-ID` and Swath sends what was missed;
  only its `reset` event (the id is too old, or from before a restart) makes it reload through
  REST. The stream's `end` event (`token_revoked`) and a 401 start the re-authentication flow.
- Fallback: while the stream cannot be had, the refresh runs every POLL_INTERVAL and also reads
  `GET /v1/events` for the events it would have fired; after each failure the interval doubles,
  up to POLL_INTERVAL_MAX. While the stream is up the refresh runs every REFRESH_INTERVAL, for
  what the stream does not carry (mowers added or deleted, health totals).

What it holds of each mower, and how an answer or a stream item changes that, is model.py's.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from contextlib import aclosing
from datetime import timedelta
import json
import logging
from typing import Any

from homeassistant.config_entries import ConfigEntry
from homeassistant.core import CALLBACK_TYPE, HomeAssistant, callback
from homeassistant.exceptions import ConfigEntryAuthFailed
from homeassistant.helpers import device_registry as dr, issue_registry as ir
from homeassistant.helpers.update_coordinator import DataUpdateCoordinator, UpdateFailed
from homeassistant.util import dt as dt_util

from . import const
from .api import (
    SseEvent,
    SwathAuthError,
    SwathClient,
    SwathError,
    SwathNotFoundError,
    SwathRateLimitedError,
)
from .const import CONF_SITES, DOMAIN, REQUIRED_HEALTH_FIELDS
from .model import (
    MowerData,
    PerMower,
    StreamStats,
    apply_alert_cleared,
    apply_event,
    apply_per_mower,
    apply_state,
    from_listing,
)

_LOGGER = logging.getLogger(__name__)

type SwathConfigEntry = ConfigEntry[SwathCoordinator]


class SwathCoordinator(DataUpdateCoordinator[dict[str, MowerData]]):
    """Keeps the mowers of one entry, pushed by the stream and refreshed through REST."""

    config_entry: SwathConfigEntry

    def __init__(
        self, hass: HomeAssistant, entry: SwathConfigEntry, client: SwathClient
    ) -> None:
        """Poll until the stream is up; the stream task is started by the entry's set-up."""
        super().__init__(
            hass,
            _LOGGER,
            config_entry=entry,
            name=DOMAIN,
            update_interval=const.POLL_INTERVAL,
        )
        self.client = client
        self.sites: set[str] | None = set(entry.options.get(CONF_SITES) or []) or None
        self.stats = StreamStats()
        self.last_event_id: str | None = None
        self._mowers_etag: str | None = None
        self._poll_failures = 0
        self._fired: OrderedDict[str, None] = OrderedDict()
        self._catch_up_mark: str | None = None
        self._mower_listeners: dict[str, list[CALLBACK_TYPE]] = {}
        self._event_listeners: dict[str, list[Callable[[dict[str, Any]], None]]] = {}
        self.scopes: frozenset[str] = frozenset()
        """The token's scopes (`GET /v1/me`): `write` shows the blade-reset buttons."""

    # REST ------------------------------------------------------------------------------------

    async def _async_setup(self) -> None:
        """Learn the token's scopes; remember the newest events, so that none before is fired."""
        try:
            me = await self.client.me()
            page = await self.client.events()
        except SwathAuthError as err:
            raise ConfigEntryAuthFailed(
                translation_domain=DOMAIN, translation_key="invalid_auth"
            ) from err
        except SwathError as err:
            raise UpdateFailed(
                translation_domain=DOMAIN,
                translation_key="cannot_connect",
                translation_placeholders={"url": self.client.url, "error": str(err)},
            ) from err
        self.scopes = frozenset(me.get("scopes") or [])
        for event in page["items"]:
            self._remember(event["id"])
        if page["items"]:
            self._catch_up_mark = page["items"][0]["id"]

    async def _async_update_data(self) -> dict[str, MowerData]:
        """Read the mowers, their health and open alerts; merge with what the stream brought."""
        try:
            data = await self._load()
            if not self.stats.connected:
                await self._catch_up_events(data)
        except SwathAuthError as err:
            raise ConfigEntryAuthFailed(
                translation_domain=DOMAIN, translation_key="invalid_auth"
            ) from err
        except SwathError as err:
            if not self.stats.connected:
                self._poll_failures += 1
                backoff = const.POLL_INTERVAL * (2 ** min(self._poll_failures, 8))
                self.update_interval = min(backoff, const.POLL_INTERVAL_MAX)
            raise UpdateFailed(
                translation_domain=DOMAIN,
                translation_key="cannot_connect",
                translation_placeholders={"url": self.client.url, "error": str(err)},
            ) from err
        self._poll_failures = 0
        self.update_interval = (
            const.REFRESH_INTERVAL if self.stats.connected else const.POLL_INTERVAL
        )
        return data

    async def _load(self) -> dict[str, MowerData]:
        listing = await self.client.mowers(self._mowers_etag)
        # Everything is fetched before anything is merged: the merge below runs without an
        # await, so no stream item can slip in between it and the coordinator's new data.
        summaries: list[dict[str, Any]] | None = None
        if listing.modified:
            summaries = [
                m for m in listing.body if self.sites is None or m["site_id"] in self.sites
            ]
        ids = (
            [m["id"] for m in summaries]
            if summaries is not None
            else list((self.data or {}).keys())
        )
        # A few at a time: a large fleet must not open a connection per mower at once.
        limit = asyncio.Semaphore(const.HEALTH_READS_AT_ONCE)

        async def per_mower(mower_id: str) -> PerMower:
            async with limit:
                return await self._per_mower(mower_id)

        answers = await asyncio.gather(*(per_mower(i) for i in ids), return_exceptions=True)
        alerts = await self.client.alerts()

        current = self.data or {}
        result: dict[str, MowerData] = {}
        if summaries is None:
            result = dict(current)
        else:
            for listed in summaries:
                result[listed["id"]] = from_listing(listed, current.get(listed["id"]))
        for mower_id, answer in zip(ids, answers, strict=True):
            held = result.get(mower_id)
            if held is None:
                continue
            if isinstance(answer, SwathNotFoundError):
                continue
            if isinstance(answer, BaseException):
                raise answer
            apply_per_mower(held, answer)
        self._check_api(result)
        for mower in result.values():
            mower.alerts = {}
        for alert in alerts:
            alerted = result.get(alert["mower_id"])
            if alerted is not None:
                alerted.alerts[alert["kind"]] = alert
        self._mowers_etag = listing.etag
        return result

    async def _per_mower(self, mower_id: str) -> PerMower:
        """The mower's health (conditional), zones, totals of its site's day, newest sessions."""
        old = (self.data or {}).get(mower_id)
        health = await self.client.health(mower_id, old.health_etag if old else None)
        zones = await self.client.zones(mower_id)
        # The site's day is not known before the answer names its time zone: a range around
        # Home Assistant's own day always holds it.
        now = dt_util.utcnow()
        days = await self.client.days(
            mower_id, (now - timedelta(days=1)).date(), (now + timedelta(days=1)).date()
        )
        zone = dt_util.get_time_zone(days["time_zone"]) or dt_util.UTC
        today = now.astimezone(zone).date().isoformat()
        current = next((d for d in days["items"] if d["day"] == today), None)
        sessions = await self.client.sessions(mower_id, const.SESSIONS_READ)
        return PerMower(health.etag, health.body, zones, current or {"day": today}, sessions)

    def _check_api(self, data: dict[str, MowerData]) -> None:
        """Raise a repair issue while Swath's health answers lack what this version reads."""
        issue = f"api_too_old_{self.config_entry.entry_id}"
        missing = sorted(
            {
                f
                for mower in data.values()
                if mower.health is not None
                for f in REQUIRED_HEALTH_FIELDS
                if f not in mower.health
            }
        )
        if missing:
            ir.async_create_issue(
                self.hass,
                DOMAIN,
                issue,
                is_fixable=False,
                severity=ir.IssueSeverity.WARNING,
                translation_key="api_too_old",
                translation_placeholders={"url": self.client.url, "missing": ", ".join(missing)},
            )
        else:
            ir.async_delete_issue(self.hass, DOMAIN, issue)

    async def _catch_up_events(self, data: dict[str, MowerData]) -> None:
        """Fire the events listed since the last look that were not fired yet, oldest first."""
        missed: list[dict[str, Any]] = []
        cursor: str | None = None
        newest: str | None = None
        for _ in range(const.EVENT_CATCH_UP_PAGES):
            page = await self.client.events(cursor)
            items = page["items"]
            if newest is None and items:
                newest = items[0]["id"]
            reached = False
            for event in items:
                if event["id"] == self._catch_up_mark:
                    reached = True
                    break
                if event["id"] not in self._fired:
                    missed.append(event)
            cursor = page.get("next_cursor")
            if reached or not cursor:
                break
        if newest is not None:
            self._catch_up_mark = newest
        for event in reversed(missed):
            if event["mower_id"] in data:
                self._fire(event)
            else:
                self._remember(event["id"])

    @callback
    def async_update_listeners(self) -> None:
        """Add and remove devices as the mowers come and go, then update every entity."""
        self._sync_devices()
        super().async_update_listeners()

    def _sync_devices(self) -> None:
        if self.data is None:
            return
        registry = dr.async_get(self.hass)
        for device in dr.async_entries_for_config_entry(registry, self.config_entry.entry_id):
            ids = [i for (domain, i) in device.identifiers if domain == DOMAIN]
            if not ids:
                continue
            mower = self.data.get(ids[0])
            if mower is None:
                _LOGGER.info(
                    "Mower %s is no longer shown (deleted in Swath, or outside the entry's "
                    "sites); removing its device.",
                    ids[0],
                )
                registry.async_update_device(
                    device.id, remove_config_entry_id=self.config_entry.entry_id
                )
                continue
            summary = mower.summary
            if (device.name, device.model, device.serial_number) != (
                summary["name"],
                summary["model"],
                summary["serial"],
            ):
                registry.async_update_device(
                    device.id,
                    name=summary["name"],
                    model=summary["model"],
                    serial_number=summary["serial"],
                )

    # Listeners of one mower -------------------------------------------------------------------

    @callback
    def async_add_mower_listener(self, mower_id: str, update: CALLBACK_TYPE) -> CALLBACK_TYPE:
        """Call `update` when the stream changes this mower; returns the remover."""
        self._mower_listeners.setdefault(mower_id, []).append(update)
        return lambda: self._mower_listeners.get(mower_id, []).remove(update)

    @callback
    def async_add_event_listener(
        self, mower_id: str, fire: Callable[[dict[str, Any]], None]
    ) -> CALLBACK_TYPE:
        """Call `fire` with each derived event of this mower, once; returns the remover."""
        self._event_listeners.setdefault(mower_id, []).append(fire)
        return lambda: self._event_listeners.get(mower_id, []).remove(fire)

    def _notify(self, mower_id: str) -> None:
        for update in list(self._mower_listeners.get(mower_id, [])):
            update()

    def _remember(self, event_id: str) -> None:
        self._fired[event_id] = None
        while len(self._fired) > const.FIRED_EVENTS_KEPT:
            self._fired.popitem(last=False)

    def _fire(self, event: dict[str, Any]) -> None:
        if event["id"] in self._fired:
            return
        self._remember(event["id"])
        self.stats.events_fired += 1
        for fire in list(self._event_listeners.get(event["mower_id"], [])):
            fire(event)

    # The live stream --------------------------------------------------------------------------

    def stream_params(self) -> dict[str, str]:
        """The stream's filters: changed states only, and the entry's sites if it has some."""
        params = {"changes_only": "true"}
        if self.sites is not None:
            params["sites"] = ",".join(sorted(self.sites))
        return params

    async def async_run_stream(self) -> None:
        """Follow the live stream until the entry unloads or the token is refused.

        After the stream is lost: at once when Swath ended it for its shutdown (another replica,
        or the restarted process, answers); otherwise `/healthz` is probed every
        HEALTH_PROBE_SECONDS while Swath does not answer, and the stream is opened as soon as it
        does. A stream refused by a Swath that answers is retried with a doubling back-off.
        """
        delay = const.STREAM_RETRY_MIN_SECONDS
        while True:
            opened_before = self.stats.opened
            self.stats.end_reason = None
            try:
                async with aclosing(
                    self.client.stream(self.stream_params(), self.last_event_id, self._on_open)
                ) as events:
                    async for event in events:
                        if not self._on_stream_event(event):
                            break
                self._stream_down(f"the stream ended: {self.stats.end_reason or 'closed'}")
                if self.stats.end_reason == "token_revoked":
                    self.config_entry.async_start_reauth(self.hass)
                    return
            except SwathAuthError as err:
                self._stream_down(str(err))
                self.config_entry.async_start_reauth(self.hass)
                return
            except SwathError as err:
                self._stream_down(str(err))
                self._stream_refused(err)
            if self.stats.opened > opened_before:
                delay = const.STREAM_RETRY_MIN_SECONDS
            if self.stats.end_reason == "shutdown":
                _LOGGER.debug("Swath ended the live stream for its shutdown; reconnecting now.")
                continue
            if await self._async_wait_for_swath():
                _LOGGER.debug("Swath answers again; reopening the live stream now.")
                continue
            _LOGGER.debug("Live stream down (%s); retrying in %s s.", self.stats.last_error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, const.STREAM_RETRY_MAX_SECONDS)

    async def _async_wait_for_swath(self) -> bool:
        """Probe `/healthz` on a short fixed interval until Swath's process answers.

        True when it did not answer at first: Swath was down and is back, so the stream is
        reopened at once; False when it answered at once (the stream was refused by a Swath that
        is up, which the back-off is for).
        """
        was_down = False
        while not await self.client.healthz():
            was_down = True
            self.stats.probes += 1
            await asyncio.sleep(const.HEALTH_PROBE_SECONDS)
        return was_down

    def _stream_refused(self, err: SwathError) -> None:
        """A 429 is the user's to fix (too many streams on one token): say so in repairs."""
        if isinstance(err, SwathRateLimitedError):
            ir.async_create_issue(
                self.hass,
                DOMAIN,
                f"stream_refused_{self.config_entry.entry_id}",
                is_fixable=False,
                severity=ir.IssueSeverity.WARNING,
                translation_key="stream_refused",
                translation_placeholders={"url": self.client.url},
            )

    @callback
    def _on_open(self) -> None:
        ir.async_delete_issue(self.hass, DOMAIN, f"stream_refused_{self.config_entry.entry_id}")
        self.stats.connected = True
        self.stats.opened += 1
        self.stats.last_error = None
        if self.last_event_id is not None:
            self.stats.resumed += 1
        self.update_interval = const.REFRESH_INTERVAL
        if self.last_event_id is None or not self.last_update_success:
            # Nothing to resume from (what happened between the REST load and now is unknown),
            # or the last refresh failed (entities are unavailable until one succeeds): read
            # REST now, not after the refresh debouncer's cool-down.
            self.config_entry.async_create_task(
                self.hass, self.async_refresh(), "swath refresh after stream open"
            )

    @callback
    def _stream_down(self, reason: str) -> None:
        self.stats.last_error = reason
        if not self.stats.connected:
            return
        self.stats.connected = False
        self.update_interval = const.POLL_INTERVAL
        self.config_entry.async_create_task(
            self.hass, self.async_request_refresh(), "swath poll after stream loss"
        )

    def _on_stream_event(self, event: SseEvent) -> bool:
        """Apply one stream event; False when the stream is over (`end`)."""
        if event.id is not None:
            self.last_event_id = event.id
        try:
            data = json.loads(event.data) if event.data else {}
        except ValueError:
            _LOGGER.warning("Ignored a live stream event %s that is not JSON", event.event)
            return True
        if event.event == "state":
            self._on_state(data)
        elif event.event == "event":
            self._on_event(data)
        elif event.event == "alert":
            self._on_alert_cleared(data)
        elif event.event == "reset":
            _LOGGER.info("The live stream could not resume (%s); reloading", data.get("reason"))
            self.stats.resets += 1
            self.config_entry.async_create_task(
                self.hass, self._async_reload_after_reset(), "swath reload after reset"
            )
        elif event.event == "end":
            self.stats.end_reason = data.get("reason")
            if self.stats.end_reason == "shutdown":
                self.stats.shutdowns += 1
                _LOGGER.info("Swath is shutting down; reconnecting the live stream.")
            else:
                _LOGGER.warning("Swath ended the live stream: %s.", self.stats.end_reason)
            return False
        return True

    async def _async_reload_after_reset(self) -> None:
        await self.async_refresh()
        if self.data is None:
            return
        try:
            await self._catch_up_events(self.data)
        except SwathError as err:
            _LOGGER.warning("Could not read the events missed by the live stream: %s", err)

    def _on_state(self, state: dict[str, Any]) -> None:
        mower = (self.data or {}).get(state["mower_id"])
        if mower is None:
            # A mower this entry does not know yet: read the directory.
            self.config_entry.async_create_task(
                self.hass, self.async_request_refresh(), "swath refresh for a new mower"
            )
            return
        if not apply_state(mower, state):
            return
        self.stats.states += 1
        self._notify(state["mower_id"])

    def _on_event(self, event: dict[str, Any]) -> None:
        mower = (self.data or {}).get(event["mower_id"])
        if mower is not None:
            apply_event(mower, event)
            self._notify(event["mower_id"])
        self._fire(event)

    def _on_alert_cleared(self, cleared: dict[str, Any]) -> None:
        mower = (self.data or {}).get(cleared["mower_id"])
        if mower is None:
            return
        apply_alert_cleared(mower, cleared)
        self._notify(cleared["mower_id"])
