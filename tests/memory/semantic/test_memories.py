"""Semantic memory over the API: dedupe, hybrid recall, filters, visibility, forgetting, idempotency."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.models import Scope
from memory.episodic.models import Event, EventKind
from memory.semantic.models import MemoryAccess, SemanticMemory
from memory.semantic.services.clocks import accesses_flush
from tests.factories import (
    FACTS,
    UNICODE_SAMPLES,
    Caller,
    contents,
    make_caller,
    remember,
    requires_model,
    search,
)

pytestmark = requires_model


def test_create_then_recall_with_score_components(alice: Caller) -> None:
    for text, tags in FACTS:
        assert remember(alice, text, tags=tags, scope="shared").status_code == 201
    results = search(alice, "Where is Alice employed?", k=2)
    assert results[0]["memory"]["content"] == FACTS[0][0]
    components = results[0]["components"]
    assert set(components) == {"relevance", "similarity", "text_relevance", "recency", "importance"}
    assert all(0.0 <= value <= 1.0 for value in components.values())
    assert 0.0 <= results[0]["score"] <= 1.0
    assert results[0]["score"] >= results[1]["score"]


def test_recall_updates_last_access(alice: Caller) -> None:
    created = remember(alice, "The office wifi password rotates monthly.").json()
    with tenant_context(alice.tenant):
        MemoryAccess.objects.filter(pk=created["id"]).update(
            last_accessed_at=timezone.now() - timedelta(days=3)
        )
    first = search(alice, "wifi password")[0]
    assert first["components"]["recency"] < 0.6  # three days old with a 72 h half-life: 0.5
    assert first["memory"]["access_count"] == 1  # the hit shows the access it made
    with tenant_context(alice.tenant):
        # the clock restarts when the worker applies the buffered recalls (tests/memory/semantic/
        # test_touches.py: within the bound, by a real worker); here the flush runs in process
        assert SemanticMemory.objects.get(pk=created["id"]).access_count == 0
        accesses_flush()
        memory = SemanticMemory.objects.get(pk=created["id"])
    assert memory.access_count == 1
    assert timezone.now() - memory.last_accessed_at < timedelta(seconds=30)
    assert search(alice, "wifi password")[0]["components"]["recency"] > 0.99


def test_exact_duplicate_returns_existing(alice: Caller) -> None:
    first = remember(alice, "Alice likes   green tea.", confidence=0.6)
    assert first.status_code == 201
    again = remember(alice, "alice LIKES green tea.", confidence=0.9)
    assert again.status_code == 200
    body = again.json()
    assert body["deduplicated"] is True and body["duplicate_of"] == "exact"
    assert body["id"] == first.json()["id"]
    assert body["confidence"] == 0.9 and body["access_count"] == 1
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.count() == 1


def test_near_duplicate_reinforces_instead_of_inserting(alice: Caller) -> None:
    first = remember(alice, "The deployment pipeline runs every night at 2am UTC.", confidence=0.5).json()
    near = remember(alice, "The deployment pipeline runs each night at 2am UTC.", confidence=0.8)
    assert near.status_code == 200
    body = near.json()
    assert body["deduplicated"] is True and body["duplicate_of"] == "near"
    assert body["similarity"] >= 0.97
    assert body["id"] == first["id"] and body["confidence"] == 0.8
    different = remember(alice, "The deployment pipeline was retired in 2024.")
    assert different.status_code == 201


def test_same_text_in_other_scope_or_agent_is_not_a_duplicate(alice: Caller, bob: Caller) -> None:
    assert remember(alice, "Standup is at 9:30.").status_code == 201
    assert remember(alice, "Standup is at 9:30.", scope="shared").status_code == 201
    assert remember(bob, "Standup is at 9:30.").status_code == 201


def test_private_memories_are_visible_only_to_their_agent(alice: Caller, bob: Caller) -> None:
    private = remember(alice, "My API budget for this task is 40 dollars.").json()
    remember(alice, "The team budget for Q3 is 12000 dollars.", scope="shared")
    assert contents(search(bob, "budget dollars")) == ["The team budget for Q3 is 12000 dollars."]
    assert len(search(alice, "budget dollars")) == 2
    assert bob.get(f"/api/v1/memories/{private['id']}").status_code == 404
    assert bob.client.delete(f"/api/v1/memories/{private['id']}").status_code == 404
    assert alice.get(f"/api/v1/memories/{private['id']}").status_code == 200


def test_other_tenant_sees_nothing(alice: Caller, mallory: Caller) -> None:
    shared = remember(alice, "Project Nightingale launches in May.", scope="shared").json()
    assert search(mallory, "Project Nightingale launch") == []
    assert mallory.get(f"/api/v1/memories/{shared['id']}").status_code == 404
    assert mallory.client.delete(f"/api/v1/memories/{shared['id']}").status_code == 404
    # the same text in tenant beta is a new memory, not a duplicate of alpha's
    assert remember(mallory, "Project Nightingale launches in May.", scope="shared").status_code == 201


def test_filters(alice: Caller, bob: Caller) -> None:
    for text, tags in FACTS:
        remember(alice, text, tags=tags, scope="shared", memory_type="fact", confidence=0.9, importance=0.2)
    remember(
        bob,
        "Bob's calendar is full on Fridays.",
        tags=["people"],
        scope="shared",
        memory_type="preference",
        confidence=0.4,
        importance=0.9,
        session_id="sess-7",
    )

    def found(**filters: object) -> set[str]:
        return set(contents(search(alice, "people", k=20, filters=filters)))

    assert found(tags_any=["ops", "deadlines"]) == {FACTS[1][0], FACTS[3][0]}
    assert found(tags_all=["people", "preferences"]) == {FACTS[2][0]}
    assert found(agent="bob") == {"Bob's calendar is full on Fridays."}
    assert (
        found(memory_type="preference")
        == found(session_id="sess-7")
        == found(min_confidence=0.3, importance={"gt": 0.5})
    )
    assert found(min_confidence=0.5) == {text for text, _ in FACTS}
    assert found(scope="private") == set()
    now = timezone.now()
    assert found(created_at={"gte": (now - timedelta(minutes=5)).isoformat()}) == {t for t, _ in FACTS} | {
        "Bob's calendar is full on Fridays."
    }
    assert found(created_at={"lt": (now - timedelta(minutes=5)).isoformat()}) == set()


def test_weights_and_mmr(alice: Caller) -> None:
    texts = [
        "Paris is the capital of France.",
        "The capital of France is Paris.",
        "France's capital city is Paris.",
        "Berlin is the capital of Germany.",
    ]
    # each by an agent of its own: one agent's rewordings reinforce one memory (near duplicates)
    for i, text in enumerate(texts):
        writer = alice if i == 0 else make_caller(alice.tenant, f"geographer-{i}")
        assert remember(writer, text, scope="shared").status_code == 201
    plain = contents(search(alice, "capital of France", k=2))
    assert all("Paris" in text for text in plain)
    diverse = contents(search(alice, "capital of France", k=2, mmr={"lambda": 0.3}))
    assert any("Berlin" in text for text in diverse)
    importance_only = search(alice, "capital", k=4, weights={"similarity": 0, "recency": 0, "importance": 1})
    assert all(r["score"] == pytest.approx(0.5) for r in importance_only)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "k": 101}, "k"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": "10"}, "k"),
        ({"query": ""}, "query"),
        ({"query": "x", "filters": {"colour": "blue"}}, "filters.colour"),
        (
            {"query": "x", "filters": {"created_at": {"between": "2026-01-01T00:00:00Z"}}},
            "filters.created_at.between",
        ),
        ({"query": "x", "filters": {"created_at": {"gte": "2026-01-01T00:00:00"}}}, "filters.created_at.gte"),
        ({"query": "x", "filters": {"min_confidence": 2}}, "filters.min_confidence"),
        ({"query": "x", "filters": {"tags_any": "people"}}, "filters.tags_any"),
        ({"query": "x", "mmr": {"lambda": 1.5}}, "mmr.lambda"),
        ({"query": "x", "weights": {"novelty": 1}}, "weights.novelty"),
        ({"query": "x", "top_k": 5}, "top_k"),
    ],
)
def test_bad_search_input_is_400_naming_the_field(alice: Caller, body: dict, field: str) -> None:
    response = alice.post("/api/v1/memories/search", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_unknown_filter_error_names_the_key(alice: Caller) -> None:
    errors = alice.post("/api/v1/memories/search", {"query": "x", "filters": {"colour": "blue"}}).json()[
        "errors"
    ]
    assert errors == {"filters.colour": ["Unknown filter."]}  # one path syntax for nested fields
    errors = alice.post(
        "/api/v1/memories/search", {"query": "x", "filters": {"importance": {"near": 0.5}}}
    ).json()["errors"]
    assert list(errors) == ["filters.importance.near"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   \n "}, "content"),
        ({"content": "x" * 32_001}, "content"),
        ({"content": 42}, "content"),
        ({"content": "ok", "importance": 1.5}, "importance"),
        ({"content": "ok", "importance": "high"}, "importance"),
        ({"content": "ok", "tags": "solo"}, "tags"),
        ({"content": "ok", "scope": "public"}, "scope"),
        ({"content": "ok", "metadata": ["x"]}, "metadata"),
        ({"content": "ok", "agent": "someone-else"}, "agent"),
    ],
)
def test_bad_memory_input_is_400_naming_the_field(alice: Caller, body: dict, field: str) -> None:
    response = alice.post("/api/v1/memories", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": "ok", "embedding": [0.1, 0.2]}, "embedding"),
        ({"content": "ok", "embedding_model": "text-embedding-3-small"}, "embedding_model"),
    ],
)
def test_vectors_of_another_model_are_a_409_naming_the_field(alice: Caller, body: dict, field: str) -> None:
    """Well-formed vectors the tenant's configured model cannot take conflict with its stored
    vectors (docs/decisions/0053); nothing is stored."""
    response = alice.post("/api/v1/memories", body)
    assert response.status_code == 409, response.content
    assert field in response.json()["errors"]
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.count() == 0


def test_unicode_memories_round_trip_byte_for_byte(alice: Caller) -> None:
    ids = [remember(alice, text).json()["id"] for text in UNICODE_SAMPLES]
    for memory_id, text in zip(ids, UNICODE_SAMPLES, strict=True):
        assert alice.get(f"/api/v1/memories/{memory_id}").json()["content"] == text
    assert search(alice, "記憶は大切です", k=1)[0]["memory"]["content"] == UNICODE_SAMPLES[2]


def test_forget_hides_keeps_and_logs_a_decision(alice: Caller) -> None:
    memory = remember(alice, "The launch code is 0000.", session_id="sess-1").json()
    response = alice.client.delete(f"/api/v1/memories/{memory['id']}")
    assert response.status_code == 200
    assert search(alice, "launch code") == []
    assert alice.get(f"/api/v1/memories/{memory['id']}").status_code == 404
    assert alice.client.delete(f"/api/v1/memories/{memory['id']}").status_code == 404
    with tenant_context(alice.tenant):
        row = SemanticMemory.objects.get(pk=memory["id"])
        assert row.forgotten_at is not None and row.forgotten_by == alice.agent
        decision = Event.objects.get(pk=response.json()["event_id"])
    assert decision.kind == EventKind.DECISION and decision.session_id == "sess-1"
    assert decision.payload["memory_id"] == memory["id"]
    # writing the same text again makes a new live memory
    assert remember(alice, "The launch code is 0000.").status_code == 201


def test_idempotent_replay_and_conflict(alice: Caller) -> None:
    body = {"content": "Idempotency keys make retries safe.", "scope": "shared"}
    first = alice.post("/api/v1/memories", body, **{"Idempotency-Key": "k-1"})
    replay = alice.post("/api/v1/memories", body, **{"Idempotency-Key": "k-1"})
    assert first.status_code == replay.status_code == 201
    assert replay.json() == first.json()
    assert replay["Idempotent-Replayed"] == "true"
    conflict = alice.post(
        "/api/v1/memories", {**body, "content": "Something else."}, **{"Idempotency-Key": "k-1"}
    )
    assert conflict.status_code == 409
    assert "Idempotency-Key" in conflict.json()["errors"]

    events = [
        {"session_id": "s", "kind": "message", "content": "once", "occurred_at": "2026-01-01T00:00:00Z"}
    ]
    assert alice.post("/api/v1/events", events, **{"Idempotency-Key": "e-1"}).status_code == 201
    assert alice.post("/api/v1/events", events, **{"Idempotency-Key": "e-1"}).status_code == 201
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.count() == 1
        assert Event.objects.count() == 1


def test_idempotency_keys_belong_to_one_agent(alice: Caller, bob: Caller) -> None:
    assert (
        alice.post("/api/v1/memories", {"content": "alice's"}, **{"Idempotency-Key": "same"}).status_code
        == 201
    )
    assert (
        bob.post("/api/v1/memories", {"content": "bob's"}, **{"Idempotency-Key": "same"}).status_code == 201
    )


def test_concurrent_identical_writes_make_one_row(scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    callers = [make_caller(scratch_tenant, "racer") for _ in range(4)]
    barrier = threading.Barrier(len(callers))
    statuses: list[int] = []

    def write(caller: Caller) -> None:
        try:
            barrier.wait()
            statuses.append(remember(caller, "Two writers, one memory.", scope="shared").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(c,)) for c in callers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200, 200, 200, 201]
    with tenant_context(scratch_tenant):
        assert SemanticMemory.objects.filter(content="Two writers, one memory.").count() == 1


def test_rows_from_another_embedding_model_are_never_compared(alice: Caller) -> None:
    from memory.embeddings import get_embedder
    from memory.semantic.services.duplicates import content_hash

    text = "Quarterly revenue grew by eight percent."
    with tenant_context(alice.tenant):
        vector = get_embedder().embed([text])[0]
        SemanticMemory.objects.create(
            agent=alice.agent,
            scope="shared",
            content=text,
            content_hash=content_hash(text),
            embedding=vector,
            embedding_model="some-other-model",
            embedding_dimensions=384,
        )
    assert search(alice, "How much did revenue grow?") == []
    # a new write of the same text is embedded with the configured model and found
    assert remember(alice, text, scope="private").status_code == 201
    assert contents(search(alice, "How much did revenue grow?")) == [text]


@requires_model
def test_forgetting_a_private_memory_logs_nothing_derived_from_its_text(alice: Caller) -> None:
    memory = alice.post("/api/v1/memories", {"content": "my PIN is 4242"}).json()
    event_id = alice.client.delete(f"/api/v1/memories/{memory['id']}").json()["event_id"]
    with tenant_context(alice.tenant):
        payload = Event.objects.get(pk=event_id).payload
    assert "content_hash" not in payload and "4242" not in json.dumps(payload)


@requires_model
def test_search_weights_cannot_all_be_zero_and_hits_show_their_new_access(alice: Caller) -> None:
    zero = {"similarity": 0, "recency": 0, "importance": 0}
    response = alice.post("/api/v1/memories/search", {"query": "x", "weights": zero})
    assert response.status_code == 400 and "weights" in response.json()["errors"]
    alice.post("/api/v1/memories", {"content": "The cafeteria closes at 3pm."})
    first = alice.post("/api/v1/memories/search", {"query": "cafeteria"}).json()["results"][0]["memory"]
    assert first["access_count"] == 1


def test_only_its_author_or_a_curator_forgets_a_shared_memory(alice: Caller, bob: Caller) -> None:
    shared = remember(alice, "The office closes at six on Fridays.", scope="shared").json()
    refused = bob.client.delete(f"/api/v1/memories/{shared['id']}")
    assert refused.status_code == 403 and "id" in refused.json()["errors"]
    assert bob.get(f"/api/v1/memories/{shared['id']}").status_code == 200  # still there
    curator = make_caller(alice.tenant, "curator", scopes=(Scope.READ, Scope.WRITE, Scope.CURATE))
    forgotten = curator.client.delete(f"/api/v1/memories/{shared['id']}")
    assert forgotten.status_code == 200 and forgotten.json()["id"] == shared["id"]
    with tenant_context(alice.tenant):
        event = Event.objects.get(pk=forgotten.json()["event_id"])
        assert event.agent.name == "curator" and event.payload["owner"] == "alice"


def test_memories_are_listed_newest_first_with_filters_and_pages(
    alice: Caller, bob: Caller, mallory: Caller
) -> None:
    notes = [
        "The staging database was upgraded on Monday.",
        "Invoices are sent on the first of each month.",
        "The cafeteria serves vegetarian food on Thursdays.",
        "Release 4.2 fixed the login timeout bug.",
        "Marta is the on-call engineer this week.",
    ]
    for i, note in enumerate(notes):
        assert remember(alice, note, scope="shared", tags=["ci", f"n{i}"], session_id="s1").status_code == 201
    remember(alice, "alice's own secret", scope="private", tags=["ci"])
    remember(bob, "bob's own secret", scope="private", tags=["ci"])
    listed = alice.get("/api/v1/memories", {"limit": 4}).json()
    assert [m["content"] for m in listed["results"]] == ["alice's own secret", notes[4], notes[3], notes[2]]
    rest = alice.client.get(listed["next"]).json()
    assert [m["content"] for m in rest["results"]] == [notes[1], notes[0]]
    assert rest["next"] is None
    tagged = alice.get("/api/v1/memories", {"tag": ["ci", "n3"]}).json()["results"]
    assert [m["content"] for m in tagged] == [notes[3]]
    assert [m["content"] for m in bob.get("/api/v1/memories", {"scope": "private"}).json()["results"]] == [
        "bob's own secret"
    ]
    assert len(alice.get("/api/v1/memories", {"session_id": "s1", "agent": "alice"}).json()["results"]) == 5
    assert mallory.get("/api/v1/memories").json()["results"] == []
    bad = alice.get("/api/v1/memories", {"since": "yesterday"})
    assert bad.status_code == 400 and "since" in bad.json()["errors"]
