"""A calendar per mower whose events are its mowing sessions (docs/rules.md W8).

Home Assistant asks a calendar for the events of a range (the calendar panel, `calendar.get_events`,
calendar triggers): the range is asked of `GET /v1/mowers/{id}/sessions?from=&to=`, every page.
The entity's own event is the open session, else the last one: the calendar is `on` while the
mower is in a session.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from homeassistant.components.calendar import CalendarEntity, CalendarEvent
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback
from homeassistant.util import dt as dt_util

from .api import SwathError
from .const import DOMAIN
from .coordinator import SwathConfigEntry, SwathCoordinator
from .entity import SwathEntity, add_entities_per_mower
from .model import parse_instant

# Read-only entities updated by the coordinator; a range read is one entity's own request.
PARALLEL_UPDATES = 0

# An open session has no end yet. As the entity's event it runs to the next quarter hour (then
# the calendar extends it, or the refresh shows it ended): an end that moves with every write
# would change the recorded `end_time` attribute on every streamed state.
OPEN_HORIZON = timedelta(minutes=15)

END_REASONS_TEXT = {
    "docked": "returned to its dock",
    "stopped": "stopped",
    "error": "stopped on an error",
    "silent": "stopped reporting",
}


async def async_setup_entry(
    hass: HomeAssistant,
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add a calendar per mower, now and whenever Swath gains one."""
    add_entities_per_mower(
        entry,
        async_add_entities,
        lambda coordinator, mower_id: [SwathSessionCalendar(coordinator, mower_id)],
    )


def duration_text(seconds: float) -> str:
    """A duration as people read it: `1 h 05 min`, `25 min`, `40 s`."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def distance_text(metres: float) -> str:
    """A distance in kilometres with two decimals, as the distance sensors show it."""
    return f"{metres / 1000:.2f} km"


def session_event(session: dict[str, Any], end_of_open: datetime) -> CalendarEvent:
    """A session as a calendar event; an open one ends at `end_of_open` (at least 1 s long)."""
    start = parse_instant(session["started_at"])
    mowing = duration_text(float(session["mowing_seconds"]))
    distance = distance_text(float(session["distance_m"]))
    lines = [f"Mowing time: {mowing}", f"Distance: {distance}"]
    if session.get("breaks"):
        lines.append(f"Breaks (resumed after a charge or a stop): {session['breaks']}")
    if session.get("open"):
        end = max(end_of_open, start + timedelta(seconds=1))
        # The summary is recorded with the entity's state: no running figure in it.
        summary = "Mowing"
        lines.insert(0, "In progress.")
    else:
        end = max(parse_instant(session["ended_at"]), start + timedelta(seconds=1))
        summary = f"Mowed {mowing}, {distance}"
        reason = session.get("end_reason") or ""
        ended = f"Ended: {END_REASONS_TEXT.get(reason, reason)}"
        if session.get("error_code"):
            ended += f" ({session['error_code']})"
        lines.insert(0, ended + ".")
    return CalendarEvent(
        start=start,
        end=end,
        summary=summary,
        description="\n".join(lines),
        uid=session["id"],
    )


def next_quarter_hour(now: datetime) -> datetime:
    """The first quarter-hour boundary after `now`."""
    floor = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    return floor + OPEN_HORIZON


class SwathSessionCalendar(SwathEntity, CalendarEntity):
    """The mower's mowing sessions as calendar events."""

    _attr_translation_key = "sessions"

    def __init__(self, coordinator: SwathCoordinator, mower_id: str) -> None:
        """The sessions calendar of this mower."""
        super().__init__(coordinator, mower_id, "sessions")

    @property
    def event(self) -> CalendarEvent | None:
        """The open session, else the last ended one; None before the mower's first session."""
        mower = self.mower
        if mower is None or not mower.sessions:
            return None
        return session_event(mower.sessions[0], next_quarter_hour(dt_util.utcnow()))

    async def async_get_events(
        self, hass: HomeAssistant, start_date: datetime, end_date: datetime
    ) -> list[CalendarEvent]:
        """The sessions that overlap the range, oldest first; an open one ends now."""
        try:
            sessions = await self.coordinator.client.sessions_between(
                self.mower_id, start_date, end_date
            )
        except SwathError as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key="sessions_failed",
                translation_placeholders={"error": str(err)},
            ) from err
        now = dt_util.utcnow()
        return [session_event(s, now) for s in reversed(sessions)]
