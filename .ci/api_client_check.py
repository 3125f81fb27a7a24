"""A client generated from openapi/openapi.json (openapi-python-client) against a running swath.

Lists the mowers, reads a page of the first mower's history that has one, then the same page of
its track as JSON and as GeoJSON (its own operation, decision 111) and checks that the GeoJSON
coordinates are the JSON positions; through the generated, typed functions only: if the
document and the service disagree, the generated parsers fail here. First, no generated model may
be named `…Dto` or `…Type0…` (decision 112).
Usage: api_client_check.py BASE_URL TOKEN
"""

import sys
import time
from datetime import datetime, timezone
from uuid import UUID

from swath_client import AuthenticatedClient
from swath_client.api.mowers import list_mowers
from swath_client.api.telemetry import (
    get_mower_history,
    get_mower_track,
    get_mower_track_geojson,
)
from swath_client.models import (
    HistoryPage,
    LineString,
    MowerList,
    Point,
    TrackFeatureCollection,
    TrackPage,
)


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


if __name__ == "__main__":
    main()
