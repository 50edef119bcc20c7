"""Regression tests from an adversarial review: odd input never yields a 500 or an HTML page."""

from __future__ import annotations

import json

import pytest
from django_tenants.utils import tenant_context

from memory.episodic.models import Event
from memory.knowledge.models import Entity

from .conftest import Caller, requires_model


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


def test_fact_names_and_literals_at_the_limits(alice: Caller) -> None:
    expands = "\ufdfa" * 100  # one ligature normalises (NFKC) to 18 letters
    for body, field in [
        ({"subject": expands, "predicate": "p", "object": {"string": "x"}}, "subject"),
        ({"subject": "A", "predicate": "p", "object": {"entity": "B", "type": "t" * 65}}, "object"),
        ({"subject": "A", "predicate": "p", "object": {"entity": "\u200b\u200d"}}, "object"),
    ]:
        response = alice.post("/api/v1/facts", body)
        assert response.status_code == 400 and field in response.json()["errors"], response.content
    huge = b'{"subject":"A","predicate":"p","object":{"number":1' + b"0" * 400 + b"}}"
    response = raw_post(alice, "/api/v1/facts", huge)
    assert response.status_code == 400 and "object" in response.json()["errors"]
    assert alice.get("/api/v1/entities/a%00b/facts").status_code == 400


def test_invisible_characters_do_not_make_a_second_entity(alice: Caller) -> None:
    alice.post("/api/v1/facts", {"subject": "Alice", "predicate": "p", "object": {"string": "x"}})
    alice.post("/api/v1/facts", {"subject": "Al\u200bice\u202e", "predicate": "p", "object": {"string": "y"}})
    with tenant_context(alice.tenant):
        assert Entity.objects.count() == 1


@requires_model
def test_forgetting_a_private_memory_logs_nothing_derived_from_its_text(alice: Caller) -> None:
    memory = alice.post("/api/v1/memories", {"content": "my PIN is 4242"}).json()
    event_id = alice.client.delete(f"/api/v1/memories/{memory['id']}").json()["event_id"]
    with tenant_context(alice.tenant):
        payload = Event.objects.get(pk=event_id).payload
    assert "content_hash" not in payload and "4242" not in json.dumps(payload)


def test_oversized_bodies_are_a_json_413_before_reading(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = raw_post(alice, "/api/v1/memories", json.dumps({"content": "x" * 2000}).encode())
    assert response.status_code == 413 and "body" in response.json()["errors"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nonexistent",
        "/api/v1/memories/not-a-uuid",
        "/api/v1/facts/-1/retract",
        "/api/v1/entities//facts",
    ],
)
def test_unknown_api_paths_are_json_404(alice: Caller, path: str) -> None:
    response = alice.client.get(path)
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_stream_refuses_other_methods_with_json(alice: Caller) -> None:
    response = alice.client.post("/api/v1/executions/e1/stream")
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


def test_bad_cursor_names_the_cursor(alice: Caller) -> None:
    response = alice.get("/api/v1/events", {"cursor": "garbage"})
    assert response.status_code == 400 and "cursor" in response.json()["errors"]


def test_unknown_and_repeated_query_parameters_are_400(alice: Caller) -> None:
    assert "x" in alice.get("/api/v1/me", {"x": "1"}).json()["errors"]
    assert alice.client.get("/api/v1/events?session_id=a&session_id=b").json()["errors"]["session_id"]
    assert alice.client.get("/api/v1/events?kind=message&kind=decision").status_code == 200
    assert alice.client.post("/api/v1/memories/search?k=5", {"query": "x"}, format="json").status_code == 400


def test_ids_with_a_trailing_newline_are_400(alice: Caller) -> None:
    response = alice.client.put("/api/v1/executions/abc%0A/blackboard/f", {"value": 1}, format="json")
    assert response.status_code == 400


def test_non_object_bodies_name_the_body(alice: Caller) -> None:
    for path in ["/api/v1/memories", "/api/v1/memories/search", "/api/v1/sessions/s1/checkpoints"]:
        response = alice.post(path, [1, 2])
        assert response.status_code == 400 and "body" in response.json()["errors"], (path, response.content)


@requires_model
def test_search_weights_cannot_all_be_zero_and_hits_show_their_new_access(alice: Caller) -> None:
    zero = {"similarity": 0, "recency": 0, "importance": 0}
    response = alice.post("/api/v1/memories/search", {"query": "x", "weights": zero})
    assert response.status_code == 400 and "weights" in response.json()["errors"]
    alice.post("/api/v1/memories", {"content": "The cafeteria closes at 3pm."})
    first = alice.post("/api/v1/memories/search", {"query": "cafeteria"}).json()["results"][0]["memory"]
    assert first["access_count"] == 1


def test_checkpoint_posts_honour_idempotency_keys(alice: Caller) -> None:
    body = {"step_index": 1, "idempotency_key": "step-1", "state": {"a": 1}}
    assert alice.post("/api/v1/sessions/s9/checkpoints", body, **{"Idempotency-Key": "h1"}).status_code == 201
    replay = alice.post("/api/v1/sessions/s9/checkpoints", body, **{"Idempotency-Key": "h1"})
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    other = alice.post(
        "/api/v1/sessions/s9/checkpoints", {**body, "step_index": 2}, **{"Idempotency-Key": "h1"}
    )
    assert other.status_code == 409
