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
from .const import KEPT_STATE_FIELDS


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


def from_listing(listed: dict[str, Any], old: MowerData | None) -> MowerData:
    """A mower of `GET /v1/mowers`, keeping what the held one has that the listing lacks."""
    summary = dict(listed)
    state = summary.pop("state", None)
    mower = MowerData(summary=summary, state=state)
    if old is None:
        return mower
    mower.health, mower.health_etag = old.health, old.health_etag
    mower.zones, mower.today = old.zones, old.today
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
    """The health (unless unchanged, a 304), zones and today's totals of one refresh."""
    mower.health_etag = reads.health_etag
    if reads.health is not None:
        mower.health = reads.health
    mower.zones, mower.today = reads.zones, reads.today


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
    """A derived event: the alert it raised or cleared, availability, blade and zone."""
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


def newer(held: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """Whether the held state was observed after the other one."""
    if held is None or other is None:
        return held is not None
    return _instant(held["observed_at"]) > _instant(other["observed_at"])


def _instant(value: str) -> datetime:
    parsed = dt_util.parse_datetime(value)
    if parsed is None:
        raise SwathError(f"not an RFC 3339 instant: {value!r}")
    return parsed
