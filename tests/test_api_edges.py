"""Small API defects from the hostile review (issue 7, items 10 and 12)."""

from __future__ import annotations

from base64 import b64encode

import pytest

from .conftest import Caller


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writes_to_an_unknown_api_path_are_the_json_404(alice: Caller, method: str) -> None:
    from django.test import Client

    client = Client(enforce_csrf_checks=True)  # as a browser-less client is treated in production
    response = getattr(client, method)(
        "/api/v1/no-such-thing",
        data="{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice.key}",
    )
    assert response.status_code == 404
    assert response.json() == {"detail": "No such endpoint or resource.", "code": "not_found"}


def _b64(text: str) -> str:
    return b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "cursor", ["%%%", "", "!!!!", "abc", _b64(""), _b64("x=1"), _b64("o=1&o=2"), _b64("r=2"), _b64("o=-1")]
)
def test_a_malformed_cursor_is_a_400(alice: Caller, cursor: str) -> None:
    response = alice.client.get("/api/v1/events", {"cursor": cursor})
    assert response.status_code == 400, (cursor, response.content)
    assert "cursor" in response.json()["errors"]


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
