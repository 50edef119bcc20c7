"""Every API error is JSON: unknown paths and methods, oversized bodies, CSRF, unexpected errors."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.factories import Caller


def raw_post(caller: Caller, path: str, body: bytes, method: str = "post"):  # type: ignore[no-untyped-def]
    return getattr(caller.client, method)(path, data=body, content_type="application/json")


def test_oversized_bodies_are_a_json_413_before_reading(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = raw_post(alice, "/api/v1/memories", json.dumps({"content": "x" * 2000}).encode())
    assert response.status_code == 413 and "body" in response.json()["errors"]


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("get", "/api/v1/nonexistent", "path"),
        ("get", "/api/v1/memories/not-a-uuid", "id"),
        ("post", "/api/v1/facts/-1/retract", "id"),
        ("get", "/api/v1/entities//facts", "path"),
    ],
)
def test_unknown_api_paths_are_json_404(alice: Caller, method: str, path: str, field: str) -> None:
    response = getattr(alice.client, method)(path, {}, format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert field in response.json()["errors"]


def test_stream_refuses_other_methods_with_json(alice: Caller) -> None:
    response = alice.client.post("/api/v1/executions/e1/stream")
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


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
    assert response.json() == {
        "detail": "No such endpoint or resource.",
        "code": "not_found",
        "errors": {"path": ["No such endpoint or resource."]},
    }


def test_an_unexpected_error_in_the_api_is_json_without_a_traceback(alice: Caller, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from api.rest import agents as views

    def broken(self, request):  # type: ignore[no-untyped-def]
        raise RuntimeError(f"a bug that must not leak, key {alice.key}")

    monkeypatch.setattr(views.WhoAmIView, "get", broken)
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {alice.key}")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": "Internal server error; it has been logged.",
        "code": "server_error",
        "errors": {},
    }
    assert alice.key not in response.content.decode()


@pytest.mark.parametrize("name", ["line\nbreak", "tab\tand\r\nreturn", "a/b/c", "\x1a\x85"])
def test_any_entity_name_is_answered_in_json(alice: Caller, name: str) -> None:
    from urllib.parse import quote

    response = alice.client.get(f"/api/v1/entities/{quote(name, safe='')}/facts")
    assert response.status_code in (400, 404) and response["Content-Type"] == "application/json"
    assert response.json()["code"] in ("not_found", "invalid")


def test_no_api_path_gets_an_html_404(alice: Caller) -> None:
    from django.test import Client

    for path in ("/api/v1/%0a", "/api/v1/events/%0a/x", "/api/v2/events", "/api/"):
        response = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {alice.key}")
        assert response.status_code == 404 and response["Content-Type"] == "application/json", path
