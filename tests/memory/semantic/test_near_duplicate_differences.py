"""A near duplicate that says something else is not a duplicate: a write whose vector nearly matches
a live memory, but which differs from it in a negation, a number, a date, a name, a literal or an
opposite, is stored as a memory of its own, never merged into the other (nor reinforcing it), on
every path that merges; a rewording still reinforces.

Two kinds of test: the table of ``test_differences`` through the API (single writes and batches),
with the vectors supplied by the client so that each pair is as near as vectors get (cosine 1: the
text alone tells the two apart); and the real embedder's near pairs (cosine >= the default
threshold, checked) walked through every write path: sync and async, object and array, against a
stored memory and against an earlier item of the same batch or drain, inside and outside a
transaction, and through MCP's ``store_memory``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import numpy as np
import pytest
from django.db import transaction
from django_tenants.utils import tenant_context
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rest_framework import serializers

from api.rest.memories import MemoryInputSerializer
from memory.embeddings import get_embedder
from memory.semantic.models import SemanticMemory
from memory.semantic.services.pending import pending_embed
from tenants.models import Tenant
from tests.factories import Caller, asgi_server, make_caller, remember, requires_model
from tests.memory.semantic.test_differences import CONTRADICTIONS, PARAPHRASES

pytestmark = requires_model


def unit_vector(i: int) -> list[float]:
    """A random unit vector of the configured model's length, one per pair (seeded by ``i``): pairs
    are far apart (cosine near 0 in hundreds of dimensions), the two texts of a pair identical to the
    index. Not one-hot: orthogonal basis vectors are all at the same distance from each other, which
    leaves the HNSW graph's greedy walk no direction, and the approximate lookup may then miss the
    match among the index's other (and dead) entries."""
    vector = np.random.default_rng(i).standard_normal(get_embedder().dimensions)
    return (vector / np.linalg.norm(vector)).tolist()


def supplied(i: int) -> dict[str, object]:
    return {"embedding": unit_vector(i), "embedding_model": get_embedder().name}


def live(caller: Caller) -> int:
    with tenant_context(caller.tenant):
        return SemanticMemory.objects.filter(agent=caller.agent, forgotten_at__isnull=True).count()


# every pair of the table: (stored, written, whether they differ); each pair is written by an agent of
# its own (the table repeats texts, which would be exact duplicates of another pair's)
PAIRS = [(s, w, True) for s, w, _ in CONTRADICTIONS] + [(s, w, False) for s, w in PARAPHRASES]


def test_the_table_through_single_writes(alice: Caller) -> None:
    for i, (stored, written, differs) in enumerate(PAIRS):
        caller = make_caller(alice.tenant, f"single-{i}")
        first = remember(caller, stored, **supplied(i))
        assert first.status_code == 201, (stored, first.content)
        second = remember(caller, written, **supplied(i))
        body = second.json()
        if differs:
            assert second.status_code == 201, (stored, written, body)
            assert body["deduplicated"] is False and body["id"] != first.json()["id"]
            assert live(caller) == 2
        else:
            assert second.status_code == 200, (stored, written, body)
            assert body["deduplicated"] is True and body["duplicate_of"] == "near"
            assert body["id"] == first.json()["id"] and body["access_count"] == 1
            assert live(caller) == 1


def test_the_table_through_batches(alice: Caller) -> None:
    for i, (stored, written, differs) in enumerate(PAIRS):
        # the pair in one batch: the written item against the earlier item
        caller = make_caller(alice.tenant, f"batch-{i}")
        response = caller.post("/api/v1/memories", [{"content": t, **supplied(i)} for t in (stored, written)])
        assert response.status_code == 201, response.content
        first, second = response.json()["results"]
        assert first["deduplicated"] is False, stored
        assert second["deduplicated"] is not differs, (stored, written, second)
        assert (second["id"] == first["id"]) is not differs, (stored, written)
        assert live(caller) == (2 if differs else 1)
        # the written item again in a batch of its own, beside a new one: against the stored memories
        again = caller.post(
            "/api/v1/memories",
            [{"content": written + " (again)", **supplied(i)}, {"content": "Unrelated.", **supplied(i + 1)}],
        )
        assert again.status_code == 201, again.content
        result = again.json()["results"][0]
        # "(again)" changes nothing that matters: it reinforces the memory that says the same
        assert result["duplicate_of"] == "near", (written, result)
        assert result["id"] == (second["id"]), (written, result)


# The real embedder's pairs (all-MiniLM-L6-v2): each within the default threshold of the first
STORED = "The deployment pipeline runs every night at 2am UTC."
CONTRADICTING = "The deployment pipeline runs every night at 3am UTC."  # cosine 0.98
REWORDED = "The deployment pipeline runs each night at 2am UTC."  # cosine 0.99


def test_the_real_pairs_are_near_duplicates_by_the_vectors(scratch_tenant: Tenant) -> None:
    """What makes the walk below meaningful: without the text rule each write would merge."""
    threshold = scratch_tenant.retrieval_policy.near_duplicate_threshold
    vectors = get_embedder().embed([STORED, CONTRADICTING, REWORDED])
    assert float(np.dot(vectors[0], vectors[1])) >= threshold
    assert float(np.dot(vectors[0], vectors[2])) >= threshold
    assert float(np.dot(vectors[1], vectors[2])) >= threshold  # the rewording is near both


@dataclass(frozen=True)
class Path:
    """One way a write reaches the merge decision."""

    write: str  # the API's "write" mode
    shape: str  # "object" (one memory per request) or "array" (a batch)
    against: str  # "stored" (a memory of an earlier request) or "earlier" (of the same batch or drain)
    in_transaction: bool = False  # a caller's transaction around the request (no one-statement path)

    @property
    def id(self) -> str:
        return f"{self.write}-{self.shape}-{self.against}" + (
            "-in-transaction" if self.in_transaction else ""
        )


def every_path() -> list[Path]:
    """Each write mode the API offers, in each shape, against each kind of near duplicate. A single
    synchronous write has no earlier item: it is walked outside and inside a transaction instead
    (outside one, its lookup and insert are one statement)."""
    field = MemoryInputSerializer().fields["write"]
    assert isinstance(field, serializers.ChoiceField)
    modes = list(field.choices)
    assert modes == ["sync", "async"], "a new write mode: teach Path how to drive it"
    paths = []
    for write in modes:
        for shape in ("object", "array"):
            for against in ("stored", "earlier"):
                if (write, shape, against) == ("sync", "object", "earlier"):
                    paths.append(Path(write, shape, "stored", in_transaction=True))
                else:
                    paths.append(Path(write, shape, against))
    return paths


def drain(tenant: Tenant) -> None:
    """Embed every pending memory (what the worker does), in this process."""
    with tenant_context(tenant):
        while SemanticMemory.objects.filter(embedding_dimensions=0, forgotten_at__isnull=True).exists():
            pending_embed(policy=tenant.retrieval_policy)


@contextmanager
def maybe_atomic(on: bool) -> Iterator[None]:
    if on:
        with transaction.atomic():
            yield
    else:
        yield


def write(caller: Caller, path: Path, texts: list[str]) -> list[str]:
    """Write ``texts`` along ``path`` (one request each, or one batch); returns their ids."""
    with maybe_atomic(path.in_transaction):
        if path.shape == "array":
            response = caller.post("/api/v1/memories", [{"content": t, "write": path.write} for t in texts])
            assert response.status_code in (200, 201, 202), response.content
            return [r["id"] for r in response.json()["results"]]
        ids = []
        for text in texts:
            response = remember(caller, text, write=path.write)
            assert response.status_code in (200, 201, 202), response.content
            ids.append(response.json()["id"])
        return ids


def became(caller: Caller, memory_id: str) -> str:
    """The memory a write became (a merged async write answers with the memory it reinforced)."""
    response = caller.get(f"/api/v1/memories/{memory_id}")
    assert response.status_code == 200, response.content
    return str(response.json()["id"])


@pytest.mark.parametrize("path", every_path(), ids=lambda p: p.id)
def test_every_write_path_stores_a_contradiction_and_merges_a_rewording(
    scratch_tenant: Tenant, path: Path
) -> None:
    """The rewording first (it reinforces the memory it rewords), then the contradiction: stored
    beside it, never merged, and an update of it (the stored memory is superseded by it, kept)."""
    caller = make_caller(scratch_tenant, "writer")
    if path.against == "stored":
        (stored,) = write(caller, path, [STORED])
        drain(scratch_tenant)
        reworded, contradicting = write(caller, path, [REWORDED, CONTRADICTING])
    else:
        stored, reworded, contradicting = write(caller, path, [STORED, REWORDED, CONTRADICTING])
    drain(scratch_tenant)
    assert became(caller, stored) == stored
    assert became(caller, contradicting) == contradicting != stored  # stored beside it
    assert became(caller, reworded) == stored  # the rewording reinforced the memory it rewords
    with tenant_context(scratch_tenant):
        rows = {str(m.pk): m for m in SemanticMemory.objects.select_related("access")}
        live = {k for k, m in rows.items() if m.forgotten_at is None}
        assert live == {stored, contradicting}, [rows[k].content for k in live]
        assert rows[stored].access.access_count == 1  # reinforced once: by the rewording only
        assert rows[contradicting].access.access_count == 0
        assert rows[contradicting].embedding_dimensions > 0
        assert str(rows[stored].superseded_by_id) == contradicting and rows[stored].superseded_at
        assert rows[contradicting].superseded_at is None


def test_mcp_store_memory_stores_a_contradiction_and_merges_a_rewording(scratch_tenant: Tenant) -> None:
    caller = make_caller(scratch_tenant, "mcp-writer")

    async def store(session: ClientSession, content: str) -> dict[str, object]:
        result = await session.call_tool("store_memory", {"content": content})
        assert not result.isError, result.content
        return dict(json.loads(result.content[0].text))  # type: ignore[union-attr]

    async def run(url: str) -> list[dict[str, object]]:
        headers = {"Authorization": f"Bearer {caller.key}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write_, _):
                async with ClientSession(read, write_) as session:
                    await session.initialize()
                    return [await store(session, text) for text in (STORED, REWORDED, CONTRADICTING)]

    with asgi_server() as port:
        stored, reworded, contradicting = asyncio.run(run(f"http://127.0.0.1:{port}/mcp"))
    assert stored["deduplicated"] is False
    assert reworded["deduplicated"] is True and reworded["id"] == stored["id"]
    assert contradicting["deduplicated"] is False and contradicting["id"] != stored["id"]
    assert contradicting["outcome"] == "updated" and contradicting["supersedes"] == stored["id"]
