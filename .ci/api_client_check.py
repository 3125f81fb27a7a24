"""A client generated from openapi/openapi.json (openapi-python-client) against a running swath.

Lists the mowers and reads a page of the first mower's history that has one, through the
generated, typed functions only: if the document and the service disagree, the generated
parsers fail here. Usage: api_client_check.py BASE_URL TOKEN
"""

import sys
import time

from swath_client import AuthenticatedClient
from swath_client.api.mowers import list_mowers
from swath_client.api.telemetry import get_mower_history
from swath_client.models import HistoryPage, MowerList


def main() -> None:
    base_url, token = sys.argv[1], sys.argv[2]
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
                return
        if time.monotonic() > deadline:
            sys.exit("no mower has any history after 30 s")
        time.sleep(1)


if __name__ == "__main__":
    main()
