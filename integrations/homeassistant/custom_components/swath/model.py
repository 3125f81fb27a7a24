"""What the integration holds of each mower, and how a REST answer or a stream item changes it.

Plain data and pure functions, without Home Assistant's event loop: the coordinator
(coordinator.py) reads Swath and follows the stream, then applies what it got through these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from homeassistant.util import dt as dt_util

from .api import SwathError
from .const import KEPT_STATE_FIELDS, SESSIONS_READ


@dataclass(slots=True)
class MowerData:
    """What the integration knows of one mower."""

    summary: dict[str, Any]
    """The mower as `GET /v1/mowers` lists it, without `state`."""
    state: dict[str, Any] | None
    """Its latest state (`GET /v1/mowers/{id}/state`), or None before its first report."""
    health: dict[str, Any] | None = None
    """Its running totals (`GET /v1/mowers/{id}/health`)."""
    health_etag: str | None = None
    alerts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Its open alerts by kind (one per kind)."""
    zones: list[dict[str, Any]] = field(default_factory=list)
    """Its zones (`GET /v1/mowers/{id}/zones`), each with `occupied`."""
    today: dict[str, Any] | None = None
    """Its totals of the current local day of its site (`GET /v1/mowers/{id}/days`)."""
    sessions: list[dict[str, Any]] = field(default_factory=list)
    """Its newest sessions (`GET /v1/mowers/{id}/sessions`), newest first, at most SESSIONS_READ."""

    @property
    def open_session(self) -> dict[str, Any] | None:
        """The session it is in now (only the newest can be open), None when it is in none."""
        newest = self.sessions[0] if self.sessions else None
        return newest if newest is not None and newest.get("open") else None

    @property
    def last_session(self) -> dict[str, Any] | None:
        """Its newest session that has ended, None before its first one ends."""
        return next((s for s in self.sessions if not s.get("open")), None)

    @property
    def zone(self) -> str | None:
        """The name of the zone it is in, None when it is in none."""
        return next((z["name"] for z in self.zones if z.get("occupied")), None)

    @property
    def online(self) -> bool:
        """Swath's availability of the mower."""
        return bool(self.summary.get("online"))


@dataclass(slots=True)
class StreamStats:
    """What the stream did, for diagnostics and tests."""

    connected: bool = False
    opened: int = 0
    resumed: int = 0
    resets: int = 0
    states: int = 0
    events_fired: int = 0
    last_error: str | None = None
    end_reason: str | None = None
    probes: int = 0
    shutdowns: int = 0
    """Streams Swath ended for its shutdown (`end`, `shutdown`)."""


@dataclass(slots=True)
class PerMower:
    """The per-mower reads of one refresh."""

    health_etag: str | None
    health: dict[str, Any] | None
    zones: list[dict[str, Any]]
    today: dict[str, Any]
    sessions: list[dict[str, Any]]


def from_listing(listed: dict[str, Any], old: MowerData | None) -> MowerData:
    """A mower of `GET /v1/mowers`, keeping what the held one has that the listing lacks."""
    summary = dict(listed)
    state = summary.pop("state", None)
    mower = MowerData(summary=summary, state=state)
    if old is None:
        return mower
    mower.health, mower.health_etag = old.health, old.health_etag
    mower.zones, mower.today, mower.sessions = old.zones, old.today, old.sessions
    keep_last_known(old.state, mower.state)
    if newer(old.state, state):
        # The stream brought a state after this answer was made.
        mower.state = old.state
        mower.summary.update(
            online=old.summary.get("online"),
            offline_reason=old.summary.get("offline_reason"),
            offline_since=old.summary.get("offline_since"),
            last_seen_at=old.summary.get("last_seen_at"),
        )
    return mower


def apply_per_mower(mower: MowerData, reads: PerMower) -> None:
    """The health (unless unchanged, a 304), zones, today's totals and sessions of a refresh."""
    mower.health_etag = reads.health_etag
    if reads.health is not None:
        mower.health = reads.health
    mower.zones, mower.today, mower.sessions = reads.zones, reads.today, reads.sessions


def apply_state(mower: MowerData, state: dict[str, Any]) -> bool:
    """A streamed state; False when the held one is newer (the streamed one is dropped)."""
    if newer(mower.state, state):
        return False
    keep_last_known(mower.state, state)
    mower.state = state
    mower.summary.update(
        online=True,
        offline_reason=None,
        offline_since=None,
        last_seen_at=state.get("last_seen_at"),
    )
    return True


def apply_event(mower: MowerData, event: dict[str, Any]) -> None:
    """A derived event: the alert it raised or cleared, availability, blade, zone, session."""
    alert = event.get("alert")
    if alert is not None:
        if alert["change"] == "raised":
            mower.alerts[alert["kind"]] = {
                "id": event["id"],
                "kind": alert["kind"],
                "mower_id": event["mower_id"],
                "raised_at": event["observed_at"],
                "code": event["details"].get("error_code"),
            }
        else:
            mower.alerts.pop(alert["kind"], None)
    kind = event["kind"]
    if kind == "went_offline":
        mower.summary.update(
            online=False, offline_reason="silent", offline_since=event["observed_at"]
        )
    elif kind == "came_online":
        mower.summary.update(online=True, offline_reason=None, offline_since=None)
    elif kind == "blade_due" and mower.health is not None:
        mower.health["blade_due"] = True
    elif kind in ("zone_entered", "zone_left"):
        _occupy(mower, event["details"], kind == "zone_entered")
    elif kind == "session_ended":
        _session_ended(mower, event["mower_id"], event["details"])


def apply_alert_cleared(mower: MowerData, cleared: dict[str, Any]) -> None:
    """A streamed `alert` item: the alert of that kind is cleared."""
    mower.alerts.pop(cleared["kind"], None)
    if cleared["kind"] == "blade_due" and mower.health is not None:
        mower.health["blade_due"] = False


def keep_last_known(held: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
    """A report without position or battery keeps the last known ones (users expect them)."""
    if held is None or new is None:
        return
    for key in KEPT_STATE_FIELDS:
        if new.get(key) is None and held.get(key) is not None:
            new[key] = held[key]


def _occupy(mower: MowerData, details: dict[str, Any], inside: bool) -> None:
    """A zone event: the zone it names is occupied (entered) or not (left)."""
    for zone in mower.zones:
        if zone["id"] == details.get("zone_id"):
            zone["occupied"] = inside


def _session_ended(mower: MowerData, mower_id: str, details: dict[str, Any]) -> None:
    """A `session_ended` event: its summary replaces the held copy of that session.

    The event carries the session's summary, so the Last session sensor needs no REST read. An
    event about a session older than those held (a catch-up) changes nothing.
    """
    ended = {
        "id": details["session_id"],
        "mower_id": mower_id,
        "open": False,
        **{
            key: details.get(key)
            for key in (
                "started_at",
                "ended_at",
                "end_reason",
                "error_code",
                "breaks",
                "mowing_seconds",
                "blade_seconds",
                "distance_m",
            )
        },
    }
    sessions = [s for s in mower.sessions if s["id"] != ended["id"]]
    sessions.append(ended)
    sessions.sort(key=lambda s: parse_instant(s["started_at"]), reverse=True)
    mower.sessions = sessions[:SESSIONS_READ]


def newer(held: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """Whether the held state was observed after the other one."""
    if held is None or other is None:
        return held is not None
    return parse_instant(held["observed_at"]) > parse_instant(other["observed_at"])


def parse_instant(value: str) -> datetime:
    """An RFC 3339 instant of Swath's answers; SwathError when it is not one."""
    parsed = dt_util.parse_datetime(value)
    if parsed is None:
        raise SwathError(f"not an RFC 3339 instant: {value!r}")
    return parsed
