"""The API's input rules: strict JSON, aware datetimes, known fields and query parameters, ids, JSON nesting."""

from __future__ import annotations

from typing import Any

import pytest
from django_tenants.utils import schema_context, tenant_context

from memory.episodic.models import Event
from tests.factories import Caller, requires_model


def raw_post(caller: Caller, path: str, body: bytes, method: str = "post"):  # type: ignore[no-untyped-def]
    return getattr(caller.client, method)(path, data=body, content_type="application/json")


@pytest.mark.parametrize(
    "when", ["2026-02-30T00:00:00Z", "2026-11-30T25:00:00Z", "2026-11-30T10:00:00+25:00"]
)
def test_impossible_datetimes_are_400(alice: Caller, when: str) -> None:
    event = {"session_id": "s", "kind": "message", "content": "x", "occurred_at": when}
    assert "occurred_at" in alice.post("/api/v1/events", event).json()["errors"]
    fact = {"subject": "A", "predicate": "p", "object": {"entity": "B"}, "valid_from": when}
    assert alice.post("/api/v1/facts", fact).status_code == 400
    assert alice.get("/api/v1/events", {"since": when}).status_code == 400


# JSON values that are not (JSON, Unicode text, or shallow enough to walk): each, in place of a value of
# a body, makes the body one the API refuses with a 400 naming it. /mcp is fed the same
# (tests/api/mcp/test_mcp_inputs.py).
MALFORMED_VALUES = {
    "not JSON": b'{"a": ',
    "not UTF-8": b'"Z\xfcrich \xff\xfe"',  # Latin-1
    "3,000 levels deep": b"[" * 3000 + b"]" * 3000,
    "a lone surrogate": b'"a\\ud800"',
}


@pytest.mark.parametrize("value", MALFORMED_VALUES.values(), ids=MALFORMED_VALUES.keys())
def test_a_body_that_is_not_json_text_is_a_400_naming_the_body(alice: Caller, value: bytes) -> None:
    response = raw_post(alice, "/api/v1/memories", b'{"content": ' + value + b"}")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "parse_error" and "body" in response.json()["errors"]


@pytest.mark.parametrize(
    "path", ["/api/v1/events", "/api/v1/memories", "/api/v1/facts", "/api/v1/sessions/s1/checkpoints"]
)
def test_deeply_nested_json_is_400(alice: Caller, path: str) -> None:
    response = raw_post(alice, path, b"[" * 5000 + b"]" * 5000)
    assert response.status_code == 400
    assert "body" in response.json()["errors"]


@pytest.mark.parametrize(
    ("path", "body", "method"),
    [
        (
            "/api/v1/events",
            '{"session_id":"s","kind":"message","content":"x","payload":{"k":"a\\ud800"},'
            '"occurred_at":"2026-01-01T00:00:00Z"}',
            "post",
        ),
        ("/api/v1/memories", '{"content":"x","metadata":{"a\\udfff":1}}', "post"),
        ("/api/v1/facts", '{"subject":"A","predicate":"p","object":{"string":"a\\ud800"}}', "post"),
        ("/api/v1/executions/e1/blackboard/f", '{"value":"a\\ud800"}', "put"),
        (
            "/api/v1/sessions/s1/checkpoints",
            '{"step_index":1,"idempotency_key":"k","state":{"a":"\\ud800"}}',
            "post",
        ),
    ],
)
def test_lone_surrogates_are_400(alice: Caller, path: str, body: str, method: str) -> None:
    response = raw_post(alice, path, body.encode(), method)
    assert response.status_code == 400, response.content
    assert "body" in response.json()["errors"]


def test_unknown_and_repeated_query_parameters_are_400(alice: Caller) -> None:
    assert "x" in alice.get("/api/v1/me", {"x": "1"}).json()["errors"]
    assert alice.client.get("/api/v1/events?session_id=a&session_id=b").json()["errors"]["session_id"]
    assert alice.client.get("/api/v1/events?kind=message&kind=decision").status_code == 200
    assert alice.client.post("/api/v1/memories/search?k=5", {"query": "x"}, format="json").status_code == 400


def test_ids_with_a_trailing_newline_are_400(alice: Caller) -> None:
    response = alice.client.put("/api/v1/executions/abc%0A/blackboard/f", {"value": 1}, format="json")
    assert response.status_code == 400


def test_non_object_bodies_name_the_body(alice: Caller) -> None:
    for path in ["/api/v1/memories/search", "/api/v1/sessions/s1/checkpoints"]:
        response = alice.post(path, [1, 2])
        assert response.status_code == 400 and "body" in response.json()["errors"], (path, response.content)
    # /memories takes an object or an array of them (a batch): a scalar names the body, an array of
    # scalars names each item
    for body in (5, "text"):
        response = alice.post("/api/v1/memories", body)
        assert response.status_code == 400 and "body" in response.json()["errors"], (body, response.content)
    errors = alice.post("/api/v1/memories", [1, {"content": "fine"}]).json()["errors"]
    assert any(name.startswith("memories[0]") for name in errors) and not any(
        name.startswith("memories[1]") for name in errors
    ), errors


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
    def limit(depth: int) -> None:
        # the platform's work, in the public schema (a tenant's role may not write tenants)
        with schema_context("public"):
            alice.tenant.json_max_depth = depth
            alice.tenant.save(update_fields=["json_max_depth"])

    limit(5)
    try:
        assert alice.post("/api/v1/events", event(nested(5))).status_code == 201
        response = alice.post("/api/v1/events", event(nested(6)))
        assert "nested deeper than 5 levels" in response.json()["errors"]["payload"][0]
    finally:
        limit(64)


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
