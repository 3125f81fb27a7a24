"""The client's pure parts: the Server-Sent Events parser and the URL an entry keeps."""

from __future__ import annotations

import pytest

from custom_components.swath.api import SseEvent, SseParser, normalize_url


def _parse(text: str) -> list[SseEvent]:
    parser = SseParser()
    events = [parser.feed(line) for line in text.splitlines(keepends=True)]
    return [e for e in events if e is not None]


def test_sse_events_with_ids_comments_and_multiline_data() -> None:
    """Comments are skipped, data lines joined, one space after the colon dropped."""
    events = _parse(
        ": keep-alive\n\n"
        "event: state\nid: 41\ndata: {\"a\":\ndata: 1}\n\n"
        "event:reset\r\nid:42\r\ndata:{\"reason\": \"unknown_id\"}\r\n\r\n"
        "event: end\ndata: {\"reason\": \"token_revoked\"}\n\n"
    )
    assert events == [
        SseEvent("state", '{"a":\n1}', "41"),
        SseEvent("reset", '{"reason": "unknown_id"}', "42"),
        SseEvent("end", '{"reason": "token_revoked"}', None),
    ]


def test_an_unfinished_event_is_not_dispatched() -> None:
    """Only a blank line ends an event (a cut connection leaves half of one)."""
    assert _parse("event: state\nid: 7\ndata: {}\n") == []


def test_urls_are_kept_without_trailing_slash_and_in_lower_case() -> None:
    """The same Swath gives the same unique id however its URL was typed."""
    assert normalize_url(" HTTP://Swath.Local:8080/ ") == "http://swath.local:8080"
    assert normalize_url("https://example.org/swath/") == "https://example.org/swath"
    for bad in ("swath.local:8080", "ftp://swath.local", "http://"):
        with pytest.raises(ValueError):
            normalize_url(bad)
