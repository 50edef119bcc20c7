"""Write policy per memory class: semantic writes may be write-back (``"write": "async"``: 202 at
once, embedded by a real worker in batches, then searchable and deduplicated like synchronous
writes); conversation-window turns trimmed by the window's bound go to the episodic log."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django_tenants.utils import tenant_context

from agents.services import agent_create
from core.redis import get_redis
from memory.embeddings import Embedder, get_embedder
from memory.episodic.models import Event
from memory.semantic.models import SemanticMemory
from memory.semantic.services.pending import PendingReport, pending_embed
from memory.semantic.services.writes import MemoryData, embed_scheduled_key, memory_create
from tenants.models import Tenant
from tests.factories import Caller, make_caller, remember, requires_model, search

# seconds: the worker picks the task queued at commit; slack for two busy cores
SEARCHABLE_WITHIN = 60


def wait_for(condition, what: str, timeout: float = SEARCHABLE_WITHIN) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"not within {timeout} s: {what}"
        time.sleep(0.1)
    return time.monotonic() - start


@requires_model
def test_async_writes_become_searchable_and_deduplicate_like_sync_ones(
    celery_worker, scratch_tenant: Tenant
) -> None:  # type: ignore[no-untyped-def]
    caller = make_caller(scratch_tenant, "writer")
    accepted = remember(caller, "The staging cluster is called Borealis.", write="async")
    assert accepted.status_code == 202, accepted.content
    body = accepted.json()
    assert body["pending"] is True and body["deduplicated"] is False
    # an exact duplicate is caught at once, pending or not: the same id, 200
    again = remember(caller, "The staging cluster is called Borealis.", write="async")
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    # a near duplicate (case and spacing would make an exact one; the missing period does not)
    near = remember(caller, "The staging cluster is called Borealis", write="async")
    assert near.status_code == 202
    other = remember(caller, "Backups are kept for 35 days in Glacier.", write="async")
    assert other.status_code == 202

    def embedded() -> bool:
        with tenant_context(scratch_tenant):
            return not SemanticMemory.objects.filter(
                embedding_dimensions=0, forgotten_at__isnull=True
            ).exists()

    delay = wait_for(embedded, "the worker to embed the async writes")
    print(f"async writes embedded {delay:.2f} s after they were accepted")
    hits = search(caller, "what is the staging cluster called")
    staging = [h for h in hits if "Borealis" in h["memory"]["content"]]
    assert len(staging) == 1, [h["memory"]["content"] for h in hits]  # no duplicate from the background path
    assert staging[0]["memory"]["id"] == body["id"]
    with tenant_context(scratch_tenant):
        merged = SemanticMemory.objects.get(pk=near.json()["id"])
        assert str(merged.merged_into_id) == body["id"] and merged.forgotten_at is not None
        assert SemanticMemory.objects.get(pk=body["id"]).access.access_count >= 2
    # the merged write's id answers with the memory it became
    assert caller.get(f"/api/v1/memories/{near.json()['id']}").json()["id"] == body["id"]
    assert any("Glacier" in h["memory"]["content"] for h in search(caller, "how long are backups kept"))


@pytest.mark.django_db
def test_trimmed_window_turns_are_in_the_episodic_log(alice: Caller) -> None:
    alice.tenant.window_max_turns = 3
    alice.tenant.save()
    for i in range(5):
        response = alice.post("/api/v1/sessions/s-win/window", {"role": "user", "content": f"turn {i}"})
        assert response.status_code == 201 and response.json()["length"] == min(i + 1, 3)
    window = alice.get("/api/v1/sessions/s-win/window", {"last": 10}).json()["results"]
    assert [t["content"] for t in window] == ["turn 2", "turn 3", "turn 4"]
    with tenant_context(alice.tenant):
        logged = list(Event.objects.filter(session_id="s-win").order_by("seq"))
        assert [e.content for e in logged] == ["turn 0", "turn 1"]
        assert all(e.kind == "message" and e.role == "user" and e.agent_id == alice.agent.pk for e in logged)
        assert logged[0].payload["source"] == "window"


@pytest.mark.django_db
def test_the_tenant_may_turn_the_window_log_off(alice: Caller) -> None:
    alice.tenant.window_max_turns, alice.tenant.window_log_trimmed = 1, False
    alice.tenant.save()
    for i in range(3):
        assert (
            alice.post("/api/v1/sessions/s-win2/window", {"role": "user", "content": f"turn {i}"}).status_code
            == 201
        )
    with tenant_context(alice.tenant):
        assert not Event.objects.filter(session_id="s-win2").exists()


class _HeldEmbedder:
    """The real embedder, holding the drain that calls it inside its transaction (after it claimed its
    rows, before it looks for their near duplicates) until ``release`` is set or 5 s have passed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dimensions = inner, inner.name, inner.dimensions
        self.entered, self.release = threading.Event(), threading.Event()

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.release.wait(5)
        return self.inner.embed(texts)


@requires_model
def test_two_drains_at_once_merge_the_later_near_duplicate_into_the_earlier(scratch_tenant: Tenant) -> None:
    """A worker with two processes runs two drains at once: when each claims one memory of a
    near-duplicate pair, the later write must still be merged into the earlier one, as the
    synchronous path (and one drain) would do, not the earlier into the later."""
    with tenant_context(scratch_tenant):
        # no drain is queued by these writes (the flag says one is): the test runs the two itself
        get_redis().set(embed_scheduled_key(), "1", px=60_000)
        agent = agent_create(by=None, name="pair")
        policy = scratch_tenant.retrieval_policy
        earlier, later = (
            memory_create(agent=agent, data=MemoryData(content=text), policy=policy, write="async").memory.pk
            for text in ("The staging cluster is called Borealis.", "The staging cluster is called Borealis")
        )
    held = _HeldEmbedder(get_embedder())
    reports: dict[str, PendingReport] = {}

    def drain(name: str, embedder: Embedder) -> None:
        try:
            with tenant_context(scratch_tenant):
                reports[name] = pending_embed(policy=policy, limit=1, embedder=embedder)
        finally:
            connection.close()

    first = threading.Thread(target=drain, args=("first", held))
    first.start()
    assert held.entered.wait(60), "the first drain never embedded"
    second = threading.Thread(target=drain, args=("second", get_embedder()))
    second.start()
    second.join(60)  # while the first drain still holds its claim (unless the second waits for it)
    held.release.set()
    first.join(60)
    second.join(60)
    assert set(reports) == {"first", "second"}
    with tenant_context(scratch_tenant):
        kept = SemanticMemory.objects.get(pk=earlier)
        merged = SemanticMemory.objects.get(pk=later)
        assert kept.forgotten_at is None and not kept.pending
        assert merged.merged_into_id == kept.pk and merged.forgotten_at is not None
