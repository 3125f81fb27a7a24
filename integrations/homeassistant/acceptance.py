"""The acceptance test: a real `hass` process with the component, against a running swath.

test.sh runs it after pytest (`python acceptance.py`, with SWATH_BIN and
SWATH_TEST_DATABASE_URL set). Unlike the pytest suite, nothing here runs inside Home
Assistant's test harness: Home Assistant is started as a user starts it (`hass -c <config>`),
and everything is done through its public APIs, as its frontend does:

1. swath on PostgreSQL (a database of its own, dropped at the end, so that a restart keeps the
   mowers and tokens) with three mowers and their states, made through Swath's API;
2. `hass` on a free port with the component in `custom_components/`, onboarded through
   `POST /api/onboarding/users` and the auth code's `POST /auth/token`;
3. the integration added through the config-flow API (`POST /api/config/config_entries/flow`,
   handler `swath`) with a `read` token;
4. devices and entities (websocket `config/device_registry/list`,
   `config/entity_registry/list`, `GET /api/states/{entity_id}`) equal to Swath's
   `GET /v1/mowers` and `GET /v1/mowers/{id}/state`;
5. each mower's Last session sensor and sessions calendar equal to Swath's sessions, its range
   read through Home Assistant's calendar API (`GET /api/calendars/{entity_id}?start=&end=`);
6. a state change and an error posted to Swath, seen in Home Assistant within 1 s (the error
   also fires the mower's event entity), the latencies printed;
7. swath stopped (SIGTERM): the entities unavailable; started again on the same port: back
   within 10 s, the time printed;
8. the token revoked (`DELETE /v1/tokens/{id}`): Home Assistant starts a `reauth` flow, which a
   new token completes through the same flow API.

Any failed check exits non-zero with the end of Home Assistant's and swath's logs; nothing is
skipped. Home Assistant runs with `--skip-pip` and a configuration without `default_config`:
it reaches nothing outside this machine.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
import os
from pathlib import Path
import shutil
import sys
import tempfile
import time
from typing import Any

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from acceptance_harness import (  # noqa: E402
    DOMAIN,
    Clients,
    Failure,
    Hass,
    Postgres,
    check,
    say,
    until,
    wait_for_hass,
)
from tests.swath import SwathServer, instant  # noqa: E402

# What a change posted to Swath may take to show in Home Assistant (issue 46).
LIVE_DEADLINE = 1.0
# What the entities may take to come back after swath restarts (issue 46).
RESTART_DEADLINE = 10.0
# The entities of each mower compared with Swath (platform, key of the unique id).
ENTITIES = [
    ("lawn_mower", "lawn_mower"),
    ("sensor", "battery"),
    ("sensor", "activity"),
    ("sensor", "error_code"),
    ("binary_sensor", "connectivity"),
    ("device_tracker", "position"),
    ("event", "event"),
    ("sensor", "last_session"),
    ("calendar", "sessions"),
]
async def onboard(clients: Clients) -> None:
    """The owner made through onboarding and logged in with its auth code; the steps done."""
    url = clients.hass.url
    client_id = f"{url}/"
    steps = {s["step"]: s["done"] for s in await clients.hass_call("GET", "/api/onboarding")}
    check(steps.get("user") is False, f"a new Home Assistant awaits its user: {steps}")
    async with clients.session.post(
        f"{url}/api/onboarding/users",
        json={
            "client_id": client_id,
            "name": "Acceptance",
            "username": "acceptance",
            "password": "acceptance-password",
            "language": "en",
        },
    ) as resp:
        check(resp.status == 200, f"onboarding the user: {resp.status} {await resp.text()}")
        auth_code = (await resp.json())["auth_code"]
    async with clients.session.post(
        f"{url}/auth/token",
        data={"grant_type": "authorization_code", "code": auth_code, "client_id": client_id},
    ) as resp:
        check(resp.status == 200, f"the auth code's token: {resp.status} {await resp.text()}")
        clients.hass_token = (await resp.json())["access_token"]
    # The core_config step is left out: configuration.yaml holds the location, and finishing
    # that step starts the met, radio_browser and google_translate flows, which reach outside.
    await clients.hass_call("POST", "/api/onboarding/analytics")
    await clients.hass_call(
        "POST", "/api/onboarding/integration", {"client_id": client_id, "redirect_uri": client_id}
    )
    steps = {s["step"]: s["done"] for s in await clients.hass_call("GET", "/api/onboarding")}
    done = {"user": True, "core_config": False, "analytics": True, "integration": True}
    check(steps == done, f"the onboarding steps done: {steps}")
    say(f"Onboarded the owner through the onboarding API; steps done: {steps}.")


async def arrange_swath(clients: Clients) -> tuple[list[str], dict[str, Any]]:
    """Three mowers with a first state each (the first one after a run of 2 minutes three hours
    ago: an ended session), and a `read` token for Home Assistant."""
    sites = (await clients.swath_call("GET", "/v1/sites"))["items"]
    check(sites, "the demo account has a site")
    account = (await clients.swath_call("GET", "/v1/me"))["account"]["id"]
    first_states = [
        {"activity": "docked", "battery_percent": 100},
        {"activity": "mowing", "battery_percent": 71, "position": {"lat": 52.3702, "lon": 4.8952}},
        {"activity": "charging", "battery_percent": 34},
    ]
    mowers = []
    for n, first in enumerate(first_states):
        created = await clients.swath_call(
            "POST",
            "/v1/mowers",
            {
                "site_id": sites[0]["id"],
                "name": f"Acceptance {n + 1}",
                "model": "Automower 450X",
                "serial": f"ACC-{n + 1}",
            },
        )
        mowers.append(created["id"])
        report = {"mower_id": created["id"], "account_id": account, "observed_at": instant()}
        earlier = []
        if n == 0:
            run_start = datetime.now(UTC) - timedelta(hours=3)
            earlier = [
                {
                    **report,
                    "observed_at": instant(run_start + timedelta(seconds=seconds)),
                    "activity": activity,
                }
                for seconds, activity in ((0, "mowing"), (60, "mowing"), (120, "docked"))
            ]
        reports = [*earlier, {**report, **first}]
        stored = await clients.swath_call("POST", "/v1/states", reports)
        check(
            stored["stored"] == len(reports), f"the states of {created['id']} are stored: {stored}"
        )
    token = await clients.swath_call(
        "POST", "/v1/tokens", {"name": "Home Assistant acceptance", "scopes": ["read"]}
    )
    return mowers, token


async def add_integration(clients: Clients, token: str) -> dict[str, Any]:
    """The config flow through Home Assistant's REST API: the user step, then the entry."""
    flow = await clients.hass_call(
        "POST",
        "/api/config/config_entries/flow",
        {"handler": DOMAIN, "show_advanced_options": False},
    )
    check(
        flow["type"] == "form" and flow["step_id"] == "user",
        f"the flow opens on the user step: {flow}",
    )
    result = await clients.hass_call(
        "POST",
        f"/api/config/config_entries/flow/{flow['flow_id']}",
        {"url": clients.swath.url, "api_token": token},
    )
    check(result["type"] == "create_entry", f"the user step creates the entry: {result}")
    entry: dict[str, Any] = result["result"]
    check(entry["state"] == "loaded", f"the entry is loaded: {entry}")
    say(f"Added the integration through the config flow: entry {entry['title']!r}.")
    return entry


async def entity_ids(
    clients: Clients, entry_id: str, mowers: list[str]
) -> dict[tuple[str, str], str]:
    """Each mower's device equal to Swath's mower; its entities' ids by (mower, key)."""
    swath_mowers = {
        m["id"]: m for m in (await clients.swath_call("GET", "/v1/mowers?limit=1000"))["items"]
    }
    check(set(swath_mowers) == set(mowers), f"Swath lists the run's mowers: {list(swath_mowers)}")
    devices = [
        d
        for d in await clients.ws_command("config/device_registry/list")
        if entry_id in d["config_entries"]
    ]
    by_mower = {i[1]: d for d in devices for i in d["identifiers"] if i[0] == DOMAIN}
    check(
        set(by_mower) == set(mowers) and len(devices) == len(mowers),
        f"one device per mower of Swath: {sorted(by_mower)} for {sorted(mowers)}",
    )
    for mower_id, device in by_mower.items():
        listed = swath_mowers[mower_id]
        seen = (device["name"], device["model"], device["serial_number"])
        want = (listed["name"], listed["model"], listed["serial"])
        check(seen == want, f"the device of {mower_id} is Swath's mower: {seen} != {want}")
    registry = await clients.ws_command("config/entity_registry/list")
    by_unique = {
        (e["platform"], e["unique_id"]): e
        for e in registry
        if e.get("config_entry_id") == entry_id
    }
    ids: dict[tuple[str, str], str] = {}
    for mower_id in mowers:
        for platform, key in ENTITIES:
            entity = by_unique.get((DOMAIN, f"{mower_id}_{key}"))
            check(entity is not None, f"{mower_id} has its {key} entity")
            assert entity is not None
            check(
                entity["entity_id"].startswith(f"{platform}."),
                f"{entity['entity_id']} is a {platform}",
            )
            check(
                entity["device_id"] == by_mower[mower_id]["id"],
                f"{entity['entity_id']} belongs to its mower's device",
            )
            ids[(mower_id, key)] = entity["entity_id"]
    say(f"{len(devices)} devices and {len(ids)} entities, each one Swath's.")
    return ids


async def mismatches(clients: Clients, ids: dict[tuple[str, str], str], mower_id: str) -> list[str]:
    """What Home Assistant shows of one mower that differs from `GET /v1/mowers/{id}/state`."""
    swath = await clients.swath_call("GET", f"/v1/mowers/{mower_id}/state")
    expected = {
        "lawn_mower": swath["lawn_mower_activity"],
        "battery": (
            "unknown" if swath.get("battery_percent") is None else str(swath["battery_percent"])
        ),
        "activity": swath["activity"],
        "error_code": swath.get("error_code") or "unknown",
        "connectivity": "on",
    }
    wrong = []
    for key, want in expected.items():
        seen = (await clients.entity_state(ids[(mower_id, key)]))["state"]
        if seen != want:
            wrong.append(f"{ids[(mower_id, key)]} is {seen!r}, Swath says {want!r}")
    tracker = await clients.entity_state(ids[(mower_id, "position")])
    position = swath.get("position")
    if position is not None:
        seen_at = (tracker["attributes"].get("latitude"), tracker["attributes"].get("longitude"))
        if seen_at != (position["lat"], position["lon"]):
            wrong.append(f"{ids[(mower_id, 'position')]} is at {seen_at}, Swath says {position}")
    return wrong


async def compare_all(clients: Clients, ids: dict[tuple[str, str], str], mowers: list[str]) -> None:
    """Every mower's entities equal to Swath's latest state."""
    for mower_id in mowers:
        wrong = await mismatches(clients, ids, mower_id)
        check(not wrong, "; ".join(wrong))
    say(f"The entities of {len(mowers)} mowers equal GET /v1/mowers/{{id}}/state.")


async def sessions(
    clients: Clients, ids: dict[tuple[str, str], str], mowers: list[str]
) -> None:
    """Last session and the calendar as Swath's sessions; a range through the calendar API."""
    now = datetime.now(UTC)
    start, end = now - timedelta(days=1), now + timedelta(hours=1)
    for mower_id in mowers:
        listed = (
            await clients.swath_call(
                "GET",
                f"/v1/mowers/{mower_id}/sessions?from={instant(start)}&to={instant(end)}",
            )
        )["items"]
        ended = next((s for s in listed if not s["open"]), None)
        sensor = await clients.entity_state(ids[(mower_id, "last_session")])
        want = "unknown" if ended is None else ended["ended_at"]
        seen = sensor["state"]
        if ended is not None and seen not in ("unknown", "unavailable"):
            # Home Assistant writes a timestamp to the second with an offset, Swath to the
            # microsecond with `Z`.
            same = datetime.fromisoformat(seen) == datetime.fromisoformat(want).replace(
                microsecond=0
            )
        else:
            same = seen == want
        check(same, f"{ids[(mower_id, 'last_session')]} is {seen!r}, Swath says {want!r}")
        if ended is not None:
            check(
                sensor["attributes"].get("end_reason") == ended["end_reason"]
                and sensor["attributes"].get("session_id") == ended["id"],
                f"the Last session's attributes are Swath's: {sensor['attributes']} {ended}",
            )
        calendar = ids[(mower_id, "sessions")]
        is_open = any(s["open"] for s in listed)
        shown = (await clients.entity_state(calendar))["state"]
        check(
            shown == ("on" if is_open else "off"),
            f"{calendar} is {shown!r} while Swath's open session is {is_open}",
        )
        events = await clients.hass_call(
            "GET", f"/api/calendars/{calendar}?start={instant(start)}&end={instant(end)}"
        )
        starts = sorted(datetime.fromisoformat(e["start"]["dateTime"]) for e in events)
        want_starts = sorted(datetime.fromisoformat(s["started_at"]) for s in listed)
        check(
            starts == want_starts,
            f"{calendar} lists sessions starting {starts}, Swath {want_starts}",
        )
    say(
        f"Last session and the sessions calendar of {len(mowers)} mowers equal "
        "GET /v1/mowers/{id}/sessions, a day read through the calendar API."
    )


async def post_state(clients: Clients, mower_id: str, **fields: Any) -> None:
    """One state of a mower, as its gateway reports it."""
    account = (await clients.swath_call("GET", "/v1/me"))["account"]["id"]
    report = {"mower_id": mower_id, "account_id": account, "observed_at": instant(), **fields}
    stored = await clients.swath_call("POST", "/v1/states", [report])
    check(stored["stored"] == 1, f"the state of {mower_id} is stored: {stored}")


async def live_changes(
    clients: Clients, ids: dict[tuple[str, str], str], mower_id: str
) -> dict[str, float]:
    """A state change and an error posted to Swath, each seen in Home Assistant within 1 s."""
    latencies: dict[str, float] = {}

    async def shows(key: str, want: str) -> bool:
        return bool((await clients.entity_state(ids[(mower_id, key)]))["state"] == want)

    # A change the stream carries (the activity changed, the battery left its band).
    before = time.monotonic()
    await post_state(clients, mower_id, activity="returning", battery_percent=52)

    async def changed() -> bool:
        return await shows("lawn_mower", "returning") and await shows("battery", "52")

    await until(changed, LIVE_DEADLINE, "the state change in Home Assistant")
    latencies["state change"] = time.monotonic() - before

    # An error: Swath derives `error_raised`, which the mower's event entity fires.
    event_entity = ids[(mower_id, "event")]
    fired_before = (await clients.entity_state(event_entity))["state"]
    before = time.monotonic()
    await post_state(clients, mower_id, activity="error", error_code="E_LIFTED", battery_percent=51)

    async def errored() -> bool:
        return await shows("lawn_mower", "error") and await shows("error_code", "E_LIFTED")

    await until(errored, LIVE_DEADLINE, "the error state in Home Assistant")
    latencies["error state"] = time.monotonic() - before

    async def fired() -> dict[str, Any] | None:
        state = await clients.entity_state(event_entity)
        fired_now = state["state"] != fired_before
        if fired_now and state["attributes"].get("event_type") == "error_raised":
            return state
        return None

    state, _ = await until(fired, LIVE_DEADLINE, "the error_raised event in Home Assistant")
    latencies["error event"] = time.monotonic() - before
    listed = await clients.swath_call("GET", f"/v1/events?mower_id={mower_id}&kind=error_raised")
    check(
        [e["id"] for e in listed["items"]][:1] == [state["attributes"]["event_id"]],
        f"the fired event is Swath's error_raised: {state['attributes']} {listed['items'][:1]}",
    )
    for what, seconds in latencies.items():
        # From before the POST to the poll that saw it: an upper bound of the push's latency.
        say(f"Latency of the {what}: {seconds * 1000:.0f} ms (deadline {LIVE_DEADLINE:.0f} s).")
        check(seconds <= LIVE_DEADLINE, f"the {what} within {LIVE_DEADLINE} s of its POST")
    return latencies


async def restart(
    clients: Clients, ids: dict[tuple[str, str], str], mowers: list[str]
) -> float:
    """swath stopped: entities unavailable; started again: available within 10 s."""
    watched = [ids[(m, "lawn_mower")] for m in mowers] + [ids[(m, "battery")] for m in mowers]

    async def states() -> list[str]:
        return [(await clients.entity_state(e))["state"] for e in watched]

    await asyncio.get_running_loop().run_in_executor(None, clients.swath.stop)

    async def all_unavailable() -> bool:
        return all(s == "unavailable" for s in await states())

    _, gone = await until(all_unavailable, 30, "the entities unavailable while swath is down", 0.1)
    say(f"swath stopped (SIGTERM): every watched entity unavailable after {gone:.1f} s.")

    await asyncio.get_running_loop().run_in_executor(None, clients.swath.start)
    started = time.monotonic()

    async def all_back() -> bool:
        return all(s != "unavailable" for s in await states())

    _, back = await until(all_back, RESTART_DEADLINE, "the entities back after the restart", 0.1)
    say(
        f"swath started again on port {clients.swath.port}: entities available after "
        f"{back:.1f} s (deadline {RESTART_DEADLINE:.0f} s)."
    )
    # What they show once back is still Swath's (its store kept every state).
    await compare_all(clients, ids, mowers)
    return time.monotonic() - started


async def revoke(clients: Clients, entry: dict[str, Any], token: dict[str, Any]) -> float:
    """The token revoked in Swath: Home Assistant asks for re-authentication; a new token heals."""
    before = time.monotonic()
    await clients.swath_call("DELETE", f"/v1/tokens/{token['id']}")

    async def reauth_flow() -> dict[str, Any] | None:
        # The flows in progress that no user started, as the frontend's notifications list them.
        flows = await clients.ws_command("config_entries/flow/progress")
        return next(
            (
                f
                for f in flows
                if f["handler"] == DOMAIN
                and f["context"].get("source") == "reauth"
                and f["context"].get("entry_id") == entry["entry_id"]
            ),
            None,
        )

    flow, took = await until(reauth_flow, 10, "the reauth flow after the token was revoked", 0.1)
    say(f"Token revoked: Home Assistant started a reauth flow after {took:.1f} s.")
    fresh = await clients.swath_call(
        "POST", "/v1/tokens", {"name": "Home Assistant acceptance 2", "scopes": ["read"]}
    )
    result = await clients.hass_call(
        "POST", f"/api/config/config_entries/flow/{flow['flow_id']}", {"api_token": fresh["token"]}
    )
    check(
        result["type"] == "abort" and result["reason"] == "reauth_successful",
        f"a new token completes the reauth flow: {result}",
    )

    async def loaded() -> bool:
        entries = await clients.hass_call("GET", "/api/config/config_entries/entry")
        return any(e["entry_id"] == entry["entry_id"] and e["state"] == "loaded" for e in entries)

    await until(loaded, 10, "the entry loaded again with the new token", 0.1)
    say("A new token completed the reauth flow; the entry is loaded again.")
    return time.monotonic() - before


async def run(swath: SwathServer, hass: Hass) -> None:
    """Every step, in order; the first failed check ends the run."""
    async with aiohttp.ClientSession() as session:
        clients = Clients(session, swath, hass)
        swath.start()
        mowers, token = await arrange_swath(clients)
        say(f"swath at {swath.url} (PostgreSQL) with {len(mowers)} mowers.")
        hass.start()
        await wait_for_hass(clients, hass)
        await onboard(clients)
        entry = await add_integration(clients, token["token"])
        async with session.ws_connect(f"{hass.url}/api/websocket") as ws:
            clients.ws = ws
            check((await ws.receive_json())["type"] == "auth_required", "websocket asks for auth")
            await ws.send_json({"type": "auth", "access_token": clients.hass_token})
            check((await ws.receive_json())["type"] == "auth_ok", "websocket accepts the token")
            user = await clients.ws_command("auth/current_user")
            check(user["is_owner"] and user["name"] == "Acceptance", f"the owner: {user}")
            ids = await entity_ids(clients, entry["entry_id"], mowers)
            await compare_all(clients, ids, mowers)
            await sessions(clients, ids, mowers)
            await live_changes(clients, ids, mowers[0])
            await restart(clients, ids, mowers)
            await revoke(clients, entry, token)
        check_log(hass)


def check_log(hass: Hass) -> None:
    """No exception went through the component, and it logged no error but the outage's."""
    lines = hass.log.read_text(errors="replace").splitlines()
    # Home Assistant's coordinator logs a failed refresh as an error: one while swath is stopped,
    # one refused when the token was revoked. Both are what the run provoked.
    expected = (
        "[custom_components.swath.coordinator] Error fetching swath data: Could not reach",
        "[custom_components.swath.coordinator] Authentication failed while fetching swath data",
    )
    wrong = [
        line
        for line in lines
        if "custom_components/swath/" in line
        or (
            " ERROR " in line
            and "[custom_components.swath" in line
            and not any(e in line for e in expected)
        )
    ]
    check(not wrong, "the component's errors in Home Assistant's log:\n" + "\n".join(wrong))


def main() -> int:
    """Run the acceptance test; 0 when every check held."""
    admin_url = os.environ.get("SWATH_TEST_DATABASE_URL")
    if not admin_url:
        print("acceptance: SWATH_TEST_DATABASE_URL is not set (test.sh sets it).", file=sys.stderr)
        return 1
    database = Postgres(admin_url)
    try:
        database.create()
    except Failure as err:
        print(f"acceptance: FAILED: {err}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="swath-ha-acceptance-"))
    swath = SwathServer(
        work,
        env={
            "SWATH_STORE": "postgres",
            "SWATH_DATABASE_URL": f"{database.url}?sslmode=disable",
        },
    )
    hass = Hass(work)
    started = time.monotonic()
    try:
        asyncio.run(run(swath, hass))
    except (Failure, AssertionError, RuntimeError, aiohttp.ClientError, TimeoutError) as err:
        print(f"acceptance: FAILED: {err}", file=sys.stderr)
        print(f"--- Home Assistant's log ({hass.log}, kept):", file=sys.stderr)
        print(hass.log_excerpt(), file=sys.stderr)
        print("--- the end of swath's logs:", file=sys.stderr)
        print("\n".join(swath.log_text().splitlines()[-30:]), file=sys.stderr)
        return 1
    finally:
        hass.stop()
        swath.stop()
        database.drop()
    shutil.rmtree(work, ignore_errors=True)
    say(f"Passed in {time.monotonic() - started:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
