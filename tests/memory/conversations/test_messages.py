"""A conversation in one call without a language model: the messages appended all or nothing, each
user and assistant turn a memory through the write pipeline, replays by Idempotency-Key, and
another tenant seeing none of it."""

from __future__ import annotations

import pytest
from django_tenants.utils import tenant_context

from memory.episodic.models import Event
from memory.semantic.models import SemanticMemory
from tests.factories import Caller, requires_model, search

pytestmark = [pytest.mark.django_db, requires_model]

URL = "/api/v1/sessions/support-1/messages"
TURNS = [
    {"role": "system", "content": "You are the airline's assistant."},
    {
        "role": "user",
        "name": "Dana",
        "content": "My return flight departs at 09:05 on Sunday.",
        "occurred_at": "2026-03-01T10:00:00Z",
    },
    {"role": "assistant", "content": "Noted, Sunday at 09:05.", "occurred_at": "2026-03-01T10:00:05Z"},
    {
        "role": "tool",
        "name": "lookup",
        "content": '{"flight": "TP123"}',
        "occurred_at": "2026-03-01T10:00:06Z",
    },
]


def test_each_turn_becomes_a_memory_and_every_message_an_event(alice: Caller) -> None:
    response = alice.post(URL, {"messages": TURNS, "data_subject": "dana", "tags": ["travel"]})
    assert response.status_code == 201, response.content
    body = response.json()
    assert [e["role"] for e in body["events"]] == ["system", "user", "assistant", "tool"]
    assert {e["data_subject"] for e in body["events"]} == {"dana"}
    assert body["job"] is None and body["data_subject"] == "dana"
    assert [(m["message"], m["outcome"], m["supersedes"]) for m in body["memories"]] == [
        (1, "created", None),
        (2, "created", None),
    ]
    with tenant_context(alice.tenant):
        user_turn = SemanticMemory.objects.get(pk=body["memories"][0]["id"])
        assert (
            user_turn.content
            == "Dana (10:00 am on 1 March, 2026): My return flight departs at 09:05 on Sunday."
        )
        assert (user_turn.session_id, user_turn.data_subject, user_turn.tags) == (
            "support-1",
            "dana",
            ["travel"],
        )
        assert user_turn.memory_type == "observation" and user_turn.metadata["role"] == "user"
        event = Event.objects.get(pk=body["events"][1]["id"])
        assert event.payload["memory_id"] == body["memories"][0]["id"] and event.payload["name"] == "Dana"
        assert "memory_id" not in Event.objects.get(pk=body["events"][3]["id"]).payload
    hits = search(alice, "When does Dana's flight leave?")
    assert hits[0]["memory"]["id"] == body["memories"][0]["id"]


def test_a_repeated_turn_reinforces_its_memory(alice: Caller) -> None:
    first = alice.post(URL, {"messages": TURNS[1:2]}).json()
    again = alice.post(URL, {"messages": TURNS[1:2]}).json()
    assert again["memories"][0]["outcome"] == "deduplicated"
    assert again["memories"][0]["id"] == first["memories"][0]["id"]


def test_all_or_nothing(alice: Caller) -> None:
    bad = [*TURNS[:2], {"role": "user", "content": "   "}]
    response = alice.post(URL, {"messages": bad})
    assert response.status_code == 400 and "messages[2].content" in response.json()["errors"]
    unknown = alice.post(URL, {"messages": [{**TURNS[1], "role": "robot"}]})
    assert unknown.status_code == 400 and "messages[0].role" in unknown.json()["errors"]
    empty = alice.post(URL, {"messages": []})
    assert empty.status_code == 400 and "messages" in empty.json()["errors"]
    with tenant_context(alice.tenant):
        assert not Event.objects.exists() and not SemanticMemory.objects.exists()


def test_an_idempotency_key_replays_the_first_answer(alice: Caller) -> None:
    body = {"messages": TURNS[1:3]}
    first = alice.post(URL, body, **{"Idempotency-Key": "conv-1"})
    replay = alice.post(URL, body, **{"Idempotency-Key": "conv-1"})
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
    with tenant_context(alice.tenant):
        assert Event.objects.count() == 2 and SemanticMemory.objects.count() == 2
    other = alice.post(URL, {"messages": TURNS[1:2]}, **{"Idempotency-Key": "conv-1"})
    assert other.status_code == 409


def test_another_tenant_sees_nothing(alice: Caller, mallory: Caller) -> None:
    body = alice.post(URL, {"messages": TURNS[1:2], "scope": "shared"}).json()
    assert search(mallory, "When does Dana's flight leave?") == []
    assert mallory.get(f"/api/v1/memories/{body['memories'][0]['id']}").status_code == 404
    assert mallory.get("/api/v1/events", {"session_id": "support-1"}).json()["results"] == []


def test_llm_extraction_without_an_endpoint_is_refused(alice: Caller) -> None:
    response = alice.post(URL, {"messages": TURNS[1:2], "extraction": "llm"})
    assert response.status_code == 400 and "extraction" in response.json()["errors"]


def test_a_turn_that_changes_a_value_supersedes_the_older_turn(alice: Caller) -> None:
    first = alice.post(URL, {"messages": TURNS[1:2], "data_subject": "dana"}).json()
    changed = {**TURNS[1], "content": "My return flight departs at 11:05 on Sunday."}
    second = alice.post(URL, {"messages": [changed], "data_subject": "dana"}).json()
    formed = second["memories"][0]
    assert (formed["outcome"], formed["supersedes"]) == ("updated", first["memories"][0]["id"])
    with tenant_context(alice.tenant):
        old = SemanticMemory.objects.get(pk=first["memories"][0]["id"])
        assert str(old.superseded_by_id) == formed["id"]
        assert Event.objects.get(pk=second["events"][0]["id"]).payload["memory_supersedes"] == str(old.pk)
    hits = search(alice, "When does Dana's flight leave?")
    assert [h["memory"]["id"] for h in hits] == [formed["id"]]
