"""Mowing sessions (issue 45) against a real Swath: the Last session sensor and its companions,
the sessions calendar (its event and range queries, paged), `session_ended` from the live stream
updating the sensor without a REST read, and the session fold of that event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import aiohttp
import pytest

from custom_components.swath import api as api_module
from custom_components.swath.calendar import (
    distance_text,
    duration_text,
    next_quarter_hour,
    session_event,
)
from custom_components.swath.model import MowerData, apply_event
from homeassistant.const import STATE_OFF, STATE_ON
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.entity_component import EntityComponent
from homeassistant.util import dt as dt_util

from .conftest import config_entry, setup_entry
from .helpers import FiredEvents, coordinator_of, entity_id, state
from .swath import SwathApi, SwathServer, instant, wait_for

BERLIN_SUMMER = timezone(timedelta(hours=2))


def _report(mower_id: str, account_id: str, at: datetime, activity: str, north: int) -> dict[str, Any]:
    return {
        "mower_id": mower_id,
        "account_id": account_id,
        "observed_at": instant(at),
        "activity": activity,
        "battery_percent": 90,
        "blade_on": activity == "mowing",
        "position": {"lat": 52.4 + north * 0.0001, "lon": 13.0, "accuracy_m": 0.5},
    }


async def _two_sessions(api: SwathApi) -> tuple[str, datetime, datetime]:
    """A mower with an ended session three hours ago (4 min of mowing, then docked) and an open
    one that started 10 minutes ago; the gap between them is longer than the default merge gap
    (7 200 s). Returns the mower and the two sessions' starts."""
    site = (await api.sites())[0]["id"]
    a = (await api.create_mower(site, "Front lawn", "SN-1"))["id"]
    account = await api.account_id()
    now = datetime.now(UTC).replace(microsecond=0)
    first = now - timedelta(hours=3)
    second = now - timedelta(minutes=10)
    reports = [
        *(_report(a, account, first + timedelta(seconds=60 * i), "mowing", i) for i in range(4)),
        _report(a, account, first + timedelta(seconds=240), "docked", 3),
        _report(a, account, second, "mowing", 0),
        _report(a, account, second + timedelta(seconds=60), "mowing", 2),
    ]
    answer = await api.call("POST", "/v1/states", reports)
    assert answer["stored"] == len(reports), answer
    for _ in range(200):
        sessions = (await api.call("GET", f"/v1/mowers/{a}/sessions"))["items"]
        if len(sessions) == 2 and sessions[0]["mowing_seconds"] > 0:
            return a, first, second
        await wait_for(lambda: True)
    raise AssertionError(f"Swath did not make the two sessions in time: {sessions}")


async def test_the_last_session_sensors_equal_the_rest_answer(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """The Last session sensor is the ended session's end, its details as attributes; its
    mowing time and distance sensors in minutes and kilometres; the open one is not it."""
    a, first, _ = await _two_sessions(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)

    newest, ended = (await api.call("GET", f"/v1/mowers/{a}/sessions"))["items"]
    assert newest["open"] and not ended["open"]
    assert ended["end_reason"] == "docked" and ended["mowing_seconds"] == 240
    sensor = state(hass, "sensor", a, "last_session")
    assert dt_util.parse_datetime(sensor.state) == first + timedelta(seconds=240)
    assert sensor.attributes["device_class"] == "timestamp"
    details = {k: v for k, v in sensor.attributes.items() if k not in ("device_class", "icon", "friendly_name")}
    assert details == {
        "session_id": ended["id"],
        "started_at": first,
        "duration_minutes": 4,
        "mowing_minutes": 4,
        "distance_km": round(ended["distance_m"] / 1000, 2),
        "end_reason": "docked",
        "error_code": None,
        "breaks": 0,
    }
    assert ended["distance_m"] > 0
    assert float(state(hass, "sensor", a, "last_session_mowing_time").state) == 4
    assert state(hass, "sensor", a, "last_session_mowing_time").attributes[
        "unit_of_measurement"
    ] == "min"
    distance = state(hass, "sensor", a, "last_session_distance")
    assert float(distance.state) == pytest.approx(ended["distance_m"] / 1000)
    assert distance.attributes["unit_of_measurement"] == "km"
    registry = er.async_get(hass)
    for key, digits in (("last_session_mowing_time", 0), ("last_session_distance", 2)):
        options = registry.async_get(entity_id(hass, "sensor", a, key)).options
        assert options["sensor"]["suggested_display_precision"] == digits, key
    await hass.config_entries.async_unload(entry.entry_id)


async def test_the_calendar_shows_the_sessions_of_a_range(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calendar is on during the open session; a range asks Swath for its sessions, page by
    page (a page of one here, so the cursor must be followed), in any time zone."""
    a, first, second = await _two_sessions(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    newest, ended = (await api.call("GET", f"/v1/mowers/{a}/sessions"))["items"]

    calendar = state(hass, "calendar", a, "sessions")
    assert calendar.state == STATE_ON
    assert calendar.attributes["message"] == "Mowing"
    local = second.astimezone(dt_util.get_default_time_zone())
    assert calendar.attributes["start_time"] == local.strftime("%Y-%m-%d %H:%M:%S")
    assert calendar.attributes["description"].startswith("In progress.")

    monkeypatch.setattr(api_module, "PAGE_LIMIT", 1)
    reads: list[dict[str, str]] = []
    client = entry.runtime_data.client
    get = client._get

    async def counted(path: str, params: dict[str, str] | None = None, etag: str | None = None) -> Any:
        # The calendar's reads only (the coordinator's refresh may run meanwhile).
        if path.endswith("/sessions") and "from" in (params or {}):
            reads.append(dict(params or {}))
        return await get(path, params, etag)

    monkeypatch.setattr(client, "_get", counted)
    eid = entity_id(hass, "calendar", a, "sessions")
    # Both sessions, through the service users and automations call; a +02:00 range.
    answer = await hass.services.async_call(
        "calendar",
        "get_events",
        {
            "entity_id": eid,
            "start_date_time": (first - timedelta(hours=1)).astimezone(BERLIN_SUMMER),
            "end_date_time": datetime.now(BERLIN_SUMMER) + timedelta(hours=1),
        },
        blocking=True,
        return_response=True,
    )
    events = answer[eid]["events"]
    assert [e["summary"] for e in events] == ["Mowed 4 min, " + distance_text(ended["distance_m"]), "Mowing"]
    assert dt_util.parse_datetime(events[0]["start"]) == first
    assert dt_util.parse_datetime(events[0]["end"]) == first + timedelta(seconds=240)
    assert events[0]["description"].splitlines()[0] == "Ended: returned to its dock."
    assert dt_util.parse_datetime(events[1]["start"]) == second
    assert len(reads) == 2 and "cursor" in reads[1], reads

    # The ended session alone, and a range between the two with none.
    component: EntityComponent[Any] = hass.data["calendar"]
    entity = component.get_entity(eid)
    assert entity is not None
    only_first = await entity.async_get_events(
        hass, first - timedelta(minutes=1), first + timedelta(minutes=1)
    )
    assert [(e.uid, e.start, e.end) for e in only_first] == [
        (ended["id"], first, first + timedelta(seconds=240))
    ]
    between = await entity.async_get_events(
        hass, first + timedelta(minutes=30), second - timedelta(minutes=30)
    )
    assert between == []

    # Swath gone: a translated error, not a traceback.
    await hass.async_add_executor_job(swath.stop)
    with pytest.raises(HomeAssistantError) as raised:
        await entity.async_get_events(hass, first, second)
    assert raised.value.translation_key == "sessions_failed"
    await hass.config_entries.async_unload(entry.entry_id)


async def test_a_mower_without_sessions_has_an_empty_calendar(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Docked since its first report: no session, the sensors unknown, the calendar off."""
    site = (await api.sites())[0]["id"]
    a = (await api.create_mower(site, "Back lawn", "SN-2"))["id"]
    await api.post_state(a, activity="docked")
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    assert state(hass, "sensor", a, "last_session").state == "unknown"
    assert "started_at" not in state(hass, "sensor", a, "last_session").attributes
    assert state(hass, "sensor", a, "last_session_distance").state == "unknown"
    calendar = state(hass, "calendar", a, "sessions")
    assert calendar.state == STATE_OFF
    assert "message" not in calendar.attributes
    await hass.config_entries.async_unload(entry.entry_id)


async def test_session_ended_fires_and_updates_the_last_session_from_the_stream(
    hass: HomeAssistant, swath_no_merge_gap: SwathServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a merge gap of 0 Swath raises `session_ended` when the mower docks: the event entity
    fires it with the session's summary, and the Last session sensor shows that session with no
    REST read of the sessions (the event carries them)."""
    swath = swath_no_merge_gap
    async with aiohttp.ClientSession() as session:
        api = SwathApi(swath, session)
        site = (await api.sites())[0]["id"]
        a = (await api.create_mower(site, "Front lawn", "SN-1"))["id"]
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)
        await api.post_state(a, activity="docked", observed_at=instant(start))
        entry = config_entry(swath.url, swath.token, await api.account_id())
        await setup_entry(hass, entry)
        coordinator = coordinator_of(hass)
        await wait_for(lambda: coordinator.stats.connected, what="the live stream")
        await hass.async_block_till_done()
        assert state(hass, "sensor", a, "last_session").state == "unknown"

        reads: list[str] = []
        sessions = coordinator.client.sessions

        async def counted(mower_id: str, limit: int) -> list[dict[str, Any]]:
            reads.append(mower_id)
            return await sessions(mower_id, limit)

        monkeypatch.setattr(coordinator.client, "sessions", counted)
        fired = FiredEvents(hass)
        account = await api.account_id()
        run = [
            _report(a, account, start + timedelta(seconds=seconds), activity, north)
            for seconds, activity, north in (
                (60, "mowing", 0), (90, "mowing", 2), (120, "mowing", 4), (150, "docked", 4)
            )
        ]
        answer = await api.call("POST", "/v1/states", run)
        assert answer["stored"] == len(run), answer
        (event,) = await wait_for(
            lambda: fired.of_type("session_ended"), what="the session_ended event"
        )
        stored = (await api.call("GET", f"/v1/mowers/{a}/sessions"))["items"]

    ended_at = start + timedelta(seconds=150)
    assert [(s["id"], s["open"], s["end_reason"]) for s in stored] == [
        (event["session_id"], False, "docked")
    ]
    assert event["end_reason"] == "docked" and event["mowing_seconds"] == 90
    assert dt_util.parse_datetime(event["ended_at"]) == ended_at
    assert event["distance_m"] == pytest.approx(stored[0]["distance_m"])
    sensor = state(hass, "sensor", a, "last_session")
    assert dt_util.parse_datetime(sensor.state) == ended_at
    assert sensor.attributes["session_id"] == event["session_id"]
    assert sensor.attributes["mowing_minutes"] == 2
    assert float(state(hass, "sensor", a, "last_session_mowing_time").state) == 1.5
    assert state(hass, "calendar", a, "sessions").state == STATE_OFF
    assert reads == [], "the sensor was updated by a REST read, not by the event"
    await hass.config_entries.async_unload(entry.entry_id)


def _session(start: str, open_: bool = False, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"s-{start}",
        "started_at": start,
        "ended_at": None if open_ else start.replace("T08", "T09"),
        "open": open_,
        "end_reason": None if open_ else "docked",
        "error_code": None,
        "mowing_seconds": 3000.0,
        "blade_seconds": 3000.0,
        "distance_m": 1200.0,
        "breaks": 0,
        **fields,
    }


def _ended_event(session: dict[str, Any], **details: Any) -> dict[str, Any]:
    return {
        "id": f"e-{session['id']}",
        "kind": "session_ended",
        "mower_id": "m",
        "observed_at": session["started_at"],
        "details": {
            "kind": "session_ended",
            "session_id": session["id"],
            "started_at": session["started_at"],
            "ended_at": session["started_at"].replace("T08", "T10"),
            "end_reason": "error",
            "error_code": "E_LIFTED",
            "breaks": 1,
            "mowing_seconds": 4000.0,
            "blade_seconds": 3900.0,
            "distance_m": 1500.0,
            **details,
        },
        "alert": None,
    }


def test_session_ended_replaces_the_held_session_and_ignores_older_ones() -> None:
    """The event's summary is the session's final copy; a catch-up event of an older session
    than the two held changes nothing; a newer one becomes the last session."""
    older = _session("2026-06-01T08:00:00Z")
    newer = _session("2026-06-02T08:00:00Z", open_=True)
    mower = MowerData(summary={}, state=None, sessions=[newer, older])
    assert mower.open_session is newer and mower.last_session is older

    apply_event(mower, _ended_event(newer))
    assert mower.open_session is None
    last = mower.last_session
    assert last is not None
    assert (last["id"], last["end_reason"], last["error_code"], last["breaks"]) == (
        newer["id"], "error", "E_LIFTED", 1
    )
    assert [s["id"] for s in mower.sessions] == [newer["id"], older["id"]]

    oldest = _session("2026-05-30T08:00:00Z")
    apply_event(mower, _ended_event(oldest))
    assert [s["id"] for s in mower.sessions] == [newer["id"], older["id"]]

    newest = _session("2026-06-03T08:00:00Z")
    apply_event(mower, _ended_event(newest))
    assert [s["id"] for s in mower.sessions] == [newest["id"], newer["id"]]


def test_the_event_texts() -> None:
    """Durations and distances as people read them; an error's code beside the reason; an open
    session's end at least a second after its start, at the next quarter hour as the entity's."""
    assert [duration_text(s) for s in (40, 59.6, 1500, 3900, 7260)] == [
        "40 s", "1 min", "25 min", "1 h 05 min", "2 h 01 min"
    ]
    assert distance_text(2140.125) == "2.14 km"
    errored = session_event(
        _session("2026-06-01T08:00:00Z", end_reason="error", error_code="E_LIFTED", breaks=2),
        datetime(2026, 6, 1, 12, tzinfo=UTC),
    )
    assert errored.summary == "Mowed 50 min, 1.20 km"
    assert errored.description is not None
    assert errored.description.splitlines() == [
        "Ended: stopped on an error (E_LIFTED).",
        "Mowing time: 50 min",
        "Distance: 1.20 km",
        "Breaks (resumed after a charge or a stop): 2",
    ]
    start = datetime(2026, 6, 1, 8, tzinfo=UTC)
    running = session_event(_session("2026-06-01T08:00:00Z", open_=True), start)
    assert (running.start, running.end) == (start, start + timedelta(seconds=1))
    assert next_quarter_hour(datetime(2026, 6, 1, 8, 14, 59, tzinfo=UTC)) == datetime(
        2026, 6, 1, 8, 15, tzinfo=UTC
    )
    assert next_quarter_hour(datetime(2026, 6, 1, 8, 15, tzinfo=UTC)) == datetime(
        2026, 6, 1, 8, 30, tzinfo=UTC
    )
