"""Deep JSON is a 400 naming the field, never a 500 (issue 7, item 4), and errors never show a
traceback: ``./engram up`` runs with ``DEBUG`` off, and an unexpected error in the API is JSON."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from django.test import Client
from django_tenants.utils import tenant_context

from memory.episodic.models import Event

from .conftest import BASE_DIR, Caller, requires_model


def nested(levels: int) -> dict[str, Any]:
    """``{"a": {"a": ... {}}}`` with ``levels`` objects in all."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def event(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "session_id": "s",
        "kind": "observation",
        "payload": payload,
        "occurred_at": "2026-12-01T10:00:00Z",
    }


def test_an_event_payload_at_the_tenant_limit_is_stored_one_deeper_is_a_400(alice: Caller) -> None:
    assert alice.post("/api/v1/events", event(nested(64))).status_code == 201
    response = alice.post("/api/v1/events", event(nested(65)))
    assert response.status_code == 400, response.content
    message = response.json()["errors"]["payload"][0]
    assert "nested deeper than 64 levels" in message and message.startswith("payload.a.a")
    batch = alice.post("/api/v1/events", [event({}), event(nested(150))])
    assert batch.status_code == 400 and "events[1].payload" in batch.json()["errors"]
    with tenant_context(alice.tenant):
        assert Event.objects.count() == 1  # nothing stored from the refused requests


def test_the_limit_is_the_tenants(alice: Caller) -> None:
    alice.tenant.json_max_depth = 5
    alice.tenant.save(update_fields=["json_max_depth"])
    try:
        assert alice.post("/api/v1/events", event(nested(5))).status_code == 201
        response = alice.post("/api/v1/events", event(nested(6)))
        assert "nested deeper than 5 levels" in response.json()["errors"]["payload"][0]
    finally:
        alice.tenant.json_max_depth = 64
        alice.tenant.save(update_fields=["json_max_depth"])


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        (
            "post",
            "/api/v1/sessions/s1/checkpoints",
            {"step_index": 1, "idempotency_key": "k", "state": nested(150)},
            "state",
        ),
        (
            "post",
            "/api/v1/sessions/s1/checkpoints",
            {"step_index": 1, "idempotency_key": "k", "state": {}, "plan": [nested(150)]},
            "plan",
        ),
        ("put", "/api/v1/executions/e1/blackboard/f", {"value": nested(150)}, "value"),
        ("put", "/api/v1/executions/e1/scratchpad/k", {"value": [nested(120)]}, "value"),
    ],
)
def test_deep_state_and_working_memory_values_are_400s(
    alice: Caller, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    response = getattr(alice.client, method)(path, body, format="json")
    assert response.status_code == 400, response.content
    assert "nested deeper than" in response.json()["errors"][field][0]


@requires_model
def test_deep_memory_metadata_is_a_400(alice: Caller) -> None:
    response = alice.post("/api/v1/memories", {"content": "x", "metadata": nested(100)})
    assert response.status_code == 400 and "metadata" in response.json()["errors"]


def test_a_body_deeper_than_any_limit_is_refused_before_it_is_walked(alice: Caller) -> None:
    # 250 levels: within what Python's parser takes, beyond the 200 anything may nest
    body = b'{"session_id":"s","kind":"message","content":"x","occurred_at":"2026-12-01T10:00:00Z","payload":'
    body += b'{"a":' * 250 + b"1" + b"}" * 250 + b"}"
    response = alice.client.post("/api/v1/events", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "nested more than 200 levels" in response.json()["errors"]["body"][0]


def test_engram_up_runs_with_debug_off() -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE"}}
    out = subprocess.run(
        [sys.executable, "-c", "from config.settings import local; print(local.DEBUG)"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
    from devstack.web import web_environment

    assert web_environment({})["ENGRAM_SERVE_STATIC"] == "1"  # the admin keeps its CSS without DEBUG


def test_an_unexpected_error_in_the_api_is_json_without_a_traceback(alice: Caller, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from api.rest import agents as views

    def broken(self, request):  # type: ignore[no-untyped-def]
        raise RuntimeError(f"a bug that must not leak, key {alice.key}")

    monkeypatch.setattr(views.WhoAmIView, "get", broken)
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {alice.key}")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Internal server error; it has been logged.", "code": "server_error"}
    assert alice.key not in response.content.decode()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/events", event(nested(300))),
        ("/api/v1/sessions/s1/checkpoints", {"step_index": 1, "idempotency_key": "k", "state": nested(300)}),
    ],
)
def test_the_reviews_300_levels_are_a_400_not_a_500(alice: Caller, path: str, body: dict[str, Any]) -> None:
    response = alice.post(path, body)
    assert response.status_code == 400, response.status_code
    assert response["Content-Type"] == "application/json"
