"""``POST /api/v1/memories`` with an array: a batch of up to 500, all or nothing, embedded in one
model call, deduplicated as if written one after another (against stored rows and earlier items),
answered ``{"count", "results"}``; idempotent; another tenant sees nothing of it."""

from __future__ import annotations

import pytest
from django_tenants.utils import tenant_context

from memory.semantic.models import SemanticMemory
from memory.semantic.services.pending import pending_embed
from tests.factories import Caller, remember, requires_model, search

pytestmark = [pytest.mark.django_db, requires_model]

PIPELINE = "The deployment pipeline runs every night at 2am UTC."
PIPELINE_NEAR = "The deployment pipeline runs each night at 2am UTC."  # cosine >= 0.97 (test_memories)


def batch(caller: Caller, items: list[dict], **headers: str):  # type: ignore[no-untyped-def]
    return caller.post("/api/v1/memories", items, **headers)


def stored(caller: Caller) -> int:
    with tenant_context(caller.tenant):
        return SemanticMemory.objects.count()


def test_a_batch_is_stored_and_answered_in_the_batch_envelope(alice: Caller) -> None:
    response = batch(
        alice,
        [
            {"content": "Alice lives in Lisbon.", "scope": "shared", "tags": ["people"]},
            {"content": "The invoice for Acme is due on 2026-12-15.", "importance": 0.9},
            {"content": "Bob prefers green tea.", "session_id": "s1"},
        ],
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["count"] == 3 and [r["content"] for r in body["results"]] == [
        "Alice lives in Lisbon.",
        "The invoice for Acme is due on 2026-12-15.",
        "Bob prefers green tea.",
    ]
    assert all(r["deduplicated"] is False and r["pending"] is False for r in body["results"])
    assert body["results"][0]["tags"] == ["people"] and body["results"][2]["session_id"] == "s1"
    assert body["results"][1]["importance"] == 0.9
    assert search(alice, "When is the Acme invoice due?", k=1)[0]["memory"]["id"] == body["results"][1]["id"]


def test_one_bad_item_stores_nothing_and_names_its_path(alice: Caller) -> None:
    remember(alice, "Already here.")
    good = {"content": "A fine memory."}
    response = batch(alice, [good, good | {"content": "Another."}, {"content": "   "}])
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["memories[2].content"]
    # a domain error found by the service (no such event) names its item too
    response = batch(alice, [good, {"content": "From an event.", "source_event_id": 999999}])
    assert response.status_code == 404
    assert list(response.json()["errors"]) == ["memories[1].source_event_id"]
    response = batch(alice, [good, {"content": "Wrong model.", "embedding_model": "other-model"}])
    assert response.status_code == 409 and list(response.json()["errors"]) == ["memories[1].embedding_model"]
    assert stored(alice) == 1  # all or nothing


def test_batch_bounds_and_one_write_mode(alice: Caller) -> None:
    assert list(batch(alice, []).json()["errors"]) == ["memories"]
    too_many = [{"content": f"memory {i}"} for i in range(501)]
    response = batch(alice, too_many)
    assert response.status_code == 400 and list(response.json()["errors"]) == ["memories"]
    response = batch(alice, [{"content": "a"}, {"content": "b", "write": "async"}])
    assert response.status_code == 400 and list(response.json()["errors"]) == ["memories[1].write"]
    assert stored(alice) == 0


def test_duplicates_inside_a_batch_and_against_stored_rows(alice: Caller) -> None:
    first = remember(alice, "Alice likes green tea.", confidence=0.5).json()
    response = batch(
        alice,
        [
            {"content": "ALICE likes green tea.", "confidence": 0.7},  # exact, stored
            {"content": PIPELINE, "confidence": 0.5},  # new
            {
                "content": "the deployment   pipeline runs every night at 2am utc.",
                "confidence": 0.5,
            },  # exact, item 1
            {"content": PIPELINE_NEAR, "confidence": 0.9},  # near, item 1
            {"content": "Alice likes green tea!", "scope": "shared"},  # another scope: new
        ],
    )
    assert response.status_code == 201, response.content
    results = response.json()["results"]
    assert [(r["deduplicated"], r.get("duplicate_of")) for r in results] == [
        (True, "exact"),
        (False, None),
        (True, "exact"),
        (True, "near"),
        (False, None),
    ]
    assert results[0]["id"] == first["id"] and results[0]["confidence"] == 0.7
    assert results[2]["id"] == results[3]["id"] == results[1]["id"]
    assert results[3]["similarity"] >= 0.97
    with tenant_context(alice.tenant):
        pipeline = SemanticMemory.objects.select_related("access").get(pk=results[1]["id"])
        assert pipeline.confidence == 0.9 and pipeline.access.access_count == 2  # seen twice again
        assert SemanticMemory.objects.count() == 3
    # a batch of nothing but duplicates creates nothing: 200
    again = batch(alice, [{"content": "Alice likes green tea."}, {"content": PIPELINE}])
    assert again.status_code == 200 and all(r["deduplicated"] for r in again.json()["results"])


def test_a_replayed_batch_answers_the_same_and_stores_nothing_more(alice: Caller) -> None:
    items = [{"content": "Alice lives in Lisbon."}, {"content": "Bob lives in Porto."}]
    first = batch(alice, items, **{"Idempotency-Key": "batch-1"})
    assert first.status_code == 201
    replay = batch(alice, items, **{"Idempotency-Key": "batch-1"})
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
    assert stored(alice) == 2
    assert batch(alice, items[:1], **{"Idempotency-Key": "batch-1"}).status_code == 409


def test_batches_are_per_agent_and_per_tenant(alice: Caller, bob: Caller, mallory: Caller) -> None:
    mine = batch(alice, [{"content": "The vault code is 4471."}, {"content": "Alice owns a red bike."}])
    assert mine.status_code == 201
    # bob's identical text is bob's own memory (dedup is per agent and scope), mallory's another tenant's
    theirs = batch(bob, [{"content": "The vault code is 4471."}])
    assert theirs.status_code == 201 and theirs.json()["results"][0]["id"] != mine.json()["results"][0]["id"]
    outsider = batch(mallory, [{"content": "The vault code is 4471."}, {"content": "Mallory's note."}])
    assert outsider.status_code == 201 and not any(r["deduplicated"] for r in outsider.json()["results"])
    assert search(mallory, "vault code", k=10)
    assert {h["memory"]["agent"] for h in search(mallory, "vault code", k=10)} == {"mallory"}
    assert {h["memory"]["agent"] for h in search(bob, "vault code", k=10)} == {"bob"}
    for result in mine.json()["results"]:
        assert mallory.get(f"/api/v1/memories/{result['id']}").status_code == 404
        assert bob.get(f"/api/v1/memories/{result['id']}").status_code == 404


def test_an_async_batch_is_accepted_then_embedded_with_the_same_dedup(alice: Caller) -> None:
    remember(alice, PIPELINE)
    response = batch(
        alice,
        [
            {"content": "The Berlin office hired Carol as an engineer.", "write": "async"},
            {"content": PIPELINE_NEAR, "write": "async"},  # near a stored memory: merged by the worker
            {"content": "The Berlin office hired Carol as engineer.", "write": "async"},  # near item 0
            {"content": PIPELINE, "write": "async"},  # exact, stored: answered at once
        ],
    )
    assert response.status_code == 202, response.content
    results = response.json()["results"]
    assert [r["pending"] for r in results] == [True, True, True, False]
    assert results[3]["deduplicated"] is True and results[3]["duplicate_of"] == "exact"
    with tenant_context(alice.tenant):
        report = pending_embed(policy=alice.tenant.retrieval_policy)
        assert (report.embedded, report.merged) == (1, 2)
        merged = {m.pk: m for m in SemanticMemory.objects.filter(merged_into__isnull=False)}
        assert {str(k) for k in merged} == {results[1]["id"], results[2]["id"]}
        assert (
            str(merged[next(k for k in merged if str(k) == results[2]["id"])].merged_into_id)
            == results[0]["id"]
        )
    assert alice.get(f"/api/v1/memories/{results[1]['id']}").json()["content"] == PIPELINE
    assert search(alice, "Who did the Berlin office hire?", k=1)[0]["memory"]["id"] == results[0]["id"]
