"""A single memory written outside any transaction (as a request without Idempotency-Key writes it):
its near-duplicate lookup and insert are one statement, and the duplicate rules still hold.

The other tests write inside the test's transaction, where that statement is not used; these run in
a committed tenant of their own (``scratch_tenant``), in autocommit as a server runs."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import tenant_context

from agents.services import agent_create
from memory.semantic.models import LexicalPosting, MemoryAccess, SemanticMemory
from memory.semantic.services.recall import memory_search
from memory.semantic.services.writes import MemoryData, memory_create
from tests.factories import requires_model

pytestmark = requires_model


def test_a_new_memory_is_stored_whole_in_two_statements(scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="solo")
        policy = scratch_tenant.retrieval_policy
        memory_create(agent=agent, data=MemoryData(content="warm-up"), policy=policy)  # the tenant's SET
        assert not connection.in_atomic_block
        with CaptureQueriesContext(connection) as queries:
            result = memory_create(
                agent=agent,
                data=MemoryData(content="The ferry to Cacilhas leaves every 20 minutes.", tags=["travel"]),
                policy=policy,
            )
        # the exact-duplicate lookup, then the near-duplicate lookup and the insert as one statement
        assert len(queries.captured_queries) == 2, [q["sql"][:80] for q in queries.captured_queries]
        assert result.outcome == "created"
        stored = SemanticMemory.objects.get(pk=result.memory.pk)
        assert stored.tags == ["travel"] and stored.embedding_dimensions == result.memory.embedding_dimensions
        assert stored.created_at == result.memory.created_at
        access = MemoryAccess.objects.get(memory_id=stored.pk)
        assert access.access_count == 0 and access.last_accessed_at == result.memory.access.last_accessed_at
        assert LexicalPosting.objects.filter(memory_id=stored.pk, lexeme="ferri").exists()
        hits = memory_search(agent=agent, query="when does the ferry leave", policy=policy, touch=False)
        assert hits[0].memory.pk == stored.pk


def test_a_near_duplicate_outside_a_transaction_reinforces_and_adds_no_row(scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="solo")
        policy = scratch_tenant.retrieval_policy
        first = memory_create(
            agent=agent,
            data=MemoryData(content="The deployment pipeline runs every night at 2am UTC.", confidence=0.5),
            policy=policy,
        )
        near = memory_create(
            agent=agent,
            data=MemoryData(content="The deployment pipeline runs each night at 2am UTC.", confidence=0.8),
            policy=policy,
        )
        assert near.outcome == "near" and near.memory.pk == first.memory.pk
        assert near.similarity is not None and near.similarity >= policy.near_duplicate_threshold
        assert SemanticMemory.objects.count() == 1 and MemoryAccess.objects.count() == 1
        assert SemanticMemory.objects.get().confidence == 0.8
        assert MemoryAccess.objects.get().access_count == 1
        exact = memory_create(
            agent=agent,
            data=MemoryData(content="the deployment pipeline runs EVERY night at 2am UTC."),
            policy=policy,
        )
        assert exact.outcome == "exact" and exact.memory.pk == first.memory.pk
        other_scope = memory_create(
            agent=agent,
            data=MemoryData(content="The deployment pipeline runs each night at 2am UTC.", scope="shared"),
            policy=policy,
        )
        assert other_scope.outcome == "created" and SemanticMemory.objects.count() == 2


def test_a_write_stored_beside_a_near_memory_takes_no_transaction(scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    """A near memory that says something else (cosine 0.69, above the update rule's floor): the
    rule stores the write beside it, in one statement after the lookup, with no BEGIN / COMMIT."""
    with tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="solo")
        policy = scratch_tenant.retrieval_policy
        first = memory_create(
            agent=agent, data=MemoryData(content="Maria prefers window seats on long flights."), policy=policy
        )
        with CaptureQueriesContext(connection) as queries:
            beside = memory_create(
                agent=agent,
                data=MemoryData(content="Maria prefers aisle seats on short trains."),
                policy=policy,
            )
        sqls = [q["sql"][:80] for q in queries.captured_queries]
        # the exact-duplicate lookup, the near lookup (finding the first), the insert
        assert len(sqls) == 3, sqls
        assert beside.outcome == "created" and beside.supersedes is None
        assert beside.memory.pk != first.memory.pk
        stored = SemanticMemory.objects.get(pk=beside.memory.pk)
        assert stored.created_at == beside.memory.created_at and stored.superseded_at is None
        assert MemoryAccess.objects.get(memory_id=stored.pk).access_count == 0
        assert LexicalPosting.objects.filter(memory_id=stored.pk, lexeme="aisl").exists()
        assert SemanticMemory.objects.get(pk=first.memory.pk).superseded_at is None


def _plans() -> dict[str, tuple[int, int]]:
    """``{name: (generic plans, custom plans)}`` of the session's prepared statements."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE name LIKE 'engram!_%%' ESCAPE '!'"
        )
        return {name: (generic, custom) for name, generic, custom in cursor.fetchall()}


def test_a_single_write_is_parsed_and_planned_once_per_connection(scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    """Every statement of a single write (created, or stored beside a near memory) is the
    ``EXECUTE`` of a statement the connection prepared, run under its generic plan once PostgreSQL's
    plan cache has settled: no parse, no plan per write (decision 0118)."""
    with tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="solo")
        policy = scratch_tenant.retrieval_policy
        texts = [
            f"{who} prefers {seat} seats on long flights."
            for who in ("Maria", "Jonas", "Ines", "Tariq")
            for seat in ("window", "aisle")
        ]
        for text in texts[:6]:  # past the plan cache's five custom plans
            memory_create(agent=agent, data=MemoryData(content=text), policy=policy)
        before = _plans()
        with CaptureQueriesContext(connection) as queries:
            results = [
                memory_create(agent=agent, data=MemoryData(content=t), policy=policy) for t in texts[6:]
            ]
        assert [r.outcome for r in results] == ["created", "created"]
        sent = [q["sql"] for q in queries.captured_queries]
        assert len(sent) >= 4 and all("EXECUTE engram_" in sql and "PREPARE" not in sql for sql in sent), [
            s[:120] for s in sent
        ]
        after = _plans()
        ran = {
            name: (g - before.get(name, (0, 0))[0], c - before.get(name, (0, 0))[1])
            for name, (g, c) in after.items()
            if (g, c) != before.get(name, (0, 0))
        }
        assert ran and all(custom == 0 for _, custom in ran.values()), ran
