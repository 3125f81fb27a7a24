"""A client generated from openapi/openapi.json (openapi-python-client) against a running swath.

Lists the mowers, reads a page of the first mower's history that has one, then the same page of
its track as JSON and as GeoJSON (its own operation, decision 111) and checks that the GeoJSON
coordinates are the JSON positions; then, in an account of its own, reports two mowing runs of a
new mower and reads its sessions (docs/rules.md W8) through the three sessions operations: their
mowing time and distance add up to the mower's health totals, ranges and pages select the right
ones, the open one is the one `get_open_session` names, and the ended one's `session_ended` event
carries its summary. Through the generated, typed functions
only: if the document and the service disagree, the generated parsers fail here. First, no
generated model may be named `…Dto` or `…Type0…` (decision 112).
Usage: api_client_check.py BASE_URL TOKEN
"""

import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from swath_client import AuthenticatedClient
from swath_client.api.accounts import create_account
from swath_client.api.ingest import record_states
from swath_client.api.mowers import create_mower, list_mowers
from swath_client.api.notifications import list_events
from swath_client.api.sessions import get_open_session, list_mower_sessions, list_sessions
from swath_client.api.sites import create_site
from swath_client.api.telemetry import (
    get_mower_health,
    get_mower_history,
    get_mower_track,
    get_mower_track_geojson,
)
from swath_client.models import (
    Activity,
    CreatedAccount,
    EndReason,
    EventKind,
    EventPage,
    HistoryPage,
    IngestResult,
    LineString,
    MowerHealth,
    MowerList,
    MowerSummary,
    NewAccount,
    NewMower,
    NewSite,
    OpenSession,
    Point,
    Problem,
    ReportedPosition,
    SessionEndedDetails,
    SessionItem,
    SessionPage,
    Site,
    StateReportIn,
    TrackFeatureCollection,
    TrackPage,
)
from swath_client.types import UNSET


def check_model_names() -> None:
    """The generated models are named after the document's schemas: none is a Rust type's name
    (`…Dto`) or one the generator made up for an inline object (`…Type0…`), decision 112."""
    import swath_client.models

    odd = [n for n in dir(swath_client.models) if n.endswith("Dto") or "Type0" in n]
    if odd:
        sys.exit(f"generated models named after no noun of the API: {odd}")


def main() -> None:
    base_url, token = sys.argv[1], sys.argv[2]
    check_model_names()
    client = AuthenticatedClient(base_url=base_url, token=token, timeout=10.0)

    mowers = list_mowers.sync(client=client, limit=50)
    if not isinstance(mowers, MowerList):
        sys.exit(f"list_mowers answered {mowers!r}")
    if not mowers.items:
        sys.exit("list_mowers answered no mower")
    print(f"Listed {len(mowers.items)} mowers (truncated: {mowers.truncated}).")

    # The simulated fleet reports every second; give it a few seconds to have history.
    deadline = time.monotonic() + 30
    while True:
        for mower in mowers.items:
            page = get_mower_history.sync(client=client, id=mower.id, limit=5)
            if not isinstance(page, HistoryPage):
                sys.exit(f"get_mower_history answered {page!r}")
            if page.items:
                first = page.items[0]
                print(
                    f"Read {len(page.items)} history entries of {mower.name} "
                    f"(first at {first.observed_at.isoformat()}, {first.activity.value}; "
                    f"more: {page.truncated})."
                )
                if page.truncated and not page.next_cursor:
                    sys.exit("a truncated page without next_cursor")
                check_track(client, mower.id, mower.name)
                check_sessions(base_url, client)
                return
        if time.monotonic() > deadline:
            sys.exit("no mower has any history after 30 s")
        time.sleep(1)


def check_track(client: AuthenticatedClient, mower_id: UUID, name: str) -> None:
    """The JSON and GeoJSON track of one window: the same positions, `[lon, lat]` in GeoJSON."""
    # A window that ends now: the positions in it no longer change between the two reads.
    to = datetime.now(timezone.utc)
    track = get_mower_track.sync(client=client, id=mower_id, to=to, limit=5)
    if not isinstance(track, TrackPage):
        sys.exit(f"get_mower_track answered {track!r}")
    if not track.items:
        sys.exit(f"{name} has history but no track")
    geo = get_mower_track_geojson.sync(client=client, id=mower_id, to=to, limit=5)
    if not isinstance(geo, TrackFeatureCollection):
        sys.exit(f"get_mower_track_geojson answered {geo!r}")
    if len(geo.features) != 1:
        sys.exit(f"a track page of {len(track.items)} positions has {len(geo.features)} features")
    feature = geo.features[0]
    expected = [[p.lon, p.lat] for p in track.items]
    geometry = feature.geometry
    if isinstance(geometry, LineString):
        coordinates = geometry.coordinates
    elif isinstance(geometry, Point):
        coordinates = [geometry.coordinates]
    else:
        sys.exit(f"a track feature's geometry is {geometry!r}")
    if len(expected) == 1 and not isinstance(geometry, Point):
        sys.exit(f"a track page of one position is a {type(geometry).__name__}")
    if coordinates != expected:
        sys.exit(f"GeoJSON coordinates {coordinates} are not the track's [lon, lat] {expected}")
    if feature.properties.times != [p.observed_at for p in track.items]:
        sys.exit("GeoJSON times are not the track's")
    if feature.properties.mower_id != mower_id:
        sys.exit(f"GeoJSON feature of mower {feature.properties.mower_id}, not {mower_id}")
    if (geo.truncated, geo.next_cursor) != (track.truncated, track.next_cursor):
        sys.exit("the GeoJSON track pages differently from the JSON track")
    print(
        f"Read {len(coordinates)} track positions of {name} as JSON and GeoJSON "
        f"({type(geometry).__name__}, first {coordinates[0]})."
    )


def typed(value: Any, kind: type, operation: str) -> Any:
    """The answer when it is of the expected model; exits with the answer otherwise."""
    if not isinstance(value, kind):
        sys.exit(f"{operation} answered {value!r}")
    return value


def check_sessions(base_url: str, demo: AuthenticatedClient) -> None:
    """A new account's mower mows for 4 minutes three hours ago (then docks) and again for a
    minute from 10 minutes ago: two sessions (the gap is longer than the default merge gap of
    7 200 s), read through every sessions operation."""
    created = typed(
        create_account.sync(client=demo, body=NewAccount(name="Python check")),
        CreatedAccount,
        "create_account",
    )
    client = AuthenticatedClient(base_url=base_url, token=created.token.token, timeout=10.0)
    site = typed(
        create_site.sync(client=client, body=NewSite(name="Python check", time_zone="Europe/Berlin")),
        Site,
        "create_site",
    )
    mower = typed(
        create_mower.sync(
            client=client,
            body=NewMower(site_id=site.id, name="Py", model="Check", serial="PY-1"),
        ),
        MowerSummary,
        "create_mower",
    )
    now = datetime.now(timezone.utc).replace(microsecond=0)
    first, second = now - timedelta(hours=3), now - timedelta(minutes=10)

    def report(at: datetime, activity: Activity, north: int) -> StateReportIn:
        return StateReportIn(
            mower_id=mower.id,
            account_id=created.account.id,
            observed_at=at,
            activity=activity,
            battery_percent=90,
            blade_on=activity == Activity.MOWING,
            position=ReportedPosition(lat=52.5 + north * 0.0001, lon=13.4, accuracy_m=0.5),
        )

    reports = [
        *(report(first + timedelta(seconds=60 * i), Activity.MOWING, i) for i in range(4)),
        report(first + timedelta(seconds=240), Activity.DOCKED, 3),
        report(second, Activity.MOWING, 0),
        report(second + timedelta(seconds=60), Activity.MOWING, 2),
    ]
    ingest = typed(record_states.sync(client=client, body=reports), IngestResult, "record_states")
    if ingest.stored != len(reports):
        sys.exit(f"record_states stored {ingest.stored} of {len(reports)} reports")

    health = typed(get_mower_health.sync(mower.id, client=client), MowerHealth, "get_mower_health")
    page = typed(
        list_mower_sessions.sync(mower.id, client=client, limit=1000),
        SessionPage,
        "list_mower_sessions",
    )
    if len(page.items) != 2:
        sys.exit(f"list_mower_sessions: {len(page.items)} sessions, not 2: {page.items!r}")
    newest, ended = page.items
    want = [
        (newest.open_, newest.started_at, newest.ended_at, newest.end_reason, newest.states),
        (ended.open_, ended.started_at, ended.ended_at, ended.end_reason, ended.states),
    ]
    if want != [
        (True, second, None, None, 2),
        (False, first, first + timedelta(seconds=240), EndReason.DOCKED, 5),
    ]:
        sys.exit(f"list_mower_sessions: the sessions are {want}")
    if ended.local_date != first.astimezone(ZoneInfo("Europe/Berlin")).date():
        sys.exit(f"list_mower_sessions: local date {ended.local_date} of a start at {first}")
    # W8: every mowing state is in a session, so the sessions add up to the health totals.
    mowed = sum(s.mowing_seconds for s in page.items)
    driven = sum(s.distance_m for s in page.items)
    if (mowed, health.mowing_seconds) != (300, 300) or abs(driven - health.distance_m) > 1e-6:
        sys.exit(
            f"list_mower_sessions: {mowed} s and {driven} m; health: "
            f"{health.mowing_seconds} s and {health.distance_m} m"
        )

    # One at a time, following the cursor: the same sessions.
    paged: list[SessionItem] = []
    cursor = UNSET
    while True:
        one = typed(
            list_mower_sessions.sync(mower.id, client=client, limit=1, cursor=cursor),
            SessionPage,
            "list_mower_sessions (limit 1)",
        )
        paged.extend(one.items)
        if not one.next_cursor:
            break
        cursor = one.next_cursor
    if [s.id for s in paged] != [newest.id, ended.id]:
        sys.exit(f"list_mower_sessions page by page: {[s.id for s in paged]}")

    # Ranges: sessions that overlap [from, to) (started before `to`, ended after `from`).
    ranges = {
        "the first run": (first + timedelta(minutes=1), first + timedelta(minutes=2)),
        "between the runs": (first + timedelta(minutes=30), second - timedelta(minutes=30)),
    }
    for name, (start, end) in ranges.items():
        ranged = typed(
            list_mower_sessions.sync(mower.id, client=client, from_=start, to=end),
            SessionPage,
            f"list_mower_sessions over {name}",
        )
        expected = [ended.id] if name == "the first run" else []
        if [s.id for s in ranged.items] != expected:
            sys.exit(f"list_mower_sessions over {name}: {[s.id for s in ranged.items]}")

    open_session = typed(get_open_session.sync(mower.id, client=client), OpenSession, "get_open_session")
    if open_session.session is None or open_session.session.id != newest.id:
        sys.exit(f"get_open_session: {open_session.session!r}, not {newest.id}")

    for name, query in (
        ("of the mower", {"mower_id": mower.id}),
        ("of the site", {"site_id": site.id}),
        ("of the account", {}),
    ):
        fleet = typed(list_sessions.sync(client=client, **query), SessionPage, f"list_sessions {name}")
        if [s.id for s in fleet.items] != [newest.id, ended.id]:
            sys.exit(f"list_sessions {name}: {[s.id for s in fleet.items]}")
    # Another account's mower is not visible: the same 404 as an unknown one (decision 200).
    other = list_sessions.sync(client=demo, mower_id=mower.id)
    if not isinstance(other, Problem) or other.status != 404:
        sys.exit(f"list_sessions of another account's mower answered {other!r}")
    # The first run can no longer merge (the second started more than the merge gap after it):
    # `session_ended` with its summary, once; the open one has none.
    deadline = time.monotonic() + 10
    while True:
        events = typed(
            list_events.sync(client=client, mower_id=mower.id, kind=EventKind.SESSION_ENDED),
            EventPage,
            "list_events (session_ended)",
        )
        if events.items or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    details = [e.details for e in events.items]
    if len(details) != 1 or not isinstance(details[0], SessionEndedDetails):
        sys.exit(f"list_events: the session_ended events are {details!r}")
    summary = details[0]
    seen = (summary.session_id, summary.started_at, summary.ended_at, summary.end_reason)
    if seen != (ended.id, ended.started_at, ended.ended_at, ended.end_reason) or (
        summary.mowing_seconds,
        summary.distance_m,
        summary.breaks,
    ) != (ended.mowing_seconds, ended.distance_m, ended.breaks):
        sys.exit(f"session_ended {summary!r} is not the stored session {ended!r}")
    print(
        f"Sessions of a new account's mower: {len(page.items)} ({mowed:g} s of mowing, "
        f"{driven:.1f} m, as its health), paged, ranged, the open one named, fleet-wide the same, session_ended its summary."
    )


if __name__ == "__main__":
    main()
