"""Cursor pages: only the cursors the API gives are accepted."""

from __future__ import annotations

from base64 import b64encode

import pytest

from tests.factories import Caller


def test_bad_cursor_names_the_cursor(alice: Caller) -> None:
    # a cursor names a page or nothing: 404 (docs/decisions/0050)
    response = alice.get("/api/v1/events", {"cursor": "garbage"})
    assert response.status_code == 404 and "cursor" in response.json()["errors"]


def _b64(text: str) -> str:
    return b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "cursor", ["%%%", "!!!!", "abc", _b64("x=1"), _b64("o=1&o=2"), _b64("r=2"), _b64("o=-1")]
)
def test_a_malformed_cursor_is_a_404(alice: Caller, cursor: str) -> None:
    response = alice.client.get("/api/v1/events", {"cursor": cursor})
    assert response.status_code == 404, (cursor, response.content)
    assert "cursor" in response.json()["errors"]


def test_a_blank_cursor_is_a_400(alice: Caller) -> None:
    """``""`` is no cursor the document allows (``minLength: 1``)."""
    response = alice.client.get("/api/v1/events", {"cursor": ""})
    assert response.status_code == 400 and "cursor" in response.json()["errors"], response.content


def test_the_cursors_the_api_gives_still_work(alice: Caller) -> None:
    events = [
        {
            "session_id": "p",
            "kind": "message",
            "content": f"turn {i}",
            "occurred_at": f"2026-12-01T10:00:{i:02d}Z",
        }
        for i in range(5)
    ]
    assert alice.post("/api/v1/events", events).status_code == 201
    first = alice.get("/api/v1/events", {"limit": 2}).json()
    second = alice.client.get(first["next"]).json()
    back = alice.client.get(second["previous"]).json()
    assert [e["content"] for e in second["results"]] == ["turn 2", "turn 3"]
    assert [e["content"] for e in back["results"]] == ["turn 0", "turn 1"]
