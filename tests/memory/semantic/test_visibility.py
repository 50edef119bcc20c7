"""Semantic memory's visibility rule is written once: the ORM queryset and the SQL of the
one-statement search select the same rows for every filter (issue 8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django_tenants.utils import tenant_context

from agents.subjects import SubjectRefused
from memory.semantic import selectors
from memory.semantic.models import SemanticMemory
from memory.semantic.selectors import MemoryFilters
from tests.factories import Caller

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MODEL = "visibility-test-8d"

CASES = [
    MemoryFilters(),
    MemoryFilters(agent_name="alice"),
    MemoryFilters(agent_name="bob"),
    MemoryFilters(agent_name="nobody"),
    MemoryFilters(scope="shared"),
    MemoryFilters(scope="private"),
    MemoryFilters(memory_type="preference"),
    MemoryFilters(session_id="s2"),
    MemoryFilters(tags_any=["red", "blue"]),
    MemoryFilters(tags_all=["red", "blue"]),
    MemoryFilters(min_confidence=0.6),
    MemoryFilters(created_at={"gte": NOW - timedelta(days=3)}),
    MemoryFilters(created_at={"gt": NOW - timedelta(days=5), "lte": NOW - timedelta(days=1)}),
    MemoryFilters(importance={"lt": 0.5}),
    MemoryFilters(importance={"gte": 0.2, "lte": 0.8}, scope="shared", tags_any=["red"]),
    MemoryFilters(agent_name="bob", scope="shared", memory_type="fact", session_id="s1", tags_all=["blue"]),
    MemoryFilters(scope="hierarchical"),
    MemoryFilters(scope="hierarchical", tags_any=["red"], agent_name="bob"),
    MemoryFilters(data_subject="dana"),
    MemoryFilters(data_subject="eve"),
    MemoryFilters(data_subject="dana", scope="shared", tags_any=["blue"]),
]
# the data subject of each row of ``specs`` below, in order ("" for none)
SUBJECTS = ["dana", "eve", "dana", "dana", "", "eve", ""]


@pytest.mark.parametrize("acting_for", ["", "dana"])
@pytest.mark.parametrize("index", range(len(CASES)))
def test_orm_and_search_sql_select_the_same_rows(
    alice: Caller, bob: Caller, index: int, acting_for: str
) -> None:
    """Also for an agent acting for one end user (a key bound to ``dana``): the subject rule is part
    of the one visibility rule, in both forms."""
    # 8-dimension vectors of a model no HNSW index covers: rows written here and rolled back must
    # not leave dead entries in the index other tests search (the rule does not look at vectors)
    specs = [
        (alice, "private", "fact", "s1", ["red"], 0.9, 0.1, 0, None),
        (alice, "shared", "preference", "s2", ["red", "blue"], 0.5, 0.5, 2, None),
        (bob, "private", "fact", "s1", ["blue"], 0.95, 0.9, 1, None),  # never visible to alice
        (bob, "shared", "fact", "s1", ["blue", "red"], 0.7, 0.3, 4, None),
        (bob, "shared", "preference", "s3", [], 0.4, 0.7, 6, None),
        (alice, "shared", "fact", None, ["green"], 1.0, 0.2, 3, None),
        (alice, "shared", "fact", "s1", ["red"], 1.0, 0.5, 0, NOW),  # forgotten
    ]
    with tenant_context(alice.tenant):
        rows = [
            SemanticMemory(
                agent=who.agent,
                scope=scope,
                memory_type=kind,
                session_id=session,
                tags=tags,
                content=f"memory {n}",
                content_hash=f"{n:064d}",
                confidence=confidence,
                importance=importance,
                embedding=[float(n + 1)] * 8,
                embedding_model=MODEL,
                embedding_dimensions=8,
                created_at=NOW - timedelta(days=age),
                forgotten_at=forgotten,
                data_subject=subject,
            )
            for n, (
                (who, scope, kind, session, tags, confidence, importance, age, forgotten),
                subject,
            ) in enumerate(zip(specs, SUBJECTS, strict=True))
        ]
        # hierarchical: bob's memories naming alice, naming her role, and naming only someone else
        hierarchical = [
            SemanticMemory(
                agent=bob.agent,
                scope="hierarchical",
                memory_type="fact",
                session_id="s1",
                tags=["red"],
                content=f"hierarchical {n}",
                content_hash=f"{100 + n:064d}",
                confidence=0.8,
                importance=0.4,
                embedding=[float(n + 20)] * 8,
                embedding_model=MODEL,
                embedding_dimensions=8,
                created_at=NOW - timedelta(days=1),
                visible_to_agents=agents,
                visible_to_roles=roles,
            )
            for n, (agents, roles) in enumerate(
                [([alice.agent.pk], []), ([], ["critic"]), ([bob.agent.pk + 999], ["janitor"])]
            )
        ]
        alice.agent.role = "critic"
        alice.agent.save(update_fields=["role"])
        SemanticMemory.objects.bulk_create(rows + hierarchical)
        alice.agent.acting_for = acting_for
        filters = CASES[index]
        if acting_for and filters.data_subject not in (None, acting_for):  # another subject: refused
            with pytest.raises(SubjectRefused):
                selectors.memories_visible_to(alice.agent, filters)
            with pytest.raises(SubjectRefused):
                selectors.visible_filter_sql(alice.agent, filters, model=MODEL, dimensions=8)
            return
        orm = set(selectors.memories_visible_to(alice.agent, filters).values_list("pk", flat=True))
        where, params = selectors.visible_filter_sql(alice.agent, filters, model=MODEL, dimensions=8)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT m.id FROM memory_semanticmemory m WHERE {where}", params)
            raw = {row[0] for row in cursor.fetchall()}
        assert orm == raw
        assert rows[-1].pk not in orm  # forgotten
        assert rows[2].pk not in orm  # bob's private memory
        assert hierarchical[2].pk not in orm  # names neither alice nor her role
        if acting_for:
            assert {rows[1].pk, rows[5].pk}.isdisjoint(orm)  # eve's memories
        if index == 0 and acting_for:
            assert orm == {rows[0].pk, rows[3].pk, rows[4].pk, *(h.pk for h in hierarchical[:2])}
        if index == 0 and not acting_for:
            assert len(orm) == 7  # the whole set, so the other cases really select subsets
            assert {hierarchical[0].pk, hierarchical[1].pk} <= orm
