"""A memory's context (its session neighbours' words, ``MemoryContext``) is kept by the database and
credited to the memory in search (issue 16, recall quality).

The triggers of migration 0020 rebuild every context whose neighbours change, whatever wrote the row:
so a context never holds words of a memory that was forgotten, merged, redacted or erased, and writes
out of time order give the same contexts as writes in order.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from memory.embeddings import get_embedder
from memory.semantic.models import MemoryAccess, MemoryContext, MemoryScope, SemanticMemory
from memory.semantic.services.duplicates import content_hash
from memory.semantic.services.erase import memories_erase
from tests.factories import Caller, remember, requires_model, search

pytestmark = requires_model


def _row(caller: Caller, content: str, *, session: str | None, at: object, **extra: object) -> SemanticMemory:
    embedder = get_embedder()
    rng = np.random.default_rng(abs(hash(content)) % 2**32)
    v = rng.standard_normal(embedder.dimensions).astype(np.float32)
    memory = SemanticMemory.objects.create(
        agent=caller.agent,
        scope=extra.pop("scope", MemoryScope.SHARED),
        session_id=session,
        content=content,
        content_hash=content_hash(content),
        embedding=v / np.linalg.norm(v),
        embedding_model=embedder.name,
        embedding_dimensions=embedder.dimensions,
        created_at=at,
        **extra,
    )
    MemoryAccess.objects.create(memory=memory)
    return memory


def _sources(memory: SemanticMemory) -> set[str]:
    context = MemoryContext.objects.filter(memory=memory).first()
    return set() if context is None else {str(s) for s in context.sources}


def _context_score(memory: SemanticMemory, lexeme: str) -> float:
    """The context's BM25 saturation of ``lexeme`` (0 when the context lacks it or is gone)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce((SELECT -(c.lexical <#> memory_lexical_query(ARRAY[%s], ARRAY[1.0::float8])) "
            "FROM memory_memorycontext c WHERE c.memory_id = %s), 0)",
            [lexeme, memory.pk],
        )
        return float(cursor.fetchone()[0])


def test_contexts_are_the_two_neighbours_each_side_in_time_order_whatever_the_write_order(
    alice: Caller, bob: Caller
) -> None:
    t0 = timezone.now() - timedelta(hours=1)
    with tenant_context(alice.tenant):
        # written out of order: the third in time comes last
        m = {i: None for i in range(6)}
        for i in (0, 1, 3, 4, 5, 2):
            m[i] = _row(alice, f"turn number {i} about kayaks", session="s1", at=t0 + timedelta(minutes=i))
        other_session = _row(alice, "a turn of another session", session="s2", at=t0 + timedelta(minutes=2))
        no_session = _row(alice, "a memory of no session", session=None, at=t0 + timedelta(minutes=2))
        bobs = _row(bob, "bob speaks in the same session", session="s1", at=t0 + timedelta(seconds=150))
        private = _row(
            alice, "a private aside", session="s1", at=t0 + timedelta(seconds=170), scope=MemoryScope.PRIVATE
        )
        ids = {i: str(memory.pk) for i, memory in m.items()}  # type: ignore[union-attr]
        for i in range(6):
            expected = {ids[j] for j in range(max(0, i - 2), min(6, i + 3)) if j != i}
            assert _sources(m[i]) == expected, i  # type: ignore[arg-type]
        # another session, another agent, another scope: never a neighbour, and no session: no context
        assert _sources(other_session) == set() and _sources(no_session) == set()
        assert _sources(bobs) == set() and _sources(private) == set()
        assert _context_score(m[0], "kayak") > 0  # type: ignore[arg-type]


def test_forget_redact_and_erase_rebuild_the_neighbours_contexts(alice: Caller) -> None:
    t0 = timezone.now() - timedelta(hours=1)
    with tenant_context(alice.tenant):
        rows = [_row(alice, f"plain turn {i}", session="s1", at=t0 + timedelta(minutes=i)) for i in range(5)]
        secret = _row(alice, "the vault code is zanzibar", session="s1", at=t0 + timedelta(seconds=150))
        near = [rows[1], rows[2], rows[3], rows[4]]
        assert all(str(secret.pk) in _sources(r) and _context_score(r, "zanzibar") > 0 for r in near)

        # a redaction (what a content change of erasure does): the words go from every context
        SemanticMemory.objects.filter(pk=secret.pk).update(content="[erased]")
        assert all(_context_score(r, "zanzibar") == 0 and _context_score(r, "eras") > 0 for r in near)

        # forgetting (and merging, which forgets): no longer anyone's neighbour, and no context itself
        SemanticMemory.objects.filter(pk=secret.pk).update(forgotten_at=timezone.now())
        assert not MemoryContext.objects.filter(sources__overlap=[secret.pk]).exists()
        assert _sources(secret) == set()
        assert _sources(rows[2]) == {str(rows[j].pk) for j in (0, 1, 3, 4)}

        # back to life, then erased for good: its context row goes and its neighbours are rebuilt
        SemanticMemory.objects.filter(pk=secret.pk).update(
            forgotten_at=None, content="the vault code is zanzibar"
        )
        assert all(_context_score(r, "zanzibar") > 0 for r in near)
        assert memories_erase(memory_ids=[secret.pk]) == [str(secret.pk)]
        assert not MemoryContext.objects.filter(memory_id=secret.pk).exists()
        assert not MemoryContext.objects.filter(sources__overlap=[secret.pk]).exists()
        assert all(_context_score(r, "zanzibar") == 0 for r in rows)
        assert _sources(rows[2]) == {str(rows[j].pk) for j in (0, 1, 3, 4)}


def test_a_neighbours_words_lift_the_memory_itself_in_search(alice: Caller, mallory: Caller) -> None:
    # the answer shares no word with the question; the turn before it does
    remember(alice, "Which instrument did Quentin learn in Vienna?", scope="shared", session_id="c1")
    answer = remember(alice, "The cello, ten years ago.", scope="shared", session_id="c1").json()["id"]
    remember(alice, "The cello, ten years ago!", scope="private")  # the same words, no session
    results = search(alice, "What instrument did Quentin learn in Vienna?", k=3)
    by_content = {r["memory"]["content"]: r for r in results}
    lifted, alone = by_content["The cello, ten years ago."], by_content["The cello, ten years ago!"]
    assert lifted["memory"]["id"] == answer
    assert lifted["components"]["text_relevance"] > 0 == alone["components"]["text_relevance"]
    assert lifted["score"] > alone["score"]
    # another tenant's identical session gives its agents nothing of this one
    assert search(mallory, "What instrument did Quentin learn in Vienna?", k=3) == []


def test_a_memory_without_a_session_leaves_the_context_table_alone(alice: Caller) -> None:
    """An insert of memories without a session has no context to build nor neighbour to refresh:
    the refresh returns before its statement, which would lock the context table (and be planned
    for nothing) on every such write (decision 0118)."""
    from django.db import transaction

    from memory.semantic.services.writes import MemoryData, memory_create

    with tenant_context(alice.tenant), transaction.atomic():
        memory_create(
            agent=alice.agent,
            data=MemoryData(content="The ferry to Cacilhas leaves every 20 minutes."),
            policy=alice.tenant.retrieval_policy,
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT mode FROM pg_locks WHERE pid = pg_backend_pid() "
                "AND relation = 'memory_memorycontext'::regclass"
            )
            assert cursor.fetchall() == []
        memory_create(
            agent=alice.agent,
            data=MemoryData(content="Standup moved to 9:30 on Mondays.", session_id="s-1"),
            policy=alice.tenant.retrieval_policy,
        )
        with connection.cursor() as cursor:  # a memory with a session does refresh (the test can fail)
            cursor.execute(
                "SELECT mode FROM pg_locks WHERE pid = pg_backend_pid() "
                "AND relation = 'memory_memorycontext'::regclass"
            )
            assert cursor.fetchall() != []
